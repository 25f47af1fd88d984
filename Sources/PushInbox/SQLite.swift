internal import CSQLite
import PushSystem

/// A failed SQLite call. `Sendable` value carrying the (extended) result code and SQLite's
/// message, so a caller can tell `SQLITE_BUSY` from `SQLITE_CORRUPT` without parsing text.
package struct SQLiteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The extended result code (`sqlite3_extended_errcode`); `primaryCode` masks it.
    package var code: Int32
    /// What was being done: `open`, `prepare`, `step`, `bind`, `exec`, `backup`.
    package var operation: String
    package var message: String
    /// The database file.
    package var path: String

    package init(code: Int32, operation: String, message: String, path: String) {
        self.code = code
        self.operation = operation
        self.message = message
        self.path = path
    }

    package var primaryCode: Int32 { code & 0xff }
    /// `SQLITE_BUSY`/`SQLITE_LOCKED`: another connection held the lock past `busy_timeout`.
    package var isBusy: Bool { primaryCode == SQLITE_BUSY || primaryCode == SQLITE_LOCKED }
    /// The file is not there (read-only open of a missing index).
    package var isCantOpen: Bool { primaryCode == SQLITE_CANTOPEN }
    /// The file is damaged (`SQLITE_CORRUPT`) or not an SQLite database at all (`SQLITE_NOTADB`).
    package var isCorrupt: Bool { primaryCode == SQLITE_CORRUPT || primaryCode == SQLITE_NOTADB }

    /// Stable, without data: for metrics labels and journald fields.
    package var shortDescription: String { "sqlite-\(operation): \(String(cString: sqlite3_errstr(code)))" }

    package var description: String {
        "sqlite \(operation) on \(path) failed: \(message) (code \(code))"
    }
}

/// One SQLite connection. Not `Sendable`: a connection is used from one thread at a time
/// (owners that share it lock around it). Every statement with data binds parameters; SQL
/// text is always a literal of this module.
package final class SQLiteDatabase {
    package enum Mode: Sendable {
        case readOnly
        /// Read-write, creating the file when missing.
        case readWriteCreate
        /// Read-write, never creating: a file that is gone stays gone.
        case readWrite
    }

    package let path: String
    private let handle: OpaquePointer
    private var statements: [String: SQLiteStatement] = [:]
    /// Set by ``checkpointInBackground()``; stopped after the connection is closed.
    package private(set) var backgroundCheckpointer: WALCheckpointer?

    /// Opens `path` (wraps `sqlite3_open_v2`) with a `busy_timeout`, so a writer waiting for
    /// another's lock retries inside SQLite rather than failing with `SQLITE_BUSY` at once.
    package init(path: String, mode: Mode, busyTimeout: Duration = .seconds(5)) throws(SQLiteError) {
        self.path = path
        var db: OpaquePointer?
        let flags = switch mode {
        case .readOnly: SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX
        case .readWriteCreate: SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        case .readWrite: SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX
        }
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard let db else {
            throw SQLiteError(code: rc, operation: "open", message: String(cString: sqlite3_errstr(rc)), path: path)
        }
        guard rc == SQLITE_OK else {
            let error = SQLiteError(code: sqlite3_extended_errcode(db), operation: "open",
                                    message: String(cString: sqlite3_errmsg(db)), path: path)
            sqlite3_close_v2(db)
            throw error
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
        let millis = Int32(clamping: busyTimeout.clampedMilliseconds)
        sqlite3_busy_timeout(db, millis)
        // A replaced index is renamed over this path while connections to the old file are
        // still open. The last connection to close a WAL database deletes `<path>-wal` and
        // `<path>-shm` *by name*, which would then be the new file's: keep them (wraps
        // sqlite3_file_control(SQLITE_FCNTL_PERSIST_WAL)).
        var persist: Int32 = 1
        sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist)
    }

    deinit {
        statements.removeAll()
        sqlite3_close_v2(handle)
        backgroundCheckpointer?.stop()
    }

    /// Stops the ``WALCheckpointer`` and closes its connection, before a step that needs this
    /// connection alone on the file (`PRAGMA journal_mode=DELETE`); the caller checkpoints
    /// from then on.
    package func stopCheckpointingInBackground() {
        guard let checkpointer = backgroundCheckpointer else { return }
        sqlite3_wal_hook(handle, nil, nil)
        checkpointer.stop()
        backgroundCheckpointer = nil
    }

    /// Hands this writer's WAL checkpoints to a ``WALCheckpointer``: a WAL hook (which
    /// replaces SQLite's automatic checkpoint, wraps sqlite3_wal_hook(3)) wakes it once per
    /// threshold of pages committed, and the commit returns at once; only a WAL the thread
    /// could not restart (``WALCheckpointer/writerPages``) is checkpointed in the commit.
    package func checkpointInBackground() throws(SystemError) {
        guard backgroundCheckpointer == nil else { return }
        let checkpointer = try WALCheckpointer(path: path)
        backgroundCheckpointer = checkpointer
        // Unretained: this connection holds the checkpointer until after it is closed, and
        // SQLite calls the hook only inside a commit on it.
        sqlite3_wal_hook(handle, { context, db, _, pages in
            guard let context, Unmanaged<WALCheckpointer>.fromOpaque(context).takeUnretainedValue().committed(walPages: pages)
            else { return SQLITE_OK }
            // Busy (the thread's checkpoint under way): the next commit tries again. The
            // commit itself has succeeded whatever the checkpoint says.
            _ = sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            return SQLITE_OK
        }, Unmanaged.passUnretained(checkpointer).toOpaque())
    }

    func error(_ operation: String) -> SQLiteError {
        SQLiteError(code: sqlite3_extended_errcode(handle), operation: operation,
                    message: String(cString: sqlite3_errmsg(handle)), path: path)
    }

    /// Runs literal SQL without parameters (DDL, pragmas, `BEGIN`); wraps `sqlite3_exec`.
    package func execute(_ sql: StaticString) throws(SQLiteError) {
        let rc = sqlite3_exec(handle, sql.description, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error("exec") }
    }

    /// A cached prepared statement for literal `sql`, reset and with its bindings cleared.
    package func statement(_ sql: StaticString) throws(SQLiteError) -> SQLiteStatement {
        let text = sql.description
        if let cached = statements[text] {
            cached.reset()
            return cached
        }
        var raw: OpaquePointer?
        guard sqlite3_prepare_v3(handle, text, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &raw, nil) == SQLITE_OK, let raw else {
            throw error("prepare")
        }
        let statement = SQLiteStatement(raw, database: self)
        statements[text] = statement
        return statement
    }

    /// What `EXPLAIN QUERY PLAN` says of `sql`: the `detail` of each step, such as
    /// `SEARCH items USING INDEX items_owner (owner=? AND seq<?)`. For tests that pin a
    /// statement to an index; the statement is prepared apart from the cache and not run.
    package func queryPlan(_ sql: StaticString) throws(SQLiteError) -> [String] {
        var raw: OpaquePointer?
        guard sqlite3_prepare_v2(handle, "EXPLAIN QUERY PLAN " + sql.description, -1, &raw, nil) == SQLITE_OK, let raw else {
            throw error("prepare")
        }
        let statement = SQLiteStatement(raw, database: self)
        var details: [String] = []
        while try statement.step() { details.append(statement.text(3) ?? "") }
        return details
    }

    /// Rows changed by the last INSERT/UPDATE/DELETE (`sqlite3_changes64`).
    package var changes: Int64 { sqlite3_changes64(handle) }

    /// Runs `body` inside `BEGIN IMMEDIATE … COMMIT` (the write lock taken up front, so a
    /// busy database fails at `BEGIN`, inside busy_timeout, not halfway); rolls back on error.
    package func transaction<T>(_ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
    }

    /// How ``checkpoint(_:)`` copies the WAL (sqlite3_wal_checkpoint_v2(3)'s modes).
    package enum CheckpointMode: Sendable {
        /// Copies what it can without waiting for the writer or the readers.
        case passive
        /// Waits (within the busy timeout) for the writer and the readers, copies everything and
        /// leaves the WAL to be restarted by the next commit.
        case restart
    }

    /// Checkpoints the WAL; returns its length in frames and how many of them are now copied
    /// into the database file. Wraps sqlite3_wal_checkpoint_v2(3); `SQLITE_BUSY` throws.
    package func checkpoint(_ mode: CheckpointMode) throws(SQLiteError) -> (log: Int32, checkpointed: Int32) {
        var log: Int32 = 0
        var checkpointed: Int32 = 0
        let rc = sqlite3_wal_checkpoint_v2(handle, "main", mode == .passive ? SQLITE_CHECKPOINT_PASSIVE : SQLITE_CHECKPOINT_RESTART,
                                           &log, &checkpointed)
        guard rc == SQLITE_OK else { throw error("checkpoint") }
        return (max(0, log), max(0, checkpointed))
    }

    /// A single text value of a pragma query such as `PRAGMA journal_mode=WAL`.
    package func pragmaText(_ sql: StaticString) throws(SQLiteError) -> String? {
        let statement = try statement(sql)
        defer { statement.reset() }
        guard try statement.step() else { return nil }
        return statement.text(0)
    }
}

/// A prepared statement of one ``SQLiteDatabase``. Not `Sendable`. Parameters are 1-based
/// like SQLite's; columns 0-based.
package final class SQLiteStatement {
    private let raw: OpaquePointer
    private unowned let database: SQLiteDatabase

    fileprivate init(_ raw: OpaquePointer, database: SQLiteDatabase) {
        self.raw = raw
        self.database = database
    }

    deinit { sqlite3_finalize(raw) }

    /// Resets and clears bindings; the statement can be bound and stepped again.
    package func reset() {
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
    }

    /// The largest parameter index the statement names (`sqlite3_bind_parameter_count`).
    package var parameterCount: Int32 { sqlite3_bind_parameter_count(raw) }

    package func bind(_ index: Int32, _ value: Int64?) throws(SQLiteError) {
        let rc = value.map { sqlite3_bind_int64(raw, index, $0) } ?? sqlite3_bind_null(raw, index)
        guard rc == SQLITE_OK else { throw database.error("bind") }
    }

    package func bind(_ index: Int32, _ value: String?) throws(SQLiteError) {
        guard let value else {
            guard sqlite3_bind_null(raw, index) == SQLITE_OK else { throw database.error("bind") }
            return
        }
        var text = value
        let rc = text.withUTF8 { buffer in
            buffer.withMemoryRebound(to: CChar.self) { chars in
                guard let base = chars.baseAddress else { return csqlite_bind_text(raw, index, "", 0) }
                return csqlite_bind_text(raw, index, base, Int32(clamping: chars.count))
            }
        }
        guard rc == SQLITE_OK else { throw database.error("bind") }
    }

    package func bind(_ index: Int32, _ value: Bool) throws(SQLiteError) {
        try bind(index, Int64(value ? 1 : 0))
    }

    /// Steps once: `true` with a row ready, `false` when done.
    package func step() throws(SQLiteError) -> Bool {
        switch sqlite3_step(raw) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = database.error("step")
            sqlite3_reset(raw)
            throw error
        }
    }

    /// Steps to completion (an INSERT/UPDATE/DELETE), then resets.
    package func run() throws(SQLiteError) {
        defer { sqlite3_reset(raw) }
        while try step() {}
    }

    package func isNull(_ column: Int32) -> Bool { sqlite3_column_type(raw, column) == SQLITE_NULL }
    package func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(raw, column) }
    package func optionalInt64(_ column: Int32) -> Int64? { isNull(column) ? nil : int64(column) }
    package func bool(_ column: Int32) -> Bool { int64(column) != 0 }

    /// The column as UTF-8 text, `nil` for NULL.
    package func text(_ column: Int32) -> String? {
        guard let pointer = sqlite3_column_text(raw, column) else { return nil }
        let count = Int(sqlite3_column_bytes(raw, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }
}
