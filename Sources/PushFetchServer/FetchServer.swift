@preconcurrency import Glibc
import PushFetchClient
import PushMedia
import PushMediaCore
import PushSystem
import Synchronization

/// The fetcher's side: serves one connection (fd 3) until the daemon closes it. Downloads,
/// sniffing, storing and thumbnailing are `MediaFetcher`'s, unchanged; this only speaks the
/// protocol. The process holds no descriptor of the journal, the spool or the index.
package enum FetchServer {
    /// Exit statuses of `pushspool-fetch`.
    package enum ExitCode: Int32 {
        case peerClosed = 0
        case refusedConfiguration = 1
        case protocolViolation = 2
        case ioError = 3
    }

    /// Serves `fd`; returns when the peer closes it or breaks the protocol. With `landlock`,
    /// the process confines its file access to reading system files and writing the media
    /// store (`Landlock`) as soon as the configuration names the store; with `seccomp`,
    /// `SyscallFilter` is installed once libcurl and libvips are initialised, before the
    /// first request; `afterFilter` runs right after that (debug builds' `SyscallProbe`).
    package static func serve(fd: Int32, fault: FetchFault?, seccomp: Bool = true, landlock: Bool = true,
                              afterFilter: (@Sendable () -> Void)? = nil,
                              log: @escaping @Sendable (String) -> Void) -> ExitCode {
        let first: FetchMessage
        do {
            guard case .message(let bytes) = try SeqPacket.receive(fd) else { return .peerClosed }
            first = try FetchMessage.decode(bytes)
        } catch {
            log("first message unusable: \(error)")
            return .protocolViolation
        }
        guard case .configure(let configuration) = first else {
            log("the first message was not a configuration")
            return .protocolViolation
        }
        let fetcher: MediaFetcher
        do {
            try Hardening.limitFileSize(maxBytes: configuration.maxBytes)
            if landlock {
                // Before MediaFetcher starts its threads (Landlock confines the calling thread
                // and what it creates later, not threads already running) and before the seccomp
                // filter (which does not allow the landlock calls). The libraries initialise
                // under it: they only read what the rules let them read.
                try confine(configuration.mediaOptions, log: log)
            } else {
                log("landlock off (--no-landlock)")
            }
            fetcher = try MediaFetcher(options: configuration.mediaOptions)
        } catch {
            try? SeqPacket.send(fd, FetchMessage.refused(message: "\(error)").encoded(), wait: true)
            log("configuration refused: \(error)")
            return .refusedConfiguration
        }
        if seccomp {
            do {
                let allowed = try SyscallFilter.install()
                log("seccomp filter active: \(allowed) system calls allowed, \(SyscallFilter.killed.count) kill the process")
            } catch where error.errno == EOPNOTSUPP && SyscallFilter.alreadyFiltered {
                // An outer filter (a unit's SystemCallFilter= without `seccomp`) refuses
                // seccomp(2), so ours cannot cover every thread. That outer filter confines
                // the process; say so loudly rather than fetch nothing at all.
                log("warning: seccomp filter not installed (\(error)); only the outer filter applies. "
                    + "Allow seccomp in SystemCallFilter= or pass --no-seccomp")
            } catch {
                try? SeqPacket.send(fd, FetchMessage.refused(message: "cannot install the seccomp filter: \(error)").encoded(), wait: true)
                log("cannot install the seccomp filter: \(error)")
                return .refusedConfiguration
            }
        } else {
            log("seccomp filter off (--no-seccomp)")
        }
        afterFilter?()
        let output = Output(fd: fd)
        guard output.send(.ready(pid: getpid())) else { return .ioError }
        while true {
            let received: SeqPacket.Received
            do {
                received = try SeqPacket.receive(fd)
            } catch {
                log("reading from pushspoold failed: \(error)")
                return .ioError
            }
            let bytes: [UInt8]
            switch received {
            case .closed: return .peerClosed
            case .oversized(let size):
                log("a \(size)-byte message is over the protocol's limit")
                return .protocolViolation
            case .message(let message): bytes = message
            }
            let request: FetchMessage
            do {
                request = try FetchMessage.decode(bytes)
            } catch {
                log("malformed request: \(error)")
                return .protocolViolation
            }
            guard case .fetch(let id, let url) = request else {
                log("unexpected message after configuration")
                return .protocolViolation
            }
            if let fault, url.contains(fault.marker) {
                // As if decoding this URL's image crashed or wedged the process: it never answers.
                fault.fire(output: output)
                continue
            }
            fetcher.fetch(url: url) { outcome in
                if !output.send(.result(id: id, FetchResult(outcome))) {
                    // pushspoold is gone: nothing to deliver to. Exit at once, without unwinding.
                    _exit(ExitCode.ioError.rawValue)
                }
            }
        }
    }

    /// Creates the store (the rule needs it to exist) and applies `Landlock.fetcherRules`. An
    /// unavailable Landlock is one warning line: systemd's unit still confines the fetcher.
    static func confine(_ options: MediaOptions, log: @Sendable (String) -> Void) throws(SystemError) {
        try MediaStore.prepare(directory: options.storeDirectory)
        let rules = Landlock.fetcherRules(storeDirectory: options.storeDirectory, caFile: options.caFile)
        switch try Landlock.restrict(rules) {
        case .restricted(let abi):
            log("landlock active (ABI \(abi)): writes only beneath \(options.storeDirectory)")
        case .unavailable(let reason):
            log("warning: landlock unavailable (\(reason)); file access is confined only by the unit's settings")
        }
    }

    /// Serialises replies from the fetcher's threads; blocking sends (the daemon reads
    /// continuously; if it stops, replies wait rather than vanish).
    final class Output: Sendable {
        let fd: Int32
        let lock = Locked(())
        /// Set by a `hang` fault: nothing more is sent.
        let muted = Atomic<Bool>(false)

        init(fd: Int32) { self.fd = fd }

        func send(_ message: FetchMessage) -> Bool {
            if muted.load(ordering: .relaxed) { return true }
            let bytes = message.encoded()
            return lock.withLock { _ in
                do {
                    try SeqPacket.send(fd, bytes, wait: true)
                    return true
                } catch {
                    return false
                }
            }
        }
    }
}

/// TEST HOOK, not an operator feature: makes `pushspool-fetch` crash or hang when it is asked
/// for a URL containing a marker, so the integration tests can show that the daemon survives
/// it. Armed only when both variables are set (the pattern of pushspoold's `FaultHook`):
///
///     PUSHSPOOL_ALLOW_FAULT_INJECTION=1
///     PUSHSPOOL_FETCH_FAULT=<kill|segv|hang|exit>:<marker>
///
/// The marked request is not answered; the fault fires 300 ms after it arrives, so downloads
/// already running are cut mid-transfer.
package struct FetchFault: Sendable, Equatable {
    package enum Kind: String, Sendable {
        /// SIGKILL (an OOM kill looks the same).
        case kill
        /// A real invalid memory access, as a decoder bug would make.
        case segv
        /// Stops answering anything, forever.
        case hang
        /// Exits with status 70 (a fatal error).
        case exit
    }

    package var kind: Kind
    package var marker: String

    package static let specVariable = "PUSHSPOOL_FETCH_FAULT"
    package static let allowVariable = "PUSHSPOOL_ALLOW_FAULT_INJECTION"

    /// The armed fault, nil when none; a spec that does not parse is an error so a test cannot
    /// pass with its fault silently off.
    package static func from(environment: (String) -> String?) throws(FetchProtocolError) -> FetchFault? {
        guard let spec = environment(specVariable), !spec.isEmpty, environment(allowVariable) == "1" else { return nil }
        let parts = spec.split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2, let kind = Kind(rawValue: parts[0]), !parts[1].isEmpty else {
            throw FetchProtocolError(.invalidField, "\(specVariable)=\(spec): expected <kill|segv|hang|exit>:<marker>")
        }
        return FetchFault(kind: kind, marker: parts[1])
    }

    func fire(output: FetchServer.Output) {
        let kind = self.kind
        startThread {
            usleep(300_000)
            switch kind {
            case .kill:
                raise(SIGKILL)
            case .segv:
                // The Swift runtime's backtracer would catch SIGSEGV and spend seconds
                // symbolicating; a decoder crash in production would too, but tests want the
                // plain kernel-delivered signal.
                signal(SIGSEGV, SIG_DFL)
                UnsafeMutablePointer<UInt8>(bitPattern: 8)!.pointee = 1
            case .hang:
                output.muted.store(true, ordering: .relaxed)
                while true { pause() }
            case .exit:
                _exit(70)
            }
        }
        if kind == .hang {
            // The request loop stops too: a hung fetcher reads nothing more.
            output.muted.store(true, ordering: .relaxed)
            while true { pause() }
        }
    }

    private func startThread(_ body: @escaping @Sendable () -> Void) {
        do {
            try PosixThread.detach(body)
        } catch {
            _exit(FetchServer.ExitCode.ioError.rawValue)
        }
    }
}
