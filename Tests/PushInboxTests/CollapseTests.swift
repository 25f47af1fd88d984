import PushInbox
import PushSystem
import Testing
import TestSupport

/// Collapse (a push with a collapse id replaces the owner's earlier item of the vendor with
/// that id), APNs thread ids kept apart from it, and the action chosen kept on the item until
/// `nc.action-revert` (docs/notification-center.md, "Collapse" and "Actions").
@Suite struct CollapseTests {
    let now: Int64 = 1_800_000_100_000
    static let feeds = [InboxFeed(name: "scores", categories: ["score"]), InboxFeed(name: "rest", rest: true)]

    func index(_ f: InboxFixture) throws -> InboxIndex { try InboxIndex(path: f.indexPath, feeds: Self.feeds) }

    func seqs(_ index: InboxIndex, _ owner: InboxOwner = .user("alice"), feed: String? = nil) throws -> [UInt64] {
        try index.list(owner, feed: feed, limit: 500, now: now).items.map(\.seq)
    }

    /// An `nc.action` / `nc.action-revert` record as the daemon journals it.
    @discardableResult
    func action(_ f: InboxFixture, _ type: String = "nc.action", item: UInt64, _ action: String, text: String? = nil,
                id: String) async throws -> UInt64 {
        var body: JSONObject = ["kind": .string("event"), "type": .string(type), "eventId": .string(id),
                                         "user": .string("alice"), "item": .seq(item), "action": .string(action)]
        if let text { body["text"] = .string(text) }
        return try await f.append(body, key: "event:" + id)
    }

    @Test func aPushWithACollapseIdReplacesTheEarlierItemUnreadAgainWithExactCounts() async throws {
        let f = try InboxFixture()
        let first = try await f.notification(title: "1:0", category: "score", extra: ["collapseId": .string("match-7")])
        let other = try await f.notification(title: "other")
        try await f.event("nc.read", item: .seq(first))
        let index = try index(f)
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 1, unread: 1))

        let second = try await f.notification(title: "2:0", category: "score", extra: ["collapseId": .string("match-7")])
        try index.catchUp(journalDirectory: f.journalDirectory)
        // One item, the newest content, unread again, first as the newest.
        #expect(try seqs(index) == [second, other])
        let item = try #require(try index.item(.user("alice"), seq: second))
        #expect(item.title == "2:0" && !item.read && !item.seen && item.replaces == first && item.collapseId == "match-7")
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 2, unread: 2))
        #expect(try index.feedCounts(.user("alice"), now: now).map(\.counts) == [InboxCounts(unseen: 1, unread: 1),
                                                                                 InboxCounts(unseen: 1, unread: 1)])
        #expect(try seqs(index, feed: "scores") == [second])
        // The replaced item is a tombstone naming its successor; events on it change nothing.
        #expect(try index.item(.user("alice"), seq: first) == nil)
        #expect(try index.item(.user("alice"), seq: first, deleted: true)?.replacedBy == second)
        #expect(try index.replacements(.user("alice"), afterSeq: other, upToSeq: .max, limit: 10).map { [$0.seq, $0.replaced] } == [[second, first]])
        try await f.event("nc.unread", item: .seq(first))
        try await f.event("nc.pin", item: .seq(first))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try seqs(index) == [second, other])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 2, unread: 2))

        // An unread one replaced by another: still counted once.
        let third = try await f.notification(title: "3:0", category: "score", extra: ["collapseId": .string("match-7")])
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try seqs(index) == [third, other])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 2, unread: 2))
        #expect(try index.count(.user("alice"), feed: "scores", now: now) == InboxCounts(unseen: 1, unread: 1))
    }

    @Test func theScopeIsTheOwnerAndTheVendorAndThreadIdsOnlyGroup() async throws {
        let f = try InboxFixture()
        let a = try await f.notification(user: "alice", title: "a", extra: ["collapseId": .string("k")])
        let b = try await f.notification(user: "bob", title: "b", extra: ["collapseId": .string("k")])
        let c = try await f.notification(user: "alice", title: "c", vendor: "infobip", extra: ["collapseId": .string("k")])
        let d = try await f.notification(user: nil, device: "dev1", title: "d", extra: ["collapseId": .string("k")])
        let t1 = try await f.notification(user: "alice", title: "t1", extra: ["threadId": .string("chat")])
        let t2 = try await f.notification(user: "alice", title: "t2", extra: ["threadId": .string("chat")])
        let plain = try await f.notification(user: "alice", title: "plain")
        let index = try index(f)
        try index.catchUp(journalDirectory: f.journalDirectory)
        // Another user, another vendor, a device's inbox: each keeps its own.
        #expect(try seqs(index) == [plain, t2, t1, c, a])
        #expect(try seqs(index, .user("bob")) == [b])
        #expect(try seqs(index, .device("dev1")) == [d])
        #expect(try index.item(.user("alice"), seq: t2)?.threadId == "chat")

        let a2 = try await f.notification(user: "alice", title: "a2", extra: ["collapseId": .string("k")])
        let d2 = try await f.notification(user: nil, device: "dev1", title: "d2", extra: ["collapseId": .string("k")])
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try seqs(index) == [a2, plain, t2, t1, c])
        #expect(try seqs(index, .user("bob")) == [b])
        #expect(try seqs(index, .device("dev1")) == [d2])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 5, unread: 5))
    }

    @Test func aPinCarriesOverAndADeletedItemIsNotReplaced() async throws {
        let f = try InboxFixture()
        let first = try await f.notification(title: "first", extra: ["collapseId": .string("k")])
        try await f.event("nc.pin", item: .seq(first))
        let second = try await f.notification(title: "second", extra: ["collapseId": .string("k")])
        let index = try index(f)
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.item(.user("alice"), seq: second)?.pinned == true)
        try await f.event("nc.delete", item: .seq(second))
        let third = try await f.notification(title: "third", extra: ["collapseId": .string("k")])
        try index.catchUp(journalDirectory: f.journalDirectory)
        // The user deleted the holder: the next push is a new item, replacing nothing.
        let item = try #require(try index.item(.user("alice"), seq: third))
        #expect(item.replaces == nil && !item.pinned)
        #expect(try index.item(.user("alice"), seq: second, deleted: true)?.replacedBy == nil)
        #expect(try seqs(index) == [third])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 1, unread: 1))
    }

    @Test func aMutedOrArchivedHolderIsReplacedWithoutCountingTwice() async throws {
        let f = try InboxFixture()
        let first = try await f.notification(title: "first", category: "score", extra: ["collapseId": .string("k")])
        try await f.event("nc.archive", item: .seq(first))
        let second = try await f.notification(title: "second", category: "score", extra: ["collapseId": .string("k")])
        let index = try index(f)
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try seqs(index) == [second])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 1, unread: 1))
        try await f.append(["kind": .string("event"), "type": .string("nc.preferences"), "eventId": .string("m1"),
                            "user": .string("alice"), "muted": .object(["score": .bool(true)])], key: "event:m1")
        let third = try await f.notification(title: "third", category: "score", extra: ["collapseId": .string("k")])
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try seqs(index).isEmpty)
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 0, unread: 0))
        try await f.append(["kind": .string("event"), "type": .string("nc.preferences"), "eventId": .string("m2"),
                            "user": .string("alice"), "muted": .object(["score": .bool(false)])], key: "event:m2")
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try seqs(index) == [third])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 1, unread: 1))
        #expect(try index.count(.user("alice"), feed: "scores", now: now) == InboxCounts(unseen: 1, unread: 1))
    }

    @Test func theActionChosenIsKeptAndOnlyItsRevertUndoesIt() async throws {
        let f = try InboxFixture()
        let item = try await f.notification(title: "reply?")
        let banner = try await f.notification(title: "banner", presentation: "banner")
        try await action(f, item: item, "reply", text: "on my way", id: "a1")
        try await action(f, item: banner, "mm_accept", id: "a2")
        let index = try index(f)
        try index.catchUp(journalDirectory: f.journalDirectory)
        var kept = try #require(try index.item(.user("alice"), seq: item))
        #expect(kept.acted && kept.actedAction == "reply" && kept.actedText == "on my way" && kept.read)
        let state = kept.jsonValue()["state"]
        #expect(state?["acted"] == .string("reply") && state?["actedText"] == .string("on my way"))
        // A banner acted on leaves the inbox (as before).
        #expect(try seqs(index) == [item])

        // A revert naming another action changes nothing; the kept one's undoes it.
        try await action(f, "nc.action-revert", item: item, "other", id: "r1")
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.item(.user("alice"), seq: item)?.actedAction == "reply")
        try await action(f, "nc.action-revert", item: item, "reply", id: "r2")
        try await action(f, "nc.action-revert", item: banner, "mm_accept", id: "r3")
        try index.catchUp(journalDirectory: f.journalDirectory)
        kept = try #require(try index.item(.user("alice"), seq: item))
        #expect(!kept.acted && kept.actedAction == nil && kept.actedText == nil && kept.read, "read stays: the user saw it")
        #expect(kept.jsonValue()["state"]?["acted"] == .bool(false) && kept.jsonValue()["state"]?["actedText"] == nil)
        // The banner is back, read.
        #expect(try seqs(index) == [banner, item])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 0, unread: 0))

        // The latest choice is kept; a text-less action clears the old text.
        try await action(f, item: item, "yes", text: "sure", id: "a3")
        try await action(f, item: item, "no", id: "a4")
        try index.catchUp(journalDirectory: f.journalDirectory)
        kept = try #require(try index.item(.user("alice"), seq: item))
        #expect(kept.actedAction == "no" && kept.actedText == nil)
    }

    @Test func aRebuildFromTheJournalIsIdentical() async throws {
        let f = try InboxFixture()
        let a = try await f.notification(title: "a", category: "score", extra: ["collapseId": .string("k"), "threadId": .string("t")])
        try await f.event("nc.pin", item: .seq(a))
        try await f.notification(title: "b", category: "score", extra: ["collapseId": .string("k")])
        let c = try await f.notification(title: "c")
        try await action(f, item: c, "reply", text: "hi", id: "a1")
        try await f.notification(title: "d", extra: ["collapseId": .string("k")])
        let index = try index(f)
        try index.catchUp(journalDirectory: f.journalDirectory)
        let rebuilt = f.temp.appending("rebuilt.sqlite")
        _ = try InboxIndex.rebuild(path: rebuilt, journalDirectory: f.journalDirectory, feeds: Self.feeds)
        let dump = try index.canonicalDump()
        #expect(try InboxIndex(path: rebuilt, readOnly: true).canonicalDump() == dump)
        #expect(dump.contains { $0.contains("|k|t|") }, "the collapse and thread ids are in the dump")
    }
}
