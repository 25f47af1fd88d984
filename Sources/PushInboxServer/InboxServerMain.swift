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
import PushModuleOptions
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
        // SIGTERM/SIGINT stop; so does a stream follower that finds the stream no longer holds
        // what the index needs (exit 78, like a configuration the host cannot serve).
        let stop = CallbackSlot<Void>()
        let exitStatus = Locked<Int32>(0)
        // Events the hub reads from the journal carry journal seqs; an index built from the
        // stream numbers items by stream seq, so there the hub learns of state changes from
        // the stream follower, as it applies them.
        let journalDirectory = inbox.source == .journal ? StateLayout(root: state).journal : ""
        let hub = EventHub(indexPath: indexPath, changes: inbox.source == .journal ? .journal(journalDirectory) : .follower)
        var streamFollower: FollowerGroup?
        var eventSink: (any EventSink)?
        var fleetOutbox: FleetOutbox?
        var stream: StreamInboxFollower?
        // A replaced stream, a rebuild's end: STATUS= follows (the reporter exists later).
        let streamChanged = CallbackSlot<Void>()
        if inbox.source == .nats {
            switch startStreamFollower(configuration: configuration, instance: options.paths.instance, indexPath: indexPath, hub: hub,
                                       stop: stop, exitStatus: exitStatus, changed: streamChanged) {
            case .exit(let status): return status
            case .run(let group, let sink, let outbox, let follower):
                streamFollower = group
                eventSink = sink
                fleetOutbox = outbox
                stream = follower
            }
        }
        let stats = ServerStats()
        stats.fleetOutbox = fleetOutbox
        stats.streamFollower = stream
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
        // Started in this order, stopped in reverse; the group takes SIGTERM/SIGINT (stop) and SIGHUP.
        let members: [(any Service)?] = [streamFollower, HTTPService(server), hubService, status]
        let services = ServiceGroup(members.compactMap { $0 }, gracefulStop: .seconds(10),
                                    reload: { reload(store: store, api: api, events: reloadEvents, configFile: store.mainFile, serving: reloadStatus) },
                                    escalated: { err("pushspool-inbox: still busy at the stop deadline: \($0.joined(separator: ", "))\n") })
        stop.set { services.stop() }
        let stopped = services.run(onReady: {
            out("listening on \(where_)\n")
            Listener.notify("READY=1\nSTATUS=serving on \(where_)")
        }, onStopping: { Listener.notify("STOPPING=1") })
        if case .startFailed(let error) = stopped.reason {
            err("pushspool-inbox: \(error)\n")
            return 1
        }
        stats.flushAuthLog(all: true)
        return exitStatus.withLock { $0 }
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
        case run(FollowerGroup, StreamEventSink, FleetOutbox?, StreamInboxFollower)
        case exit(Int32)
    }

    /// `[Inbox] Source=nats`: the follower that builds the index from the `[Export]` stream,
    /// checked before the server starts, and the sink that publishes accepted events to that
    /// stream. A stream that no longer holds what the index needs refuses the start (78), now
    /// or later (then `stop` is signalled with 78 as the status); NATS out of reach only
    /// delays the index (the follower keeps trying) and answers events with 503.
    static func startStreamFollower(configuration: Configuration, instance: String?, indexPath: String, hub: EventHub, stop: CallbackSlot<Void>,
                                    exitStatus: Locked<Int32>, changed: CallbackSlot<Void>) -> StreamStart {
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
        let streamName = options.export.stream
        // The fleet outbox works an event once the index applied it: each commit wakes it.
        let outbox = Locked<FleetOutbox?>(nil)
        // The erasures the index applies, for the fleet outbox (made later) to stop sending.
        let erased = ErasedSubjects()
        do throws(InboxStreamError) {
            follower = try StreamInboxFollower(options: options, refused: { error in
                refusedStart(error, events: events)
                exitStatus.withLock { $0 = 78 }
                stop()
            }, observer: { event in
                switch event {
                case .resumed, .applied: hub.indexApplied()
                case .erasure(let id, let seq, let outcome):
                    erasureApplied(id: id, streamSeq: seq, outcome: outcome, hub: hub, events: events,
                                   erased: erased)
                case .streamReplaced(let reason, let seq):
                    streamReplaced(reason, appliedSeq: seq, events: events)
                    changed()
                case .rebuilt(let seq, let items, let failure):
                    indexRebuilt(appliedSeq: seq, items: items, failure: failure, stream: streamName, events: events)
                    changed()
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
        } catch where error.refusesStart {
            refusedStart(error, events: events)
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
        return .run(FollowerGroup(followers, commits: CommitFeed(), niceness: 0), StreamEventSink(publisher: publisher), fleetOutbox, follower)
    }

    /// A refusal of the stream follower (gap, host id in use): on stderr, and a host id in use
    /// as a journald event too.
    static func refusedStart(_ error: InboxStreamError, events: EventLog) {
        err("pushspool-inbox: \(error)\n")
        if case .hostIdInUse(let hostId, let other) = error.kind {
            events.log(.inboxHostIdInUse, "another inbox node uses this host id: set [Export] HostId= per node",
                       fields: [("HOST_ID", hostId), ("OTHER_NODE", other), (EventField.reasonCode, error.shortDescription)])
        }
    }

    /// The stream is not the one the index was built from: said on stderr and as a journald
    /// event before the follower rebuilds.
    static func streamReplaced(_ reason: InboxStreamError, appliedSeq: UInt64, events: EventLog) {
        err("pushspool-inbox: \(reason)\n")
        var fields: [(String, String)] = [("INBOX_APPLIED_SEQ", String(appliedSeq)), (EventField.reasonCode, "rebuilding")]
        if case .replaced(let indexCreated, let streamCreated) = reason.kind {
            fields += [("STREAM_CREATED", String(streamCreated)), ("INDEX_STREAM_CREATED", indexCreated.map(String.init) ?? "none")]
        }
        events.log(.inboxStreamReplaced, "export stream replaced: rebuilding the inbox index from the new stream", fields: fields)
    }

    /// The end of the rebuild after a replaced stream.
    static func indexRebuilt(appliedSeq: UInt64, items: Int64, failure: InboxStreamError?, stream: String, events: EventLog) {
        if let failure {
            err("pushspool-inbox: rebuilding the inbox index from stream \(stream) failed (retried): \(failure)\n")
            events.log(.inboxStreamReplaced, "export stream replaced: rebuilding the inbox index failed, retried",
                       fields: [("INBOX_APPLIED_SEQ", String(appliedSeq)), (EventField.reasonCode, "rebuild_failed")])
        } else {
            err("pushspool-inbox: inbox index rebuilt from the new stream \(stream): \(items) items, stream seq \(appliedSeq)\n")
            events.log(.inboxStreamReplaced, "export stream replaced: inbox index rebuilt from the new stream",
                       fields: [("INBOX_APPLIED_SEQ", String(appliedSeq)), ("INBOX_ITEMS", String(items)), (EventField.reasonCode, "rebuilt")])
        }
    }

    /// An erasure record from the stream, applied by the follower (the erased user's rows,
    /// their stream `changes` too, left the index); one that named no one here is a journald event (never the plain
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
            // The index took the subject's rows (its `changes` too): streams read it again.
            hub.indexApplied()
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
