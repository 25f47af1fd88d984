@preconcurrency import Glibc
import PushSystem
internal import CFetchShim

/// Starting and reaping the fetcher process.
package enum ChildProcess {
    /// `posix_spawn(3)` of `executable` with `arguments`, the caller's environment, default
    /// signal dispositions and an empty signal mask (the daemon blocks and ignores signals it
    /// handles through dispatch sources; the child must not inherit that), the caller's environment
    /// with `extra` set over it, `socket` as fd 3
    /// and every other fd from 4 up closed.
    package static func spawn(executable: String, arguments: [String], environment extra: [String: String] = [:],
                              socket: Int32) throws(SystemError) -> Glibc.pid_t {
        var source = socket
        if source == 3 {
            // dup2(3, 3) would not clear close-on-exec; move it out of the way first.
            source = try Posix.call("fcntl", "F_DUPFD_CLOEXEC") { fcntl(socket, F_DUPFD_CLOEXEC, 10) }
        }
        defer { if source != socket { Posix.close(source) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, source, 3)
        cfetch_spawn_closefrom(&actions, 4)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal: Int32 in 1..<32 where signal != SIGKILL && signal != SIGSTOP { sigaddset(&defaults, signal) }
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var inherited: [String] = []
        var cursor = environ
        while let entry = cursor.pointee {
            let text = String(cString: entry)
            let name = text.split(separator: "=", maxSplits: 1).first.map(String.init) ?? text
            if extra[name] == nil { inherited.append(text) }
            cursor += 1
        }
        let envp = (inherited + extra.map { "\($0.key)=\($0.value)" }).map { strdup($0) } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw SystemError(call: "posix_spawn", errno: result, subject: executable) }
        return pid
    }

    /// How a reaped child ended, for logs: "exit status 1", "killed by signal 11 (SIGSEGV)".
    package static func describe(status: Int32) -> String {
        let signal = status & 0x7f
        if signal == 0 { return "exit status \((status >> 8) & 0xff)" }
        let name = cfetch_signal_name(signal).map { "SIG" + String(cString: $0) } ?? "?"
        return "killed by signal \(signal) (\(name))"
    }

    /// `waitpid(2)`, blocking; the raw status, or nil when there is no such child.
    package static func reap(_ pid: Glibc.pid_t) -> Int32? {
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, 0)
            if result == pid { return status }
            if result == -1 && errno == EINTR { continue }
            return nil
        }
    }

    /// Waits up to `timeoutMillis` for `pid` to end and reaps it: poll(2) on its pidfd
    /// (pidfd_open(2), Linux 5.3), which becomes readable when the child exits, then
    /// `waitpid(2)` with WNOHANG. The raw status; nil if it is still running. Where no pidfd
    /// can be had (an older kernel, a seccomp filter), one look without waiting.
    package static func reap(_ pid: Glibc.pid_t, timeoutMillis: Int) -> Int32? {
        let pidfd = cfetch_pidfd_open(pid)
        if pidfd >= 0 {
            defer { Posix.close(pidfd) }
            let deadline = Posix.monotonicNanos() &+ UInt64(max(0, timeoutMillis)) &* 1_000_000
            var entry = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
            while true {
                let now = Posix.monotonicNanos()
                let remaining = deadline > now ? Int32(clamping: (deadline - now + 999_999) / 1_000_000) : 0
                let result = poll(&entry, 1, remaining)
                if result == 0 { return nil }
                if result == -1 && errno == EINTR { continue }
                break
            }
        }
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid { return status }
            if result == -1 && errno == EINTR { continue }
            return nil
        }
    }
}
