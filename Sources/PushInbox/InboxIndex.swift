@preconcurrency import Glibc
import PushFollow
import PushJournal
import PushPayload
import PushSystem

/// A failure of the inbox index. `Sendable` value; `description` says what to do.
package struct InboxError: Error, Sendable, CustomStringConvertible {
    package enum Kind: Sendable {
        case sqlite(SQLiteError)
        case journal(JournalError)
        case io(SystemError)
        /// The index file does not exist (read-only open); `nc reindex` builds it.
        case missing
        /// The file was written by another schema version; rebuild it with `nc reindex`.
        case schemaMismatch(found: Int64)
        /// A writer opened an index built with the other `[Inbox] ListModals=` (`indexed`:
        /// what the file was built with); rebuild it with `nc reindex`.
        case listingMismatch(indexed: Bool)
        /// A writer opened an index built with other `[Feed NAME]` definitions (`indexed`: the
        /// names it was built with); rebuild it with `nc reindex`.
        case feedsMismatch(indexed: [String])
        /// A writer opened an index built with another `[Inbox] RetentionSec=` (`indexedMillis`:
        /// what it was built with, 0 = none); rebuild it with `nc reindex`.
        case retentionMismatch(indexedMillis: Int64)
        /// No feed of this name (`?feed=`, `--feed`); `known`: the index's (``InboxIndex/feedNames()``).
        case unknownFeed(String, known: [String])
        /// A cursor that this index did not hand out.
        case invalidCursor
        /// `limit` outside 1...500.
        case invalidLimit(Int)
    }

    package var kind: Kind
    package var path: String

    package init(_ kind: Kind, path: String) {
        self.kind = kind
        self.path = path
    }

    /// The file is damaged or not a database: the index is derived data, so it is moved
    /// aside and rebuilt from the journal rather than repaired.
    package var isCorrupt: Bool {
        if case .sqlite(let e) = kind { return e.isCorrupt }
        return false
    }

    /// The file is a sound index built by another build or with another listing rule: a
    /// writer replaces it with a fresh one and rebuilds from the journal (nothing to keep).
    package var isStale: Bool {
        switch kind {
        case .schemaMismatch, .listingMismatch, .feedsMismatch, .retentionMismatch: true
        default: false
        }
    }

    /// Stable, without data: for metrics labels and journald fields.
    package var shortDescription: String {
        switch kind {
        case .sqlite(let e): e.shortDescription
        case .journal(let e): "journal: \(e.shortDescription)"
        case .io(let e): "io: \(e.shortDescription)"
        case .missing: "missing"
        case .schemaMismatch: "schema-mismatch"
        case .listingMismatch: "listing-mismatch"
        case .feedsMismatch: "feeds-mismatch"
        case .retentionMismatch: "retention-mismatch"
        case .unknownFeed: "unknown-feed"
        case .invalidCursor: "invalid-cursor"
        case .invalidLimit: "invalid-limit"
        }
    }

    package var description: String {
        switch kind {
        case .sqlite(let e): "inbox index: \(e)"
        case .journal(let e): "inbox index: \(e)"
        case .io(let e): "inbox index \(path): \(e)"
        case .missing: "inbox index \(path) does not exist; build it from the journal with `pushspoolctl nc reindex`"
        case .schemaMismatch(let found):
            "inbox index \(path) has schema version \(found), this build uses \(InboxIndex.schemaVersion); "
                + "rebuild it with `pushspoolctl nc reindex`"
        case .listingMismatch(let indexed):
            "inbox index \(path) was built with [Inbox] ListModals=\(indexed ? "yes" : "no"), the configuration says "
                + "\(indexed ? "no" : "yes"); rebuild it with `pushspoolctl nc reindex`"
        case .feedsMismatch(let indexed):
            "inbox index \(path) was built with other [Feed] definitions (feeds: \(indexed.isEmpty ? "none" : indexed.joined(separator: ", "))); "
                + "rebuild it with `pushspoolctl nc reindex`"
        case .retentionMismatch(let indexed):
            "inbox index \(path) was built with [Inbox] RetentionSec=\(indexed / 1000), the configuration says otherwise; "
                + "rebuild it with `pushspoolctl nc reindex`"
        case .unknownFeed(let name, let known):
            "no feed '\(name)'; "
                + (known.isEmpty ? "no feeds are configured (add [Feed NAME] sections)" : "the feeds are \(known.joined(separator: ", "))")
        case .invalidCursor: "invalid cursor (use the nextCursor of a previous page)"
        case .invalidLimit(let n): "limit must be 1 to \(InboxIndex.maxLimit), not \(n)"
        }
    }
}

/// The Notification Center's query index: an SQLite file derived from the journal alone
/// (`<state>/inbox/index.sqlite`, WAL mode). It records the last journal seq it applied in the
/// same transaction as the records, so a crash anywhere loses nothing and applies nothing
/// twice: the next catch-up starts after that seq.
///
/// Not `Sendable`: owns a connection. ``InboxFollower`` wraps one behind a lock.
package final class InboxIndex {
    /// 2: silent pushes are not items, MODALs are listed per `ListModals=` (`listed`), and
    /// items carry sound, badge, loc keys, Infobip's link kinds and the custom payload.
    /// 3: items can be pinned (`pinned`) and deleted (`deleted`, a tombstone).
    /// 4: feeds (`feeds`, `item_feeds`, `feed_counts`, the items' `feeds` mask), muted
    /// categories (`preferences`, the items' `muted`).
    /// 5: collapse (`collapse_id`, `replaces`, `replaced_by`), APNs `thread_id`, and the
    /// action chosen kept on the item (`acted_action`, `acted_text`; `nc.action-revert`).
    /// 6: timed transitions: snoozes (`snoozed_until`), expiry applied when it falls due
    /// (`expired`), the `due` table and the `timed_changes` log (InboxTimed.swift).
    /// 7: media that is not served (`media_source_url`, `media_reason`): the push's image
    /// URL and why pushspool holds no image to show for it (not fetched, fetch failed,
    /// undecodable), so an app can fetch it itself.
    /// 8: SFMC's request and hash ids (`request_id`, `hash_id`), for attribution.
    /// 9: the `changes` log of applied state changes that streams read by seq
    /// (InboxChanges.swift), with `meta.changes_after`.
    package static let schemaVersion: Int64 = 9
    package static let maxLimit = 500
    /// The page size of an index file this build creates (`PRAGMA page_size`), against
    /// SQLite's 4,096. A journal record dirties a handful of B-tree pages of the index (the
    /// item's row, its owner's counters, two per-owner index entries, the applied seq), each
    /// written whole to the WAL at every commit and synced with it at every checkpoint:
    /// with rows of about 300 bytes, a 1 KiB page carries the same change for a quarter of
    /// the bytes. That write volume, on the disk the journal syncs to, is what held the
    /// journal's own fdatasyncs slow at a steady 1,000 files/s (docs/performance.md, "The
    /// tail at 1,000 files/s is the inbox index's"). A file made with another page size
    /// keeps it (SQLite cannot change it in WAL mode) until it is rebuilt (`nc reindex`).
    package static let pageSize: Int64 = 1024
    /// Columns of `items` (``canonicalDump()`` prints them all).
    static let columnCount = 56

    /// `<stateDirectory>/inbox/index.sqlite`.
    package static func path(stateDirectory: String) -> String { StateLayout(root: stateDirectory).inboxIndex }

    /// `APPLIED` beside the index: rewritten after every committed batch, so a reader in
    /// another process (pushspool-inbox) learns of new records through inotify instead of a
    /// timer. Its content (the applied seq, 20 digits) is for people; readers ask the index.
    /// Written after the commit, so a reader woken by it sees the batch.
    package static func appliedMarkPath(indexPath: String) -> String { directory(of: indexPath) + "/APPLIED" }

    static func directory(of path: String) -> String {
        let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return directory.isEmpty ? "." : directory
    }

    package let path: String
    let db: SQLiteDatabase
    /// Device and inode of the file when opened, to notice a replaced file.
    package private(set) var fileIdentity: (dev: UInt64, ino: UInt64)? = nil
    /// Whether commits rewrite `APPLIED` (not for a rebuild's temp file).
    private let announces: Bool
    /// `[Inbox] ListModals=`: whether MODAL mirror pushes are listed (and counted) like
    /// banners. Decided when a record is applied (``listed(_:listModals:)``), so a writer
    /// must open an index built with the same value (`.listingMismatch` otherwise).
    package let listModals: Bool
    /// The writer's feeds (`[Feed NAME]`), in configuration order: feed `i` is bit `i` of an
    /// item's `feeds` mask and row `i` of the `feeds` table. Decided when a record is
    /// applied, so a writer must open an index built with the same definitions
    /// (`.feedsMismatch` otherwise). A read-only open ignores it and reads the table.
    package let feeds: [InboxFeed]
    /// `[Inbox] RetentionSec=` in ms (`nil` = none): an item also expires this long after it
    /// was ingested (InboxTimed.swift). Decided when a record is applied, so a writer must
    /// open an index built with the same value (`.retentionMismatch` otherwise).
    package let retentionMillis: Int64?
    /// How many rows `changes` keeps (``defaultChangesKept``; tests make it small).
    package var changesKept: Int64 = InboxIndex.defaultChangesKept

    /// Opens (creating when `readOnly` is false) the index at `path`. A read-only open of a
    /// missing file throws `.missing`. `announce`: a writer rewrites `APPLIED` after each batch.
    /// `listModals`: a writer's `[Inbox] ListModals=`; a read-only open ignores it (readers
    /// see what the writer decided). `feeds`: a writer's `[Feed NAME]` definitions, likewise.
    package init(path: String, readOnly: Bool = false, announce: Bool = true, listModals: Bool = false,
                 feeds: [InboxFeed] = [], retention: Duration? = nil) throws(InboxError) {
        self.path = path
        announces = announce && !readOnly
        self.listModals = listModals
        retentionMillis = retention.flatMap { $0 > .zero ? $0.clampedMilliseconds : nil }
        self.feeds = Array(feeds.prefix(InboxFeed.maximum))
        if readOnly {
            var st = stat()
            guard stat(path, &st) == 0 else { throw InboxError(.missing, path: path) }
        } else {
            let directory = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
            if !directory.isEmpty {
                do { try Posix.mkdirs(directory) } catch { throw InboxError(.io(error), path: path) }
            }
        }
        do {
            db = try SQLiteDatabase(path: path, mode: readOnly ? .readOnly : .readWriteCreate)
            if !readOnly {
                // ``pageSize`` (statements are static text here). Before the first table: a file
                // that has any keeps the page size it was made with.
                try db.execute("PRAGMA page_size=1024")
                _ = try db.pragmaText("PRAGMA journal_mode=WAL")
                // WAL + NORMAL: a power cut may drop the newest transactions, never corrupt; the
                // dropped ones carry their own last-seq, so catch-up re-applies them.
                try db.execute("PRAGMA synchronous=NORMAL")
                try createSchema()
            } else if try !Self.hasMetaTable(db) {
                // A writer killed between creating the file and committing the schema (one
                // transaction) leaves an empty database: not yet an index, like a missing one.
                throw InboxError(.missing, path: path)
            }
            let version = try Self.meta(db, "schema_version") ?? 0
            guard version == Self.schemaVersion else { throw InboxError(.schemaMismatch(found: version), path: path) }
            if !readOnly, let indexed = try Self.meta(db, "list_modals"), (indexed != 0) != listModals {
                throw InboxError(.listingMismatch(indexed: indexed != 0), path: path)
            }
            if !readOnly {
                let stored = try Self.storedFeeds(db)
                if stored.map(\.name) != self.feeds.map(\.name) || stored.map(\.definition) != self.feeds.map(\.definitionText) {
                    throw InboxError(.feedsMismatch(indexed: stored.map(\.name)), path: path)
                }
                let indexed = try Self.meta(db, "retention_ms") ?? 0
                if indexed != retentionMillis ?? 0 { throw InboxError(.retentionMismatch(indexedMillis: indexed), path: path) }
                // The WAL's checkpoints leave the committing thread (WALCheckpointer.swift).
                try db.checkpointInBackground()
            }
        } catch let error as SQLiteError {
            if error.isCantOpen { throw InboxError(.missing, path: path) }
            throw InboxError(.sqlite(error), path: path)
        } catch let error as InboxError {
            throw error
        } catch let error as SystemError {
            throw InboxError(.io(error), path: path)
        } catch {
            throw InboxError(.io(SystemError(call: "sqlite", errno: EIO, subject: path)), path: path)
        }
        var st = stat()
        fileIdentity = stat(path, &st) == 0 ? (UInt64(st.st_dev), UInt64(st.st_ino)) : nil
    }

    /// Whether this connection's WAL checkpoints run on a ``WALCheckpointer`` (every writer's do).
    package var checkpointsInBackground: Bool { db.backgroundCheckpointer != nil }

    /// Rewrites `APPLIED` after a commit, when this index announces.
    private func announce(_ seq: UInt64) {
        if announces { Self.writeAppliedMark(indexPath: path, seq: seq) }
    }

    /// Rewrites `APPLIED` after timed transitions (InboxTimed.swift): the applied seq is
    /// unchanged, so readers compare ``lastTimedChange()`` too.
    func announceTimed() {
        if announces, let seq = try? appliedSeq() { Self.writeAppliedMark(indexPath: path, seq: seq) }
    }

    /// Writes the seq as 20 digits and a newline at offset 0 of `APPLIED` (a fixed length,
    /// rewritten in place; no fsync: it is a wake-up, not state). Opened each time, once per
    /// batch: a removed `APPLIED` comes back instead of an open fd writing to a deleted file
    /// nobody watches. Failures are ignored: readers then wake on their keep-alive.
    static func writeAppliedMark(indexPath: String, seq: UInt64) {
        AppliedSignal.announce(path: appliedMarkPath(indexPath: indexPath), seq: seq)
    }

    private func createSchema() throws(SQLiteError) {
        try db.transaction { () throws(SQLiteError) in
            try db.execute("CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID")
            // One row per notification record; `owner` is "u:<user>" or, for records without a
            // user, "d:<device>" (a shared-device inbox): a query matches it exactly, never by prefix.
            // `hidden` = not listed (a MODAL presented in-app only), archived, deleted, or a
            // banner acted on: it does not show in the inbox and is not counted.
            // `deleted` is a tombstone, not a missing row: a deleted newest MODAL must still
            // stop older ones from being presented, and later events on it are ignored.
            // Silent pushes have no row (``listed(_:listModals:)``).
            // `loc_args`, `title_loc_args`: JSON arrays of strings; `custom_payload`: a JSON
            // value (an object, or a string).
            try db.execute("""
                CREATE TABLE IF NOT EXISTS items(
                    seq INTEGER PRIMARY KEY, owner TEXT, user TEXT, device TEXT,
                    vendor TEXT NOT NULL, id TEXT NOT NULL, title TEXT, subtitle TEXT, body TEXT,
                    click_url TEXT, category TEXT, buttons TEXT NOT NULL, actions TEXT, actions_cut INTEGER NOT NULL,
                    presentation TEXT, inapp_open_title TEXT, inapp_dismiss_title TEXT,
                    media_path TEXT, thumbnail_path TEXT, expires_at INTEGER, ingested_at INTEGER NOT NULL,
                    push_name TEXT, push_date TEXT,
                    seen INTEGER NOT NULL DEFAULT 0, read INTEGER NOT NULL DEFAULT 0, archived INTEGER NOT NULL DEFAULT 0,
                    acted INTEGER NOT NULL DEFAULT 0, inapp_shown INTEGER NOT NULL DEFAULT 0, hidden INTEGER NOT NULL DEFAULT 0,
                    listed INTEGER NOT NULL DEFAULT 1, sound TEXT, badge INTEGER,
                    loc_key TEXT, loc_args TEXT, title_loc_key TEXT, title_loc_args TEXT,
                    deeplink TEXT, web_view_url TEXT, browser_url TEXT, custom_payload TEXT,
                    pinned INTEGER NOT NULL DEFAULT 0, deleted INTEGER NOT NULL DEFAULT 0, feeds INTEGER NOT NULL DEFAULT 0,
                    muted INTEGER NOT NULL DEFAULT 0,
                    collapse_id TEXT, thread_id TEXT, acted_action TEXT, acted_text TEXT, replaces INTEGER, replaced_by INTEGER,
                    snoozed_until INTEGER, expired INTEGER NOT NULL DEFAULT 0, media_source_url TEXT, media_reason TEXT,
                    request_id TEXT, hash_id TEXT)
                """)
            try db.execute("CREATE INDEX IF NOT EXISTS items_owner ON items(owner, seq) WHERE owner IS NOT NULL")
            // A device's items, for its erasure (InboxErasure.swift); added to schema 6 files by
            // `IF NOT EXISTS` when the writer opens them, as no row changes.
            try db.execute("CREATE INDEX IF NOT EXISTS items_device ON items(device, seq) WHERE device IS NOT NULL")
            try db.execute("CREATE INDEX IF NOT EXISTS items_expiry ON items(owner, expires_at, hidden, seen, read) WHERE expires_at IS NOT NULL")
            try db.execute("CREATE INDEX IF NOT EXISTS items_age ON items(owner, ingested_at, hidden, seen, read)")
            try db.execute("CREATE INDEX IF NOT EXISTS items_modal ON items(owner, seq) WHERE presentation = 'modal'")
            // Few items are pinned: the first part of a page reads them through this index.
            try db.execute("CREATE INDEX IF NOT EXISTS items_pinned ON items(owner, seq) WHERE pinned = 1 AND hidden = 0")
            // The one live item of each collapse id, found when a push with that id arrives.
            try db.execute("CREATE INDEX IF NOT EXISTS items_collapse ON items(owner, vendor, collapse_id) WHERE collapse_id IS NOT NULL AND deleted = 0")
            // Exact counters of visible unseen/unread items per owner, kept in the same
            // transaction as the items, so `count` does not scan a 100,000-item inbox; expired
            // items are subtracted at query time through items_expiry / items_age.
            try db.execute("""
                CREATE TABLE IF NOT EXISTS owners(owner TEXT PRIMARY KEY, unseen INTEGER NOT NULL DEFAULT 0,
                    unread INTEGER NOT NULL DEFAULT 0, optout INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID
                """)
            // Feeds: the definitions this index was built with (row `id` = bit `id` of an
            // item's `feeds` mask), each item's feeds as rows ordered for a keyset scan of one
            // feed (the feed's list), and exact per-feed counters kept like `owners`.
            try db.execute("CREATE TABLE IF NOT EXISTS feeds(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, definition TEXT NOT NULL)")
            try db.execute("""
                CREATE TABLE IF NOT EXISTS item_feeds(owner TEXT NOT NULL, feed INTEGER NOT NULL, seq INTEGER NOT NULL,
                    PRIMARY KEY(owner, feed, seq)) WITHOUT ROWID
                """)
            try db.execute("""
                CREATE TABLE IF NOT EXISTS feed_counts(owner TEXT NOT NULL, feed INTEGER NOT NULL, unseen INTEGER NOT NULL DEFAULT 0,
                    unread INTEGER NOT NULL DEFAULT 0, PRIMARY KEY(owner, feed)) WITHOUT ROWID
                """)
            // The categories each owner muted (`nc.preferences`): their items are `muted` (and
            // so hidden) while the row is there.
            try db.execute("CREATE TABLE IF NOT EXISTS preferences(owner TEXT NOT NULL, category TEXT NOT NULL, PRIMARY KEY(owner, category)) WITHOUT ROWID")
            try Self.createTimedSchema(db)
            try Self.createChangesSchema(db)
            // A fresh file gets this writer's feeds; an existing one keeps what it was built
            // with (compared after, so that other definitions rebuild it).
            if try Self.meta(db, "schema_version") == nil {
                let feed = try db.statement("INSERT INTO feeds(id, name, definition) VALUES (?1, ?2, ?3)")
                for (id, definition) in feeds.enumerated() {
                    try feed.bind(1, Int64(id))
                    try feed.bind(2, definition.name)
                    try feed.bind(3, definition.definitionText)
                    try feed.run()
                }
            }
            let insert = try db.statement("INSERT OR IGNORE INTO meta(key, value) VALUES (?1, ?2)")
            try insert.bind(1, "schema_version")
            try insert.bind(2, Self.schemaVersion)
            try insert.run()
            try insert.bind(1, "last_seq")
            try insert.bind(2, Int64(0))
            try insert.run()
            try insert.bind(1, "list_modals")
            try insert.bind(2, listModals)
            try insert.run()
            try insert.bind(1, "retention_ms")
            try insert.bind(2, retentionMillis ?? 0)
            try insert.run()
            try insert.bind(1, "changes_after")
            try insert.bind(2, Int64(0))
            try insert.run()
        }
    }

    static func hasMetaTable(_ db: SQLiteDatabase) throws(SQLiteError) -> Bool {
        let statement = try db.statement("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'")
        defer { statement.reset() }
        return try statement.step()
    }

    /// The feeds an index was built with, in bit order.
    static func storedFeeds(_ db: SQLiteDatabase) throws(SQLiteError) -> [(name: String, definition: String)] {
        let statement = try db.statement("SELECT name, definition FROM feeds ORDER BY id")
        defer { statement.reset() }
        var feeds: [(name: String, definition: String)] = []
        while try statement.step() { feeds.append((statement.text(0) ?? "", statement.text(1) ?? "")) }
        return feeds
    }

    static func meta(_ db: SQLiteDatabase, _ key: String) throws(SQLiteError) -> Int64? {
        let statement = try db.statement("SELECT value FROM meta WHERE key = ?1")
        defer { statement.reset() }
        try statement.bind(1, key)
        return try statement.step() ? statement.int64(0) : nil
    }

    /// The seq of the last journal record applied (0 = none).
    package func appliedSeq() throws(InboxError) -> UInt64 {
        do { return UInt64(clamping: try Self.meta(db, "last_seq") ?? 0) } catch { throw InboxError(.sqlite(error), path: path) }
    }

    /// Which export stream a `Source=nats` index was built from: the stream's creation time
    /// (nanoseconds, `created` in its info) stored beside the applied seq, so a stream deleted
    /// and created again under the same name is told apart (`nil`: not recorded, a journal
    /// index or one from before this was kept).
    package func streamCreated() throws(InboxError) -> Int64? {
        do { return try Self.meta(db, "stream_created") } catch { throw InboxError(.sqlite(error), path: path) }
    }

    /// Records the stream this index follows (``streamCreated()``).
    package func setStreamCreated(_ nanos: Int64) throws(InboxError) {
        do {
            let statement = try db.statement("INSERT OR REPLACE INTO meta(key, value) VALUES ('stream_created', ?1)")
            try statement.bind(1, nanos)
            try statement.run()
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }

    // MARK: applying journal records

    /// Applies `records` in one transaction and advances the last seq in it. Records at or
    /// below the applied seq are skipped, so re-applying is harmless. Records that are not
    /// JSON, of unknown kinds, or naming items of another owner change nothing but the seq.
    /// Returns how many records were past the applied seq.
    @discardableResult
    package func apply(_ records: [JournalRecord]) throws(InboxError) -> Int {
        try apply(records.map(FollowedRecord.init))
    }

    /// ``apply(_:)`` of records the follower runtime decoded (``FollowedRecord``).
    @discardableResult
    package func apply(_ records: [FollowedRecord]) throws(InboxError) -> Int {
        do {
            let (applied, last) = try db.transaction { () throws(SQLiteError) -> (Int, UInt64) in
                let last = UInt64(clamping: try Self.meta(db, "last_seq") ?? 0)
                var newLast = last
                var applied = 0
                var logged = false
                for record in records where record.seq > newLast {
                    // Seqs past Int64 cannot be stored as an SQLite integer; no journal gets there.
                    guard let seq = Int64(exactly: record.seq) else { continue }
                    // What fell due before this record was journaled happened before it: the
                    // same order whenever (and however often) the records are applied.
                    try applyDue(upTo: record.ingestMillis)
                    try applyOne(record, seq: seq)
                    // In the same transaction as the change and the seq: a stream never
                    // sees one without the other.
                    if try logChange(record) { logged = true }
                    newLast = record.seq
                    applied += 1
                }
                if logged { try pruneChanges() }
                if newLast != last {
                    let update = try db.statement("UPDATE meta SET value = ?1 WHERE key = 'last_seq'")
                    try update.bind(1, Int64(clamping: newLast))
                    try update.run()
                }
                return (applied, newLast)
            }
            if applied > 0 { announce(last) }
            return applied
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }

    /// Applies one record (see ``apply(_:)``).
    @discardableResult
    package func apply(record: JournalRecord) throws(InboxError) -> Int { try apply([record]) }

    private func applyOne(_ record: FollowedRecord, seq: Int64) throws(SQLiteError) {
        switch record.body {
        case .notification(let notification):
            try insertItem(notification.members, seq: seq, ingestMillis: record.ingestMillis)
        case .event(let event):
            try applyEvent(event, clock: record.ingestMillis)
        // An erasure's effect on the index is the eraser's (it waits for the index to pass the
        // record); a tombstone names nobody; a body this version cannot read changes nothing
        // but the applied seq, so that a newer writer's records do not stop the index.
        case .erasure, .tombstone, .undecodable:
            return
        }
    }

    static func owner(user: String?, device: String?) -> String? {
        if let user, !user.isEmpty { return "u:" + user }
        if let device, !device.isEmpty { return "d:" + device }
        return nil
    }

    /// A member as text: strings as they are, numbers as their lexeme (Mindbox's `pushDate`
    /// may be either), anything else `nil`.
    private static func scalarText(_ value: JSONValue?) -> String? {
        switch value {
        case .string(let s)?: s
        case .number(let n)?: n
        default: nil
        }
    }

    /// Whether a notification record is an item, and whether the inbox lists it: `nil` for
    /// no row at all, else `listed`. The rules (docs/vendor-rules.md, "What a person sees"):
    ///
    /// - A silent push (the record's `silent`: APNs `content-available` with nothing to
    ///   display, an FCM data message without a body, Infobip's `silent`) is journaled for the
    ///   app but shows nothing to a person: no item, no count, no stream event. Except a
    ///   silent MODAL with something to show: Infobip presents modal mirror pushes "for silent
    ///   push notifications as well", so it is kept for in-app presentation, never listed.
    /// - A MODAL is presented in-app and, unlike a banner, not added to the Notification
    ///   Center: kept for `inapp`, listed only with `listModals` (`[Inbox] ListModals=yes`).
    /// - Everything else is listed.
    static func listed(_ body: JSONObject, listModals: Bool) -> Bool? {
        let silent = body["silent"]?.boolValue == true
        let modal = body["presentation"]?.stringValue == "modal"
        guard silent else { return modal ? listModals : true }
        guard modal else { return nil }
        let shows = ["title", "subtitle", "body", "locKey", "titleLocKey"].contains { key in
            body[key]?.stringValue.map { !$0.isEmpty } ?? false
        }
        return shows ? false : nil
    }

    /// A JSON array of strings as stored text (`loc-args`), `nil` for anything else.
    private static func stringArrayText(_ value: JSONValue?) -> String? {
        guard let value, case .array(let elements) = value,
              elements.allSatisfy({ if case .string = $0 { true } else { false } }) else { return nil }
        return value.serializedString()
    }

    /// The record's `customPayload` as stored JSON text: an object as it is, a string as a
    /// JSON string; anything else (an array, a number) as its JSON text in a string.
    private static func customPayloadText(_ value: JSONValue?) -> String? {
        guard let value, !value.isNull else { return nil }
        switch value {
        case .object, .string: return value.serializedString()
        default: return JSONValue.string(value.serializedString()).serializedString()
        }
    }

    /// Why the record's `media` gives the item no image to show, or `nil` when it does (or
    /// names none): `media.reason` of a skip (`media_disabled`, `insecure_scheme`, …), the
    /// failure's `media.error.code` (`timeout`, `http_status`, …), `undecodable` for a stored
    /// file the decoder could not read (no attachment on a device either, so SFMC's alt text
    /// replaced the body). Bounded: a reason from a hostile record is at most 64 bytes.
    static func unservedMedia(_ media: JSONObject?) -> String? {
        guard let media, let status = media["status"]?.stringValue else { return nil }
        let reason: String
        switch status {
        case "stored":
            guard media["decodable"] == .bool(false) else { return nil }
            reason = "undecodable"
        case "skipped": reason = media["reason"]?.stringValue ?? "skipped"
        case "failed": reason = media["error"]?["code"]?.stringValue ?? "failed"
        default: reason = status
        }
        return reason.isEmpty || reason.utf8.count > 64 ? status : reason
    }

    private func insertItem(_ body: JSONObject, seq: Int64, ingestMillis: Int64) throws(SQLiteError) {
        guard let listed = Self.listed(body, listModals: listModals) else { return }
        let user = body["user"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
        let device = body["device"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 }
        let owner = Self.owner(user: user, device: device)
        // A push of a category its owner muted is kept, hidden, until the category is unmuted.
        let muted = try owner.map { owner throws(SQLiteError) in try isMuted(owner: owner, category: body["category"]?.stringValue) } ?? false
        let media = body["media"]?.objectValue
        let custom = body["customPayload"]
        // A hostile `actionsCut` (1e999, -5, "x") is read as a bounded count or 0.
        let actionsCut = body["actionsCut"]?.numberLexeme.flatMap { Int64($0) }.map { min(max($0, 0), 1_000_000) } ?? 0
        let buttons: String = if case .array = body["buttons"] { body["buttons"]!.serializedString() } else { "[]" }
        let actions: String? = if case .array = body["actions"] { body["actions"]!.serializedString() } else { nil }
        let vendor = body["vendor"]?.stringValue ?? ""
        // The normaliser bounded both keys; a record from elsewhere is bounded here too.
        func key(_ name: String) -> String? {
            body[name]?.stringValue.flatMap { $0.isEmpty || $0.utf8.count > 255 ? nil : $0 }
        }
        let collapseId = key("collapseId")
        // The item this push replaces: the owner's live item of the same vendor and collapse
        // id (only an owned item: nothing lists the others).
        let holder = try owner.flatMap { owner throws(SQLiteError) in
            try collapseId.flatMap { id throws(SQLiteError) in try collapseHolder(owner: owner, vendor: vendor, collapseId: id, before: seq) }
        }
        // An unparseable expiry counts as none: hiding a push over a typo would lose it. One
        // already past when the push was journaled is never shown; a later one falls due
        // (InboxTimed.swift), measured on the journal's clock like every timed transition.
        let expiresAt = body["expiresAt"]?.stringValue.flatMap(ISO8601.millis)
        let ingestedAt = body["ingestedAt"]?.stringValue.flatMap(ISO8601.millis) ?? ingestMillis
        // It leaves at the earliest of its own expiry and the end of its retention.
        let retained = retentionMillis.flatMap { retention in
            let (end, overflow) = ingestedAt.addingReportingOverflow(retention)
            return overflow ? nil : end
        }
        // FCM's time to live, from ingest (the normaliser bounded it; bounded again here).
        let lived = body["ttlMillis"]?.numberLexeme.flatMap { Int64($0) }.flatMap { ttl -> Int64? in
            guard (0...(28 * 86_400_000)).contains(ttl) else { return nil }
            let (end, overflow) = ingestedAt.addingReportingOverflow(ttl)
            return overflow ? nil : end
        }
        let leaves = [expiresAt, retained, lived].compactMap { $0 }.min()
        let expired = leaves.map { $0 <= ingestMillis } ?? false
        let state = InboxItemState(listed: listed, banner: body["presentation"]?.stringValue == "banner", muted: muted, expired: expired)
        let statement = try db.statement("""
            INSERT OR IGNORE INTO items(seq, owner, user, device, vendor, id, title, subtitle, body, click_url, category,
                buttons, actions, actions_cut, presentation, inapp_open_title, inapp_dismiss_title, media_path,
                thumbnail_path, expires_at, ingested_at, push_name, push_date, hidden, listed, sound, badge,
                loc_key, loc_args, title_loc_key, title_loc_args, deeplink, web_view_url, browser_url, custom_payload, feeds, muted,
                collapse_id, thread_id, replaces, pinned, expired, media_source_url, media_reason, request_id, hash_id)
            VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23,
                ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31, ?32, ?33, ?34, ?35, ?36, ?37, ?38, ?39, ?40, ?41, ?42, ?43, ?44, ?45, ?46)
            """)
        try statement.bind(1, seq)
        try statement.bind(2, owner)
        try statement.bind(3, user)
        try statement.bind(4, device)
        try statement.bind(5, vendor)
        try statement.bind(6, body["id"]?.stringValue ?? "")
        try statement.bind(7, body["title"]?.stringValue)
        try statement.bind(8, body["subtitle"]?.stringValue)
        try statement.bind(9, body["body"]?.stringValue)
        try statement.bind(10, body["clickUrl"]?.stringValue)
        try statement.bind(11, body["category"]?.stringValue)
        try statement.bind(12, buttons)
        try statement.bind(13, actions)
        try statement.bind(14, actionsCut)
        try statement.bind(15, body["presentation"]?.stringValue)
        try statement.bind(16, body["inAppOpenTitle"]?.stringValue)
        try statement.bind(17, body["inAppDismissTitle"]?.stringValue)
        try statement.bind(18, media?["path"]?.stringValue)
        try statement.bind(19, media?["thumbnail"]?["path"]?.stringValue)
        try statement.bind(20, expiresAt)
        try statement.bind(21, ingestedAt)
        // The Mindbox guide spells these both ways; the outbox reads both too.
        try statement.bind(22, Self.scalarText(custom?.first(of: "pushName", "push_name")))
        try statement.bind(23, Self.scalarText(custom?.first(of: "pushDate", "push_date")))
        try statement.bind(24, state.hidden)
        try statement.bind(25, listed)
        try statement.bind(26, body["sound"]?.stringValue)
        // The normaliser wrote an integer; anything else (1e999, "x") reads as no badge.
        try statement.bind(27, body["badge"]?.numberLexeme.flatMap { Int64($0) })
        try statement.bind(28, body["locKey"]?.stringValue)
        try statement.bind(29, Self.stringArrayText(body["locArgs"]))
        try statement.bind(30, body["titleLocKey"]?.stringValue)
        try statement.bind(31, Self.stringArrayText(body["titleLocArgs"]))
        try statement.bind(32, body["deeplink"]?.stringValue)
        try statement.bind(33, body["webViewUrl"]?.stringValue)
        try statement.bind(34, body["browserUrl"]?.stringValue)
        try statement.bind(35, Self.customPayloadText(body["customPayload"]))
        // The item's feeds, decided now and kept: an item that arrives while a count is read
        // is in that count or not, never half. Only an owned item is in a feed (nothing lists
        // the others).
        let mask = owner == nil || feeds.isEmpty ? 0
            : InboxFeed.membership(feeds, vendor: body["vendor"]?.stringValue ?? "", category: body["category"]?.stringValue,
                                   customPayload: custom.flatMap { $0.isNull ? nil : $0 })
        try statement.bind(36, mask)
        try statement.bind(37, muted)
        try statement.bind(38, collapseId)
        try statement.bind(39, key("threadId"))
        try statement.bind(40, holder?.seq)
        // A pin is the user's choice for what the item stands for: the newer content keeps it.
        try statement.bind(41, holder?.state.pinned ?? false)
        try statement.bind(42, expired)
        let unserved = Self.unservedMedia(media)
        try statement.bind(43, media?["url"]?.stringValue.flatMap { $0.isEmpty ? nil : $0 })
        try statement.bind(44, unserved)
        try statement.bind(45, key("requestId"))
        try statement.bind(46, key("hashId"))
        try statement.run()
        guard db.changes == 1, let owner else { return }
        if let holder { try replace(holder, by: seq, owner: owner) }
        if let leaves, !expired { try schedule(.expire, seq: seq, at: leaves) }
        if mask != 0 {
            let member = try db.statement("INSERT OR IGNORE INTO item_feeds(owner, feed, seq) VALUES (?1, ?2, ?3)")
            for feed in InboxFeed.bits(mask) {
                try member.bind(1, owner)
                try member.bind(2, feed)
                try member.bind(3, seq)
                try member.run()
            }
        }
        let (unseen, unread) = state.counted
        if unseen != 0 || unread != 0 { try adjustCounters(owner: owner, unseen: unseen, unread: unread, feeds: mask) }
    }

    /// Moves `owner`'s counters (and those of the feeds in the mask `feeds`) by what an item
    /// counts as `after` less what it counted as `before`.
    func adjustCounters(owner: String, from before: InboxItemState, to after: InboxItemState, feeds: Int64) throws(SQLiteError) {
        let (u0, r0) = before.counted, (u1, r1) = after.counted
        if u0 != u1 || r0 != r1 { try adjustCounters(owner: owner, unseen: u1 - u0, unread: r1 - r0, feeds: feeds) }
    }

    /// Adds to `owner`'s counters and to those of each feed in the mask `feeds`.
    func adjustCounters(owner: String, unseen: Int64, unread: Int64, feeds: Int64) throws(SQLiteError) {
        let statement = try db.statement("""
            INSERT INTO owners(owner, unseen, unread) VALUES (?1, ?2, ?3)
            ON CONFLICT(owner) DO UPDATE SET unseen = unseen + ?2, unread = unread + ?3
            """)
        try statement.bind(1, owner)
        try statement.bind(2, unseen)
        try statement.bind(3, unread)
        try statement.run()
        guard feeds != 0 else { return }
        let feed = try db.statement("""
            INSERT INTO feed_counts(owner, feed, unseen, unread) VALUES (?1, ?2, ?3, ?4)
            ON CONFLICT(owner, feed) DO UPDATE SET unseen = unseen + ?3, unread = unread + ?4
            """)
        for bit in InboxFeed.bits(feeds) {
            try feed.bind(1, owner)
            try feed.bind(2, bit)
            try feed.bind(3, unseen)
            try feed.bind(4, unread)
            try feed.run()
        }
    }

    /// Recomputes an owner's counters from its items (after a bulk change).
    private func recount(owner: String) throws(SQLiteError) {
        try Self.recount(db, owner: owner)
    }

    /// ``recount(owner:)`` on `db` (an erasure opens the file itself).
    static func recount(_ db: SQLiteDatabase, owner: String) throws(SQLiteError) {
        let statement = try db.statement("""
            INSERT INTO owners(owner, unseen, unread)
            SELECT ?1, coalesce(sum(seen = 0), 0), coalesce(sum(read = 0), 0) FROM items WHERE owner = ?1 AND hidden = 0
            ON CONFLICT(owner) DO UPDATE SET unseen = excluded.unseen, unread = excluded.unread
            """)
        try statement.bind(1, owner)
        try statement.run()
        // The feeds' too: zero them all, then set those with visible items, so a feed whose
        // last counted item went is 0 rather than stale.
        let zero = try db.statement("UPDATE feed_counts SET unseen = 0, unread = 0 WHERE owner = ?1")
        try zero.bind(1, owner)
        try zero.run()
        let feeds = try db.statement("""
            INSERT INTO feed_counts(owner, feed, unseen, unread)
            SELECT ?1, f.feed, coalesce(sum(i.seen = 0), 0), coalesce(sum(i.read = 0), 0)
            FROM item_feeds f JOIN items i ON i.seq = f.seq WHERE f.owner = ?1 AND i.hidden = 0 GROUP BY f.feed
            ON CONFLICT(owner, feed) DO UPDATE SET unseen = excluded.unseen, unread = excluded.unread
            """)
        try feeds.bind(1, owner)
        try feeds.run()
    }

    /// An item's owner, feeds and state, as the index applies events to them.
    struct ItemRow {
        var owner: String?
        /// The item's feeds mask.
        var feeds: Int64
        var state: InboxItemState
    }

    /// Item `seq`'s row, or `nil` when there is none.
    func itemRow(_ seq: Int64) throws(SQLiteError) -> ItemRow? {
        try Self.itemRow(db, seq)
    }

    /// Item `seq`'s row in `db`, or `nil` when there is none: the one statement that reads
    /// an item's state, for one item's event and for each item of a bulk change.
    static func itemRow(_ db: SQLiteDatabase, _ seq: Int64) throws(SQLiteError) -> ItemRow? {
        let select = try db.statement("""
            SELECT owner, feeds, presentation, listed, seen, read, archived, inapp_shown, pinned, deleted, muted, acted_action, acted_text,
                snoozed_until, expired
            FROM items WHERE seq = ?1
            """)
        defer { select.reset() }
        try select.bind(1, seq)
        guard try select.step() else { return nil }
        // `acted` is true exactly when `acted_action` is set (``store(_:_:_:)`` keeps them so).
        var state = InboxItemState(listed: select.bool(3), banner: select.text(2) == "banner")
        state.seen = select.bool(4)
        state.read = select.bool(5)
        state.archived = select.bool(6)
        state.inAppShown = select.bool(7)
        state.pinned = select.bool(8)
        state.deleted = select.bool(9)
        state.muted = select.bool(10)
        state.acted = select.text(11).map { InboxItemState.Acted(action: $0, text: select.text(12)) }
        state.snoozedUntil = select.optionalInt64(13)
        state.expired = select.bool(14)
        return ItemRow(owner: select.text(0), feeds: select.int64(1), state: state)
    }

    /// Writes the state `after` of item `seq` (and `hidden`, derived) and moves the counters
    /// by the difference to `before`.
    func write(_ seq: Int64, owner: String, before: InboxItemState, after: InboxItemState, feeds: Int64) throws(SQLiteError) {
        try Self.store(db, seq, after)
        try adjustCounters(owner: owner, from: before, to: after, feeds: feeds)
    }

    /// The owner's live item with this vendor and collapse id (at most one: each arrival
    /// replaces the one before), its state and feeds.
    private func collapseHolder(owner: String, vendor: String, collapseId: String,
                                before seq: Int64) throws(SQLiteError) -> (seq: Int64, state: InboxItemState, feeds: Int64)? {
        let select = try db.statement("""
            SELECT seq FROM items INDEXED BY items_collapse
            WHERE owner = ?1 AND vendor = ?2 AND collapse_id = ?3 AND deleted = 0 AND seq < ?4 ORDER BY seq DESC LIMIT 1
            """)
        defer { select.reset() }
        try select.bind(1, owner)
        try select.bind(2, vendor)
        try select.bind(3, collapseId)
        try select.bind(4, seq)
        guard try select.step() else { return nil }
        let holder = select.int64(0)
        select.reset()
        guard let row = try itemRow(holder) else { return nil }
        return (holder, row.state, row.feeds)
    }

    /// Writes item `seq`'s flags as `state` has them, and `hidden` as it derives it.
    private static func store(_ db: SQLiteDatabase, _ seq: Int64, _ state: InboxItemState) throws(SQLiteError) {
        let update = try db.statement("""
            UPDATE items SET seen = ?2, read = ?3, archived = ?4, acted = ?5, inapp_shown = ?6, hidden = ?7, pinned = ?8,
                deleted = ?9, acted_action = ?10, acted_text = ?11, snoozed_until = ?12, expired = ?13, muted = ?14 WHERE seq = ?1
            """)
        try update.bind(1, seq)
        try update.bind(2, state.seen)
        try update.bind(3, state.read)
        try update.bind(4, state.archived)
        try update.bind(5, state.acted != nil)
        try update.bind(6, state.inAppShown)
        try update.bind(7, state.hidden)
        try update.bind(8, state.pinned)
        try update.bind(9, state.deleted)
        try update.bind(10, state.acted?.action)
        try update.bind(11, state.acted?.text)
        try update.bind(12, state.snoozedUntil)
        try update.bind(13, state.expired)
        try update.bind(14, state.muted)
        try update.run()
    }

    /// A bulk change (archive what is read, mute or unmute a category) as `event` applied to
    /// each item whose seq `select` returns, through the same transitions as one item's
    /// event, so that the index spells none of the rules in SQL. The caller recounts.
    static func applyToEach(_ db: SQLiteDatabase, _ select: SQLiteStatement, _ event: InboxItemEvent) throws(SQLiteError) {
        var picked: [Int64] = []
        while try select.step() { picked.append(select.int64(0)) }
        select.reset()
        for seq in picked {
            guard let before = try itemRow(db, seq)?.state else { continue }
            let after = before.applying(event)
            if after != before { try store(db, seq, after) }
        }
    }

    /// Retires `holder`, replaced by the item `seq` (already inserted and counted): a
    /// tombstone like a delete (later events on it change nothing) that names its successor,
    /// and its counts taken back in the same transaction.
    private func replace(_ holder: (seq: Int64, state: InboxItemState, feeds: Int64), by seq: Int64, owner: String) throws(SQLiteError) {
        let after = holder.state.applying(.delete)
        let update = try db.statement("UPDATE items SET deleted = ?3, hidden = ?4, replaced_by = ?2 WHERE seq = ?1")
        try update.bind(1, holder.seq)
        try update.bind(2, seq)
        try update.bind(3, after.deleted)
        try update.bind(4, after.hidden)
        try update.run()
        try adjustCounters(owner: owner, from: holder.state, to: after, feeds: holder.feeds)
    }

    /// Whether `owner` muted `category` (`nil`: an item without a category, never muted).
    private func isMuted(owner: String, category: String?) throws(SQLiteError) -> Bool {
        guard let category else { return false }
        let statement = try db.statement("SELECT 1 FROM preferences WHERE owner = ?1 AND category = ?2")
        defer { statement.reset() }
        try statement.bind(1, owner)
        try statement.bind(2, category)
        return try statement.step()
    }

    /// Mutes or unmutes `category` for `owner`: the preference row and its items' `muted`
    /// and `hidden` (recomputed from the other flags by ``InboxItemState``'s rule on unmute).
    /// Returns whether anything changed (the caller then recounts).
    private func setMuted(owner: String, category: String, _ muted: Bool) throws(SQLiteError) -> Bool {
        guard try isMuted(owner: owner, category: category) != muted else { return false }
        let row = try muted ? db.statement("INSERT INTO preferences(owner, category) VALUES (?1, ?2)")
            : db.statement("DELETE FROM preferences WHERE owner = ?1 AND category = ?2")
        try row.bind(1, owner)
        try row.bind(2, category)
        try row.run()
        try Self.setMuted(db, owner: owner, category: category, muted)
        return true
    }

    /// Unmutes `owner`'s muted items of `category` (`nil`: of every category). The caller
    /// recounts. On `db`, as an erasure opens the file itself.
    static func unmute(_ db: SQLiteDatabase, owner: String, category: String?) throws(SQLiteError) {
        try setMuted(db, owner: owner, category: category, false)
    }

    /// Mutes or unmutes `owner`'s items of `category` (`nil`: of every category) that are not
    /// so yet.
    private static func setMuted(_ db: SQLiteDatabase, owner: String, category: String?, _ muted: Bool) throws(SQLiteError) {
        let select = try category == nil
            ? db.statement("SELECT seq FROM items WHERE owner = ?1 AND muted = ?3")
            : db.statement("SELECT seq FROM items WHERE owner = ?1 AND category = ?2 AND muted = ?3")
        try select.bind(1, owner)
        if let category { try select.bind(2, category) }
        try select.bind(3, !muted)
        try applyToEach(db, select, muted ? .mute : .unmute)
    }

    private func applyEvent(_ event: EventBody, clock: Int64) throws(SQLiteError) {
        let body = event.members
        guard let owner = Self.owner(user: body["user"]?.stringValue, device: body["device"]?.stringValue) else { return }
        // A bulk change limited to a feed names it; the feed as this index defines it now
        // decides (a name it does not know changes nothing).
        var feed: Int64? = nil
        if let name = body["feed"]?.stringValue {
            guard let bit = feeds.firstIndex(where: { $0.name == name }) else { return }
            feed = Int64(bit)
        }
        switch event.type {
        // Bulk changes are the inbox's: they leave what it does not list (a MODAL waiting to
        // be presented in-app, a muted category's items, which come back as they were) alone.
        case .readAll:
            let statement = try feed == nil
                ? db.statement("UPDATE items SET read = 1, seen = 1 WHERE owner = ?1 AND read = 0 AND listed = 1 AND deleted = 0 AND muted = 0")
                : db.statement("""
                    UPDATE items SET read = 1, seen = 1 WHERE seq IN (SELECT seq FROM item_feeds WHERE owner = ?1 AND feed = ?2)
                        AND owner = ?1 AND read = 0 AND listed = 1 AND deleted = 0 AND muted = 0
                    """)
            try statement.bind(1, owner)
            if let feed { try statement.bind(2, feed) }
            try statement.run()
            try recount(owner: owner)
        case .archiveRead:
            let select = try feed == nil
                ? db.statement("SELECT seq FROM items WHERE owner = ?1 AND read = 1 AND archived = 0 AND listed = 1 AND deleted = 0 AND muted = 0")
                : db.statement("""
                    SELECT seq FROM items WHERE seq IN (SELECT seq FROM item_feeds WHERE owner = ?1 AND feed = ?2)
                        AND owner = ?1 AND read = 1 AND archived = 0 AND listed = 1 AND deleted = 0 AND muted = 0
                    """)
            try select.bind(1, owner)
            if let feed { try select.bind(2, feed) }
            try Self.applyToEach(db, select, .archive)
            try recount(owner: owner)
        case .inAppOptOut:
            guard let enabled = body["enabled"]?.boolValue else { return }
            let statement = try db.statement("""
                INSERT INTO owners(owner, optout) VALUES (?1, ?2) ON CONFLICT(owner) DO UPDATE SET optout = ?2
                """)
            try statement.bind(1, owner)
            try statement.bind(2, !enabled)
            try statement.run()
        case .preferences:
            guard case .object(let members)? = body["muted"] else { return }
            var changed = false
            // In name order, so that a rebuild applies them the same way.
            for (category, value) in members.sorted(by: { $0.key < $1.key }) {
                guard let muted = value.boolValue, !category.isEmpty else { continue }
                changed = try setMuted(owner: owner, category: category, muted) || changed
            }
            if changed { try recount(owner: owner) }
        case .seen, .read, .open, .archive, .action, .actionRevert, .inAppShown, .unread, .unarchive, .delete, .pin, .unpin,
             .snooze, .unsnooze:
            // Only a plain decimal seq names an item: 1e3, -1, 1.5 and 2^64 are ignored.
            guard let lexeme = body["item"]?.numberLexeme, lexeme.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                  let item = Int64(lexeme), item > 0,
                  let change = InboxItemEvent(event.type, action: body["action"]?.stringValue, text: body["text"]?.stringValue,
                                              until: body["until"]?.stringValue.flatMap(ISO8601.millis), at: clock) else { return }
            try updateItem(item, owner: owner, change)
        case .opened:
            return  // the Notification Center screen: no inbox state
        }
    }

    /// Applies `event` to item `seq` when `owner` owns it (never across inboxes: the event's
    /// user or device must own the item); the rules are ``InboxItemState/applying(_:)``'s.
    private func updateItem(_ seq: Int64, owner: String, _ event: InboxItemEvent) throws(SQLiteError) {
        guard let row = try itemRow(seq), let holder = row.owner, IdBytes.equal(holder, owner) else { return }
        let after = row.state.applying(event)
        guard after != row.state else { return }
        try write(seq, owner: owner, before: row.state, after: after, feeds: row.feeds)
        // A snooze's end falls due at its time (InboxTimed.swift); an unsnooze takes it back.
        if after.snoozedUntil != row.state.snoozedUntil {
            if let until = after.snoozedUntil { try schedule(.unsnooze, seq: seq, at: until) } else { try unschedule(.unsnooze, seq: seq) }
        }
    }

    // MARK: catching up

    /// Applies every committed journal record after the applied seq, in batches of
    /// `batchSize` records (one transaction each); returns how many were applied.
    @discardableResult
    package func catchUp(journalDirectory: String, batchSize: Int = 2000, shouldStop: () -> Bool = { false }) throws(InboxError) -> Int {
        let reader: FollowedReader
        do { reader = try FollowedReader(directory: journalDirectory, fromSeq: try appliedSeq() + 1) } catch let error as JournalError {
            throw InboxError(.journal(error), path: path)
        } catch let error as InboxError {
            throw error
        } catch {
            throw InboxError(.io(SystemError(call: "open", errno: EIO, subject: journalDirectory)), path: path)
        }
        return try catchUp(reader: reader, batchSize: batchSize, shouldStop: shouldStop)
    }

    /// Like ``catchUp(journalDirectory:batchSize:shouldStop:)`` with a reader the caller keeps
    /// between calls (positioned at the applied seq + 1), so a follower does not re-read the
    /// newest segment on every poll.
    @discardableResult
    package func catchUp(reader: FollowedReader, batchSize: Int, shouldStop: () -> Bool = { false }) throws(InboxError) -> Int {
        var total = 0
        var batch: [FollowedRecord] = []
        batch.reserveCapacity(max(1, batchSize))
        while !shouldStop() {
            batch.removeAll(keepingCapacity: true)
            do {
                while batch.count < max(1, batchSize), let record = try reader.next() { batch.append(record) }
            } catch {
                throw InboxError(.journal(error), path: path)
            }
            if batch.isEmpty { break }
            total += try apply(batch)
        }
        return total
    }

    // MARK: dump

    /// Every row of every table in a canonical text form, for comparing two indexes
    /// (`nc reindex` equality).
    package func canonicalDump() throws(InboxError) -> [String] {
        var lines: [String] = []
        do {
            let meta = try db.statement("SELECT key, value FROM meta ORDER BY key")
            while try meta.step() { lines.append("meta|\(meta.text(0) ?? "")|\(meta.int64(1))") }
            meta.reset()
            let owners = try db.statement("SELECT owner, unseen, unread, optout FROM owners ORDER BY owner")
            while try owners.step() {
                lines.append("owner|\(owners.text(0) ?? "")|\(owners.int64(1))|\(owners.int64(2))|\(owners.int64(3))")
            }
            owners.reset()
            let feeds = try db.statement("SELECT id, name, definition FROM feeds ORDER BY id")
            while try feeds.step() { lines.append("feed|\(feeds.int64(0))|\(feeds.text(1) ?? "")|\(feeds.text(2) ?? "")") }
            feeds.reset()
            let counts = try db.statement("SELECT owner, feed, unseen, unread FROM feed_counts ORDER BY owner, feed")
            while try counts.step() {
                lines.append("feed-count|\(counts.text(0) ?? "")|\(counts.int64(1))|\(counts.int64(2))|\(counts.int64(3))")
            }
            counts.reset()
            let preferences = try db.statement("SELECT owner, category FROM preferences ORDER BY owner, category")
            while try preferences.step() { lines.append("muted|\(preferences.text(0) ?? "")|\(preferences.text(1) ?? "")") }
            preferences.reset()
            let members = try db.statement("SELECT owner, feed, seq FROM item_feeds ORDER BY owner, feed, seq")
            while try members.step() { lines.append("feed-item|\(members.text(0) ?? "")|\(members.int64(1))|\(members.int64(2))") }
            members.reset()
            let items = try db.statement("SELECT * FROM items ORDER BY seq")
            while try items.step() {
                var fields: [String] = ["item"]
                for column in Int32(0)..<Int32(Self.columnCount) {
                    fields.append(items.isNull(column) ? "∅" : (items.text(column) ?? ""))
                }
                lines.append(fields.joined(separator: "|"))
            }
            items.reset()
            lines += try timedDump()
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
        return lines
    }

    // MARK: rebuild and replacement

    /// Rebuilds the index at `path` from the journal alone, whatever the file there holds
    /// (missing, damaged, another schema): into a temp file beside it, renamed over it with
    /// ``replace(path:with:appliedSeq:)``. Readers and the follower notice the new inode and reopen
    /// (``InboxIndexHandle``). Returns the rebuilt index's applied seq and item count.
    /// What fell due by `now` (expiries, snoozes' ends) is applied as the live index did.
    package static func rebuild(path: String, journalDirectory: String, listModals: Bool = false,
                                feeds: [InboxFeed] = [], retention: Duration? = nil,
                                now: Int64 = Posix.wallClockMillis()) throws(InboxError) -> (appliedSeq: UInt64, items: Int64) {
        try rebuild(path: path, listModals: listModals, feeds: feeds, retention: retention) { fresh throws(InboxError) in
            try fresh.catchUp(journalDirectory: journalDirectory, batchSize: 10_000)
            try fresh.applyDue(now: now)
        }
    }

    /// Builds a fresh index into a temp file beside `path` with `fill` and, when it returns,
    /// puts it at `path` (``replace(path:with:appliedSeq:)``); a `fill` that throws leaves
    /// `path` as it was. For the journal's rebuild and the stream's (PushInboxJetStream).
    package static func rebuild(path: String, listModals: Bool, feeds: [InboxFeed] = [], retention: Duration? = nil,
                                fill: (InboxIndex) throws(InboxError) -> Void) throws(InboxError) -> (appliedSeq: UInt64, items: Int64) {
        try buildAside(path: path, tag: "rebuild", listModals: listModals, feeds: feeds, retention: retention) { fresh in
            try fill(fresh)
            let result = (appliedSeq: try fresh.appliedSeq(), items: try fresh.itemCount())
            // One self-contained file: no WAL of its own to carry along (and no other
            // connection, which journal_mode=DELETE needs).
            fresh.db.stopCheckpointingInBackground()
            try fresh.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            _ = try fresh.db.pragmaText("PRAGMA journal_mode=DELETE")
            return result
        }
    }

    /// Makes a fresh index (this schema, `listModals`) in a temp file beside `path`, lets
    /// `finish` fill it, then puts it at `path` with ``replace(path:with:appliedSeq:)``. The
    /// temp file goes whatever happens; when `finish` throws, `path` stays as it was.
    private static func buildAside(path: String, tag: String, listModals: Bool, feeds: [InboxFeed], retention: Duration?,
                                   _ finish: (InboxIndex) throws -> (appliedSeq: UInt64, items: Int64)) throws(InboxError) -> (appliedSeq: UInt64, items: Int64) {
        let temp = path + ".\(tag)-\(getpid())"
        for suffix in ["", "-wal", "-shm"] { unlink(temp + suffix) }
        defer { for suffix in ["", "-wal", "-shm"] { unlink(temp + suffix) } }
        let result: (appliedSeq: UInt64, items: Int64)
        do {
            result = try finish(try InboxIndex(path: temp, announce: false, listModals: listModals, feeds: feeds, retention: retention))
        } catch let error as InboxError {
            throw error
        } catch let error as SQLiteError {
            throw InboxError(.sqlite(error), path: path)
        } catch {
            throw InboxError(.io(SystemError(call: tag, errno: EIO, subject: path)), path: path)
        }
        try replace(path: path, with: temp, appliedSeq: result.appliedSeq)
        return result
    }

    /// Makes an index that applied nothing yet start after `seq`: the records up to it are
    /// taken as accounted for (a rebuild from a stream whose first records are gone). Does
    /// nothing when the index applied records already.
    package func startAfter(_ seq: UInt64) throws(InboxError) {
        do {
            try db.transaction { () throws(SQLiteError) in
                guard UInt64(clamping: try Self.meta(db, "last_seq") ?? 0) == 0 else { return }
                let update = try db.statement("UPDATE meta SET value = ?1 WHERE key = 'last_seq'")
                try update.bind(1, Int64(clamping: seq))
                try update.run()
                // The changes up to it are not known either.
                try setChangesAfter(Int64(clamping: seq))
            }
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }

    /// Puts a fresh, empty index (this schema, `listModals`) at `path` in place of whatever
    /// is there, through a temp file and ``replace(path:with:appliedSeq:)``: for an index of
    /// another schema or listing rule, which a follower then rebuilds from the journal in
    /// batches. Nothing of the old file is kept: it was sound, only built by other rules.
    package static func replaceWithEmpty(path: String, listModals: Bool, feeds: [InboxFeed] = [],
                                         retention: Duration? = nil) throws(InboxError) {
        _ = try buildAside(path: path, tag: "fresh", listModals: listModals, feeds: feeds, retention: retention) { fresh in
            fresh.db.stopCheckpointingInBackground()
            _ = try fresh.db.pragmaText("PRAGMA journal_mode=DELETE")
            return (0, 0)
        }
    }

    /// Puts the database file `temp` (not in WAL mode) at `path`. The old `-wal` and `-shm`
    /// go first: SQLite opens a `-wal` it finds beside a database whatever mode the file is
    /// in, so the new file must never meet the old one's. Connections to the old file keep
    /// their open descriptors (and, with `SQLITE_FCNTL_PERSIST_WAL`, never delete by name).
    package static func replace(path: String, with temp: String, appliedSeq: UInt64) throws(InboxError) {
        for suffix in ["-wal", "-shm"] where unlink(path + suffix) != 0 && errno != ENOENT {
            throw InboxError(.io(SystemError(call: "unlink", errno: errno, subject: path + suffix)), path: path)
        }
        do {
            _ = try Posix.call("rename", path) { rename(temp, path) }
            try Posix.syncDirectory(directory(of: path))
        } catch {
            throw InboxError(.io(error), path: path)
        }
        // Wake readers of `APPLIED` (pushspool-inbox) too; the rename itself is also seen.
        writeAppliedMark(indexPath: path, seq: appliedSeq)
    }

    /// How many moved-aside damaged indexes are kept (oldest removed first).
    package static let keptCorruptCopies = 3

    /// Moves a damaged index and its `-wal`/`-shm` aside as `<path>.corrupt-<UTC time>…`,
    /// kept for a post-mortem (the newest ``keptCorruptCopies`` sets), so a fresh index can be
    /// created at `path`. Returns the new name of the database file.
    package static func moveAside(path: String, now: Int64 = Posix.wallClockMillis()) throws(InboxError) -> String {
        let stamp = Timestamp.iso8601(millis: now).filter { $0.isNumber || $0 == "T" || $0 == "Z" }
        var target = path + ".corrupt-" + stamp
        var n = 1
        while access(target, F_OK) == 0 {
            n += 1
            target = path + ".corrupt-" + stamp + "-\(n)"
        }
        do {
            // The -wal and -shm first, for the same reason as in replace(path:with:appliedSeq:).
            for suffix in ["-wal", "-shm", ""] {
                do {
                    _ = try Posix.call("rename", path + suffix) { rename(path + suffix, target + suffix) }
                } catch where error.errno == ENOENT {
                    continue
                }
            }
            try Posix.syncDirectory(directory(of: path))
        } catch {
            throw InboxError(.io(error), path: path)
        }
        pruneCorruptCopies(path: path)
        return target
    }

    /// Removes all but the newest ``keptCorruptCopies`` moved-aside sets.
    static func pruneCorruptCopies(path: String) {
        let directory = directory(of: path)
        let base = String(path.split(separator: "/").last ?? "") + ".corrupt-"
        guard let names = try? RealFileSystem().listDirectory(directory) else { return }
        let stems = Set(names.filter { $0.hasPrefix(base) }.map { name -> String in
            var stem = name
            for suffix in ["-wal", "-shm"] where stem.hasSuffix(suffix) { stem.removeLast(suffix.count) }
            return stem
        }).sorted()
        for stem in stems.dropLast(keptCorruptCopies) {
            for suffix in ["", "-wal", "-shm"] { unlink(directory + "/" + stem + suffix) }
        }
    }

    package func itemCount() throws(InboxError) -> Int64 {
        do {
            let statement = try db.statement("SELECT count(*) FROM items")
            defer { statement.reset() }
            return try statement.step() ? statement.int64(0) : 0
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }
}
