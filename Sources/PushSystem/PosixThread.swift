@preconcurrency import Glibc

/// Dedicated POSIX threads for blocking work (curl, SQLite, fsync, directory scans), which
/// must never run on the cooperative pool. One place that owns the `pthread_create` dance.
package enum PosixThread {
    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    /// Starts `body` on a new joinable thread; wraps pthread_create(3). The caller joins the
    /// returned handle with `pthread_join` (see man 3 pthread_join).
    package static func spawn(_ body: @escaping @Sendable () -> Void) throws(SystemError) -> pthread_t {
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
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
