@preconcurrency import Glibc
import PushSystem
import PushJournal
import PushSystemd
import PushConfig
import PushInbox
import PushOutbox
import PushOutboxStore

/// The journal's followers inside pushspoold: the Notification Center index (SQLite) and the
/// outbox that delivers its events to the vendors. Each reads the journal from its own durable
/// cursor on a thread of its own, so nothing they do (SQLite, HTTP) can slow or block ingest;
/// their lag shows in STATUS= and the metrics.
///
/// `Sendable`: the followers lock internally; this type only holds them.
final class Followers: Sendable {
    let inbox: InboxFollower?
    let outbox: OutboxFollower?

    /// Opens the index (created on first use) and, when `[Outbox] Enabled=yes`, the outbox with
    /// its key files. A follower that cannot open stops start-up with a clear message: running
    /// without it would silently leave apps and vendors behind.
    init(configuration: Configuration, journal: JournalWriter, events: EventLog) throws(DaemonError) {
        do {
            inbox = configuration.inbox.enabled
                ? try InboxFollower(stateDirectory: configuration.journal.stateDirectory, journalLastSeq: { journal.stats.lastSeq })
                : nil
        } catch {
            throw DaemonError(stage: "inbox index", message: "\(error) (rebuild it with `pushspoolctl nc reindex`)", errno: EIO)
        }
        let settings = configuration.outbox
        guard settings.enabled else {
            outbox = nil
            return
        }
        var options = OutboxOptions(stateDirectory: configuration.journal.stateDirectory)
        options.mindboxURL = settings.mindboxURL
        options.mindboxEndpointId = settings.mindboxEndpointId
        options.infobipURL = settings.infobipURL
        options.allowHTTP = settings.allowHTTP
        options.allowNetworks = settings.allowNetworks
        options.connectTimeout = settings.connectTimeout
        options.requestTimeout = settings.requestTimeout
        options.maxAttempts = settings.maxAttempts
        options.retryBase = settings.retryBase
        options.maxAge = settings.maxAge
        do {
            try options.load(mindboxSecretKeyFile: settings.mindboxSecretKeyFile, infobipAppKeyFile: settings.infobipAppKeyFile)
            outbox = try OutboxFollower(options: options) { notice in Self.log(notice, events: events) }
        } catch {
            throw DaemonError(stage: "outbox", message: "\(error)", errno: EINVAL)
        }
    }

    func start() {
        inbox?.start()
        outbox?.start()
    }

    /// Stops both threads after their current batch or request.
    func stop() {
        outbox?.stop()
        inbox?.stop()
    }

    /// `; inbox lag 0; outbox 0 pending, 0 parked` for STATUS=.
    var statusSuffix: String {
        var text = inbox.map { "; inbox lag \($0.lag)" } ?? ""
        if let outbox { text += "; " + outbox.status.summary }
        return text
    }

    func publish(to metrics: Metrics) {
        if let inbox { metrics.set(MetricFamily.inboxLag, to: Double(inbox.lag)) }
        if let status = outbox?.status {
            metrics.set(MetricFamily.outbox, labels: ["state": "pending"], to: Double(status.pending))
            metrics.set(MetricFamily.outbox, labels: ["state": "parked"], to: Double(status.parked))
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
        }
    }
}
