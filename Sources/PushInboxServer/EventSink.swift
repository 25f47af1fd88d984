@preconcurrency import Glibc
import PushJournal
import PushNcEvents
import PushPayload
import PushSpool
import PushSystem
import PushErasure

/// Why an event could not be accepted: answered ``status`` with ``code`` and ``message`` as
/// the problem body, and `Retry-After: retryAfterSeconds` when one is given. `Sendable` value.
package struct EventSinkFailure: Error, Sendable, Equatable {
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

/// What an accepted erasure request's answer adds: where its status is kept.
///
/// `Sendable`: a value.
package struct ErasureReceipt: Sendable, Equatable {
    /// `"node"` when this node keeps the status (it applies the erasure from the stream);
    /// `nil` when pushspoold on this host does.
    package var statusScope: String?

    package init(statusScope: String?) { self.statusScope = statusScope }
}

/// The one write port of pushspool-inbox: where an event or an erasure request it accepted
/// goes. ``SpoolEventSink`` drops it into this host's spool for pushspoold to journal;
/// ``StreamEventSink`` (`[Inbox] Source=nats`) publishes it to the fleet's stream. Each owns
/// its event-id rule (``eventID(user:idempotencyKey:fingerprint:)``) and its erasure path, so
/// ``InboxAPI`` holds one sink and never asks which it has.
package protocol EventSink: Sendable {
    /// The id an event gets: fresh without an Idempotency-Key; with one, derived from the
    /// user and the key, so that a retry of the request gets the same id and counts once.
    /// `fingerprint` is the request's (``IdempotencyBindings/fingerprint(_:)``). The default
    /// is the stream's rule (``StreamEventSink/eventID(user:idempotencyKey:fingerprint:)``).
    func eventID(user: String, idempotencyKey: String?, fingerprint: String) -> String

    /// Stores `event` durably and returns `nil`, or says why it could not (nothing was
    /// stored that the caller should count on; a retry with the same event id counts once).
    /// `fingerprint`: the request's, when it came with an Idempotency-Key; a sink that sees
    /// the key's first use elsewhere refuses another request with ``EventSinkFailure/keyReused``.
    func accept(_ event: PushEvent, fingerprint: String?) -> EventSinkFailure?

    /// Takes a checked erasure request and says where its status will be, or why it was not
    /// taken. `stateDirectory`: this node's, holding `erase.key` (the fleet key a stream
    /// sink names the subject's hash under). The default is the stream's: the erasure record
    /// is built here and published through ``acceptErasure(erasureID:body:)``.
    func acceptErasure(_ request: ErasureRequest, stateDirectory: String) -> Result<ErasureReceipt, EventSinkFailure>

    /// Publishes an erasure record (key `erasure:<erasureID>`, `body` as pushspoold journals
    /// one) for every ingest host and inbox node to apply; `nil` once the stream confirmed it.
    func acceptErasure(erasureID: String, body: [UInt8]) -> EventSinkFailure?

    /// The 404 text for an erasure status not recorded yet: who records it, and when.
    var erasureNotYetRecorded: String { get }
}

extension EventSink {
    package func eventID(user: String, idempotencyKey: String?, fingerprint: String) -> String {
        StreamEventRules.eventID(user: user, idempotencyKey: idempotencyKey)
    }

    package func acceptErasure(_ request: ErasureRequest, stateDirectory: String) -> Result<ErasureReceipt, EventSinkFailure> {
        StreamEventRules.publishErasure(request, stateDirectory: stateDirectory, through: self)
    }

    /// A sink that cannot carry erasure records: the request is refused, nothing published.
    package func acceptErasure(erasureID: String, body: [UInt8]) -> EventSinkFailure? {
        EventSinkFailure(code: "erasure_unavailable", message: "this node cannot publish erasure requests", retryAfterSeconds: nil)
    }

    package var erasureNotYetRecorded: String {
        "no such erasure (yet): this node records it once it has applied the erasure from the stream"
    }
}

/// `[Inbox] Source=journal`: events and erasure requests are dropped into this host's spool
/// as envelopes, which pushspoold journals (and its index follower applies). The answer does
/// not wait for pushspoold: the drop is durable (``SpoolDropper``).
///
/// `Sendable`: a value.
package struct SpoolEventSink: EventSink {
    package let layout: SpoolLayout

    package init(layout: SpoolLayout) { self.layout = layout }

    /// Fresh without a key; with one, derived from the user, the key and the request's
    /// fingerprint: the spool has no memory of keys (the API's ``IdempotencyBindings`` does,
    /// on this host only), so a reuse of the key for another request must get another id,
    /// or pushspoold's dedup would drop the second request as a retry of the first.
    package func eventID(user: String, idempotencyKey: String?, fingerprint: String) -> String {
        guard let key = idempotencyKey else { return NcEventWriter.newEventId() }
        return IdempotencyBindings.eventId(user: user, key: key, fingerprint: fingerprint)
    }

    package func accept(_ event: PushEvent, fingerprint: String?) -> EventSinkFailure? {
        do {
            try NcEventWriter.write(event, layout: layout)
            return nil
        } catch {
            return EventSinkFailure(code: "spool_unavailable", message: error.shortDescription, retryAfterSeconds: nil)
        }
    }

    /// Drops the request's envelope for pushspoold, which journals it (the subject hashed
    /// under this host's key) and keeps its status.
    package func acceptErasure(_ request: ErasureRequest, stateDirectory: String) -> Result<ErasureReceipt, EventSinkFailure> {
        do {
            try SpoolDropper.drop(bytes: request.envelopeBytes(), layout: layout)
            return .success(ErasureReceipt(statusScope: nil))
        } catch {
            return .failure(EventSinkFailure(code: "spool_unavailable", message: error.shortDescription, retryAfterSeconds: nil))
        }
    }

    package var erasureNotYetRecorded: String {
        "no such erasure (yet): pushspoold records it once it has journaled the request"
    }
}

/// The stream's rules for event ids and erasure records, which every sink that publishes to
/// the stream follows (the protocol's defaults and ``StreamEventSink`` in the composition).
/// `Sendable`: case-less namespace.
package enum StreamEventRules {
    /// Fresh without a key; with one, derived from the user and the key alone: the
    /// fingerprint travels with the event, so the stream recognises the key whichever node
    /// saw its first use and refuses another request under it (``EventSinkFailure/keyReused``).
    package static func eventID(user: String, idempotencyKey: String?) -> String {
        guard let key = idempotencyKey else { return NcEventWriter.newEventId() }
        return IdempotencyBindings.eventId(user: user, key: key)
    }

    /// A stream-fed node's erasure: no pushspoold journals for it, so the node publishes the
    /// erasure record through `sink` itself, the subject named by its keyed hash under the
    /// fleet key in `stateDirectory`; the status is then the node's. No key: refused, since
    /// no other host could resolve a hash under a key of this node's own.
    package static func publishErasure(_ request: ErasureRequest, stateDirectory: String, through sink: some EventSink)
        -> Result<ErasureReceipt, EventSinkFailure> {
        let secret: ErasureSecret?
        do { secret = try ErasureSecret.load(stateDirectory: stateDirectory) } catch {
            return .failure(EventSinkFailure(code: "erasure_unavailable", message: "this node's erasure key cannot be read: \(error.shortDescription)",
                                             retryAfterSeconds: nil))
        }
        guard let secret else {
            return .failure(EventSinkFailure(code: "erasure_unavailable", message: "this node has no fleet erasure key: configure [Export] ErasureKeyFile= "
                                             + "(or LoadCredential=erase-key:…) with the key every ingest host and node shares, then restart",
                                             retryAfterSeconds: nil))
        }
        let subject: ErasureSubject = request.scope == .user ? .user(request.id) : .device(request.id)
        let body = ErasureRecord.body(erasureID: request.erasureId, scope: subject.scope, subjectHash: secret.subjectHash(subject),
                                      requestedAt: Timestamp.iso8601(millis: Posix.wallClockMillis()))
        if let failure = sink.acceptErasure(erasureID: request.erasureId, body: body) { return .failure(failure) }
        return .success(ErasureReceipt(statusScope: "node"))
    }
}
