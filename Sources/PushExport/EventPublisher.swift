import PushPayload
import PushJournal
import PushSystem

/// Publishes Notification Center events straight to the export stream, for inbox nodes whose
/// index follows the stream (`[Inbox] Source=nats`): pushspool-inbox's state-change routes
/// and `pushspoolctl nc <event>` on such a node. Every node, this one included, applies the
/// event when its consumer delivers it, so all agree on each user's state and order.
///
/// The message is what the exporter would send for the event had a pushspoold journaled it
/// (the same subject, the journal's record body), except:
/// - `Nats-Msg-Id` is ``messageId(eventId:)``, `event:<eventId>`, without a host id: the event
///   id is the same whichever node takes a retried request (`Idempotency-Key` derives it), so
///   the stream keeps one copy within its duplicate window;
/// - there is no `Pushspool-Seq` (no journal holds it) and no `sourceFile` (no spool file);
/// - an event accepted under an Idempotency-Key carries the request's fingerprint in
///   ``fingerprintHeader``: its id derives from the user and the key alone, so the stream
///   answers a second use of the key on any node as a duplicate, and the fingerprint tells
///   a retry (same request) from a reuse for another request (``PublishOutcome/conflict(seq:)``).
///
/// ``publish(_:)`` returns only after the PubAck: the event is in the stream. The connection
/// has no libnats reconnect buffer, so a publish that failed is not sent later behind its
/// caller's back. Two ways to connect:
/// - on first use and again after a failure, in the caller's thread (`pushspoolctl nc`);
/// - after ``startConnecting()`` (pushspool-inbox): a thread of the publisher's own connects
///   at start and again whenever a publish found the connection gone or failed, with backoff
///   (250 ms doubling to 5 s). A publish then never connects: while no connection is up it
///   throws `.connect` at once, so an HTTP worker answers 503 at once instead of waiting for a
///   connect that may not come (a server that accepts and never answers held each worker for
///   the 2 s connect, one after another, and GETs waited behind them).
///
/// `Sendable`: the connection lives behind a lock; publishes are serialised on it (one round
/// trip each on a LAN; at most the PubAck wait when a server stops answering, after which
/// the connection is dropped and the publishes queued behind fail at once).
package final class EventPublisher: Sendable {
    package let options: ExportOptions
    private let template: SubjectTemplate
    private let connectTimeout: Duration
    private let client = Locked<NatsClient?>(nil)
    /// Set once ``startConnecting()`` ran: publishes no longer connect themselves.
    private let background = Locked(Background())
    private let connectorWake = Wakeup()

    /// Rung when the connecting thread returns.
    private let connectorEnded = Wakeup()

    private struct Background {
        var started = false
        var stopped = false
        /// The connecting thread returned.
        var ended = false
    }

    /// The `Nats-Msg-Id` of an event published by an inbox node. The exporter's ids are
    /// `<host id>:<journal key>`, and the host id `event` is refused
    /// (``ExportOptions/resolvedHostId(machineIdPath:)``), so the two never meet.
    package static func messageId(eventId: String) -> String { DedupKey.event(eventId) }

    /// The header carrying the fingerprint of the request an event was accepted for.
    package static let fingerprintHeader = "Pushspool-Request-Fingerprint"

    /// What the stream made of a publish. `Sendable` value.
    package enum PublishOutcome: Sendable, Equatable {
        /// Stored now, or already held for the same request (a retry; `duplicate` set):
        /// either way the stream holds the event once.
        case stored(NatsClient.PubAck)
        /// The stream already holds a message with this id for a different request: the
        /// Idempotency-Key was used before, on some node, for something else. Nothing stored.
        case conflict(seq: UInt64)
    }

    /// `options`: `[Export]` (URLs, credentials, TLS, `Subject=`, `AckTimeoutSec=` as the wait
    /// for a PubAck, at most `maxWait`). Refuses a subject template the exporter would refuse.
    package init(options: ExportOptions, maxWait: Duration = .seconds(5), connectTimeout: Duration = .seconds(2)) throws(ExportError) {
        guard let template = SubjectTemplate(options.subject) else {
            throw ExportError(.config, "[Export] Subject= '\(options.subject)': \(SubjectTemplate.validate(options.subject) ?? "invalid")")
        }
        var options = options
        options.ackTimeout = min(options.ackTimeout, maxWait)
        self.options = options
        self.template = template
        self.connectTimeout = connectTimeout
    }

    /// The subject, message id, body and headers `event` is published with; `ingestMillis`
    /// is when this node accepted it (the record's `ingestedAt`). Pure.
    package func message(for event: PushEvent, ingestMillis: Int64,
                         fingerprint: String? = nil) -> (subject: String, msgId: String, body: [UInt8], headers: [(String, String)]) {
        let envelope = event.envelope().serialized() + [0x0a]
        let body = event.recordBody(ingestMillis: ingestMillis, sourceFile: nil, envelopeSHA256: SHA256.hex(of: envelope),
                                    envelopeSize: envelope.count)
        // The exporter's own subject for this record, so the stream's filter takes it as it
        // takes the events pushspoold exports.
        let record = JournalRecord(seq: 0, ingestMillis: ingestMillis, key: event.dedupKey, body: body, segment: "", offset: 0)
        let subject = ExportMessage(record: record, hostId: "", template: template).subject
        var headers = [(ExportMessage.ingestHeader, String(ingestMillis))]
        if let fingerprint { headers.append((Self.fingerprintHeader, fingerprint)) }
        return (subject, Self.messageId(eventId: event.eventId), body, headers)
    }

    /// Publishes `event` (its id drawn already) and waits for the PubAck. Throws `.connect`
    /// when no server answers and `.publish` when the stream did not confirm the message; the
    /// connection is then dropped and made again by the next call.
    ///
    /// `fingerprint`: the request's, for an event accepted under an Idempotency-Key. When the
    /// stream answers "duplicate", the message it holds is read back (js_GetMsg) and its
    /// fingerprint compared: another request's gives ``PublishOutcome/conflict(seq:)``. A copy
    /// without one, or no longer held (erased), counts as the same request: nothing tells
    /// otherwise, and nothing new was stored.
    @discardableResult
    package func publish(_ event: PushEvent, fingerprint: String? = nil,
                         ingestMillis: Int64 = Posix.wallClockMillis()) throws(ExportError) -> PublishOutcome {
        let (subject, msgId, body, headers) = message(for: event, ingestMillis: ingestMillis, fingerprint: fingerprint)
        return try client.withLock { client throws(ExportError) -> PublishOutcome in
            let connected = try usableConnection(&client)
            do throws(ExportError) {
                let ack = try connected.publish(subject: subject, msgId: msgId, body: body, headers: headers)
                guard ack.duplicate, let fingerprint,
                      let held = try connected.message(options.stream, seq: ack.streamSeq)?.requestFingerprint,
                      held != fingerprint else { return .stored(ack) }
                return .conflict(seq: ack.streamSeq)
            } catch {
                // Whatever libnats still holds for this connection goes with it.
                connected.close()
                client = nil
                if background.withLock({ $0.started }) { connectorWake.signal() }
                var error = error
                error.message = "publishing event \(event.eventId) to stream \(options.stream) on \(subject): " + error.message
                throw error
            }
        }
    }

    /// Publishes a record as the exporter of host `hostId` would export it had its journal
    /// held it under `key` (the exporter's subject for that key, `Nats-Msg-Id`
    /// `<host id>:<key>`, `Pushspool-Ingest-Millis`, no `Pushspool-Seq`), and waits for the
    /// PubAck. An inbox node publishes its erasure records so (docs/design/fleet-inbox.md,
    /// "Erasure"). Fails as ``publish(_:fingerprint:ingestMillis:)`` does: `.connect` at once
    /// while no connection is up, `.publish` when the stream did not confirm.
    @discardableResult
    package func publishRecord(key: String, body: [UInt8], hostId: String,
                               ingestMillis: Int64 = Posix.wallClockMillis()) throws(ExportError) -> NatsClient.PubAck {
        let record = JournalRecord(seq: 0, ingestMillis: ingestMillis, key: key, body: body, segment: "", offset: 0)
        let message = ExportMessage(record: record, hostId: hostId, template: template)
        let headers = [(ExportMessage.ingestHeader, String(ingestMillis))]
        return try client.withLock { client throws(ExportError) -> NatsClient.PubAck in
            let connected = try usableConnection(&client)
            do throws(ExportError) {
                return try connected.publish(subject: message.subject, msgId: message.msgId, body: body, headers: headers)
            } catch {
                connected.close()
                client = nil
                if background.withLock({ $0.started }) { connectorWake.signal() }
                var error = error
                error.message = "publishing \(key) to stream \(options.stream) on \(message.subject): " + error.message
                throw error
            }
        }
    }

    /// The connection to publish on, under the client lock: a dead one is dropped (and the
    /// connecting thread woken); without the thread, one is made here.
    private func usableConnection(_ client: inout NatsClient?) throws(ExportError) -> NatsClient {
        let inBackground = background.withLock { $0.started }
        if let current = client, current.isClosed || !current.isConnected {
            current.close()
            client = nil
            if inBackground { connectorWake.signal() }
        }
        if client == nil {
            if inBackground {
                throw ExportError(.connect, "no connection to NATS at \(options.urls.joined(separator: ",")) (connecting in the background)")
            }
            client = try connect()
        }
        guard let connected = client else { throw ExportError(.connect, "not connected") }
        return connected
    }

    private func connect() throws(ExportError) -> NatsClient {
        try NatsClient(options, name: "pushspool-events", reconnects: false, connectTimeout: connectTimeout)
    }

    /// Starts the publisher's connecting thread (see the type's documentation); a second call
    /// does nothing. Publishes fail with `.connect` until its first connect succeeds.
    package func startConnecting() throws(SystemError) {
        let first = background.withLock { state in
            defer { state.started = true }
            return !state.started
        }
        guard first else { return }
        do throws(SystemError) {
            try PosixThread.detach(name: "nats-connect") { [self] in runConnector() }
        } catch {
            // No thread to wait for at the close.
            background.withLock { $0.started = false }
            throw error
        }
    }

    private var isStopped: Bool { background.withLock { $0.stopped } }

    private func runConnector() {
        defer {
            background.withLock { $0.ended = true }
            connectorEnded.signal()
        }
        var backoff: Duration = .milliseconds(250)
        while !isStopped {
            let needed = client.withLock { client in client.map { $0.isClosed || !$0.isConnected } ?? true }
            if needed {
                do throws(ExportError) {
                    // Made outside the lock: publishes meanwhile fail at once, not after the connect.
                    let fresh = try connect()
                    let kept = client.withLock { client in
                        // A close meanwhile cleared the client before this: the fresh
                        // connection would outlive the stop.
                        guard !isStopped else { return false }
                        client?.close()
                        client = fresh
                        return true
                    }
                    if !kept { fresh.close() }
                    backoff = .milliseconds(250)
                } catch {
                    // The failure is told by the publishes meanwhile (503, one line per outage).
                    connectorWake.wait(timeout: backoff)
                    backoff = min(backoff * 2, .seconds(5))
                    continue
                }
            }
            // Up: sleep until a publish finds the connection gone or failed, or a stop.
            connectorWake.wait(timeout: nil)
        }
    }

    /// Closes the connection (a stop) and ends the connecting thread; without it, the next
    /// publish connects again.
    package func close() {
        background.withLock { $0.stopped = true }
        connectorWake.signal()
        client.withLock { client in
            client?.close()
            client = nil
        }
    }

    /// ``close()``, then waits for the connecting thread to return, at most until `deadline`
    /// (monotonic nanoseconds): a connect under way ends within the connect timeout. False
    /// when it was still running then.
    package func close(waitingUntil deadline: UInt64) -> Bool {
        close()
        while true {
            let state = background.withLock { $0 }
            if !state.started || state.ended { return true }
            let now = Posix.monotonicNanos()
            guard now < deadline else { return false }
            connectorEnded.wait(timeout: .nanoseconds(Int64(clamping: deadline - now)))
        }
    }
}
