import PushFollow
import PushInbox
import PushJournal
import PushSystem
import Testing
import TestSupport

/// The `changes` table (InboxChanges.swift): what streams read by seq.
@Suite struct ChangesTableTests {
    func records(_ f: InboxFixture) throws -> [JournalRecord] {
        let reader = try JournalReader(directory: f.journalDirectory, fromSeq: 1)
        var records: [JournalRecord] = []
        while let record = try reader.next() { records.append(record) }
        return records
    }

    @Test func eachAppliedStateChangeHasItsRowAtItsSeq() async throws {
        let f = try InboxFixture()
        let first = try await f.notification(user: "alice")
        let read = try await f.event("nc.read", user: "alice", item: .seq(first))
        try await f.notification(user: "bob")
        let readAll = try await f.event("nc.read-all", user: "bob")
        try await f.event("nc.opened", user: "alice")  // the screen: no inbox state
        let archive = try await f.event("nc.archive", user: "alice", item: .seq(first))
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.allChanges() == [
            InboxIndex.Change(seq: read, user: "alice", item: first, type: "nc.read"),
            InboxIndex.Change(seq: readAll, user: "bob", item: nil, type: "nc.read-all"),
            InboxIndex.Change(seq: archive, user: "alice", item: first, type: "nc.archive"),
        ])
        #expect(try index.changes(user: "alice", after: read, upTo: archive).map(\.seq) == [archive])
        #expect(try index.changes(user: "alice", after: 0, upTo: read).map(\.seq) == [read])
        #expect(try index.changes(user: "bob", after: 0, upTo: .max).map(\.type) == ["nc.read-all"])
        #expect(try index.changesCoveredAfter() == 0)
    }

    /// The rows are written in the batch's transaction: a batch applied again (a crash after
    /// the commit, before the caller learned of it) and a batch cut anywhere yield the same
    /// rows as one pass, and no row is ever past the applied seq.
    @Test func reapplyingOrSplittingABatchYieldsTheSameRows() async throws {
        let f = try InboxFixture()
        var items: [UInt64] = []
        for i in 0..<4 { items.append(try await f.notification(user: "u\(i % 2)")) }
        for (i, item) in items.enumerated() { try await f.event(i % 2 == 0 ? "nc.seen" : "nc.pin", user: "u\(i % 2)", item: .seq(item)) }
        try await f.event("nc.archive-read", user: "u0")
        let all = try records(f)

        let once = try InboxIndex(path: f.temp.appending("once.sqlite"))
        try once.apply(all)
        let expected = try once.allChanges()
        #expect(expected.count == 5)
        try once.apply(all)
        try once.apply(Array(all.suffix(3)))
        #expect(try once.allChanges() == expected)

        for cut in 1..<all.count {
            let split = try InboxIndex(path: f.temp.appending("split\(cut).sqlite"))
            try split.apply(Array(all.prefix(cut)))
            let applied = try split.appliedSeq()
            #expect(try split.allChanges().allSatisfy { $0.seq <= applied })
            #expect(try split.allChanges() == expected.filter { $0.seq <= applied })
            try split.apply(Array(all.prefix(cut + 1)))
            try split.apply(all)
            #expect(try split.allChanges() == expected, "cut at \(cut)")
        }
    }

    @Test func theOldestRowsArePrunedAndTheWindowSaysSo() async throws {
        let f = try InboxFixture()
        let item = try await f.notification(user: "alice")
        var seqs: [UInt64] = []
        for i in 0..<6 { seqs.append(try await f.event(i % 2 == 0 ? "nc.pin" : "nc.unpin", user: "alice", item: .seq(item))) }
        let index = try f.openIndex()
        index.changesKept = 4
        try index.catchUp(journalDirectory: f.journalDirectory, batchSize: 1)
        #expect(try index.allChanges().map(\.seq) == Array(seqs.suffix(4)))
        // Every change after the window's start is there; a stream before it is told to refetch.
        #expect(try index.changesCoveredAfter() == seqs[1])
        #expect(try index.changes(user: "alice", after: 0, upTo: .max).count == 4)
    }

    @Test func anIndexThatStartsAfterASeqDoesNotCoverWhatCameBefore() throws {
        let temp = TempDir(#function)
        let index = try InboxIndex(path: temp.appending("index.sqlite"))
        try index.startAfter(41)
        #expect(try index.appliedSeq() == 41)
        #expect(try index.changesCoveredAfter() == 41)
    }

    @Test func anErasureTakesTheUsersRows() async throws {
        let f = try InboxFixture()
        let alices = try await f.notification(user: "alice")
        let bobs = try await f.notification(user: "bob")
        try await f.event("nc.read", user: "alice", item: .seq(alices))
        let bobRead = try await f.event("nc.read", user: "bob", item: .seq(bobs))
        do {
            let index = try f.openIndex()
            try index.catchUp(journalDirectory: f.journalDirectory)
        }
        _ = try InboxIndex.erase(path: f.indexPath, subject: .user("alice"))
        let index = try InboxIndex(path: f.indexPath, readOnly: true)
        #expect(try index.allChanges() == [InboxIndex.Change(seq: bobRead, user: "bob", item: bobs, type: "nc.read")])
    }
}
