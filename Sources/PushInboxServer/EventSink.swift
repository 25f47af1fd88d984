@preconcurrency import Glibc
import PushExport
import PushPayload
import PushSystem

/// Why an event could not be accepted: answered ``status`` with ``code`` and ``message`` as
/// the problem body, and `Retry-After: retryAfterSeconds` when one is given. `Sendable` value.
package struct EventSinkFailure: Sendable, Equatable {
    package var status: Int
    package var code: String
    package var message: String
    package var retryAfterSeconds: Int?

    package init(status: Int = 503, code: String, message: String, retryAfterSeconds: Int?) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
    }

    /// The Idempotency-Key was first used, on some node, for a different request.
    package static let keyReused = EventSinkFailure(
        status: 422, code: "idempotency_key_reused",
        message: "this Idempotency-Key was used for a different request; use a new key for a new request", retryAfterSeconds: nil)
}

/// Where pushspool-inbox puts an event it accepted, when not into the local spool.
package protocol EventSink: Sendable {
    /// Stores `event` durably and returns `nil`, or says why it could not (nothing was
    /// stored that the caller should count on; a retry with the same event id counts once).
    /// `fingerprint`: the request's, when it came with an Idempotency-Key; a sink that sees
    /// the key's first use elsewhere refuses another request with ``EventSinkFailure/keyReused``.
    func accept(_ event: PushEvent, fingerprint: String?) -> EventSinkFailure?

    /// Publishes an erasure record (key `erasure:<erasureID>`, `body` as pushspoold journals
    /// one) for every ingest host and inbox node to apply; `nil` once the stream confirmed it.
    func acceptErasure(erasureID: String, body: [UInt8]) -> EventSinkFailure?
}

extension EventSink {
    /// A sink that cannot carry erasure records: the request is refused, nothing published.
    package func acceptErasure(erasureID: String, body: [UInt8]) -> EventSinkFailure? {
        EventSinkFailure(code: "erasure_unavailable", message: "this node cannot publish erasure requests", retryAfterSeconds: nil)
    }
}

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
