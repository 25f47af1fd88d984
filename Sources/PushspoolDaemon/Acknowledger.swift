import Dispatch
import Synchronization

/// Finishes committed files off the journal's writer thread: the writer hands over each
/// batch's completions and goes straight on to its next `write` + `fdatasync`, while this
/// queue unlinks the files of the batch before (and reports them). The writer's sync (I/O
/// wait) and the unlinks (CPU in the kernel) overlap instead of taking turns, which a plain
/// single-threaded loop cannot do.
///
/// Nothing is acknowledged earlier than before: a job is queued only from a `.committed`
/// completion, which the writer runs after the covering `fdatasync`.
///
/// `Sendable`: the job list is behind a `Mutex`; one drain at a time consumes it.
final class Acknowledger: Sendable {
    private let jobs = Mutex<(queue: [@Sendable () -> Void], draining: Bool)>(([], false))
    /// Serial: jobs run in submission order. A dispatch queue rather than an own thread, so an
    /// idle acknowledger (and a `Daemon` made and dropped by a test) holds no thread.
    private let queue: DispatchQueue
    /// Drains scheduled so far: a measure of wake-ups, for tests.
    let drains = Atomic<Int>(0)

    init(label: String) {
        queue = DispatchQueue(label: label, qos: .userInitiated)
    }

    /// Queues `job`; it runs on the acknowledger's queue, in submission order. Schedules a
    /// drain only when none is running, so a batch of completions costs one wake-up, not one each.
    func submit(_ job: @escaping @Sendable () -> Void) {
        let mustSchedule = jobs.withLock { state -> Bool in
            state.queue.append(job)
            if state.draining { return false }
            state.draining = true
            return true
        }
        if mustSchedule { queue.async { [self] in drain() } }
    }

    /// Returns once every job submitted before the call has run (the drains are serial on
    /// `queue`, and a job submitted during a drain is run by that drain).
    func waitUntilIdle() {
        queue.sync {}
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
