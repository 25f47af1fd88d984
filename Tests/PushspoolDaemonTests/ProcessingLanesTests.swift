import Foundation
import Synchronization
import PushSystem
import Testing
@testable import PushspoolDaemon

/// Claimed files are prepared on two lanes at once, and their effects (journal submission,
/// quarantine) still happen in claim order.
@Suite struct ProcessingLanesTests {
    /// Chunks whose preparation takes longer the earlier they were dealt: the later ones are
    /// prepared first, yet every `finish` runs in submission order.
    @Test func finishRunsInSubmissionOrderHoweverLongPrepareTakes() throws {
        let lanes = ProcessingLanes<Int>(label: "test.lanes", count: 2)
        let finished = Locked<[Int]>([])
        let done = DispatchSemaphore(value: 0)
        let chunks = 40
        for chunk in 0..<chunks {
            let items = Array((chunk * 8)..<(chunk * 8 + 8))
            lanes.submit(items, prepare: { item in
                // Earlier chunks sleep longer, so a lane left alone would finish out of order.
                if item % 8 == 0 { usleep(UInt32((chunks - chunk) * 200)) }  // why: the scenario: unequal preparation times
                return item
            }, finish: { item in
                finished.withLock { $0.append(item) }
            }, done: {
                if chunk == chunks - 1 { done.signal() }
            })
        }
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(finished.withLock { $0 } == Array(0..<(chunks * 8)))
    }

    /// Two chunks are prepared at the same time: each `prepare` waits until the other has
    /// started. With one lane (the single queue this replaced) the first would wait in vain.
    @Test func twoLanesPrepareAtOnce() throws {
        let lanes = ProcessingLanes<Bool>(label: "test.lanes.parallel", count: 2)
        let started = Atomic<Int>(0)
        // Signalled twice by the second `prepare` to start, once for each.
        let bothStarted = DispatchSemaphore(value: 0)
        let results = Locked<[Bool]>([])
        let done = DispatchSemaphore(value: 0)
        for chunk in 0..<2 {
            lanes.submit([chunk], prepare: { _ in
                if started.add(1, ordering: .relaxed).newValue == 2 {
                    bothStarted.signal()
                    bothStarted.signal()
                }
                return bothStarted.wait(timeout: .now() + 5) == .success
            }, finish: { overlapped in
                results.withLock { $0.append(overlapped) }
            }, done: { done.signal() })
        }
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(results.withLock { $0 } == [true, true])
    }

    @Test func laneCountFollowsTheUsableCPUsWithinTheLimit() {
        #expect(ProcessingLanes<Int>.laneCount(limit: 1) == 1)
        #expect(ProcessingLanes<Int>.laneCount(limit: 64) == Posix.usableCPUs())
        #expect(ProcessingLanes<Int>(label: "test.lanes.none", count: 0).count == 1)
    }
}
