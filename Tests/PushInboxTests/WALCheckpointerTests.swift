@preconcurrency import Glibc
import Foundation
import PushInbox
import PushSystem
import Testing
import TestSupport

/// The index writer's WAL checkpoints run on a thread of their own, not inside the commit
/// that crosses the threshold (which held the inbox follower, and the pushes behind it, for
/// as long as the disk took to sync the database file).
@Suite struct WALCheckpointerTests {
    static func size(_ path: String) -> Int {
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_size) : -1
    }

    static func waitUntil(seconds: Double = 20, _ condition: () -> Bool) -> Bool {
        eventually(within: seconds, condition)
    }

    /// Commits about 1,200 pages (4 KiB each) into the WAL of `db`.
    static func fill(_ db: SQLiteDatabase) throws {
        try db.execute("BEGIN")
        let insert = try db.statement("INSERT INTO blobs (data) VALUES (zeroblob(3900))")
        for _ in 0..<1_200 { try insert.run() }
        try db.execute("COMMIT")
    }

    @Test func aCommitPastTheThresholdReturnsBeforeTheCheckpointWhichFollowsOnItsThread() throws {
        let temp = TempDir()
        let path = temp.appending("index.sqlite")
        let db = try SQLiteDatabase(path: path, mode: .readWriteCreate)
        _ = try db.pragmaText("PRAGMA journal_mode=WAL")
        try db.execute("CREATE TABLE blobs (data BLOB)")
        try db.checkpointInBackground()
        let checkpointer = try #require(db.backgroundCheckpointer)
        let before = Self.size(path)
        // Held: no checkpoint can run while the commit happens and just after it.
        try checkpointer.gate.withLock { _ throws in
            try Self.fill(db)
            #expect(Self.size(path) == before, "the commit itself copied pages into the database file")
            #expect(Self.size(path + "-wal") > 1_000 * 4096)
        }
        #expect(Self.waitUntil { checkpointer.checkpoints.withLock { $0 } >= 1 }, "no checkpoint followed")
        #expect(Self.waitUntil { Self.size(path) > 1_000 * 4096 }, "the checkpoint did not copy the pages")
        // Below the threshold nothing wakes it.
        let runs = checkpointer.checkpoints.withLock { $0 }
        try db.execute("INSERT INTO blobs (data) VALUES (x'00')")
        // The window under test: the wake pipe coalesces, so a later checkpoint cannot prove this one absent.
        usleep(200_000) // why: see above: no later event can prove the absence
        #expect(checkpointer.checkpoints.withLock { $0 } == runs)
    }

    /// The index's writer uses it; a read-only open does not.
    @Test func theIndexWriterCheckpointsInTheBackground() throws {
        let temp = TempDir()
        let path = temp.appending("inbox/index.sqlite")
        let writer = try InboxIndex(path: path)
        #expect(writer.checkpointsInBackground)
        let reader = try InboxIndex(path: path, readOnly: true)
        #expect(!reader.checkpointsInBackground)
    }

    /// A file deleted under it is not created again by its connection.
    @Test func aDeletedFileIsNotBroughtBackEmpty() throws {
        let temp = TempDir()
        let path = temp.appending("index.sqlite")
        let db = try SQLiteDatabase(path: path, mode: .readWriteCreate)
        _ = try db.pragmaText("PRAGMA journal_mode=WAL")
        try db.execute("CREATE TABLE blobs (data BLOB)")
        try db.checkpointInBackground()
        let checkpointer = try #require(db.backgroundCheckpointer)
        try checkpointer.gate.withLock { _ throws in
            try Self.fill(db)
            unlink(path)
        }
        #expect(Self.waitUntil { checkpointer.checkpoints.withLock { $0 } >= 1 })
        #expect(access(path, F_OK) != 0)
    }
}
