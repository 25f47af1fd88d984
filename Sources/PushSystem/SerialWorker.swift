import Dispatch
@preconcurrency import Glibc

/// One named POSIX thread that runs the jobs given to it one at a time, in the order given.
///
/// The daemons' one kind of background queue (ingest lanes, acknowledgements, export
/// checkpoints, media finishing, blocking bridges): unlike a dispatch queue, its thread has a
/// name (`top -H`, `gdb`, the crash mark), a nice value of its own, and an end — ``stop()``
/// runs what was queued and joins the thread. A worker nobody stops ends its thread when the
/// last reference goes, so an object made and dropped by a test leaves no thread behind.
///
/// `Sendable`: the job list is behind a lock; the thread is the only one to run jobs.
package final class SerialWorker: Sendable {
    private final class Core: Sendable {
        struct State {
            var jobs: [@Sendable () -> Void] = []
            var sleeping = false
            var stopping = false
            var thread: pthread_t?
        }
        let state = Locked(State())
        let wake = DispatchSemaphore(value: 0)

        func run() {
            state.withLock { $0.thread = pthread_self() }
            var batch: [@Sendable () -> Void] = []
            while true {
                let stop = state.withLock { state -> Bool in
                    if state.jobs.isEmpty {
                        if state.stopping { return true }
                        state.sleeping = true
                        return false
                    }
                    swap(&batch, &state.jobs)
                    return false
                }
                if stop { return }
                if batch.isEmpty {
                    wake.wait()
                    continue
                }
                for job in batch { job() }
                batch.removeAll(keepingCapacity: true)
            }
        }

        /// False when the worker is stopping: the job was not queued.
        func enqueue(_ job: @escaping @Sendable () -> Void) -> Bool {
            let (queued, mustWake) = state.withLock { state -> (Bool, Bool) in
                if state.stopping { return (false, false) }
                state.jobs.append(job)
                defer { state.sleeping = false }
                return (true, state.sleeping)
            }
            if mustWake { wake.signal() }
            return queued
        }

        func requestStop() {
            let mustWake = state.withLock { state -> Bool in
                state.stopping = true
                defer { state.sleeping = false }
                return state.sleeping
            }
            if mustWake { wake.signal() }
        }

        var isCurrentThread: Bool {
            guard let thread = state.withLock({ $0.thread }) else { return false }
            return pthread_equal(thread, pthread_self()) != 0
        }
    }

    private let core: Core
    private let thread: pthread_t
    private let joined = Locked(false)
    package let name: String

    /// Starts the worker's thread. `name` is what the kernel shows (the first 15 bytes);
    /// `niceness` > 0 lowers the thread's priority (see ``PosixThread/spawn(name:niceness:_:)``).
    ///
    /// Workers are made while a program starts; one that cannot get its thread (EAGAIN: the
    /// task limit, `TasksMax=`) cannot do its part, and the program stops there with the
    /// reason rather than run without it.
    package init(name: String, niceness: Int32 = 0) {
        self.name = name
        let core = Core()
        self.core = core
        do {
            thread = try PosixThread.spawn(name: name, niceness: niceness) { core.run() }
        } catch {
            preconditionFailure("cannot start the \(name) thread: \(error)")
        }
    }

    deinit {
        // The last reference can go inside one of the worker's own jobs: `stop()` lets the
        // thread go then, as a thread cannot join itself.
        stop()
    }

    /// Queues `job` behind every job given before it. After ``stop()`` it is dropped.
    package func submit(_ job: @escaping @Sendable () -> Void) {
        _ = core.enqueue(job)
    }

    /// Runs `body` on the worker after every job given before it, and returns its result.
    /// Called from a job of this worker it would wait for itself, and after ``stop()`` nothing
    /// would run it: then it runs `body` at once on the calling thread.
    package func sync<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        if core.isCurrentThread { return body() }
        let result = Locked<T?>(nil)
        let done = DispatchSemaphore(value: 0)
        let queued = core.enqueue {
            let value = body()
            result.withLock { $0 = value }
            done.signal()
        }
        guard queued else { return body() }
        done.wait()
        return result.withLock { $0! }
    }

    /// Returns once every job given before the call has run.
    package func waitUntilIdle() {
        sync {}
    }

    /// Whether the calling thread is this worker's.
    package var isCurrent: Bool { core.isCurrentThread }

    /// Runs the jobs already queued, ends the thread and joins it. Jobs given afterwards are
    /// dropped (``sync`` runs its body on the caller). From one of the worker's own
    /// jobs it only asks: the thread ends after that job (a thread cannot join itself).
    package func stop() {
        core.requestStop()
        let mustJoin = joined.withLock { joined -> Bool in
            defer { joined = true }
            return !joined
        }
        guard mustJoin else { return }
        if core.isCurrentThread { pthread_detach(thread) } else { pthread_join(thread, nil) }
    }
}
