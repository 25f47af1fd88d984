import PushFollow
import PushJournal
import PushPayload

/// The `changes` table: each state change the index applied (an event on one item, or a bulk
/// change of an inbox), written in the same transaction as the change itself and as the
/// applied seq. pushspool-inbox's streams read it by seq to tell a client which items changed,
/// so what a stream says and what the index holds cannot disagree: a crash before the commit
/// loses both, re-applying a batch skips records at or below the applied seq (no row twice),
/// and a `Source=nats` index writes it through the same ``InboxIndex/apply(_:)``.
///
/// Bounded: the newest ``InboxIndex/changesKept`` rows stay; `meta.changes_after` says up to which seq
/// rows may be missing (pruned, or before ``InboxIndex/startAfter(_:)``), so a stream resuming
/// there gets `event: refresh` instead of silence.
extension InboxIndex {
    /// One applied state change of a user's inbox: `item` for one item, `nil` for a bulk
    /// change (read-all, archive-read). `Sendable` value.
    package struct Change: Sendable, Equatable {
        package var seq: UInt64
        package var user: String
        package var item: UInt64?
        package var type: String

        package init(seq: UInt64, user: String, item: UInt64?, type: String) {
            self.seq = seq
            self.user = user
            self.item = item
            self.type = type
        }
    }

    /// How many rows `changes` keeps (the oldest go first): what a stream can resume over.
    package static let defaultChangesKept: Int64 = 16_384

    static func createChangesSchema(_ db: SQLiteDatabase) throws(SQLiteError) {
        // One record is at most one change: its seq is the key. `owner` is "u:<user>", so an
        // erasure finds its rows as it finds the items.
        try db.execute("""
            CREATE TABLE IF NOT EXISTS changes(seq INTEGER PRIMARY KEY, owner TEXT NOT NULL, item INTEGER, type TEXT NOT NULL)
            """)
        try db.execute("CREATE INDEX IF NOT EXISTS changes_owner ON changes(owner, seq)")
    }

    /// The inbox change a record is, if any: an event naming a user and an item (or, for a
    /// bulk change, the inbox). An event record is known by its body's `"kind": "event"`:
    /// records read back from the stream carry no journal key.
    package static func change(_ record: FollowedRecord) -> Change? {
        switch record.body {
        case .event(let event):
            guard let user = event["user"]?.stringValue else { return nil }
            // By what the event changes, as the index applies it (InboxItemState.swift).
            switch event.type.inboxScope {
            case .item:
                guard let item = event["item"]?.numberLexeme.flatMap({ UInt64($0) }) else { return nil }
                return Change(seq: record.seq, user: user, item: item, type: event.type.rawValue)
            case .inbox:
                return Change(seq: record.seq, user: user, item: nil, type: event.type.rawValue)
            case .none:
                return nil
            }
        // A new push reaches a stream as an item, not as a change; erasures, tombstones and
        // unreadable bodies change nothing a stream shows.
        case .notification, .erasure, .tombstone, .undecodable:
            return nil
        }
    }

    /// Logs `record`'s change, if it is one; inside ``apply(_:)``'s transaction.
    func logChange(_ record: FollowedRecord) throws(SQLiteError) -> Bool {
        guard let change = Self.change(record), let seq = Int64(exactly: change.seq) else { return false }
        let insert = try db.statement("INSERT OR REPLACE INTO changes(seq, owner, item, type) VALUES (?1, ?2, ?3, ?4)")
        try insert.bind(1, seq)
        try insert.bind(2, InboxOwner.user(change.user).key)
        try insert.bind(3, change.item.flatMap { Int64(exactly: $0) })
        try insert.bind(4, change.type)
        try insert.run()
        return true
    }

    /// Drops the oldest rows beyond ``changesKept`` and moves `changes_after` past them; inside
    /// ``apply(_:)``'s transaction, so the window and its rows move together.
    func pruneChanges() throws(SQLiteError) {
        let kept = max(1, changesKept)
        let oldestKept = try db.statement("SELECT seq FROM changes ORDER BY seq DESC LIMIT 1 OFFSET ?1")
        defer { oldestKept.reset() }
        try oldestKept.bind(1, max(0, kept - 1))
        guard try oldestKept.step() else { return }
        let boundary = oldestKept.int64(0)
        let dropped = try db.statement("SELECT max(seq) FROM changes WHERE seq < ?1")
        defer { dropped.reset() }
        try dropped.bind(1, boundary)
        guard try dropped.step(), !dropped.isNull(0) else { return }
        let after = dropped.int64(0)
        let delete = try db.statement("DELETE FROM changes WHERE seq <= ?1")
        try delete.bind(1, after)
        try delete.run()
        try setChangesAfter(after)
    }

    func setChangesAfter(_ seq: Int64) throws(SQLiteError) {
        let update = try db.statement("INSERT INTO meta(key, value) VALUES ('changes_after', ?1) ON CONFLICT(key) DO UPDATE SET value = max(value, ?1)")
        try update.bind(1, seq)
        try update.run()
    }

    /// The seq after which `changes` is complete: every change with a seq past it and at or
    /// below ``appliedSeq()`` has its row (erased users' aside). A stream behind it cannot be
    /// told what changed and gets `event: refresh`.
    package func changesCoveredAfter() throws(InboxError) -> UInt64 {
        do { return UInt64(clamping: try Self.meta(db, "changes_after") ?? 0) } catch { throw InboxError(.sqlite(error), path: path) }
    }

    /// `user`'s changes with `after < seq <= upTo`, oldest first, at most `limit`.
    package func changes(user: String, after: UInt64, upTo: UInt64, limit: Int = 10_000) throws(InboxError) -> [Change] {
        guard upTo > after else { return [] }
        do {
            let select = try db.statement("""
                SELECT seq, item, type FROM changes WHERE owner = ?1 AND seq > ?2 AND seq <= ?3 ORDER BY seq LIMIT ?4
                """)
            defer { select.reset() }
            try select.bind(1, InboxOwner.user(user).key)
            try select.bind(2, Int64(clamping: after))
            try select.bind(3, Int64(clamping: upTo))
            try select.bind(4, Int64(max(1, limit)))
            var changes: [Change] = []
            while try select.step() {
                let item: UInt64? = select.isNull(1) ? nil : UInt64(clamping: select.int64(1))
                changes.append(Change(seq: UInt64(clamping: select.int64(0)), user: user, item: item, type: select.text(2) ?? ""))
            }
            return changes
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }

    /// Every row of `changes` in seq order (tests, diagnosis).
    package func allChanges() throws(InboxError) -> [Change] {
        do {
            let select = try db.statement("SELECT seq, owner, item, type FROM changes ORDER BY seq")
            defer { select.reset() }
            var changes: [Change] = []
            while try select.step() {
                let owner = select.text(1) ?? ""
                let item: UInt64? = select.isNull(2) ? nil : UInt64(clamping: select.int64(2))
                changes.append(Change(seq: UInt64(clamping: select.int64(0)), user: String(owner.dropFirst(2)), item: item,
                                      type: select.text(3) ?? ""))
            }
            return changes
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }
}
