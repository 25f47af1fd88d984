@preconcurrency import Glibc
import PushSystem

extension InboxIndex {
    /// Deletes everything the index holds about `subject` — its items and its `owners` row —
    /// so that no byte of it stays in the file: `secure_delete` zeroes the freed cells,
    /// `VACUUM` rebuilds the file without free pages, and `wal_checkpoint(TRUNCATE)` empties
    /// the WAL that held the rows and the vacuum's copies (docs/design/erasure.md, "Inbox
    /// index"). Returns the items deleted. Idempotent: a second call deletes nothing and
    /// compacts again. A user's items are those owned by `u:<user>`; a device's are those
    /// naming it (`device`), whoever owned them, and its own `d:<device>` row.
    ///
    /// Opens the file directly, not through ``init(path:readOnly:announce:listModals:)``: an
    /// erasure does not depend on how the index lists MODAL pushes.
    ///
    /// `before` bounds a live erasure (pushspoold running): only items below that seq — the
    /// erasure record's — go; later ones are new data. The `owners` row then goes only once no
    /// item of the owner is left (its counters serve the items that stay).
    @discardableResult
    package static func erase(path: String, subject: DataSubject, before: UInt64 = .max) throws(InboxError) -> Int {
        var st = stat()
        guard stat(path, &st) == 0 else { throw InboxError(.missing, path: path) }
        do {
            let db = try SQLiteDatabase(path: path, mode: .readWriteCreate)
            try db.execute("PRAGMA secure_delete=ON")
            let deleted = try db.transaction { () throws(SQLiteError) -> Int in
                // SQLite integers are signed: `.max` (everything) is bound as Int64.max.
                let bound = Int64(clamping: before)
                let items = switch subject {
                case .user: try db.statement("DELETE FROM items WHERE owner = ?1 AND seq < ?3")
                case .device: try db.statement("DELETE FROM items WHERE (device = ?1 OR owner = ?2) AND seq < ?3")
                }
                try items.bind(3, bound)
                switch subject {
                case .user(let id): try items.bind(1, InboxOwner.user(id).key)
                case .device(let id):
                    try items.bind(1, id)
                    try items.bind(2, InboxOwner.device(id).key)
                }
                try items.run()
                let count = Int(clamping: db.changes)
                let owner = try db.statement("DELETE FROM owners WHERE owner = ?1 AND NOT EXISTS (SELECT 1 FROM items WHERE items.owner = ?1)")
                switch subject {
                case .user(let id): try owner.bind(1, InboxOwner.user(id).key)
                case .device(let id): try owner.bind(1, InboxOwner.device(id).key)
                }
                try owner.run()
                return count
            }
            try compactForErasure(db)
            return deleted
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
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
    /// scan of the owners and of the items' owner (or device) column.
    package static func erasureCandidates(path: String, device: Bool) throws(InboxError) -> Set<String> {
        var st = stat()
        guard stat(path, &st) == 0 else { throw InboxError(.missing, path: path) }
        do {
            let db = try SQLiteDatabase(path: path, mode: .readOnly)
            var ids: Set<String> = []
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
                        ids.insert(String(text.dropFirst(2)))
                    } else if !text.isEmpty {
                        ids.insert(text)
                    }
                }
            }
            return ids
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }
}
