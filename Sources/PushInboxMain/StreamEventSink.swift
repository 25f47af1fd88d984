@preconcurrency import Glibc
import PushExport
import PushInboxServer
import PushNcEvents
import PushPayload
import PushSystem
import PushErasure

/// `[Inbox] Source=nats`: events go to the export stream (``EventPublisher``), not to this
/// host's spool, and every node applies them from its consumer. The answer waits for the
/// PubAck.
///
/// `Sendable`: the publisher locks; the failure flag is locked.
package final class StreamEventSink: EventSink {
    /// How long a client is asked to wait before retrying when NATS is out of reach: the
    /// client library retries a lost server every 250 ms, and a cluster elects a new stream
    /// leader within a few seconds.
    static let retryAfterSeconds = 5

    package let publisher: EventPublisher
    /// Whether the last publish failed: only the first failure of a run is written to stderr
    /// (journald), so an outage is one line, not one per request.
    private let failing = Locked(false)
    private let log: @Sendable (String) -> Void

    package init(publisher: EventPublisher, log: @escaping @Sendable (String) -> Void = StreamEventSink.stderrLine) {
        self.publisher = publisher
        self.log = log
    }

    /// The stream's rule (``StreamEventRules/eventID(user:idempotencyKey:)``).
    package static func eventID(user: String, idempotencyKey: String?) -> String {
        StreamEventRules.eventID(user: user, idempotencyKey: idempotencyKey)
    }

    package func eventID(user: String, idempotencyKey: String?, fingerprint: String) -> String {
        Self.eventID(user: user, idempotencyKey: idempotencyKey)
    }

    package func acceptErasure(_ request: ErasureRequest, stateDirectory: String) -> Result<ErasureReceipt, EventSinkFailure> {
        StreamEventRules.publishErasure(request, stateDirectory: stateDirectory, through: self)
    }

    package static let stderrLine: @Sendable (String) -> Void = { text in
        let bytes = Array((text + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }

    /// The erasure record as the exporter of this node's host id would export it
    /// (``EventPublisher/publishRecord(key:body:hostId:ingestMillis:)``): `Nats-Msg-Id`
    /// `<host id>:erasure:<id>`, so a retry of the same id counts once.
    package func acceptErasure(erasureID: String, body: [UInt8]) -> EventSinkFailure? {
        do throws(ExportError) {
            let hostId = try publisher.options.resolvedHostId()
            try publisher.publishRecord(key: "erasure:" + erasureID, body: body, hostId: hostId)
            return nil
        } catch {
            log("pushspool-inbox: erasure \(erasureID) not published: \(error)")
            let message = error.code == .connect
                ? "the event stream (NATS) is out of reach: the erasure was not requested; retry later"
                : "the event stream (NATS) did not confirm the erasure request; retry later"
            return EventSinkFailure(code: "stream_unavailable", message: message, retryAfterSeconds: Self.retryAfterSeconds)
        }
    }

    package func accept(_ event: PushEvent, fingerprint: String?) -> EventSinkFailure? {
        do throws(ExportError) {
            let outcome = try publisher.publish(event, fingerprint: fingerprint)
            let recovered = failing.withLock { was in
                defer { was = false }
                return was
            }
            if recovered { log("pushspool-inbox: events reach the stream \(publisher.options.stream) again") }
            if case .conflict = outcome { return .keyReused }
            return nil
        } catch {
            let first = failing.withLock { was in
                defer { was = true }
                return !was
            }
            if first { log("pushspool-inbox: events are refused with 503 until NATS answers: \(error)") }
            // The client is not told the servers' addresses; the operator finds them in the log.
            let message = error.code == .connect
                ? "the event stream (NATS) is out of reach: nothing was stored; retry later with the same Idempotency-Key"
                : "the event stream (NATS) did not confirm the event: retry later with the same Idempotency-Key (it then counts once)"
            return EventSinkFailure(code: "stream_unavailable", message: message, retryAfterSeconds: Self.retryAfterSeconds)
        }
    }
}
