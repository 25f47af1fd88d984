import PushSystem

/// Timed transitions: an item's expiry and the end of a snooze happen at a moment, not when
/// the next query happens to look. The writer keeps what falls due in the `due` table
/// (ordered by the due time) and applies it in a transaction, adjusting the counters there,
/// so counts are exact at every moment; each transition it applies is logged in
/// `timed_changes`, which pushspool-inbox reads to tell live streams at that moment.
///
/// Transitions are a function of the records and the time alone: before a record is applied,
/// what fell due up to its journal time is applied (``applyDue(upTo:)``), and
/// ``applyDue(now:)`` applies what fell due up to now. A rebuild from the journal at a given
/// moment therefore holds what the live index holds at that moment, whenever and in whatever
/// batches the live one applied them. A wall clock stepped back only delays transitions.
extension InboxIndex {
    /// What falls due. Raw values are stored in `due.kind`; stable.
    enum DueKind: Int64 {
        /// The item's expiry (the earliest of the envelope's and the vendor's): it leaves the
        /// inbox, its counts and in-app presentation for good.
        case expire = 0
        /// The end of a snooze: the item is back, unread.
        case unsnooze = 1
    }

    /// How many transitions `timed_changes` keeps for streams (the oldest go first).
    static let timedChangesKept: Int64 = 16_384

    static func createTimedSchema(_ db: SQLiteDatabase) throws(SQLiteError) {
        // `at` first: the writer reads the earliest row, and all rows due by a time, in order.
        try db.execute("""
            CREATE TABLE IF NOT EXISTS due(at INTEGER NOT NULL, seq INTEGER NOT NULL, kind INTEGER NOT NULL,
                PRIMARY KEY(at, seq, kind)) WITHOUT ROWID
            """)
        try db.execute("CREATE INDEX IF NOT EXISTS due_item ON due(seq, kind)")
        // Numbered in the order applied (the same in a rebuild), so a reader asks for what
        // came after the last id it saw.
        try db.execute("""
            CREATE TABLE IF NOT EXISTS timed_changes(id INTEGER PRIMARY KEY, owner TEXT NOT NULL, item INTEGER NOT NULL,
                type TEXT NOT NULL, at INTEGER NOT NULL)
            """)
    }

    /// Records that `seq` falls due at `at` for `kind`, replacing an earlier time of that kind.
    func schedule(_ kind: DueKind, seq: Int64, at: Int64) throws(SQLiteError) {
        try unschedule(kind, seq: seq)
        let insert = try db.statement("INSERT OR IGNORE INTO due(at, seq, kind) VALUES (?1, ?2, ?3)")
        try insert.bind(1, at)
        try insert.bind(2, seq)
        try insert.bind(3, kind.rawValue)
        try insert.run()
    }

    func unschedule(_ kind: DueKind, seq: Int64) throws(SQLiteError) {
        let delete = try db.statement("DELETE FROM due WHERE seq = ?1 AND kind = ?2")
        try delete.bind(1, seq)
        try delete.bind(2, kind.rawValue)
        try delete.run()
    }

    /// Applies, in due order, every transition due at or before `time`; returns how many
    /// changed an item. Inside the caller's transaction.
    @discardableResult
    func applyDue(upTo time: Int64) throws(SQLiteError) -> Int {
        var changed = 0
        while true {
            let select = try db.statement("SELECT at, seq, kind FROM due WHERE at <= ?1 ORDER BY at, seq, kind LIMIT 256")
            try select.bind(1, time)
            var rows: [(at: Int64, seq: Int64, kind: Int64)] = []
            while try select.step() { rows.append((select.int64(0), select.int64(1), select.int64(2))) }
            select.reset()
            if rows.isEmpty { break }
            let delete = try db.statement("DELETE FROM due WHERE at = ?1 AND seq = ?2 AND kind = ?3")
            for row in rows {
                try delete.bind(1, row.at)
                try delete.bind(2, row.seq)
                try delete.bind(3, row.kind)
                try delete.run()
                guard let kind = DueKind(rawValue: row.kind) else { continue }
                if try transition(kind, seq: row.seq, at: row.at) { changed += 1 }
            }
        }
        if changed > 0 {
            // Bounded: streams read only the newest; ids keep growing (max + 1).
            let prune = try db.statement("DELETE FROM timed_changes WHERE id <= (SELECT max(id) FROM timed_changes) - ?1")
            try prune.bind(1, Self.timedChangesKept)
            try prune.run()
        }
        return changed
    }

    /// One due transition; whether it changed the item (and was logged). The rules are
    /// ``InboxItemState/applying(_:)``'s (deleted and expired items stay as they are).
    private func transition(_ kind: DueKind, seq: Int64, at: Int64) throws(SQLiteError) -> Bool {
        guard let row = try itemRow(seq), let owner = row.owner else { return false }
        let event: InboxItemEvent
        let type: String
        switch kind {
        case .expire:
            event = .expire
            type = "nc.expired"
        case .unsnooze:
            event = .snoozeEnded(at: at)
            type = "nc.unsnoozed"
        }
        let after = row.state.applying(event)
        guard after != row.state else { return false }
        // Expired is final: a snooze's end has nothing to bring back.
        if case .expire = kind { try unschedule(.unsnooze, seq: seq) }
        try write(seq, owner: owner, before: row.state, after: after, feeds: row.feeds)
        let log = try db.statement("INSERT INTO timed_changes(owner, item, type, at) VALUES (?1, ?2, ?3, ?4)")
        try log.bind(1, owner)
        try log.bind(2, seq)
        try log.bind(3, type)
        try log.bind(4, at)
        try log.run()
        return true
    }

    /// Applies every transition due by `now` (wall clock, epoch ms) in one transaction and,
    /// when any applied, rewrites `APPLIED` so readers look; returns how many applied.
    @discardableResult
    package func applyDue(now: Int64) throws(InboxError) -> Int {
        do {
            let changed = try db.transaction { () throws(SQLiteError) -> Int in try applyDue(upTo: now) }
            if changed > 0 { announceTimed() }
            return changed
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }

    /// The earliest due time still pending (epoch ms), `nil` when nothing is: the writer
    /// sleeps until then (or a new record), and not at all when nothing is pending.
    package func nextDue() throws(InboxError) -> Int64? {
        do {
            let select = try db.statement("SELECT min(at) FROM due")
            defer { select.reset() }
            return try select.step() ? select.optionalInt64(0) : nil
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }

    /// How long a writer may sleep from `now` before the next due time: `nil` when nothing is
    /// due (sleep until a record), else at most `cap`, so a wall clock stepped forward is
    /// noticed within it (the sleep itself is measured on the monotonic clock).
    package func dueSleep(now: Int64, cap: Duration = .seconds(60)) throws(InboxError) -> Duration? {
        guard let next = try nextDue() else { return nil }
        let (left, overflow) = next.subtractingReportingOverflow(now)
        if overflow { return left < 0 ? .zero : cap }
        return min(.milliseconds(max(0, left)), cap)
    }

    /// One transition applied at its due time (`timed_changes`). `Sendable` value.
    package struct TimedChange: Sendable, Equatable {
        package var id: Int64
        package var item: UInt64
        /// `nc.expired` or `nc.unsnoozed`.
        package var type: String
        package var atMillis: Int64
    }

    /// The id of the newest logged transition (0 = none): a reader's starting point.
    package func lastTimedChange() throws(InboxError) -> Int64 {
        do {
            let select = try db.statement("SELECT coalesce(max(id), 0) FROM timed_changes")
            defer { select.reset() }
            return try select.step() ? select.int64(0) : 0
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }

    /// `owner`'s transitions logged after `afterId`, oldest first, at most `limit`.
    package func timedChanges(_ owner: InboxOwner, afterId: Int64, limit: Int = 200) throws(InboxError) -> [TimedChange] {
        do {
            let select = try db.statement("""
                SELECT id, item, type, at FROM timed_changes WHERE id > ?1 AND owner = ?2 ORDER BY id LIMIT ?3
                """)
            defer { select.reset() }
            try select.bind(1, afterId)
            try select.bind(2, owner.key)
            try select.bind(3, Int64(max(1, min(limit, 10_000))))
            var changes: [TimedChange] = []
            while try select.step() {
                changes.append(TimedChange(id: select.int64(0), item: UInt64(clamping: select.int64(1)), type: select.text(2) ?? "",
                                           atMillis: select.int64(3)))
            }
            return changes
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }

    /// The timed tables in canonical text form (``canonicalDump()``).
    func timedDump() throws(SQLiteError) -> [String] {
        var lines: [String] = []
        let due = try db.statement("SELECT at, seq, kind FROM due ORDER BY at, seq, kind")
        while try due.step() { lines.append("due|\(due.int64(0))|\(due.int64(1))|\(due.int64(2))") }
        due.reset()
        let changes = try db.statement("SELECT id, owner, item, type, at FROM timed_changes ORDER BY id")
        while try changes.step() {
            lines.append("timed|\(changes.int64(0))|\(changes.text(1) ?? "")|\(changes.int64(2))|\(changes.text(3) ?? "")|\(changes.int64(4))")
        }
        changes.reset()
        return lines
    }
}
