import Dispatch
import Synchronization
import PushSystem

/// Finishes committed files off the journal's writer thread: the writer hands over each
/// batch's completions and goes straight on to its next `write` + `fdatasync`, while this
/// queue unlinks the files of the batch before (and reports them). The writer's sync (I/O
/// wait) and the unlinks (CPU in the kernel) overlap instead of taking turns, which a plain
/// single-threaded loop cannot do.
///
/// Adaptive: the hand-off pays only under a burst. A job that comes alone — nothing queued,
/// no drain running, and the previous job more than `burstGapNanos` ago (files arriving
/// slowly, one record per sync) — runs at once on the submitting thread: handing it over
/// would cost two context switches and a wake-up for one unlink, which is what raised
/// context switches fivefold at low rates in the first perf round. Completions of one
/// batch come back to back, so from the second job of a batch on they are handed over.
///
/// Nothing is acknowledged earlier than before: a job is queued only from a `.committed`
/// completion, which the writer runs after the covering `fdatasync`.
///
/// `Sendable`: the job list is behind a lock; one drain (or inline run) at a time consumes it.
final class Acknowledger: Sendable {
    private struct State {
        var queue: [@Sendable () -> Void] = []
        var draining = false
        var lastSubmitNanos: UInt64 = 0
    }
    private let jobs = Locked<State>(State())
    /// Jobs closer together than this are a burst and are handed over.
    let burstGapNanos: UInt64
    /// Jobs run inline on the submitting thread: a measure of hand-offs saved, for tests.
    let inlineRuns = Atomic<Int>(0)
    /// Serial: jobs run in submission order. Its thread ends with the acknowledger, so a
    /// `Daemon` made and dropped by a test leaves none behind.
    private let queue: SerialWorker
    /// Drains scheduled so far: a measure of wake-ups, for tests.
    let drains = Atomic<Int>(0)

    init(label: String, burstGapNanos: UInt64 = 500_000) {
        queue = SerialWorker(name: label)
        self.burstGapNanos = burstGapNanos
    }

    private enum Route { case inline, joined, schedule }

    /// Runs `job` now on this thread when it comes alone, or queues it for the acknowledger's
    /// queue; either way in submission order. Schedules a drain only when none is running, so a
    /// batch of completions costs one wake-up, not one each.
    func submit(_ job: @escaping @Sendable () -> Void) {
        let now = Posix.monotonicNanos()
        let route = jobs.withLock { state -> Route in
            let alone = now &- state.lastSubmitNanos >= burstGapNanos
            state.lastSubmitNanos = now
            if state.draining {
                state.queue.append(job)
                return .joined
            }
            // Marked draining while it runs inline, so a job submitted meanwhile from another
            // thread queues behind it instead of overtaking it.
            state.draining = true
            if alone && state.queue.isEmpty { return .inline }
            state.queue.append(job)
            return .schedule
        }
        switch route {
        case .joined:
            return
        case .schedule:
            queue.submit { [self] in drain() }
        case .inline:
            inlineRuns.add(1, ordering: .relaxed)
            job()
            let more = jobs.withLock { state -> Bool in
                if state.queue.isEmpty {
                    state.draining = false
                    return false
                }
                return true
            }
            if more { queue.submit { [self] in drain() } }
        }
    }

    /// Returns once every job submitted before the call has run (the drains are serial on
    /// `queue`, and a job submitted during a drain is run by that drain).
    func waitUntilIdle() {
        queue.waitUntilIdle()
    }

    private func drain() {
        drains.add(1, ordering: .relaxed)
        var taken: [@Sendable () -> Void] = []
        while true {
            let more = jobs.withLock { state -> Bool in
                if state.queue.isEmpty {
                    state.draining = false
                    return false
                }
                swap(&taken, &state.queue)
                return true
            }
            guard more else { return }
            for job in taken { job() }
            taken.removeAll(keepingCapacity: true)
        }
    }
}
