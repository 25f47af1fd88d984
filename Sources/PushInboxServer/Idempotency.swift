import PushPayload
import PushSystem

/// What an `Idempotency-Key` was first used for, so the key cannot be reused for another
/// request (issue 21, defect 8: the journal deduplicates by event id, so a second request
/// under the same id answered 202 and was dropped).
///
/// Two parts make it exact:
/// - the event id is derived from the user, the key *and* the request's fingerprint
///   (``eventId(user:key:fingerprint:)``), so a different request can never be taken for a
///   duplicate of the first, whatever this table remembers;
/// - this table binds (user, key) to the first fingerprint for ``retention`` (at most
///   ``capacity`` keys, oldest forgotten first): a different request under a bound key is
///   refused with 422 before anything is dropped. It lives in memory; after a restart, or once
///   a key is forgotten, a reused key with another request is simply a new event.
///
/// `Sendable`: state behind a lock.
final class IdempotencyBindings: Sendable {
    enum Outcome: Equatable {
        /// The key was free: now bound to this request.
        case bound
        /// The key is bound to this very request: a retry.
        case retry
        /// The key is bound to another request.
        case conflict
    }

    static let retention: Duration = .seconds(24 * 3600)
    static let capacity = 100_000

    private struct State {
        /// Fingerprint and bind time by scope.
        var fingerprints: [String: (fingerprint: String, at: UInt64)] = [:]
        /// Keys in the order they were bound (so by age), with when.
        var order: [(scope: String, at: UInt64)] = []
        var head = 0
    }

    private let state = Locked(State())
    private let retentionNanos: UInt64
    private let capacity: Int

    init(retention: Duration = IdempotencyBindings.retention, capacity: Int = IdempotencyBindings.capacity) {
        retentionNanos = retention.clampedUInt64Nanoseconds
        self.capacity = max(1, capacity)
    }

    /// The fingerprint of a request: SHA-256 of the canonical JSON of the event it asks for
    /// (route as type and action, item, body as text, device), without its id and time.
    static func fingerprint(_ event: PushEvent) -> String {
        var content = event
        content.eventId = ""
        content.at = nil
        return SHA256.hex(of: content.jsonValue().serialized())
    }

    /// Whose key this is: the user and the key, hashed (the table holds neither).
    static func scope(user: String, key: String) -> String {
        SHA256.hex(of: Array((user + "\u{0}" + key).utf8))
    }

    /// `http.` and 40 hex digits of SHA-256 over the user, the key and the fingerprint.
    static func eventId(user: String, key: String, fingerprint: String) -> String {
        "http." + String(SHA256.hex(of: Array((user + "\u{0}" + key + "\u{0}" + fingerprint).utf8)).prefix(40))
    }

    /// Binds `scope` to `fingerprint` unless it is bound already. `now`: monotonic nanoseconds.
    func bind(_ scope: String, _ fingerprint: String, now: UInt64 = Posix.monotonicNanos()) -> Outcome {
        state.withLock { state in
            forgetExpired(&state, now: now)
            if let bound = state.fingerprints[scope] { return bound.fingerprint == fingerprint ? .retry : .conflict }
            state.fingerprints[scope] = (fingerprint, now)
            state.order.append((scope, now))
            while state.fingerprints.count > capacity { forgetOldest(&state) }
            return .bound
        }
    }

    /// Undoes a ``bind(_:_:now:)`` that answered `.bound` when the event could not be dropped:
    /// the request did not happen, so the key is free again.
    func unbind(_ scope: String, _ fingerprint: String) {
        state.withLock { state in
            if state.fingerprints[scope]?.fingerprint == fingerprint { state.fingerprints[scope] = nil }
        }
    }

    var count: Int { state.withLock { $0.fingerprints.count } }

    private func forgetExpired(_ state: inout State, now: UInt64) {
        while state.head < state.order.count, now &- state.order[state.head].at >= retentionNanos { forgetOldest(&state) }
    }

    private func forgetOldest(_ state: inout State) {
        guard state.head < state.order.count else { return }
        let (scope, at) = state.order[state.head]
        state.head += 1
        // An unbound and rebound key has a newer place in the order: keep it.
        if state.fingerprints[scope]?.at == at { state.fingerprints[scope] = nil }
        if state.head > 1024, state.head * 2 > state.order.count {
            state.order.removeFirst(state.head)
            state.head = 0
        }
    }
}
