import Foundation
import Synchronization
import PushSystem
import Testing
@testable import PushspoolDaemon

/// The acknowledger takes committed files off the journal's writer thread under a burst:
/// every job runs, in submission order, a burst on another thread and in few drains; a job
/// that comes alone runs at once on the submitting thread, with no hand-off at all.
@Suite struct AcknowledgerTests {
    @Test func jobsRunInOrderOffTheSubmittingThread() throws {
        let acknowledger = Acknowledger(label: "test.ack", burstGapNanos: 1_000_000_000)
        let seen = Locked<[Int]>([])
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
        // The first job of a burst comes alone (nothing before it) and runs inline; the rest
        // follow within microseconds and are handed over.
        #expect(offThread.load(ordering: .relaxed) >= count - 1)
        #expect(acknowledger.inlineRuns.load(ordering: .relaxed) <= 1)
    }

    /// Files arriving slowly: each completion comes alone and runs on the submitting thread,
    /// so no drain (no wake-up of another thread) is ever scheduled.
    @Test func spacedJobsRunInlineWithoutAHandOff() throws {
        let acknowledger = Acknowledger(label: "test.ack.slow", burstGapNanos: 200_000)
        let submitter = pthread_self()
        let onSubmitter = Atomic<Int>(0)
        let seen = Locked<[Int]>([])
        for i in 0..<20 {
            acknowledger.submit {
                if pthread_equal(pthread_self(), submitter) != 0 { onSubmitter.add(1, ordering: .relaxed) }
                seen.withLock { $0.append(i) }
            }
            usleep(2_000) // why: the scenario: files arriving slowly, each past the 0.2 ms burst gap
        }
        #expect(seen.withLock { $0 } == Array(0..<20))
        #expect(onSubmitter.load(ordering: .relaxed) == 20)
        #expect(acknowledger.inlineRuns.load(ordering: .relaxed) == 20)
        #expect(acknowledger.drains.load(ordering: .relaxed) == 0)
    }

    /// A job submitted while a drain still runs queues behind it even when it comes alone:
    /// order is kept, it never overtakes the jobs before it.
    @Test func aLoneJobDuringADrainQueuesBehindIt() throws {
        let acknowledger = Acknowledger(label: "test.ack.order", burstGapNanos: 2_000_000)
        let gate = DispatchSemaphore(value: 0)
        let seen = Locked<[Int]>([])
        acknowledger.submit { seen.withLock { $0.append(0) } }   // alone: inline
        acknowledger.submit {                                    // a burst: handed over
            gate.wait()
            seen.withLock { $0.append(1) }
        }
        usleep(20_000) // why: the scenario: the lone job comes past the burst gap, the drain blocked
        let done = DispatchSemaphore(value: 0)
        acknowledger.submit {
            seen.withLock { $0.append(2) }
            done.signal()
        }
        #expect(seen.withLock { $0 } == [0])
        gate.signal()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(seen.withLock { $0 } == [0, 1, 2])
    }

    /// Jobs submitted while a drain runs join it: a slow first job lets the rest pile up, and
    /// they all run in the same drain rather than one scheduled each.
    @Test func jobsSubmittedDuringADrainJoinIt() throws {
        let acknowledger = Acknowledger(label: "test.ack.join", burstGapNanos: 1_000_000_000)
        let gate = DispatchSemaphore(value: 0)
        let ran = Atomic<Int>(0)
        acknowledger.submit { ran.add(1, ordering: .relaxed) }   // alone: inline
        acknowledger.submit {
            gate.wait()
            ran.add(1, ordering: .relaxed)
        }
        let done = DispatchSemaphore(value: 0)
        for index in 0..<100 {
            acknowledger.submit {
                ran.add(1, ordering: .relaxed)
                if index == 99 { done.signal() }   // jobs run in order: the last one runs last
            }
        }
        gate.signal()
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(ran.load(ordering: .relaxed) == 102)
        #expect(acknowledger.drains.load(ordering: .relaxed) == 1)
    }
}
