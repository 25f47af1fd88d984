@preconcurrency import Glibc
import PushInbox
import PushJournal
import PushSystem
import Testing
import TestSupport

/// The index is derived data: whatever happens to the file, the follower and `nc reindex`
/// rebuild it from the journal, and every handle follows the file at the path.
@Suite struct IndexReplacementTests {
    let now: Int64 = 1_800_000_100_000

    /// Writes `bytes` of garbage over the start of `path` (creating it) and removes its -wal/-shm.
    static func damage(_ path: String, inPlace: Bool = true) throws {
        let target = inPlace ? path : path + ".garbage"
        let fd = open(target, O_WRONLY | O_CREAT, 0o644)
        try #require(fd >= 0)
        let garbage = [UInt8](repeating: 0x5a, count: 8192)
        _ = garbage.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        close(fd)
        if !inPlace { try #require(rename(target, path) == 0) }
        unlink(path + "-wal")
        unlink(path + "-shm")
    }

    @Test func theFollowerMovesADamagedIndexAsideAndRebuildsIt() async throws {
        let f = try InboxFixture()
        for i in 0..<5 { try await f.notification(title: "n\(i)") }
        try Posix.mkdirs(f.stateDirectory + "/inbox")
        try Self.damage(f.indexPath)

        // At start: no error, a notice, the file kept aside, a fresh index rebuilt.
        let notices = Locked([InboxNotice]())
        let follower = try InboxFollower(stateDirectory: f.stateDirectory, notify: { notice in notices.withLock { $0.append(notice) } })
        guard case .indexCorrupt(let movedTo, let reason)? = notices.withLock({ $0.first }) else {
            Issue.record("no notice")
            return
        }
        #expect(movedTo.hasPrefix(f.indexPath + ".corrupt-"))
        #expect(reason.contains("sqlite"), "\(reason)")
        #expect(access(movedTo, F_OK) == 0)
        #expect(follower.status.rebuilding)
        try follower.catchUp()
        try follower.catchUp()
        #expect(follower.appliedSeq == 5)
        #expect(!follower.status.rebuilding)
        #expect(try InboxIndex(path: f.indexPath, readOnly: true).count(.user("alice"), now: now).unread == 5)

        // While running: a damaged file renamed in (a new inode) is found on the next batch.
        for round in 0..<4 {
            try Self.damage(f.indexPath, inPlace: false)
            try await f.notification(title: "late\(round)")
            try follower.catchUp()
            try follower.catchUp()
            #expect(follower.status.corruptIndexes == 2 + round)
            #expect(try InboxIndex(path: f.indexPath, readOnly: true).count(.user("alice"), now: now).unread == 6 + round)
        }
        #expect(notices.withLock { $0.count } == 5)
        // Only the newest few damaged copies are kept.
        let kept = try RealFileSystem().listDirectory(f.stateDirectory + "/inbox").filter { $0.hasPrefix("index.sqlite.corrupt-") }
        #expect(kept.filter { !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }.count == InboxIndex.keptCorruptCopies, "\(kept)")
    }

    @Test func reindexReplacesAnyFileAndEveryHandleFollows() async throws {
        let f = try InboxFixture()
        for i in 0..<3 { try await f.notification(title: "n\(i)") }
        let writer = InboxIndexHandle(path: f.indexPath, readOnly: false)
        try writer.current().catchUp(journalDirectory: f.journalDirectory)
        let reader = InboxIndexHandle(path: f.indexPath, readOnly: true)
        #expect(try reader.current().itemCount() == 3)

        // A damaged file: reindex does not read it, it replaces it.
        try await f.notification(title: "n3")
        try Self.damage(f.indexPath)
        let result = try InboxIndex.rebuild(path: f.indexPath, journalDirectory: f.journalDirectory)
        #expect(result.items == 4 && result.appliedSeq == 4)
        #expect(try reader.current().itemCount() == 4)

        // A healthy file, open in WAL mode by a writer and a reader: both switch to the new file
        // on their next use, and the writer's new commits are what the reader sees.
        try await f.notification(title: "n4")
        try writer.current().catchUp(journalDirectory: f.journalDirectory)
        #expect(try reader.current().itemCount() == 5)
        let generations = (writer.generation, reader.generation)
        _ = try InboxIndex.rebuild(path: f.indexPath, journalDirectory: f.journalDirectory)
        try await f.notification(title: "n5")
        try writer.current().catchUp(journalDirectory: f.journalDirectory)
        #expect(try reader.current().itemCount() == 6)
        #expect(writer.generation == generations.0 + 1 && reader.generation == generations.1 + 1)
        #expect(try reader.current().appliedSeq() == 6)
        let expected = try InboxIndex.rebuildDump(f)
        #expect(try reader.current().canonicalDump() == expected)

        // Deleted: the writer creates and rebuilds it; the reader follows.
        for suffix in ["", "-wal", "-shm"] { unlink(f.indexPath + suffix) }
        #expect(throws: InboxError.self) { try reader.current() }
        try writer.current().catchUp(journalDirectory: f.journalDirectory)
        #expect(try reader.current().itemCount() == 6)
    }

    /// The page size the file at `path` was made with.
    static func pageSize(_ path: String) throws -> Int64? {
        try SQLiteDatabase(path: path, mode: .readOnly).pragmaText("PRAGMA page_size").flatMap { Int64($0) }
    }

    /// ``InboxIndex/pageSize``: the files this build makes (the follower's, a rebuild's) have
    /// 1 KiB pages; a file an earlier build made with SQLite's 4 KiB pages is a sound index,
    /// kept and applied to as it is (no rebuild at upgrade) until `nc reindex` rebuilds it.
    @Test func indexFilesAreMadeWithSmallPagesAndEarlierOnesAreKept() async throws {
        let f = try InboxFixture()
        for i in 0..<3 { try await f.notification(title: "n\(i)") }
        try InboxFollower(stateDirectory: f.stateDirectory).catchUp()
        #expect(try Self.pageSize(f.indexPath) == InboxIndex.pageSize)
        #expect(InboxIndex.pageSize == 1024)

        // An index as earlier builds made it: the page size is fixed by the first write.
        let e = try InboxFixture()
        for i in 0..<3 { try await e.notification(title: "n\(i)") }
        try Posix.mkdirs(e.stateDirectory + "/inbox")
        do {
            let db = try SQLiteDatabase(path: e.indexPath, mode: .readWriteCreate)
            try db.execute("PRAGMA page_size=4096")
            _ = try db.pragmaText("PRAGMA journal_mode=WAL")
        }
        let notices = Locked([InboxNotice]())
        let follower = try InboxFollower(stateDirectory: e.stateDirectory, notify: { notice in notices.withLock { $0.append(notice) } })
        try follower.catchUp()
        #expect(notices.withLock { $0 }.isEmpty)
        #expect(try Self.pageSize(e.indexPath) == 4096)
        #expect(try InboxIndex(path: e.indexPath, readOnly: true).count(.user("alice"), now: now).unread == 3)

        let rebuilt = try InboxIndex.rebuild(path: e.indexPath, journalDirectory: e.journalDirectory)
        #expect(rebuilt.items == 3)
        #expect(try Self.pageSize(e.indexPath) == InboxIndex.pageSize)
    }
}

extension InboxIndex {
    /// The canonical dump of an index rebuilt from scratch beside the fixture's.
    static func rebuildDump(_ f: InboxFixture) throws -> [String] {
        let path = f.temp.appending("reference.sqlite")
        _ = try InboxIndex.rebuild(path: path, journalDirectory: f.journalDirectory)
        return try InboxIndex(path: path, readOnly: true).canonicalDump()
    }
}
