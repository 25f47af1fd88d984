@preconcurrency import Glibc
import PushCLI
import PushConfig
import PushExport
import PushFollow
import PushInbox
import PushInboxNode
import PushInboxServer
import PushInboxJetStream
import PushFleetOutbox
import PushOutbox
import PushOutboxStore
import PushJournal
import PushModuleOptions
import PushDaemonOptions
import PushPayload
import PushSpool
import PushSystem
import PushSystemd
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
        // Kept for SIGHUP: a reload reads the same files with the same overrides.
        let store: ConfigurationStore
        do {
            store = try ConfigurationStore(mainFile: options.config ?? ConfigurationLoader.defaultMainFile,
                                           mainFileRequired: options.config != nil,
                                           overrides: ConfigOverride.paths(spool: options.spool, stateDirectory: options.stateDir))
        } catch {
            err("pushspool-inbox: configuration error: \(error)\n")
            return 78
        }
        let configuration = store.current
        let inbox = configuration.inbox
        // The start-up check `pushspoolctl config check --for pushspool-inbox` runs too: the
        // token secret and admin token (read here, once), and on an inbox node ([Inbox]
        // Source=nats), which runs the fleet outbox, the key files and vendor URLs. On a
        // journal node [Outbox] and the erasure key are pushspoold's, and pushspoold checks them.
        let credentials = Configuration.Credentials.fromEnvironment(unset: .none)
        let check = configuration.deploymentCheck(keyFileOwner: geteuid(), for: .pushspoolInbox, credentials: credentials)
        guard check.problems.isEmpty, let secrets = check.inboxSecrets else {
            for problem in check.problems { err("pushspool-inbox: configuration error: \(problem)\n") }
            return 78
        }
        if inbox.source == .nats {
            // The fleet erasure key, so this node resolves the erasure records in the stream
            // (their hashes are under it). Only here: a journal-fed pushspool-inbox shares
            // pushspoold's state directory, where pushspoold alone installs it.
            if let keyFile = configuration.export.erasureKeyPath(credentialsDirectory: credentials.directory) {
                do {
                    try Posix.mkdirs(configuration.journal.stateDirectory)
                    try ErasureSecret.provision(stateDirectory: configuration.journal.stateDirectory, keyFile: keyFile, owner: nil)
                } catch {
                    err("pushspool-inbox: \(error)\n")
                    return 78
                }
            }
        }
        let auth = TokenAuth(secret: secrets.tokenSecret)
        // The admin token of /v1/admin/: optional; without one only SelfErase= users get in.
        let adminToken = secrets.adminToken

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
        // Events the hub reads from the journal carry journal seqs; an index built from the
        // stream numbers items by stream seq, so there the hub learns of state changes from
        // the stream follower, as it applies them.
        let journalDirectory = inbox.source == .journal ? StateLayout(root: state).journal : ""
        let hub = EventHub(indexPath: indexPath, changes: inbox.source == .journal ? .journal(journalDirectory) : .follower)
        var nodeServices: [any Service] = []
        var eventSink: (any EventSink)?
        var fleetOutbox: FleetOutbox?
        var stream: JetStreamInboxFollower?
        // A replaced stream, a rebuild's end: STATUS= follows (the reporter exists later).
        let streamChanged = CallbackSlot<Void>()
        if inbox.source == .nats {
            switch startStreamFollower(configuration: configuration, instance: options.paths.instance, indexPath: indexPath, hub: hub,
                                       changed: streamChanged) {
            case .exit(let status): return status
            case .run(let node, let sink):
                nodeServices = node.services
                eventSink = sink
                fleetOutbox = node.fleetOutbox
                stream = node.follower
            }
        }
        let stats = ServerStats()
        // /metrics reads the node through plain values: the HTTP layer knows none of its types.
        stats.node = nodeReadings(stream: stream, fleetOutbox: fleetOutbox)
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
        let status = StatusReporter { [fleetOutbox, stream] in
            let summaryPending = stats.flushAuthLog()
            // The fleet outbox's counts as pushspoold's STATUS= shows its outbox's.
            let outbox = fleetOutbox.map { "; " + $0.status.summary } ?? ""
            // A replaced stream being rebuilt, or replacements seen, lead the line.
            var index = ""
            if let stream {
                let health = stream.health
                if health.state == .rebuilding { index = "index rebuilding: stream replaced; " }
                if health.streamReplacements > 0 { index += "stream replaced \(health.streamReplacements)x; " }
            }
            Listener.notify("STATUS=\(index)serving on \(serving): \(server.currentConnections) connections, "
                + "\(hub.openStreams) streams, \(stats.totalRequests) requests, \(stats.authFailures) refused" + outbox)
            return summaryPending
        }
        let hubService = EventHubService(hub)
        streamChanged.set { status.changed() }
        stats.onChange.set { status.changed() }
        fleetOutbox?.observe { status.changed() }
        hub.onStreamsChanged.set {
            status.changed()
            hubService.streamCountChanged()
        }
        // SIGHUP reloads (what pushspool-inbox can apply running: [Inbox] RetentionSec=).
        let reloadEvents = EventLog(identifier: "pushspool-inbox")
        let reloadStatus = where_
        let services = serviceGroup(node: nodeServices, http: HTTPService(server), hub: hubService, status: status, reload: {
            reload(store: store, api: api, events: reloadEvents, configFile: store.mainFile, serving: reloadStatus)
        })
        let stopped = services.run(onReady: {
            out("listening on \(where_)\n")
            Listener.notify("READY=1\nSTATUS=serving on \(where_)")
        }, onStopping: { Listener.notify("STOPPING=1") })
        if let why = stopMessage(stopped.reason) { err("pushspool-inbox: \(why)\n") }
        if case .startFailed = stopped.reason { return exitStatus(stopped.reason) }
        stats.flushAuthLog(all: true)
        return exitStatus(stopped.reason)
    }

    /// pushspool-inbox's services in the order they start; the group stops them in the
    /// reverse order, after asking all of them at once to wind down, within 10 s:
    /// 1. the node's (`[Inbox] Source=nats`, ``InboxNode/services``): its followers, then
    ///    the event publisher's connecting thread;
    /// 2. the HTTP server, whose workers publish through the node's publisher;
    /// 3. the event hub: its streams are ended as the stop begins and get up to 100 ms to
    ///    close before the server (stopped next) closes their connections;
    /// 4. the status reporter.
    /// Each shuts the group down when it ends by itself (the default): none ends while
    /// serving but the node's followers, on a stream refusal. `main` runs the group, takes
    /// SIGTERM/SIGINT (stop) and SIGHUP (`reload`) through it, and exits with
    /// ``exitStatus(_:)``.
    package static func serviceGroup(node: [any Service], http: any Service, hub: any Service, status: any Service,
                                     watchSignals: Bool = true, reload: (@Sendable () -> Void)? = nil) -> ServiceGroup {
        ServiceGroup(node + [http, hub, status], gracefulStop: .seconds(10), watchSignals: watchSignals, reload: reload,
                     escalated: { err("pushspool-inbox: still busy at the stop deadline: \($0.joined(separator: ", "))\n") })
    }

    /// The exit status for why the group stopped: 0 after a stop asked for (SIGTERM,
    /// SIGINT); 78 (EX_CONFIG) for a failure of the configuration or state the host has (the
    /// stream no longer holds what the index needs: a restart does not help); 1 for any other
    /// failure, and for a service that ended while the rest served, so that systemd sees the
    /// failure (`Restart=on-failure`).
    package static func exitStatus(_ reason: ServiceGroupStateMachine.StopReason) -> Int32 {
        switch reason {
        case .requested, .signal:
            return 0
        case .serviceFinished:
            return 1
        case .startFailed(let error), .serviceFailed(_, let error):
            // The follower's refusal of the stream after the start, among others.
            if error.kind == .configuration { return 78 }
            return 1
        }
    }

    /// The stderr line for a stop that was not asked for; `nil` for SIGTERM/SIGINT.
    static func stopMessage(_ reason: ServiceGroupStateMachine.StopReason) -> String? {
        switch reason {
        case .requested, .signal: nil
        case .serviceFinished(let name): "\(name) ended while serving"
        case .startFailed(let error), .serviceFailed(_, let error): "\(error)"
        }
    }

    /// What `/metrics` and `/healthz` read of the node, as the HTTP layer's plain values.
    static func nodeReadings(stream: JetStreamInboxFollower?, fleetOutbox: FleetOutbox?) -> ServerStats.NodeReadings {
        var readings = ServerStats.NodeReadings()
        if let stream {
            readings.stream = { @Sendable () -> ServerStats.StreamReading in
                let health = stream.health
                let state: ServerStats.StreamReading.State
                switch health.state {
                case .connecting: state = .connecting
                case .following: state = .following
                case .rebuilding: state = .rebuilding
                case .refused: state = .refused
                }
                return ServerStats.StreamReading(state: state, replacements: health.streamReplacements)
            }
        }
        if let fleetOutbox {
            readings.fleetOutbox = { @Sendable () -> ServerStats.FleetOutboxReading in
                let status = fleetOutbox.status
                return ServerStats.FleetOutboxReading(delivered: status.delivered, retried: status.retried, skipped: status.skipped,
                                                      parked: status.parked, inFlight: status.inFlight, connected: status.connected)
            }
        }
        return readings
    }

    /// SIGHUP: re-reads the configuration; one that loads whole replaces the old, and its
    /// `[Inbox] RetentionSec=` applies to requests from now on. Every other key pushspool-inbox
    /// reads takes effect at its next restart, which the event names (`RESTART_NEEDED_FOR=`),
    /// as pushspoold's reload does; a file that does not load leaves the running one in force.
    /// Runs on the signal thread, between `RELOADING=1` and `READY=1`.
    static func reload(store: ConfigurationStore, api: InboxAPI, events: EventLog, configFile: String, serving: String) {
        Listener.notify("RELOADING=1\nMONOTONIC_USEC=\(Posix.monotonicNanos() / 1000)\nSTATUS=Reloading configuration")
        defer { Listener.notify("READY=1\nSTATUS=serving on \(serving)") }
        switch store.reload(for: .pushspoolInbox) {
        case .applied(let changed, let needsRestart):
            let retention = store.current.inbox.retention
            api.setRetention(retention)
            var fields: [(String, String)] = [("CONFIG_FILE", configFile), ("CHANGED", changed.joined(separator: " "))]
            if !needsRestart.isEmpty { fields.append(("RESTART_NEEDED_FOR", needsRestart.joined(separator: " "))) }
            events.log(.reload, needsRestart.isEmpty
                ? "configuration reloaded (\(changed.count) changed)"
                : "configuration reloaded; \(needsRestart.joined(separator: ", ")) take effect at the next restart",
                fields: fields)
        case .rejected(let error):
            events.log(.reloadFailed, "configuration reload failed, keeping the previous one: \(error)",
                       fields: [("CONFIG_FILE", configFile)])
        }
    }

    enum StreamStart {
        case run(InboxNode, StreamEventSink)
        case exit(Int32)
    }

    /// `[Inbox] Source=nats`: the node (``InboxNode``: the follower that builds the index from
    /// the `[Export]` stream, checked before the server starts, the publisher, the fleet
    /// outbox) built from this configuration's options, and the sink through which the HTTP
    /// layer publishes accepted events. A stream that no longer holds what the index needs
    /// refuses the start (78), now or later (then the node's followers end with a failure
    /// of kind configuration, which stops the group: 78 too, by ``exitStatus(_:)``); NATS
    /// out of reach only delays the index (the follower keeps trying) and answers events with 503.
    static func startStreamFollower(configuration: Configuration, instance: String?, indexPath: String, hub: EventHub,
                                    changed: CallbackSlot<Void>) -> StreamStart {
        let credentials = getenv("CREDENTIALS_DIRECTORY").map { String(cString: $0) }
        var options: JetStreamInboxOptions
        do throws(ExportError) {
            options = try JetStreamInboxOptions(configuration: configuration, indexPath: indexPath, instance: instance,
                                             credentialsDirectory: credentials)
        } catch {
            err("pushspool-inbox: [Inbox] Source=nats: \(error)\n")
            return .exit(78)
        }
        options.erasureHook = EraseKillHook.hook(environment: { getenv($0).map { String(cString: $0) } })
        let state = configuration.journal.stateDirectory
        let settings = configuration.outbox
        // [Outbox] Enabled=yes on a Source=nats node: the fleet outbox, its key files loaded
        // when the node makes it (after the follower's check against the stream).
        let outbox: (() throws(OutboxError) -> OutboxOptions)? = settings.enabled
            ? { () throws(OutboxError) in try OutboxOptions.load(settings: settings, stateDirectory: state) } : nil
        let hooks = InboxNode.Hooks(indexApplied: { hub.indexApplied() }, changed: { changed() })
        let node: InboxNode
        do throws(InboxNode.StartError) {
            node = try InboxNode(options: options, outbox: outbox, fleetOutboxDirectory: StateLayout(root: state).fleetOutbox, hooks: hooks)
        } catch {
            switch error {
            case .follower(let error):
                err("pushspool-inbox: \(error)\n")
                return .exit(1)
            case .publisher(let error):
                err("pushspool-inbox: [Inbox] Source=nats: \(error)\n")
                return .exit(78)
            case .refused:
                // The gap or the host id in use, said by the node.
                return .exit(78)
            case .fleetOutbox(let error):
                // startFleetOutbox's key files, URLs or state.
                err("pushspool-inbox: [Outbox] Enabled=yes with [Inbox] Source=nats: \(error)\n")
                return .exit(78)
            }
        }
        return .run(node, StreamEventSink(publisher: node.publisher))
    }
}
