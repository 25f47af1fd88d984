@preconcurrency import Glibc
import Dispatch
import Testing
import PushSystem
@testable import PushspoolDaemon

/// The ingest thread's waits end on the intake's doorbell, not on a clock: each test parks a
/// waiter with a long limit and checks that the event ends its wait well before it.
@Suite struct IntakeDoorbellTests {
    /// Starts a thread that waits on the doorbell for at most 20 s; returns a semaphore
    /// signalled when the wait ended.
    static func waiter(_ intake: Intake) throws -> DispatchSemaphore {
        let ended = DispatchSemaphore(value: 0)
        let waiting = DispatchSemaphore(value: 0)
        try PosixThread.detach {
            waiting.signal()
            intake.waitForDoorbell(timeout: .seconds(20))
            ended.signal()
        }
        waiting.wait()
        return ended
    }

    @Test func aStopWakesTheThreadWaitingForASlot() throws {
        let intake = Intake(capacityLimit: 1)
        _ = intake.state.withLock { $0.intakeArmed() }
        #expect(intake.state.withLock { $0.admit() } == .granted)
        #expect(intake.state.withLock { $0.admit() } == .full)
        let ended = try Self.waiter(intake)
        intake.requestStop()
        #expect(ended.wait(timeout: .now() + .seconds(5)) == .success, "the stop ended the wait for a slot")
        #expect(intake.state.withLock { $0.admit() } == .refused)
    }

    @Test func theLastFileInFlightWakesTheDrain() throws {
        let intake = Intake(capacityLimit: 4)
        _ = intake.state.withLock { $0.intakeArmed() }
        #expect(intake.state.withLock { $0.admit() } == .granted)
        intake.requestStop()
        // What the drain does before it waits: the next finish must ring for it.
        let step = intake.state.withLock { state in
            let step = state.drainStep(deadlinePassed: false)
            if step == .wait { state.awaitFinish() }
            return step
        }
        #expect(step == .wait)
        // A ring nobody waited for (the stop's) is consumed first, as the drain's first pass would.
        intake.waitForDoorbell(timeout: .zero)
        let ended = try Self.waiter(intake)
        intake.fileEnded("a", .done)
        #expect(ended.wait(timeout: .now() + .seconds(5)) == .success, "the finish ended the drain's wait")
        #expect(intake.state.withLock { $0.drainStep(deadlinePassed: false) } == .close(leftInFlight: 0))
    }

    @Test func theJournalResumingWakesTheLoopWaitingOnAFullDisk() throws {
        let intake = Intake(capacityLimit: 4)
        intake.journalPauseChanged(true)
        #expect(intake.state.withLock { $0.journalPaused })
        intake.waitForDoorbell(timeout: .zero)
        let ended = try Self.waiter(intake)
        intake.journalPauseChanged(false)
        #expect(ended.wait(timeout: .now() + .seconds(5)) == .success, "resumed ended the wait")
        #expect(!intake.state.withLock { $0.journalPaused })
    }
}
