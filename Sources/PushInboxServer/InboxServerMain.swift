@preconcurrency import Glibc
import PushCLI
import PushConfig
import PushExport
import PushFollow
import PushInbox
import PushInboxStream
import PushFleetOutbox
import PushOutbox
import PushOutboxStore
import PushJournal
import PushPayload
import PushSpool
import PushSystem
import PushSystemd
import PushUserData
import Foundation

/// `pushspool-inbox`: command line, configuration, then the server until SIGTERM/SIGINT.
/// `Sendable`: case-less namespace.
package enum InboxServerMain {
    /// pushspool-inbox's table: where to listen, how many threads, and the shared path options.
    package static var program: Program<Options> {
        Program("pushspool-inbox", root: Command(
            "pushspool-inbox", summary: "serve the Notification Center over HTTP",
            options: [
                .value("--listen", placeholder: "ADDR:PORT", help: "bind here (127.0.0.1:8080, [::1]:0); port 0 = any free port, "
                       + "printed on stdout as \"listening on ADDR:PORT\""),
                .value("--threads", placeholder: "N", help: "HTTP worker threads, 1-64, each with its own epoll set and read-only index connection "
                       + "(default: the CPUs online, at most 16)"),
            ] + PathOptions.options,
            discussion: """
                Serves the Notification Center over HTTP (docs/inbox-api.md). Without --listen it takes
                the socket systemd passes (pushspool-inbox.socket). Reads <state>/inbox/index.sqlite
                read-only; state changes become event envelopes dropped into <spool>/incoming/.
                With [Inbox] Source=nats it builds that index from the [Export] stream and
                publishes state changes to that stream instead; with [Outbox] Enabled=yes as
                well, it delivers the events inbox nodes published to the vendors, each event
                by one node of the fleet.
                """,
            exitStatus: "Exit status: 0 stopped, 1 runtime failure, 64 usage error or no socket, 78 configuration error."
        ) { invocation throws(CLIError) in
            Options(listen: invocation.value("--listen"), threads: try invocation.integer("--threads", in: 1...64),
                    paths: try PathOptions.resolve(invocation))
        })
    }

    package struct Options: Sendable, Equatable {
        var listen: String?
        var threads: Int?
        var paths = PathOptions()
        var spool: String? { paths.spool }
        var stateDir: String? { paths.stateDir }
        var config: String? { paths.config }
    }

    /// The usage lines, for a `--listen` the table cannot judge.
    static var usage: String { program.usage([]) }

    static func err(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }

    static func out(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    }

    /// pushspool-inbox's own writable directory: systemd's `$STATE_DIRECTORY`
    /// (`StateDirectory=pushspool-inbox`; the first of a colon-separated list), else
    /// `<journal state>/inbox-http` (created here), `nil` when it cannot be created. The
    /// journal's state directory itself is read-only to this process under its unit.
    static func ownStateDirectory(journalState: String) -> String? {
        if let value = getenv("STATE_DIRECTORY").map({ String(cString: $0) }),
           let first = value.split(separator: ":").first, !first.isEmpty {
            return String(first)
        }
        let directory = StateLayout(root: journalState).inboxHTTP
        do {
            try Posix.mkdirs(directory, mode: 0o700)
            return directory
        } catch {
            err("pushspool-inbox: Idempotency-Key bindings kept in memory only (not across restarts): \(error)\n")
            return nil
        }
    }

    /// One worker per CPU online (`sysconf(_SC_NPROCESSORS_ONLN)`), 1 to 16: more threads
    /// than CPUs only add switching, and each holds an index connection.
    static func defaultThreads() -> Int {
        min(16, max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    }

    /// Runs the program; returns the exit status (64 usage, 78 configuration, 1 runtime).
    package static func main(_ arguments: [String]) -> Int32 {
        let options: Options
        switch program.resolve(arguments, version: pushspoolVersion) {
        case .exit(let status): return status
        case .run(let parsed, _): options = parsed
        }
        let configuration: Configuration
        do {
            configuration = try ConfigurationLoader.load(
                mainFile: options.config ?? ConfigurationLoader.defaultMainFile, mainFileRequired: options.config != nil,
                overrides: ConfigOverride.paths(spool: options.spool, stateDirectory: options.stateDir)).0
        } catch {
            err("pushspool-inbox: configuration error: \(error)\n")
            return 78
        }
        let inbox = configuration.inbox
        // An inbox node runs the fleet outbox itself: the same key-file and URL checks as
        // pushspoold's start and `config check --for pushspool-inbox`. On a journal node
        // [Outbox] is pushspoold's, and pushspoold checks it.
        if inbox.source == .nats {
            let credentials = getenv("CREDENTIALS_DIRECTORY").map { String(cString: $0) }
            let problems = configuration.deploymentProblems(keyFileOwner: geteuid(), for: .pushspoolInbox,
                                                            credentialsDirectory: credentials)
            guard problems.isEmpty else {
                for problem in problems { err("pushspool-inbox: \(problem)\n") }
                return 78
            }
            // The fleet erasure key, so this node resolves the erasure records in the stream
            // (their hashes are under it). Only here: a journal-fed pushspool-inbox shares
            // pushspoold's state directory, where pushspoold alone installs it.
            if let keyFile = configuration.export.erasureKeyPath(credentialsDirectory: credentials) {
                do {
                    try Posix.mkdirs(configuration.journal.stateDirectory)
                    try ErasureSecret.provision(stateDirectory: configuration.journal.stateDirectory, keyFile: keyFile, owner: nil)
                } catch {
                    err("pushspool-inbox: \(error)\n")
                    return 78
                }
            }
        }
        var secretPath = inbox.tokenSecretFile
        if secretPath.isEmpty {
            guard let credentials = getenv("CREDENTIALS_DIRECTORY").map({ String(cString: $0) }), !credentials.isEmpty else {
                err("pushspool-inbox: no token secret: set [Inbox] TokenSecretFile= or run with LoadCredential=inbox-token-secret:…\n")
                return 78
            }
            secretPath = credentials + "/inbox-token-secret"
        }
        let auth: TokenAuth
        do {
            auth = try TokenAuth.load(path: secretPath)
        } catch {
            err("pushspool-inbox: cannot read the token secret \(secretPath) (at least \(TokenAuth.minSecretBytes) bytes): \(error)\n")
            return 78
        }

        // The admin token of /v1/admin/: optional; without one only SelfErase= users get in.
        var adminToken: [UInt8]?
        var adminPath = inbox.adminTokenFile
        if adminPath.isEmpty, let credentials = getenv("CREDENTIALS_DIRECTORY").map({ String(cString: $0) }), !credentials.isEmpty,
           access(credentials + "/inbox-admin-token", F_OK) == 0 {
            adminPath = credentials + "/inbox-admin-token"
        }
        if !adminPath.isEmpty {
            do {
                var bytes = try Posix.readFile(adminPath, limit: TokenAuth.maxSecretBytes)
                while let last = bytes.last, last == 0x0a || last == 0x0d || last == 0x20 || last == 0x09 { bytes.removeLast() }
                guard bytes.count >= TokenAuth.minSecretBytes else { throw SystemError(call: "read", errno: EINVAL, subject: adminPath) }
                adminToken = bytes
            } catch {
                err("pushspool-inbox: cannot read the admin token \(adminPath) (at least \(TokenAuth.minSecretBytes) bytes): \(error)\n")
                return 78
            }
        }

        // Block the stop signals before any thread starts, so every thread inherits the mask
        // and the signal watcher below takes them.
        SignalWatcher.blockInThisThread()
        signal(SIGPIPE, SIG_IGN)

        let listenFD: Int32
        var where_ = "the socket systemd passed"
        do {
            if let listen = options.listen {
                guard let (host, port) = Listener.parse(listen) else {
                    err("pushspool-inbox: --listen needs ADDR:PORT, not '\(listen)'\n\(usage)\n")
                    return 64
                }
                let bound = try Listener.bind(host: host, port: port)
                listenFD = bound.fd
                where_ = host.contains(":") ? "[\(host)]:\(bound.port)" : "\(host):\(bound.port)"
            } else if let fd = try Listener.fromSystemd() {
                listenFD = fd
            } else {
                err("pushspool-inbox: no socket: pass --listen ADDR:PORT or start pushspool-inbox.socket\n")
                return 64
            }
        } catch {
            err("pushspool-inbox: cannot listen: \(error)\n")
            return 1
        }

        let state = configuration.journal.stateDirectory
        let indexPath = InboxIndex.path(stateDirectory: state)
        // SIGTERM/SIGINT stop; so does a stream follower that finds the stream no longer holds
        // what the index needs (exit 78, like a configuration the host cannot serve).
        let stop = DispatchSemaphore(value: 0)
        let exitStatus = Locked<Int32>(0)
        // Events the hub reads from the journal carry journal seqs; an index built from the
        // stream numbers items by stream seq, so there the hub learns of state changes from
        // the stream follower, as it applies them.
        let journalDirectory = inbox.source == .journal ? StateLayout(root: state).journal : ""
        let hub = EventHub(indexPath: indexPath, changes: inbox.source == .journal ? .journal(journalDirectory) : .follower)
        var streamFollower: FollowerGroup?
        var eventSink: (any EventSink)?
        var fleetOutbox: FleetOutbox?
        if inbox.source == .nats {
            switch startStreamFollower(configuration: configuration, instance: options.paths.instance, indexPath: indexPath, hub: hub,
                                       stop: stop, exitStatus: exitStatus) {
            case .exit(let status): return status
            case .run(let group, let sink, let outbox):
                streamFollower = group
                eventSink = sink
                fleetOutbox = outbox
            }
        }
        let stats = ServerStats()
        stats.fleetOutbox = fleetOutbox
        let retention: Duration? = inbox.retention == .zero ? nil : inbox.retention
        let idempotencyDirectory = ownStateDirectory(journalState: state)
        let api = InboxAPI(settings: .init(indexPath: indexPath, mediaDirectory: StateLayout(root: state).media,
                                           spool: SpoolLayout(root: configuration.spool.directory), retention: retention,
                                           idempotencyDatabase: idempotencyDirectory.map { $0 + "/idempotency.sqlite" },
                                           journalDirectory: journalDirectory, events: eventSink,
                                           adminToken: adminToken, selfErase: inbox.selfErase, stateDirectory: state),
                           auth: auth, hub: hub, stats: stats)
        if let error = api.idempotencyStoreError {
            err("pushspool-inbox: Idempotency-Key bindings kept in memory only (not across restarts): \(error)\n")
        }
        var limits = HTTPLimits(maxConnections: inbox.maxConnections, maxConnectionsPerIP: inbox.maxConnectionsPerIP,
                                connectionTimeout: inbox.connectionTimeout, maxRequestBytes: inbox.maxRequestBytes)
        limits.threads = options.threads ?? defaultThreads()
        let server = HTTPServer(listenFD: listenFD, limits: limits, handler: api)
        let serving = where_
        let status = StatusReporter { [fleetOutbox] in
            let summaryPending = stats.flushAuthLog()
            // The fleet outbox's counts as pushspoold's STATUS= shows its outbox's.
            let outbox = fleetOutbox.map { "; " + $0.status.summary } ?? ""
            Listener.notify("STATUS=serving on \(serving): \(server.currentConnections) connections, "
                + "\(hub.openStreams) streams, \(stats.totalRequests) requests, \(stats.authFailures) refused" + outbox)
            return summaryPending
        }
        stats.onChange.set { status.changed() }
        fleetOutbox?.observe { status.changed() }
        hub.onStreamsChanged.set { status.changed() }
        let members: [(any Service)?] = [streamFollower, HTTPService(server), EventHubService(hub), status]
        let services = ServiceGroup(members.compactMap { $0 })
        // SIGHUP is taken and ignored (the configuration is read at start).
        let signals: SignalWatcher
        do {
            signals = try SignalWatcher { signalNumber in
                if signalNumber != SIGHUP { stop.signal() }
            }
        } catch {
            err("pushspool-inbox: cannot start the signal thread: \(error)\n")
            return 1
        }
        defer { signals.stop() }
        do {
            try services.start()
        } catch {
            err("pushspool-inbox: \(error)\n")
            return 1
        }
        out("listening on \(where_)\n")
        Listener.notify("READY=1\nSTATUS=serving on \(where_)")
        stop.wait()
        Listener.notify("STOPPING=1")
        let stuck = services.stop(within: .seconds(10))
        if !stuck.isEmpty { err("pushspool-inbox: still busy at the stop deadline: \(stuck.joined(separator: ", "))\n") }
        stats.flushAuthLog(all: true)
        return exitStatus.withLock { $0 }
    }

    enum StreamStart {
        case run(FollowerGroup, StreamEventSink, FleetOutbox?)
        case exit(Int32)
    }

    /// `[Inbox] Source=nats`: the follower that builds the index from the `[Export]` stream,
    /// checked before the server starts, and the sink that publishes accepted events to that
    /// stream. A stream that no longer holds what the index needs refuses the start (78), now
    /// or later (then `stop` is signalled with 78 as the status); NATS out of reach only
    /// delays the index (the follower keeps trying) and answers events with 503.
    static func startStreamFollower(configuration: Configuration, instance: String?, indexPath: String, hub: EventHub, stop: DispatchSemaphore,
                                    exitStatus: Locked<Int32>) -> StreamStart {
        let credentials = getenv("CREDENTIALS_DIRECTORY").map { String(cString: $0) }
        var options: StreamInboxOptions
        do throws(ExportError) {
            options = try StreamInboxOptions(configuration: configuration, indexPath: indexPath, instance: instance,
                                             credentialsDirectory: credentials)
        } catch {
            err("pushspool-inbox: [Inbox] Source=nats: \(error)\n")
            return .exit(78)
        }
        options.erasureHook = EraseKillHook.hook(environment: { getenv($0).map { String(cString: $0) } })
        let events = EventLog(identifier: "pushspool-inbox")
        let follower: StreamInboxFollower
        // The fleet outbox works an event once the index applied it: each commit wakes it.
        let outbox = Locked<FleetOutbox?>(nil)
        // The erasures the index applies, for the fleet outbox (made later) to stop sending.
        let erased = ErasedSubjects()
        do throws(InboxStreamError) {
            follower = try StreamInboxFollower(options: options, refused: { error in
                err("pushspool-inbox: \(error)\n")
                exitStatus.withLock { $0 = 78 }
                stop.signal()
            }, observer: { event in
                switch event {
                case .resumed(let seq): hub.followerResumed(at: seq)
                case .applied(let records, let seq): hub.followerApplied(records, appliedSeq: seq)
                case .erasure(let id, let seq, let outcome):
                    erasureApplied(id: id, streamSeq: seq, outcome: outcome, hub: hub, events: events,
                                   erased: erased)
                }
                outbox.withLock { $0 }?.indexAdvanced()
            })
        } catch {
            err("pushspool-inbox: \(error)\n")
            return .exit(1)
        }
        let publisher: EventPublisher
        // The PubAck wait bounded at 2 s, and the connection made by the publisher's own
        // thread: an HTTP worker never waits for a connect, and at most 2 s for a stream that
        // stopped answering (the outage's first request; the next ones answer 503 at once).
        do throws(ExportError) { publisher = try EventPublisher(options: options.export, maxWait: .seconds(2)) } catch {
            err("pushspool-inbox: [Inbox] Source=nats: \(error)\n")
            return .exit(78)
        }
        do throws(SystemError) { try publisher.startConnecting() } catch {
            err("pushspool-inbox: cannot start the thread that connects to NATS: \(error)\n")
            return .exit(1)
        }
        do throws(InboxStreamError) {
            try follower.prepare()
        } catch where error.isGap {
            err("pushspool-inbox: \(error)\n")
            return .exit(78)
        } catch {
            err("pushspool-inbox: the inbox index waits for NATS: \(error)\n")
        }
        var followers: [any Follower] = [follower]
        var fleetOutbox: FleetOutbox?
        if configuration.outbox.enabled {
            do throws(OutboxError) {
                let fleet = try startFleetOutbox(configuration: configuration, export: options.export, follower: follower, erased: erased)
                outbox.withLock { $0 = fleet }
                fleetOutbox = fleet
                followers += [fleet, fleet.retrySender] as [any Follower]
            } catch {
                err("pushspool-inbox: [Outbox] Enabled=yes with [Inbox] Source=nats: \(error)\n")
                return .exit(78)
            }
        }
        return .run(FollowerGroup(followers, commits: CommitFeed(), niceness: 0), StreamEventSink(publisher: publisher), fleetOutbox)
    }

    /// An erasure record from the stream, applied by the follower: the erased user's changes
    /// leave the SSE ring; one that named no one here is a journald event (never the plain
    /// id: the record holds only the hash, and so does the event).
    /// The fleet outbox (`erased`) stops sending the subject's events from before the record.
    static func erasureApplied(id: String, streamSeq: UInt64, outcome: NodeErasure.Outcome, hub: EventHub, events: EventLog,
                               erased: ErasedSubjects? = nil) {
        switch outcome {
        case .erased(let subject, _):
            let erasedSubject: ErasedSubjects.Subject = switch subject {
            case .user(let user): .user(user)
            case .device(let device): .device(device)
            }
            erased?.add(ErasedSubjects.Entry(erasureID: id, subject: erasedSubject, before: streamSeq))
            if case .user(let user) = subject { hub.forget(user: user) }
        case .unmatched(let reason, _):
            let why = reason == "no_key"
                ? "this node has no erasure key (give the fleet one: [Export] ErasureKeyFile=)"
                : "no user or device of this node's index matches it"
            events.log(.erasureUnmatched, "erasure \(id) from the stream names no one here: \(why)",
                       fields: [("ERASURE_ID", id), ("STREAM_SEQ", String(streamSeq)), (EventField.reasonCode, reason)])
        case .alreadyDone:
            break
        }
    }

    /// `[Outbox] Enabled=yes` on a `Source=nats` node: the fleet outbox, pulling the events
    /// inbox nodes publish from the consumer every such node shares, key files loaded.
    static func startFleetOutbox(configuration: Configuration, export: ExportOptions,
                                 follower: StreamInboxFollower, erased: ErasedSubjects = ErasedSubjects()) throws(OutboxError) -> FleetOutbox {
        let state = configuration.journal.stateDirectory
        let outbox = try OutboxOptions.load(settings: configuration.outbox, stateDirectory: state)
        let options = FleetOutboxOptions(outbox: outbox, export: export, directory: StateLayout(root: state).fleetOutbox)
        return try FleetOutbox(options: options, appliedSeq: { follower.appliedSeq }, erased: erased, onNotice: { notice in
            switch notice {
            case .parked(let id, let target, let status, let reason, let message):
                err("pushspool-inbox: outbox delivery \(id) to \(target) parked (\(reason), HTTP \(status)): \(message)\n")
            case .failed(let id, let target, let status, let message, let retryInMillis):
                err("pushspool-inbox: outbox delivery \(id) to \(target) failed (HTTP \(status)), handed back for \(retryInMillis) ms: \(message)\n")
            case .fieldProblem(let id, let target, let field, let reason, let message):
                err("pushspool-inbox: outbox delivery \(id) to \(target): field \(field) not normalised (\(reason)): \(message)\n")
            }
        })
    }
}
