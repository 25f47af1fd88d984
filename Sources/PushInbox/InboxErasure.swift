@preconcurrency import Glibc
import PushSystem

extension InboxIndex {
    /// Deletes everything the index holds about `subject`, so that no byte of it stays in the
    /// file: its items and what hangs off them (`item_feeds`, `due`, `timed_changes`), and
    /// what its owner key names (`owners`, `feed_counts`, `preferences`, its `timed_changes`).
    /// `secure_delete` zeroes the freed cells, `VACUUM` rebuilds the file without free pages,
    /// and `wal_checkpoint(TRUNCATE)` empties the WAL that held the rows and the vacuum's
    /// copies (docs/design/erasure.md, "Inbox index"). Returns the items deleted. Idempotent:
    /// a second call deletes nothing and compacts again. A user's items are those owned by
    /// `u:<user>`; a device's are those naming it (`device`), whoever owned them, and its own
    /// `d:<device>` rows. Schema 6's other tables (`meta`, `feeds`) name nobody.
    ///
    /// Opens the file directly, not through ``init(path:readOnly:announce:listModals:)``: an
    /// erasure does not depend on how the index lists MODAL pushes.
    ///
    /// `before` bounds a live erasure (pushspoold running): only items below that seq — the
    /// erasure record's — go; later ones are new data. The `owners` and `feed_counts` rows then
    /// go only once no item of the owner is left (else they are recounted from the items that
    /// stay); the muted categories go in any case — the events that set them are erased from
    /// the journal too — and items that stay are unmuted with them.
    @discardableResult
    package static func erase(path: String, subject: DataSubject, before: UInt64 = .max) throws(InboxError) -> Int {
        var st = stat()
        guard stat(path, &st) == 0 else { throw InboxError(.missing, path: path) }
        do {
            let db = try SQLiteDatabase(path: path, mode: .readWriteCreate)
            try db.execute("PRAGMA secure_delete=ON")
            let deleted = try db.transaction { () throws(SQLiteError) -> Int in
                try eraseRows(db, subject: subject, before: before)
            }
            try compactForErasure(db)
            return deleted
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }

    /// The statements that find and delete one erasure scope's items, each reading `items`
    /// through the scope's index (`items_owner`, `items_device`): one statement for both scopes
    /// (`device = ?1 OR owner = ?2`) read the whole table. Tests pin each to its index.
    /// Parameters: ?1 the subject in its column (the owner key `u:<user>`, or the device id),
    /// ?2 the `before` bound, ?3 the owner key (only where the statement names it).
    package struct ErasureSQL: Sendable {
        /// The owners other than the subject's whose items go: their counters are recounted.
        /// `nil` for a user, whose items have no other owner.
        package let otherOwners: StaticString?
        package let itemFeeds: StaticString
        package let due: StaticString
        /// The log of timed changes also names the owner.
        package let timedChanges: StaticString
        package let items: StaticString

        package var all: [StaticString] { [otherOwners, itemFeeds, due, timedChanges, items].compactMap { $0 } }

        /// By owner. `u:<user>` owns exactly the user's items.
        package static let user = ErasureSQL(
            otherOwners: nil,
            itemFeeds: "DELETE FROM item_feeds WHERE seq IN (SELECT seq FROM items WHERE owner = ?1 AND seq < ?2)",
            due: "DELETE FROM due WHERE seq IN (SELECT seq FROM items WHERE owner = ?1 AND seq < ?2)",
            timedChanges: """
                DELETE FROM timed_changes WHERE (owner = ?3 AND item < ?2)
                    OR item IN (SELECT seq FROM items WHERE owner = ?1 AND seq < ?2)
                """,
            items: "DELETE FROM items WHERE owner = ?1 AND seq < ?2")

        /// By device: the items naming it, whoever owns them. Its own `d:<device>` items name
        /// it too (an item is owned by its device only when it has no user, ``owner(user:device:)``).
        package static let device = ErasureSQL(
            otherOwners: "SELECT DISTINCT owner FROM items WHERE device = ?1 AND seq < ?2 AND owner IS NOT NULL AND owner != ?3",
            itemFeeds: "DELETE FROM item_feeds WHERE seq IN (SELECT seq FROM items WHERE device = ?1 AND seq < ?2)",
            due: "DELETE FROM due WHERE seq IN (SELECT seq FROM items WHERE device = ?1 AND seq < ?2)",
            timedChanges: """
                DELETE FROM timed_changes WHERE (owner = ?3 AND item < ?2)
                    OR item IN (SELECT seq FROM items WHERE device = ?1 AND seq < ?2)
                """,
            items: "DELETE FROM items WHERE device = ?1 AND seq < ?2")
    }

    /// The deletes of ``erase(path:subject:before:)``, inside its transaction.
    private static func eraseRows(_ db: SQLiteDatabase, subject: DataSubject, before: UInt64) throws(SQLiteError) -> Int {
        let (sql, key, ownerKey) = switch subject {
        case .user(let id): (ErasureSQL.user, InboxOwner.user(id).key, InboxOwner.user(id).key)
        case .device(let id): (ErasureSQL.device, id, InboxOwner.device(id).key)
        }
        // SQLite integers are signed: `.max` (everything) is bound as Int64.max.
        func bound(_ text: StaticString) throws(SQLiteError) -> SQLiteStatement {
            let statement = try db.statement(text)
            try statement.bind(1, key)
            try statement.bind(2, Int64(clamping: before))
            if statement.parameterCount >= 3 { try statement.bind(3, ownerKey) }
            return statement
        }
        // A device's items may belong to users: their counters are recounted after.
        var owners: [String] = []
        if let otherOwners = sql.otherOwners {
            let select = try bound(otherOwners)
            while try select.step() { if let owner = select.text(0) { owners.append(owner) } }
            select.reset()
        }
        // What hangs off the items first, while the subquery still finds them.
        try bound(sql.itemFeeds).run()
        try bound(sql.due).run()
        try bound(sql.timedChanges).run()
        // The stream log names the user, and the items a device's erasure takes.
        switch subject {
        case .user: try bound("DELETE FROM changes WHERE owner = ?3 AND seq < ?2").run()
        case .device: try bound("DELETE FROM changes WHERE item IN (SELECT seq FROM items WHERE device = ?1 AND seq < ?2)").run()
        }
        try bound(sql.items).run()
        let count = Int(clamping: db.changes)

        let preferences = try db.statement("DELETE FROM preferences WHERE owner = ?1")
        try preferences.bind(1, ownerKey)
        try preferences.run()
        // Its preferences go: what they muted is back, as unmuting a category brings it.
        try InboxIndex.unmute(db, owner: ownerKey, category: nil)
        let left = try db.statement("SELECT 1 FROM items WHERE owner = ?1 LIMIT 1")
        try left.bind(1, ownerKey)
        let itemsLeft = try left.step()
        left.reset()
        if itemsLeft {
            owners.append(ownerKey)
        } else {
            let owner = try db.statement("DELETE FROM owners WHERE owner = ?1")
            try owner.bind(1, ownerKey)
            try owner.run()
            let counts = try db.statement("DELETE FROM feed_counts WHERE owner = ?1")
            try counts.bind(1, ownerKey)
            try counts.run()
        }
        for owner in owners { try recount(db, owner: owner) }
        return count
    }

    /// `VACUUM` and an emptied WAL: what the index holds afterwards is only live rows.
    static func compactForErasure(_ db: SQLiteDatabase) throws(SQLiteError) {
        try db.execute("VACUUM")
        // A checkpoint blocked by a reader returns a row with busy = 1 rather than an error;
        // the WAL would then keep the deleted rows' pages, so that is a failure here.
        if try db.pragmaText("PRAGMA wal_checkpoint(TRUNCATE)") != "0" {
            throw SQLiteError(code: 5 /* SQLITE_BUSY */, operation: "wal_checkpoint(TRUNCATE)",
                              message: "a reader kept the write-ahead log from being emptied; retry when pushspool-inbox is idle",
                              path: db.path)
        }
    }
}

extension InboxIndex {
    /// The ids of `scope` this index knows, for an erasure that names its subject only by a
    /// keyed hash (an erasure record read from the stream on an inbox node): users are the
    /// owners `u:<user>` (of a row or of an item); devices the items' `device` column and the
    /// owners `d:<device>`. The caller hashes each and keeps the one that matches. Costs one
    /// scan of the owners and of the items' owner (or device) column. Each id once by its
    /// bytes (NFC and NFD `josé` are both there: two subjects).
    package static func erasureCandidates(path: String, device: Bool) throws(InboxError) -> [String] {
        var st = stat()
        guard stat(path, &st) == 0 else { throw InboxError(.missing, path: path) }
        do {
            let db = try SQLiteDatabase(path: path, mode: .readOnly)
            var ids: [String] = []
            let prefix = device ? "d:" : "u:"
            let queries: [StaticString] = device
                ? ["SELECT owner FROM owners WHERE substr(owner, 1, 2) = 'd:'", "SELECT DISTINCT device FROM items WHERE device IS NOT NULL"]
                : ["SELECT owner FROM owners WHERE substr(owner, 1, 2) = 'u:'",
                   "SELECT DISTINCT owner FROM items WHERE substr(owner, 1, 2) = 'u:'"]
            for (index, sql) in queries.enumerated() {
                let statement = try db.statement(sql)
                defer { statement.reset() }
                while try statement.step() {
                    guard let text = statement.text(0) else { continue }
                    // The owner queries give `u:`/`d:` keys; the device column the id itself.
                    if index == 0 || !device {
                        guard text.hasPrefix(prefix) else { continue }
                        ids.append(String(text.dropFirst(2)))
                    } else if !text.isEmpty {
                        ids.append(text)
                    }
                }
            }
            return IdBytes.unique(ids)
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }
}
