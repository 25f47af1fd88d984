@preconcurrency import Glibc
import PushSystem
import PushJournal
import PushSystemd
import PushConfig
import PushInbox
import PushOutbox
import PushDaemonOptions
import PushOutboxStore
import PushExport
import PushFollow
import PushSpool
import PushErasure

/// The journal's followers inside pushspoold: the Notification Center index (SQLite) and the
/// outbox that delivers its events to the vendors. Each reads the journal from its own durable
/// cursor on a thread of its own, so nothing they do (SQLite, HTTP) can slow or block ingest;
/// their lag shows in STATUS= and the metrics.
///
/// `Sendable`: the followers lock internally; this type only holds them.
final class Followers: Sendable {
    let inbox: InboxFollower?
    let outbox: OutboxFollower?
    /// `[Export] Enabled=yes`: publishes every record to NATS JetStream.
    let exporter: Exporter?
    /// Performs the journaled erasure requests (docs/design/erasure.md), after the others.
    let eraser: EraserFollower?
    /// `[Export] Enabled=yes`: performs here the erasures other hosts put into the stream.
    let fleetErasure: FleetErasureListener?
    /// The followers on the shared runtime, in start order.
    let group: FollowerGroup

    /// Opens the index (created on first use) and, when `[Outbox] Enabled=yes`, the outbox with
    /// its key files. A follower that cannot open stops start-up with a clear message: running
    /// without it would silently leave apps and vendors behind. A damaged index is no such
    /// reason: it is derived data, moved aside and rebuilt in the background (an
    /// `inboxIndexCorrupt` event).
    init(configuration: Configuration, journal: JournalWriter, events: EventLog, retention: PeriodicFollower?,
         eraser eraserJournal: EraserFollower.LiveErasureJournalFactory? = nil, erasureRequests: ErasureRequests? = nil,
         spool: SpoolLayout? = nil,
         erasureSecret: ErasureSecret? = nil,
         eraserHook: @escaping @Sendable (String) -> Void = { _ in }) throws(DaemonError) {
        do {
            // With [Inbox] Source=nats, pushspool-inbox builds the index from the stream: the
            // journal's follower must not write into the same file with journal seqs.
            inbox = configuration.inbox.enabled && configuration.inbox.source == .journal
                ? try InboxFollower(stateDirectory: configuration.journal.stateDirectory, listModals: configuration.inbox.listModals,
                                    feeds: configuration.inboxFeeds,
                                    retention: configuration.inbox.retention > .zero ? configuration.inbox.retention : nil, journalLastSeq: { journal.stats.lastSeq }, notify: { Self.log($0, events: events) })
                : nil
        } catch {
            throw DaemonError(stage: "inbox index", message: "\(error) (rebuild it with `pushspoolctl nc reindex`)", errno: EIO)
        }
        do {
            exporter = configuration.export.enabled
                ? try Exporter(options: Self.exportOptions(configuration), journalLastSeq: { journal.stats.lastSeq },
                               notify: { Self.log($0, events: events) })
                : nil
        } catch {
            throw DaemonError(stage: "export", message: "\(error)", errno: EINVAL)
        }
        // The erasures a crash left pending, before the outbox loads its files (it drops theirs).
        erasureRequests?.restoreErased(journalDirectory: StateLayout(root: configuration.journal.stateDirectory).journal)
        outbox = try Self.makeOutbox(configuration, events: events, erased: erasureRequests?.erased ?? ErasedSubjects())
        if let eraserJournal, let spool {
            // The stream holds this host's data when the exporter publishes records to it, or
            // when this node's inbox publishes its events there.
            let stream = configuration.export.enabled || configuration.inbox.source == .nats ? Self.exportOptions(configuration) : nil
            do {
                eraser = try EraserFollower(
                    sources: UserDataSources(stateDirectory: configuration.journal.stateDirectory, spool: spool), stream: stream,
                    journal: eraserJournal, journalLastSeq: journal.stats.lastSeq, requests: erasureRequests,
                    hook: eraserHook)
            } catch {
                throw DaemonError(stage: "eraser", message: "\(error)", errno: EIO)
            }
        } else {
            eraser = nil
        }
        fleetErasure = try Self.makeFleetErasure(configuration, journal: journal, spool: spool, secret: erasureSecret, events: events,
                                                 hook: eraserHook)
        let members: [(any Follower)?] = [inbox, outbox, exporter, retention, eraser, fleetErasure]
        group = FollowerGroup(members.compactMap { $0 }, commits: journal.commits, healthChanged: { Self.log($0, events: events) })
    }

    /// `[Outbox]` as the follower takes it, key files loaded; `nil` when disabled.
    private static func makeOutbox(_ configuration: Configuration, events: EventLog, erased: ErasedSubjects) throws(DaemonError) -> OutboxFollower? {
        let settings = configuration.outbox
        guard settings.enabled else { return nil }
        do {
            let options = try OutboxOptions.load(settings: settings, stateDirectory: configuration.journal.stateDirectory)
            return try OutboxFollower(options: options, erased: erased) { notice in Self.log(notice, events: events) }
        } catch {
            throw DaemonError(stage: "outbox", message: "\(error)", errno: EINVAL)
        }
    }

    /// The fleet erasure listener when `[Export] Enabled=yes` (with the spool and the erasure
    /// key the live erasure path needs); `nil` otherwise.
    private static func makeFleetErasure(_ configuration: Configuration, journal: JournalWriter, spool: SpoolLayout?, secret: ErasureSecret?,
                                         events: EventLog, hook: @escaping @Sendable (String) -> Void) throws(DaemonError) -> FleetErasureListener? {
        guard configuration.export.enabled, let spool, let secret else { return nil }
        let export = exportOptions(configuration)
        let hostId: String
        do { hostId = try export.resolvedHostId() } catch {
            throw DaemonError(stage: "export", message: "\(error)", errno: EINVAL)
        }
        return FleetErasureListener(
            options: FleetErasureOptions(export: export, hostId: hostId), secret: secret,
            stateDirectory: configuration.journal.stateDirectory, spool: spool,
            journaled: { journal.contains(key: $0) },
            onResult: { notice, outcome in
                let (result, text) = switch outcome {
                case .dropped: ("dropped", "erasure from the fleet names a subject here: its request is in the spool")
                case .unusableId: ("unusable_id", "erasure from the fleet names a subject here whose id a request cannot carry "
                                   + "(control characters or over 255 bytes): erase it with pushspoold stopped (pushspoolctl user erase)")
                default: ("nothing_here", "erasure from the fleet holds nothing here")
                }
                events.log(.fleetErasure, text, fields: [(EventField.erasureID, notice.erasureID),
                                                         (EventField.erasureSubjectPrefix, notice.subjectPrefix),
                                                         (EventField.fleetErasureResult, result)])
            },
            hook: hook)
    }

    /// The lowest seq any follower still has to read, for retention: a segment holding a record
    /// above it stays. The exporter's durable cursor, the index's applied seq and the outbox's
    /// cursor all count — retiring past the index or the outbox would lose inbox items or
    /// vendor events, not only exports. `nil` = no follower.
    func retentionFloor() -> UInt64? {
        group.retentionFloor()
    }

    func start() throws(ServiceError) {
        try group.start()
    }

    /// Stops retention and waits for its pass in progress: it deletes journal segments, which
    /// must not happen after the journal's lock is released.
    func stopRetention(deadline: UInt64) {
        group.runner(named: "retention")?.stop(deadline: deadline)
    }

    /// Asks every follower to stop after its current step, without waiting: an outbox POST
    /// in flight is abandoned while ingest drains.
    func requestStop() {
        for runner in group.runners { runner.requestStop() }
    }

    /// Stops the threads after their current batch or request (the exporter waits up to 2 s
    /// for PubAcks in flight and checkpoints), all within `deadline`.
    /// Returns the names of those still running at the deadline.
    func stop(deadline: UInt64) -> [String] {
        group.stop(deadline: Optional(deadline))
    }

    /// `[Export]` as the exporter takes it, for this instance and with `LoadCredential=`'s files.
    static func exportOptions(_ configuration: Configuration, environment: [String: String] = Followers.environment()) -> ExportOptions {
        ExportOptions(settings: configuration.export, stateDirectory: configuration.journal.stateDirectory,
                      instance: environment["PUSHSPOOL_INSTANCE"], credentialsDirectory: environment["CREDENTIALS_DIRECTORY"])
    }

    static func environment() -> [String: String] {
        var out: [String: String] = [:]
        for name in ["CREDENTIALS_DIRECTORY", "PUSHSPOOL_INSTANCE"] {
            if let value = getenv(name) { out[name] = String(cString: value) }
        }
        return out
    }

    /// `; inbox lag 0; outbox 0 pending, 0 parked; export lag 0 (connected)` for STATUS=,
    /// one part per follower in the group (a failing one says so).
    var statusSuffix: String { group.statusSuffix }

    /// What the followers add to status.json: the fleet erasure listener's counts and
    /// connection under `fleetErasure`.
    /// The followers' members of status.json: `fleetErasure`, `erasures`.
    var statusMembers: JSONObject {
        var members: JSONObject = [:]
        if let status = fleetErasure?.status { members["fleetErasure"] = status.jsonValue }
        if let stats = eraser?.stats {
            members["erasures"] = .object(["pending": .integer(stats.pending), "recordsErased": .integer(stats.recordsErased)])
        }
        return members
    }

    func publish(to metrics: Metrics) {
        // The same three series for every follower in the group, so none can be left out.
        for status in group.statuses {
            let labels = ["follower": status.name]
            if status.durableSeq != nil { metrics.set(MetricFamily.followerLag, labels: labels, to: Double(status.lag)) }
            metrics.set(MetricFamily.followerFailures, labels: labels, to: Double(status.failuresTotal))
            metrics.set(MetricFamily.followerFailing, labels: labels, to: status.failures > 0 || status.parked != nil ? 1 : 0)
        }
        if let status = inbox?.status {
            metrics.set(MetricFamily.inboxLag, to: Double(status.lag))
            metrics.set(MetricFamily.inboxIndexCorrupt, to: Double(status.corruptIndexes))
            metrics.set(MetricFamily.inboxRebuilding, to: status.rebuilding ? 1 : 0)
        }
        if let status = outbox?.status {
            metrics.set(MetricFamily.outbox, labels: ["state": "pending"], to: Double(status.pending))
            metrics.set(MetricFamily.outbox, labels: ["state": "parked"], to: Double(status.parked))
        }
        if let status = fleetErasure?.status {
            metrics.set(MetricFamily.fleetErasures, labels: ["result": "dropped"], to: Double(status.resolved))
            metrics.set(MetricFamily.fleetErasures, labels: ["result": "nothing_here"], to: Double(status.nothingHere))
            metrics.set(MetricFamily.fleetErasures, labels: ["result": "already_here"], to: Double(status.alreadyHere))
            metrics.set(MetricFamily.fleetErasures, labels: ["result": "unusable_id"], to: Double(status.unusable))
            metrics.set(MetricFamily.fleetErasureConnected, to: status.connected ? 1 : 0)
        }
        if let stats = eraser?.stats {
            metrics.set(MetricFamily.erasuresPending, to: Double(stats.pending))
            metrics.set(MetricFamily.erasureRecords, to: Double(stats.recordsErased))
        }
        if let status = exporter?.status {
            metrics.set(MetricFamily.exportLag, to: Double(status.lag))
            metrics.set(MetricFamily.exportAcknowledged, to: Double(status.acknowledgedSeq))
            metrics.set(MetricFamily.exportConnected, to: status.connected ? 1 : 0)
        }
    }

    /// Members of status.json the followers add: `erasures` (`pending`, `recordsErased`), as
    /// the metrics count them.

    /// Once per transition, not per retry: a follower failing for hours logs two lines.
    static func log(_ change: FollowerHealthChange, events: EventLog) {
        switch change {
        case .failing(let follower, let error):
            events.log(.followerFailing, "follower \(follower) is failing, retrying with backoff; ingest goes on: \(error)",
                       fields: [(EventField.follower, follower), (EventField.error, error)])
        case .recovered(let follower, let failedSteps):
            events.log(.followerRecovered, "follower \(follower) recovered after \(failedSteps) failed steps",
                       fields: [(EventField.follower, follower), (EventField.failedSteps, String(failedSteps))])
        }
    }

    private static func log(_ notice: ExportNotice, events: EventLog) {
        switch notice {
        case .lagHigh(let lag, let threshold, let error):
            events.log(.exportLag, "export to NATS JetStream is lagging: \(lag) records not acknowledged" + (error.map { " (\($0))" } ?? ""),
                       fields: [(EventField.exportLag, String(lag)), (EventField.exportLagThreshold, String(threshold))])
        case .lagRecovered(let lag):
            events.log(.exportCaughtUp, "export to NATS JetStream caught up", fields: [(EventField.exportLag, String(lag))])
        }
    }

    private static func log(_ notice: InboxNotice, events: EventLog) {
        switch notice {
        case .indexCorrupt(let movedTo, let reason):
            events.log(.inboxIndexCorrupt, "inbox index was damaged (\(reason)): moved to \(movedTo), rebuilding it from the journal",
                       fields: [(EventField.inboxIndexMovedTo, movedTo), (EventField.reasonCode, reason)])
        case .indexOutdated(let reason):
            events.log(.inboxIndexOutdated, "inbox index was built by other rules (\(reason)): replaced, rebuilding it from the journal",
                       fields: [(EventField.reasonCode, reason)])
        }
    }

    private static func log(_ notice: OutboxNotice, events: EventLog) {
        switch notice {
        case .parked(let id, let target, let status, let reason, let message):
            events.log(.outboxParked, "outbox delivery parked (\(reason)): \(message); `pushspoolctl outbox retry` sends it again",
                       fields: [(EventField.outboxDelivery, id), (EventField.outboxTarget, target), (EventField.httpStatus, String(status)),
                                (EventField.reasonCode, reason)])
        case .failed(let id, let target, let status, let message, let retryInMillis):
            events.log(.outboxFailed, "outbox delivery failed, retrying in \(retryInMillis) ms: \(message)",
                       fields: [(EventField.outboxDelivery, id), (EventField.outboxTarget, target), (EventField.httpStatus, String(status))])
        case .fieldProblem(let id, let target, let field, let reason, let message):
            events.log(.outboxFieldProblem, "outbox delivery field not normalised (\(reason)): \(message)",
                       fields: [(EventField.outboxDelivery, id), (EventField.outboxTarget, target), (EventField.outboxField, field),
                                (EventField.reasonCode, reason)])
        }
    }
}
