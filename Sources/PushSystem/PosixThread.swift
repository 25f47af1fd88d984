@preconcurrency import Glibc
internal import CPosix

/// Dedicated POSIX threads for blocking work (curl, SQLite, fsync, directory scans), which
/// must never run on the cooperative pool. One place that owns the `pthread_create` dance.
package enum PosixThread {
    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// Starts `body` on a new joinable thread; wraps pthread_create(3). The caller joins the
    /// returned handle with `pthread_join` (see man 3 pthread_join). `niceness` > 0 lowers the
    /// thread's own scheduling priority (Linux applies setpriority(2) per thread): a follower
    /// that must never slow ingest yields the cores to it under load and catches up after.
    package static func spawn(niceness: Int32 = 0, _ body: @escaping @Sendable () -> Void) throws(SystemError) -> pthread_t {
        var run = body
        if niceness > 0 {
            run = {
                _ = cposix_set_thread_niceness(niceness)
                body()
            }
        }
        let context = Unmanaged.passRetained(Body(run)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(&thread, nil, { raw in
            Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue().run()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            throw SystemError(call: "pthread_create", errno: result)
        }
        return thread
    }

    /// The calling thread's nice value; wraps getpriority(2) on the thread id.
    package static func currentNiceness() throws(SystemError) -> Int32 {
        var value: Int32 = 0
        guard cposix_get_thread_niceness(&value) == 0 else { throw SystemError(call: "getpriority", errno: errno) }
        return value
    }

    /// Sets the calling thread's nice value (Linux applies setpriority(2) per thread). Raising
    /// it is always allowed; lowering it again needs ``mayLowerNiceness(to:)``, else EACCES.
    package static func setCurrentNiceness(_ niceness: Int32) throws(SystemError) {
        guard cposix_set_thread_niceness(niceness) == 0 else { throw SystemError(call: "setpriority", errno: errno) }
    }

    /// Whether a thread of this process may go back down to `niceness` after raising it:
    /// RLIMIT_NICE allows it (systemd's `LimitNICE=`) or CAP_SYS_NICE is effective.
    package static func mayLowerNiceness(to niceness: Int32) -> Bool {
        cposix_may_lower_niceness_to(niceness) == 1
    }

    /// Starts `body` on a detached thread that nobody joins.
    package static func detach(_ body: @escaping @Sendable () -> Void) throws(SystemError) {
        pthread_detach(try spawn(body))
    }
}
