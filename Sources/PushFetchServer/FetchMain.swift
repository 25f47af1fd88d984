@preconcurrency import Glibc
import PushCLI
import PushFetchClient
import PushPayload
import PushSystem

/// `pushspool-fetch`: the media fetcher that pushspoold starts (or that systemd starts per
/// connection on pushspool-fetch.socket). It serves the connection on fd 3.
///
/// Its options are in ``program``; nothing passes `--no-seccomp` or `--no-landlock` by default.
package enum FetchMain {
    /// What the command line sets.
    package struct Options: Sendable, Equatable {
        var fd: Int32 = 3
        var addressSpaceBytes: UInt64?
        var seccomp = true
        var landlock = true
    }

    /// pushspool-fetch's table.
    package static var program: Program<Options> {
        Program("pushspool-fetch", root: Command(
            "pushspool-fetch", summary: "download and decode push media in a sandbox",
            options: [
                .value("--fd", placeholder: "N", help: "the socket to serve (default 3, as systemd and pushspoold pass it)"),
                .value("--max-memory", placeholder: "BYTES", help: "the address-space limit, at least 67108864 (64 MiB; default 2 GiB)"),
                .flag("--no-seccomp", help: "do not load the system-call filter, to debug a call it refuses (e.g. under strace); for debugging only"),
                .flag("--no-landlock", help: "do not confine file access with Landlock, to debug an access it refuses; for debugging only"),
            ],
            discussion: "Started by pushspoold (or systemd's pushspool-fetch.socket); not for interactive use. "
                + "It serves the connection on fd 3.",
            exitStatus: "Exit status: 0 the connection ended, 64 usage error, 71 hardening failed."
        ) { invocation throws(CLIError) in
            Options(fd: try invocation.integer("--fd", in: 0...Int32.max) ?? 3,
                    addressSpaceBytes: try invocation.integer("--max-memory", in: (64 << 20)...UInt64.max),
                    seccomp: !invocation.flag("--no-seccomp"), landlock: !invocation.flag("--no-landlock"))
        })
    }

    package static func run(arguments: [String]) -> Int32 {
        let options: Options
        switch program.resolve(arguments, version: pushspoolVersion) {
        case .exit(let status): return status
        case .run(let parsed, _): options = parsed
        }
        let fd = options.fd
        let seccomp = options.seccomp
        let landlock = options.landlock
        var limits = Hardening.Limits()
        if let bytes = options.addressSpaceBytes { limits.addressSpaceBytes = bytes }
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
