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

    /// Starts `body` on a detached thread that nobody joins.
    package static func detach(_ body: @escaping @Sendable () -> Void) throws(SystemError) {
        pthread_detach(try spawn(body))
    }
}
