import Foundation
import Synchronization
import Testing
@testable import PushspoolDaemon

/// The acknowledger takes committed files off the journal's writer thread: every job runs,
/// in submission order, on another thread, and a burst costs few drains, not one per job.
@Suite struct AcknowledgerTests {
    @Test func jobsRunInOrderOffTheSubmittingThread() throws {
        let acknowledger = Acknowledger(label: "test.ack")
        let seen = Mutex<[Int]>([])
        let offThread = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        let submitter = pthread_self()
        let count = 5_000
        for i in 0..<count {
            acknowledger.submit {
                if pthread_equal(pthread_self(), submitter) == 0 { offThread.add(1, ordering: .relaxed) }
                seen.withLock { $0.append(i) }
                if i == count - 1 { done.signal() }
            }
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(seen.withLock { $0 } == Array(0..<count))
        #expect(offThread.load(ordering: .relaxed) == count)
    }

    /// Jobs submitted while a drain runs join it: a slow first job lets the rest pile up, and
    /// they all run in the same drain rather than one scheduled each.
    @Test func jobsSubmittedDuringADrainJoinIt() throws {
        let acknowledger = Acknowledger(label: "test.ack.join")
        let gate = DispatchSemaphore(value: 0)
        let ran = Atomic<Int>(0)
        acknowledger.submit {
            gate.wait()
            ran.add(1, ordering: .relaxed)
        }
        for _ in 0..<100 {
            acknowledger.submit {
                ran.add(1, ordering: .relaxed)
            }
        }
        gate.signal()
        let deadline = Date().addingTimeInterval(10)
        while ran.load(ordering: .relaxed) < 101 && Date() < deadline { usleep(1_000) }
        #expect(ran.load(ordering: .relaxed) == 101)
        #expect(acknowledger.drains.load(ordering: .relaxed) == 1)
    }
}
