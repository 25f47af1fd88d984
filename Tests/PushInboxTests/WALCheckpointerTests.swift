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

    /// A WAL database at `path` with a `blobs` table, checkpointed in the background.
    static func blobsDatabase(at path: String) throws -> (SQLiteDatabase, WALCheckpointer) {
        let db = try SQLiteDatabase(path: path, mode: .readWriteCreate)
        _ = try db.pragmaText("PRAGMA journal_mode=WAL")
        try db.execute("CREATE TABLE blobs (data BLOB)")
        try db.checkpointInBackground()
        return (db, try #require(db.backgroundCheckpointer))
    }

    @Test func aCommitPastTheThresholdReturnsBeforeTheCheckpointWhichFollowsOnItsThread() throws {
        let temp = TempDir()
        let path = temp.appending("index.sqlite")
        let (db, checkpointer) = try Self.blobsDatabase(at: path)
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

    /// One wake-up per threshold's worth of pages committed since the last checkpoint: the
    /// commits that land while a checkpoint runs (the WAL still past the threshold, as it is
    /// not wholly copied) do not ask for another at once.
    @Test func aSteadyStreamOfCommitsWakesTheThreadOncePerThresholdOfPages() {
        var rule = WALCheckpointer.WakeRule()
        var wakes: [Int32] = []
        var wal: Int32 = 0
        for _ in 0..<2_000 {
            wal += 3
            if rule.commit(walPages: wal) {
                wakes.append(wal)
                // The checkpoint copies what was there when it was asked, while commits go on.
                rule.checkpointed(wal)
            }
        }
        #expect(wakes == [1_002, 2_004, 3_006, 4_008, 5_010])
        let after = rule.commit(walPages: wal + 3)
        #expect(after == false)
    }

    @Test func aWakeUpCoversTheCommitsWhileItsCheckpointRuns() {
        var rule = WALCheckpointer.WakeRule()
        func commit(_ walPages: Int32) -> Bool { rule.commit(walPages: walPages) }
        let threshold = WALCheckpointer.thresholdPages
        #expect(commit(threshold - 1) == false)
        #expect(commit(threshold))
        // Not yet copied: later commits still do not wake it before another threshold.
        #expect(commit(threshold + 10) == false)
        #expect(commit(2 * threshold - 1) == false)
        #expect(commit(2 * threshold))
        // A checkpoint that copied less than asked (a reader on an old snapshot) counts from there.
        rule.checkpointed(threshold + 500)
        #expect(commit(2 * threshold + 499) == false)
        #expect(commit(2 * threshold + 500))
    }

    @Test func aRestartedWALCountsFromItsBeginning() {
        var rule = WALCheckpointer.WakeRule()
        func commit(_ walPages: Int32) -> Bool { rule.commit(walPages: walPages) }
        let threshold = WALCheckpointer.thresholdPages
        #expect(commit(3 * threshold))
        rule.checkpointed(3 * threshold)
        // The next commit after a whole copy starts the WAL again.
        #expect(commit(4) == false)
        #expect(commit(threshold - 1) == false)
        #expect(commit(threshold))
    }

    /// Commits that never pause long enough for a passive checkpoint to copy the whole WAL
    /// would grow it for ever: back to back, as here, not even the restart checkpoint finds
    /// a pause, and the writer's own checkpoint bounds it. The thread's checkpoints stay
    /// about one per threshold of pages.
    @Test func aWALUnderSteadyCommitsIsRestartedAndStaysBounded() throws {
        let temp = TempDir()
        let path = temp.appending("index.sqlite")
        let (db, checkpointer) = try Self.blobsDatabase(at: path)
        let insert = try db.statement("INSERT INTO blobs (data) VALUES (zeroblob(3900))")
        // 24,000 pages in commits of three.
        var longest = 0
        for _ in 0..<8_000 {
            try db.execute("BEGIN")
            for _ in 0..<3 { try insert.run() }
            try db.execute("COMMIT")
            longest = max(longest, Self.size(path + "-wal"))
        }
        let checkpoints = checkpointer.checkpoints.withLock { $0 }
        #expect(checkpoints >= 4, "the WAL was not checkpointed as it grew")
        #expect(checkpoints <= 72, "\(checkpoints) checkpoints for 24 thresholds' worth of pages")
        // The WAL file keeps its longest length: bounded by the writer's length and what
        // commits add while a checkpoint of the thread keeps the writer's from running.
        let bound = Int(WALCheckpointer.writerPages + WALCheckpointer.thresholdPages) * 4_200
        #expect(longest <= bound, "the WAL grew to \(longest) bytes")
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
        let (db, checkpointer) = try Self.blobsDatabase(at: path)
        try checkpointer.gate.withLock { _ throws in
            try Self.fill(db)
            unlink(path)
        }
        #expect(Self.waitUntil { checkpointer.checkpoints.withLock { $0 } >= 1 })
        #expect(access(path, F_OK) != 0)
    }
}
