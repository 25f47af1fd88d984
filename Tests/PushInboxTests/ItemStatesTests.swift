import PushInbox
import PushSystem
import Testing
import TestSupport

/// `nc.unread`, `nc.unarchive`, `nc.delete`, `nc.pin`, `nc.unpin`: each transition, the
/// counts after it, and how the states combine (docs/inbox-api.md, "Item states").
@Suite struct ItemStatesTests {
    let now: Int64 = 1_800_000_100_000

    func titles(_ index: InboxIndex, limit: Int = 500) throws -> [String] {
        try index.list(.user("alice"), limit: limit, now: now).items.compactMap(\.title)
    }

    /// An access request's export reads items with their states: a pinned item says so, and
    /// a deleted one (a tombstone that still holds the push) is marked deleted.
    @Test func theExportReadsPinnedAndDeletedStates() async throws {
        let f = try InboxFixture()
        let pinned = try await f.notification(title: "pinned")
        let deleted = try await f.notification(title: "deleted")
        let plain = try await f.notification(title: "plain")
        try await f.event("nc.pin", item: .seq(pinned))
        try await f.event("nc.delete", item: .seq(deleted))
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        var seen: [UInt64: (pinned: Bool, deleted: Bool)] = [:]
        try index.forEachItem(naming: .user("alice")) { seen[$0.seq] = ($0.pinned, $0.deleted) }
        #expect(seen.count == 3)
        #expect(seen[pinned]?.pinned == true && seen[pinned]?.deleted == false)
        #expect(seen[deleted]?.deleted == true)
        #expect(seen[plain]?.pinned == false && seen[plain]?.deleted == false)
    }

    @Test func unreadMakesAReadItemUnreadAndTheCountsFollow() async throws {
        let f = try InboxFixture()
        let a = try await f.notification(title: "a")
        let b = try await f.notification(title: "b")
        try await f.event("nc.read", item: .seq(a))
        try await f.event("nc.read", item: .seq(b))
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 0, unread: 0))

        try await f.event("nc.unread", item: .seq(a))
        try await f.event("nc.unread", item: .seq(a))  // again: counted once
        try index.catchUp(journalDirectory: f.journalDirectory)
        // Unread is not unseen: the user has seen it.
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 0, unread: 1))
        let item = try #require(try index.item(.user("alice"), seq: a))
        #expect(item.seen && !item.read)
        #expect(try index.list(.user("alice"), unread: true, now: now).items.map(\.seq) == [a])

        // An archived item made unread is still not counted; unarchived, it is.
        try await f.event("nc.archive", item: .seq(b))
        try await f.event("nc.unread", item: .seq(b))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 0, unread: 1))
        try await f.event("nc.unarchive", item: .seq(b))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 0, unread: 2))
    }

    @Test func unarchiveBringsAnArchivedItemBackWithExactCounts() async throws {
        let f = try InboxFixture()
        let a = try await f.notification(title: "a")
        try await f.notification(title: "b")
        try await f.event("nc.archive", item: .seq(a))
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try titles(index) == ["b"])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 1, unread: 1))

        try await f.event("nc.unarchive", item: .seq(a))
        try await f.event("nc.unarchive", item: .seq(a))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try titles(index) == ["b", "a"])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 2, unread: 2))

        // An item archived by archive-read comes back read.
        try await f.event("nc.read-all")
        try await f.event("nc.archive-read")
        try await f.event("nc.unarchive", item: .seq(a))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try titles(index) == ["a"])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 0, unread: 0))
        #expect(try index.item(.user("alice"), seq: a)?.read == true)
    }

    @Test func deleteIsFinal() async throws {
        let f = try InboxFixture()
        let a = try await f.notification(title: "a")
        try await f.notification(title: "b")
        try await f.event("nc.archive", item: .seq(a))
        try await f.event("nc.delete", item: .seq(a))
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try titles(index) == ["b"])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 1, unread: 1))
        // Looked up like a missing item; only the stream's tombstone lookup sees it.
        #expect(try index.item(.user("alice"), seq: a) == nil)
        #expect(try index.item(.user("alice"), seq: a, deleted: true)?.deleted == true)

        // Nothing brings it back or changes it: unarchive, read, unread, pin, bulk changes.
        for type in ["nc.unarchive", "nc.unread", "nc.read", "nc.pin", "nc.seen"] {
            try await f.event(type, item: .seq(a))
        }
        try await f.event("nc.read-all")
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try titles(index) == ["b"])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 0, unread: 0))
        let tombstone = try #require(try index.item(.user("alice"), seq: a, deleted: true))
        #expect(tombstone.archived && !tombstone.read && !tombstone.pinned)

        // Deleting a visible unread item takes it out of the counts at once.
        let c = try await f.notification(title: "c")
        try await f.event("nc.delete", item: .seq(c))
        try await f.event("nc.delete", user: "bob", item: .seq(c - 1))  // another user's: ignored
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try titles(index) == ["b"])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 0, unread: 0))
    }

    @Test func deletingTheNewestModalPresentsNoOlderOne() async throws {
        let f = try InboxFixture()
        try await f.notification(title: "old modal", presentation: "modal")
        let newest = try await f.notification(title: "new modal", presentation: "modal")
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.inapp(.user("alice"), now: now)?.seq == newest)
        try await f.event("nc.delete", item: .seq(newest))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.inapp(.user("alice"), now: now) == nil)
        #expect(try index.modals(.user("alice"), afterSeq: 0, upToSeq: .max, limit: 10) == [newest - 1])
    }

    @Test func pinnedItemsComeFirstNewestFirstAcrossPages() async throws {
        let f = try InboxFixture()
        var seqs: [UInt64] = []
        for i in 0..<7 { seqs.append(try await f.notification(title: "n\(i)")) }
        for i in [1, 5, 3] { try await f.event("nc.pin", item: .seq(seqs[i])) }
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        let expected = ["n5", "n3", "n1", "n6", "n4", "n2", "n0"]
        #expect(try titles(index) == expected)
        #expect(try index.item(.user("alice"), seq: seqs[5])?.pinned == true)
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 7, unread: 7))
        // Every page size: each item once, in the same order.
        for limit in 1...8 {
            var all: [String] = []
            var cursor: String?
            repeat {
                let page = try index.list(.user("alice"), limit: limit, cursor: cursor, now: now)
                all += page.items.compactMap(\.title)
                cursor = page.nextCursor
            } while cursor != nil
            #expect(all == expected, "limit \(limit)")
        }
        // Unread only and one category keep the order rule.
        try await f.event("nc.read", item: .seq(seqs[5]))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.list(.user("alice"), unread: true, limit: 3, now: now).items.compactMap(\.title) == ["n3", "n1", "n6"])

        try await f.event("nc.unpin", item: .seq(seqs[3]))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try titles(index) == ["n5", "n1", "n6", "n4", "n3", "n2", "n0"])
    }

    @Test func archivingAPinnedItemKeepsItsPin() async throws {
        let f = try InboxFixture()
        let a = try await f.notification(title: "a")
        try await f.notification(title: "b")
        try await f.event("nc.pin", item: .seq(a))
        try await f.event("nc.archive", item: .seq(a))
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try titles(index) == ["b"])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 1, unread: 1))
        try await f.event("nc.unarchive", item: .seq(a))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try titles(index) == ["a", "b"])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 2, unread: 2))
    }

    @Test func aRebuildFromTheJournalEqualsTheFollowedIndex() async throws {
        let f = try InboxFixture()
        var seqs: [UInt64] = []
        for i in 0..<6 { seqs.append(try await f.notification(title: "n\(i)")) }
        let index = try f.openIndex()
        for (type, i) in [("nc.read", 0), ("nc.unread", 0), ("nc.pin", 1), ("nc.archive", 2), ("nc.unarchive", 2),
                          ("nc.delete", 3), ("nc.unarchive", 3), ("nc.pin", 4), ("nc.unpin", 4), ("nc.archive", 5)] {
            try await f.event(type, item: .seq(seqs[i]))
            // Applied one by one, as the follower may.
            try index.catchUp(journalDirectory: f.journalDirectory)
        }
        let before = try index.canonicalDump()
        let rebuilt = f.temp.appending("rebuilt.sqlite")
        _ = try InboxIndex.rebuild(path: rebuilt, journalDirectory: f.journalDirectory)
        #expect(try InboxIndex(path: rebuilt).canonicalDump() == before)
        #expect(try titles(index) == ["n1", "n4", "n2", "n0"])
        // n0 was read, so seen: unread again, not unseen.
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 3, unread: 4))
    }
}
