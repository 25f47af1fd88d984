import PushInbox
import PushSystem
import Testing
import TestSupport

/// Preferences (`nc.preferences`): a muted category is neither listed, counted (in all and per
/// feed) nor presented in-app; its pushes are kept and come back, in the states they were
/// left in, when it is unmuted; a rebuild from the journal comes out the same.
@Suite struct PreferencesTests {
    let now: Int64 = 1_800_000_100_000
    static let feeds = [InboxFeed(name: "promo", categories: ["promo"]), InboxFeed(name: "rest", rest: true)]

    func preferences(_ f: InboxFixture, user: String = "alice", _ muted: [String: Bool], id: String) async throws {
        try await f.append(["kind": .string("event"), "type": .string("nc.preferences"), "eventId": .string(id),
                            "user": .string(user), "muted": .object(JSONObject(muted.mapValues { JSONValue.bool($0) }))], key: "event:\(id)")
    }

    func titles(_ index: InboxIndex, feed: String? = nil) throws -> [String] {
        try index.list(.user("alice"), feed: feed, limit: 500, now: now).items.compactMap(\.title)
    }

    /// Found by the property test: unmuting a category holding an item acted on that has no
    /// presentation (not a banner) computed `hidden` as NULL in SQL (`NULL = 'banner'`), which
    /// the NOT NULL column refused, failing the whole batch for good.
    @Test func unmutingAnActedOnItemWithoutPresentationApplies() async throws {
        let f = try InboxFixture()
        let item = try await f.notification(title: "p1", category: "promo")
        try await f.append(["kind": .string("event"), "type": .string("nc.action"), "eventId": .string("a1"), "user": .string("alice"),
                            "item": .seq(item), "action": .string("yes")], key: "event:a1")
        try await preferences(f, ["promo": true], id: "mute-1")
        try await preferences(f, ["promo": false], id: "unmute-1")
        let index = try InboxIndex(path: f.indexPath, feeds: Self.feeds)
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try titles(index) == ["p1"])
    }

    @Test func aMutedCategoryIsNeitherListedCountedNorPresentedAndComesBack() async throws {
        let f = try InboxFixture()
        let p1 = try await f.notification(title: "p1", category: "promo")
        try await f.notification(title: "n1", category: "news")
        try await f.event("nc.read", item: .seq(p1))
        try await preferences(f, ["promo": true], id: "mute-1")
        // Arriving while muted: kept, hidden.
        try await f.notification(title: "p2", category: "promo")
        try await f.notification(title: "m1", presentation: "modal", category: "promo")
        try await f.notification(title: "n2", category: "news")
        // Bob's promo is his: alice's preference does not touch it.
        try await f.notification(user: "bob", title: "b1", category: "promo")
        let index = try InboxIndex(path: f.indexPath, feeds: Self.feeds)
        try index.catchUp(journalDirectory: f.journalDirectory)

        #expect(try titles(index) == ["n2", "n1"])
        #expect(try titles(index, feed: "promo").isEmpty)
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 2, unread: 2))
        #expect(try index.count(.user("alice"), feed: "promo", now: now) == InboxCounts(unseen: 0, unread: 0))
        #expect(try index.inapp(.user("alice"), now: now) == nil, "a muted modal is not presented")
        #expect(try index.mutedCategories(.user("alice")) == ["promo"])
        #expect(try index.count(.user("bob"), now: now) == InboxCounts(unseen: 1, unread: 1))
        // Read-all while muted passes the muted items by: they come back as they were.
        try await f.event("nc.read-all")
        try await preferences(f, ["promo": false, "news": true], id: "mute-2")
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try titles(index) == ["p2", "p1"])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 1, unread: 1), "p1 read, p2 new")
        #expect(try index.count(.user("alice"), feed: "promo", now: now) == InboxCounts(unseen: 1, unread: 1))
        #expect(try index.inapp(.user("alice"), now: now)?.title == "m1", "the modal comes back with its category")
        #expect(try index.mutedCategories(.user("alice")) == ["news"])

        // A replayed or repeated preference changes nothing; the journal alone rebuilds it all.
        try await preferences(f, ["news": true], id: "mute-3")
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 1, unread: 1))
        let rebuilt = f.temp.appending("rebuilt.sqlite")
        _ = try InboxIndex.rebuild(path: rebuilt, journalDirectory: f.journalDirectory, feeds: Self.feeds)
        #expect(try InboxIndex(path: rebuilt, readOnly: true).canonicalDump() == index.canonicalDump())
    }

    /// A state change while muted takes effect (and is counted once unmuted); archived and
    /// deleted items stay hidden when their category is unmuted.
    @Test func statesChangedWhileMutedHoldAfterUnmuting() async throws {
        let f = try InboxFixture()
        let a = try await f.notification(title: "a", category: "promo")
        let b = try await f.notification(title: "b", category: "promo")
        let c = try await f.notification(title: "c", category: "promo")
        try await preferences(f, ["promo": true], id: "m1")
        try await f.event("nc.read", item: .seq(a))
        try await f.event("nc.archive", item: .seq(b))
        try await f.event("nc.delete", item: .seq(c))
        let index = try InboxIndex(path: f.indexPath, feeds: Self.feeds)
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 0, unread: 0))
        try await preferences(f, ["promo": false], id: "m2")
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try titles(index) == ["a"])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 0, unread: 0))
        try await f.event("nc.unarchive", item: .seq(b))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try titles(index) == ["b", "a"])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 1, unread: 1))
        #expect(try index.count(.user("alice"), feed: "promo", now: now) == InboxCounts(unseen: 1, unread: 1))
    }
}
