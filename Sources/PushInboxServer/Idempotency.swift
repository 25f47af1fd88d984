import PushInbox
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
///   ``capacity`` keys in memory, oldest forgotten first): a different request under a bound
///   key is refused with 422 before anything is dropped. With an ``IdempotencyStore`` the
///   bindings are also on disk, so they outlive a restart; once a key is forgotten, a reused
///   key with another request is simply a new event.
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
        /// The bindings on disk (`nil`: memory only). Used under the lock only.
        var store: IdempotencyStore?
        var bindsSincePrune = 0
        /// Fingerprint and bind time by scope.
        var fingerprints: [String: (fingerprint: String, at: UInt64)] = [:]
        /// Keys in the order they were bound (so by age), with when.
        var order: [(scope: String, at: UInt64)] = []
        var head = 0
    }

    private let state: Locked<State>
    private let retentionNanos: UInt64
    private let capacity: Int

    init(retention: Duration = IdempotencyBindings.retention, capacity: Int = IdempotencyBindings.capacity,
         store: consuming sending IdempotencyStore? = nil) {
        retentionNanos = retention.clampedUInt64Nanoseconds
        self.capacity = max(1, capacity)
        state = Locked(State(store: store))
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

    /// `http.` and 40 hex digits of SHA-256 over the user and the key: the id of a keyed
    /// event on a `Source=nats` node, the same for every request under that key (the stream
    /// keeps the first; its fingerprint tells a retry from a reuse).
    package static func eventId(user: String, key: String) -> String {
        "http." + String(SHA256.hex(of: Array((user + "\u{0}" + key).utf8)).prefix(40))
    }

    /// `http.` and 40 hex digits of SHA-256 over the user, the key and the fingerprint.
    static func eventId(user: String, key: String, fingerprint: String) -> String {
        "http." + String(SHA256.hex(of: Array((user + "\u{0}" + key + "\u{0}" + fingerprint).utf8)).prefix(40))
    }

    /// Binds `scope` to `fingerprint` unless it is bound already. `now`: monotonic
    /// nanoseconds; `wallMillis`: the wall clock, for the store (which outlives boots).
    func bind(_ scope: String, _ fingerprint: String, now: UInt64 = Posix.monotonicNanos(),
              wallMillis: Int64 = Posix.wallClockMillis()) -> Outcome {
        state.withLock { state in
            forgetExpired(&state, now: now)
            if let bound = state.fingerprints[scope] { return bound.fingerprint == fingerprint ? .retry : .conflict }
            let retentionMillis = Int64(clamping: retentionNanos / 1_000_000)
            // A store that fails is no worse than none: the fingerprinted event id keeps a
            // forgotten key safe.
            if let stored = try? state.store?.lookup(scope), wallMillis &- stored.atMillis < retentionMillis {
                // Back in memory for the rest of its retention (ages measured on the wall clock).
                let ageNanos = UInt64(clamping: max(0, wallMillis &- stored.atMillis)).multipliedReportingOverflow(by: 1_000_000)
                remember(&state, scope, stored.fingerprint, at: ageNanos.overflow ? 0 : now &- min(now, ageNanos.partialValue))
                return stored.fingerprint == fingerprint ? .retry : .conflict
            }
            remember(&state, scope, fingerprint, at: now)
            try? state.store?.insert(scope, fingerprint, atMillis: wallMillis)
            state.bindsSincePrune += 1
            if state.bindsSincePrune >= 1024 {
                state.bindsSincePrune = 0
                try? state.store?.prune(olderThan: wallMillis &- retentionMillis)
            }
            return .bound
        }
    }

    private func remember(_ state: inout State, _ scope: String, _ fingerprint: String, at: UInt64) {
        state.fingerprints[scope] = (fingerprint, at)
        state.order.append((scope, at))
        while state.fingerprints.count > capacity { forgetOldest(&state) }
    }

    /// Undoes a ``bind(_:_:now:)`` that answered `.bound` when the event could not be dropped:
    /// the request did not happen, so the key is free again.
    func unbind(_ scope: String, _ fingerprint: String) {
        state.withLock { state in
            if state.fingerprints[scope]?.fingerprint == fingerprint { state.fingerprints[scope] = nil }
            try? state.store?.delete(scope, fingerprint)
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

/// ``IdempotencyBindings`` on disk: one SQLite table in pushspool-inbox's own state directory
/// (systemd's `StateDirectory=pushspool-inbox`), WAL with `synchronous=NORMAL`: a binding
/// survives a crash of the process; one lost with the machine only costs a 422 (the event id
/// still tells the requests apart).
///
/// Not `Sendable`: one connection, used under ``IdempotencyBindings``' lock.
final class IdempotencyStore {
    private let db: SQLiteDatabase

    /// Opens or creates `path`.
    init(path: String) throws(SQLiteError) {
        db = try SQLiteDatabase(path: path, mode: .readWriteCreate)
        _ = try db.pragmaText("PRAGMA journal_mode=WAL")
        try db.execute("PRAGMA synchronous=NORMAL")
        try db.execute("CREATE TABLE IF NOT EXISTS bindings(scope TEXT PRIMARY KEY, fingerprint TEXT NOT NULL, at_ms INTEGER NOT NULL) WITHOUT ROWID")
        try db.execute("CREATE INDEX IF NOT EXISTS bindings_age ON bindings(at_ms)")
    }

    func lookup(_ scope: String) throws(SQLiteError) -> (fingerprint: String, atMillis: Int64)? {
        let statement = try db.statement("SELECT fingerprint, at_ms FROM bindings WHERE scope = ?1")
        defer { statement.reset() }
        try statement.bind(1, scope)
        guard try statement.step(), let fingerprint = statement.text(0) else { return nil }
        return (fingerprint, statement.int64(1))
    }

    /// Binds `scope`, replacing an expired binding.
    func insert(_ scope: String, _ fingerprint: String, atMillis: Int64) throws(SQLiteError) {
        let statement = try db.statement("INSERT OR REPLACE INTO bindings(scope, fingerprint, at_ms) VALUES (?1, ?2, ?3)")
        try statement.bind(1, scope)
        try statement.bind(2, fingerprint)
        try statement.bind(3, atMillis)
        try statement.run()
    }

    func delete(_ scope: String, _ fingerprint: String) throws(SQLiteError) {
        let statement = try db.statement("DELETE FROM bindings WHERE scope = ?1 AND fingerprint = ?2")
        try statement.bind(1, scope)
        try statement.bind(2, fingerprint)
        try statement.run()
    }

    func prune(olderThan millis: Int64) throws(SQLiteError) {
        let statement = try db.statement("DELETE FROM bindings WHERE at_ms < ?1")
        try statement.bind(1, millis)
        try statement.run()
    }
}
