@preconcurrency import Glibc
import PushFetch
import PushSystem

/// `pushspool-fetch`: the media fetcher that pushspoold starts (or that systemd starts per
/// connection on pushspool-fetch.socket). It serves the connection on fd 3.
///
///     pushspool-fetch [--fd=N] [--max-memory=BYTES] [--no-seccomp] [--no-landlock]
///
/// `--no-seccomp` is for debugging a system call the filter refuses (with strace),
/// `--no-landlock` a file access Landlock refuses; nothing passes them by default.
package enum FetchMain {
    package static func run(arguments: [String]) -> Int32 {
        var fd: Int32 = 3
        var limits = Hardening.Limits()
        var seccomp = true
        var landlock = true
        for argument in arguments {
            if argument == "-h" || argument == "--help" {
                writeStderr("usage: pushspool-fetch [--fd=N] [--max-memory=BYTES] [--no-seccomp] [--no-landlock]\n"
                            + "Started by pushspoold (or systemd's pushspool-fetch.socket); not for interactive use.\n")
                return 0
            } else if argument == "--no-seccomp" {
                seccomp = false
            } else if argument == "--no-landlock" {
                landlock = false
            } else if argument.hasPrefix("--fd="), let value = Int32(argument.dropFirst(5)), value >= 0 {
                fd = value
            } else if argument.hasPrefix("--max-memory="), let value = UInt64(argument.dropFirst(13)), value >= 64 << 20 {
                limits.addressSpaceBytes = value
            } else {
                writeStderr("pushspool-fetch: unknown or invalid argument \(argument)\n")
                return 64
            }
        }
        // Under systemd (Accept=yes) the connection comes as LISTEN_FDS=1 on fd 3, and systemd is
        // the parent, so dying with the parent means nothing; spawned by pushspoold it matters.
        let underSystemd = getenv("LISTEN_FDS") != nil
        do {
            try Hardening.apply(limits, dieWithParent: !underSystemd)
        } catch {
            writeStderr("pushspool-fetch: hardening failed: \(error)\n")
            return 71
        }
        let fault: FetchFault?
        do {
            fault = try FetchFault.from(environment: { getenv($0).map { String(cString: $0) } })
        } catch {
            writeStderr("pushspool-fetch: \(error)\n")
            return 64
        }
        // The system-call test hook exists in debug builds only (see SyscallProbe).
        let afterFilter: (@Sendable () -> Void)?
        #if DEBUG
        do {
            let probe = try SyscallProbe.from(environment: { getenv($0).map { String(cString: $0) } })
            if let probe {
                afterFilter = { probe.run() }
            } else {
                afterFilter = nil
            }
        } catch {
            writeStderr("pushspool-fetch: \(error)\n")
            return 64
        }
        #else
        afterFilter = nil
        #endif
        let code = FetchServer.serve(fd: fd, fault: fault, seccomp: seccomp, landlock: landlock, afterFilter: afterFilter, log: { writeStderr("pushspool-fetch: \($0)\n") })
        return code.rawValue
    }

    static func writeStderr(_ text: String) {
        try? Posix.writeAll(2, Array(text.utf8))
    }
}
