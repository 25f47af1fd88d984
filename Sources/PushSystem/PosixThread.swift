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
    /// `name` is what the kernel shows for the thread (`top -H`, `/proc/PID/task/*/comm`, a
    /// core dump): its first 15 bytes.
    package static func spawn(name: String? = nil, niceness: Int32 = 0, _ body: @escaping @Sendable () -> Void) throws(SystemError) -> pthread_t {
        var run = body
        if niceness > 0 || name != nil {
            run = {
                if let name { setCurrentName(name) }
                if niceness > 0 { _ = cposix_set_thread_niceness(niceness) }
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

    /// Names the calling thread; wraps pthread_setname_np(3), which takes at most 15 bytes.
    package static func setCurrentName(_ name: String) {
        // Whole characters only: a cut inside one would show as a broken one.
        var bytes: [UInt8] = []
        for scalar in name.unicodeScalars {
            let encoded = Array(String(scalar).utf8)
            guard bytes.count + encoded.count <= 15 else { break }
            bytes += encoded
        }
        bytes.append(0)
        bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { _ = cposix_set_thread_name($0.baseAddress!) }
        }
    }

    /// The calling thread's name, as the kernel keeps it.
    package static func currentName() -> String {
        var buffer = [CChar](repeating: 0, count: 16)
        guard cposix_get_thread_name(&buffer, buffer.count) == 0 else { return "" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
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

    /// The calling thread's I/O priority; wraps ioprio_get(2) on the thread id (see man 2
    /// ioprio_get).
    package static func currentIOPriority() throws(SystemError) -> IOPriority {
        var klass: Int32 = 0, level: Int32 = 0
        guard cposix_get_thread_io_priority(&klass, &level) == 0 else { throw SystemError(call: "ioprio_get", errno: errno) }
        return IOPriority(klass: klass, level: level)
    }

    /// Sets the calling thread's I/O priority; wraps ioprio_set(2) on the thread id (see man 2
    /// ioprio_set). Best-effort and idle need no privilege; realtime needs CAP_SYS_ADMIN.
    package static func setCurrentIOPriority(_ priority: IOPriority) throws(SystemError) {
        let (klass, level) = priority.raw
        guard cposix_set_thread_io_priority(klass, level) == 0 else { throw SystemError(call: "ioprio_set", errno: errno) }
    }

    /// Runs `body` with the calling thread at `priority` for I/O, then puts back the priority
    /// it had, also when `body` throws. A thread whose priority cannot be read or set runs
    /// `body` as it is: the priority is a courtesy to other work, never a reason to fail.
    package static func withIOPriority<T, E: Error>(_ priority: IOPriority, _ body: () throws(E) -> T) throws(E) -> T {
        guard let previous = try? currentIOPriority(), (try? setCurrentIOPriority(priority)) != nil else { return try body() }
        defer { try? setCurrentIOPriority(previous) }
        return try body()
    }

    /// Starts `body` on a detached thread that nobody joins.
    package static func detach(name: String? = nil, _ body: @escaping @Sendable () -> Void) throws(SystemError) {
        pthread_detach(try spawn(name: name, body))
    }
}

/// A thread's I/O scheduling class and level (man 2 ioprio_set). Only schedulers that
/// implement priorities (BFQ; not `none` or `mq-deadline`) act on it.
///
/// `Sendable`: a value.
package enum IOPriority: Sendable, Equatable {
    /// No class set: the kernel derives a best-effort level from the nice value.
    case none
    /// Served first; needs CAP_SYS_ADMIN.
    case realtime(level: Int32)
    /// The default class; level 0 (highest) to 7 (lowest).
    case bestEffort(level: Int32)
    /// Served only when no other thread wants the disk.
    case idle

    init(klass: Int32, level: Int32) {
        switch klass {
        case 1: self = .realtime(level: level)
        case 2: self = .bestEffort(level: level)
        case 3: self = .idle
        default: self = .none
        }
    }

    var raw: (klass: Int32, level: Int32) {
        switch self {
        case .none: (0, 0)
        case .realtime(let level): (1, level)
        case .bestEffort(let level): (2, level)
        case .idle: (3, 0)
        }
    }
}
