import Dispatch
import PushSpool
import PushSystem

/// The intake state behind its lock, with the two ways to wake the ingest thread: the
/// doorbell it waits on whenever it is not asleep in the feed (a free slot, the drain, a file
/// processed alone, a paused journal), and the feed's waker it sleeps on between batches.
/// Every ``IntakeState`` event goes through here, and the ``IntakeAction`` it returns runs
/// after the lock is released. It exists before the pipeline and is the pipeline's
/// ``FileEndSink``.
///
/// `Sendable`: the state and the waker are behind locks; the semaphore is thread-safe.
final class Intake: FileEndSink, Sendable {
    let state: Locked<IntakeState>
    /// Rung for every action: a file ended while the ingest thread waits for one
    /// (`wakeAdmitter`), or something the loop must see (`wakeLoop`: a stop, a failure, the
    /// journal paused or resumed). Coalescing: rings that nobody waited for wake the next wait once.
    private let doorbell = Wakeup()
    /// Ends the watcher's wait early; set by the ingest thread for each feed it builds.
    private let waker = Locked<Waker?>(nil)

    init(capacityLimit: Int) {
        state = Locked(IntakeState(capacityLimit: capacityLimit))
    }

    /// Runs `event` under the lock, then its action outside it; returns what the event returned.
    @discardableResult
    func perform<Result>(_ event: (inout IntakeState) -> (Result, IntakeAction)) -> Result {
        let (result, action) = state.withLock { event(&$0) }
        run(action)
        return result
    }

    func run(_ action: IntakeAction) {
        if !action.isEmpty { doorbell.signal() }
        if action.contains(.wakeLoop) { waker.withLock { $0?.wake() } }
    }

    /// The feed the ingest thread now sleeps in.
    func use(_ newWaker: Waker) { waker.withLock { $0 = newWaker } }

    /// Waits until the doorbell rings, at most `timeout` (`nil`: no limit). The caller
    /// re-checks its condition after, as with any condition variable.
    func waitForDoorbell(timeout: Duration?) { doorbell.wait(timeout: timeout) }

    /// The journal paused on a full disk or resumed (its writer's events): the ingest thread,
    /// waiting on the doorbell or in the feed, looks again.
    func journalPauseChanged(_ paused: Bool) {
        run(state.withLock { state -> IntakeAction in
            state.journalPausedChanged(paused)
            return .wakeLoop
        })
    }

    func requestStop() { run(state.withLock { $0.requestStop() }) }
    func requestReload() { run(state.withLock { $0.requestReload() }) }
    func finish() { run(state.withLock { $0.finish() }) }

    /// Where every file taken by `admit` ends: `FilePipeline` calls it exactly once per file.
    func fileEnded(_ name: String, _ end: FileEnd) {
        switch end {
        case .done, .leftForNextStart:
            run(state.withLock { state in
                state.releaseName(name)
                return state.finish()
            })
        case .handBack:
            run(state.withLock { $0.handBack(name) })
        case .journalFailed(let errno, let message):
            run(state.withLock { state in
                state.releaseName(name)
                return state.journalFailed(.init(errno: errno, message: message)).union(state.finish())
            })
        }
    }
}
