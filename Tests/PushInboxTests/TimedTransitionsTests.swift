import PushInbox
import PushSystem
import Testing
import TestSupport

/// Issue 25, the time-driven part: a snooze's end and an item's expiry are applied by the
/// writer at their moment (counters in the same transaction, a `timed_changes` row for
/// streams), as a function of the records and the time alone, so that a rebuild at the same
/// moment is identical.
@Suite struct TimedTransitionsTests {
    static let t0: Int64 = 1_800_000_000_000
    static let feeds = [InboxFeed(name: "promo", categories: ["promo"]), InboxFeed(name: "rest", rest: true)]

    func snooze(_ f: InboxFixture, _ item: UInt64, until: Int64, id: String) async throws {
        try await f.append(["kind": .string("event"), "type": .string("nc.snooze"), "eventId": .string(id), "user": .string("alice"),
                            "item": .integer(item), "until": .string(Timestamp.iso8601(millis: until))], key: "event:\(id)")
    }

    func titles(_ index: InboxIndex, feed: String? = nil, now: Int64) throws -> [String] {
        try index.list(.user("alice"), feed: feed, limit: 500, now: now).items.compactMap(\.title)
    }

    @Test func aSnoozedItemLeavesAtOnceAndComesBackUnreadAtItsMoment() async throws {
        let f = try InboxFixture()
        f.ingestMillis = Self.t0
        let a = try await f.notification(title: "a", category: "promo")
        try await f.notification(title: "b", category: "news")
        try await f.event("nc.read", item: .seq(a))
        try await snooze(f, a, until: Self.t0 + 5000, id: "s1")
        let index = try InboxIndex(path: f.indexPath, feeds: Self.feeds)
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try titles(index, now: Self.t0) == ["b"])
        #expect(try titles(index, feed: "promo", now: Self.t0).isEmpty)
        #expect(try index.count(.user("alice"), now: Self.t0) == InboxCounts(unseen: 1, unread: 1))
        #expect(try index.nextDue() == Self.t0 + 5000)
        #expect(try index.dueSleep(now: Self.t0 + 1000) == .seconds(4))

        #expect(try index.applyDue(now: Self.t0 + 4999) == 0)
        #expect(try titles(index, now: Self.t0 + 4999) == ["b"])
        #expect(try index.applyDue(now: Self.t0 + 5000) == 1)
        #expect(try titles(index, now: Self.t0 + 5000) == ["b", "a"])
        // Back unread (it was read before the snooze); seen stays.
        #expect(try index.count(.user("alice"), now: Self.t0) == InboxCounts(unseen: 1, unread: 2))
        #expect(try index.count(.user("alice"), feed: "promo", now: Self.t0) == InboxCounts(unseen: 0, unread: 1))
        let changes = try index.timedChanges(.user("alice"), afterId: 0)
        #expect(changes.map(\.type) == ["nc.unsnoozed"] && changes.map(\.item) == [a])
        #expect(try index.timedChanges(.user("bob"), afterId: 0).isEmpty)
        #expect(try index.nextDue() == nil, "nothing pending: the writer sleeps until a record")
        #expect(try index.dueSleep(now: Self.t0) == nil)
    }

    @Test func aSnoozeThatIsOverOrUnsnoozedOrTooLong() async throws {
        let f = try InboxFixture()
        f.ingestMillis = Self.t0
        let a = try await f.notification(title: "a")
        let b = try await f.notification(title: "b")
        // Not after the event: over already, changes nothing.
        try await snooze(f, a, until: Self.t0, id: "past")
        // Years ahead: bounded to 366 days past the event.
        try await snooze(f, b, until: Self.t0 + 5 * 366 * 86_400_000, id: "far")
        let index = try InboxIndex(path: f.indexPath)
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try titles(index, now: Self.t0) == ["a"])
        #expect(try index.nextDue() == Self.t0 + 366 * 86_400_000)
        // An unsnooze brings it back now, unread, and forgets the pending end.
        try await f.event("nc.unsnooze", item: .seq(b))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try titles(index, now: Self.t0) == ["b", "a"])
        #expect(try index.count(.user("alice"), now: Self.t0) == InboxCounts(unseen: 2, unread: 2))
        #expect(try index.nextDue() == nil)
        // Another user's item is not snoozed by alice.
        let c = try await f.notification(user: "bob", title: "c")
        try await snooze(f, c, until: Self.t0 + 1000, id: "bobs")
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.count(.user("bob"), now: Self.t0) == InboxCounts(unseen: 1, unread: 1))
    }

    @Test func anExpiryLeavesTheCountersAtItsMoment() async throws {
        let f = try InboxFixture()
        f.ingestMillis = Self.t0
        try await f.notification(title: "lasting", category: "promo")
        try await f.notification(title: "brief", expiresAt: Timestamp.iso8601(millis: Self.t0 + 3000), category: "promo")
        try await f.notification(title: "gone", expiresAt: Timestamp.iso8601(millis: Self.t0 - 1), category: "promo")
        try await f.notification(title: "modal", presentation: "modal", expiresAt: Timestamp.iso8601(millis: Self.t0 + 3000))
        let index = try InboxIndex(path: f.indexPath, feeds: Self.feeds)
        try index.catchUp(journalDirectory: f.journalDirectory)
        // Already expired when journaled: never counted.
        #expect(try index.count(.user("alice"), now: Self.t0) == InboxCounts(unseen: 2, unread: 2))
        #expect(try index.inapp(.user("alice"), now: Self.t0)?.title == "modal")
        #expect(try index.applyDue(now: Self.t0 + 3000) == 2)
        // The counters themselves moved (asked at t0, where the query-time filter hides nothing).
        #expect(try index.count(.user("alice"), now: Self.t0) == InboxCounts(unseen: 1, unread: 1))
        #expect(try index.count(.user("alice"), feed: "promo", now: Self.t0) == InboxCounts(unseen: 1, unread: 1))
        #expect(try titles(index, now: Self.t0) == ["lasting"])
        #expect(try index.inapp(.user("alice"), now: Self.t0) == nil)
        #expect(try index.timedChanges(.user("alice"), afterId: 0).map(\.type) == ["nc.expired", "nc.expired"])
        // A later event on an expired item changes nothing.
        try await f.event("nc.unarchive", item: .seq(2))
        try await snooze(f, 2, until: Self.t0 + 9000, id: "late")
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.count(.user("alice"), now: Self.t0) == InboxCounts(unseen: 1, unread: 1))
        #expect(try index.nextDue() == nil)
    }

    /// The live index applies records and due transitions in whatever batches and at
    /// whatever moments; a rebuild at the same final moment comes out identical, including an
    /// event journaled after a snooze's end (it applies after the end, in both).
    @Test func aRebuildAtTheSameMomentIsIdentical() async throws {
        let f = try InboxFixture()
        f.ingestMillis = Self.t0
        let a = try await f.notification(title: "a", category: "promo")
        let b = try await f.notification(title: "b", expiresAt: Timestamp.iso8601(millis: Self.t0 + 4000))
        try await snooze(f, a, until: Self.t0 + 2000, id: "s1")
        let live = try InboxIndex(path: f.indexPath, feeds: Self.feeds)
        try live.catchUp(journalDirectory: f.journalDirectory)
        try live.applyDue(now: Self.t0 + 2500)
        // Read after the snooze ended: stays read. Snoozed again, and an expiry while snoozed.
        f.ingestMillis = Self.t0 + 3000
        try await f.event("nc.read", item: .seq(a))
        try await snooze(f, b, until: Self.t0 + 8000, id: "s2")
        f.ingestMillis = Self.t0 + 9000
        try await f.notification(title: "c", expiresAt: Timestamp.iso8601(millis: Self.t0 + 20_000))
        // The live follower slept through it all: one late batch.
        try live.catchUp(journalDirectory: f.journalDirectory)
        try live.applyDue(now: Self.t0 + 10_000)
        #expect(try titles(live, now: Self.t0 + 10_000) == ["c", "a"])
        #expect(try live.count(.user("alice"), now: Self.t0) == InboxCounts(unseen: 1, unread: 1))
        #expect(try live.timedChanges(.user("alice"), afterId: 0).map(\.type) == ["nc.unsnoozed", "nc.expired"])

        let rebuilt = f.temp.appending("rebuilt.sqlite")
        _ = try InboxIndex.rebuild(path: rebuilt, journalDirectory: f.journalDirectory, feeds: Self.feeds, now: Self.t0 + 10_000)
        #expect(try InboxIndex(path: rebuilt, readOnly: true).canonicalDump() == live.canonicalDump())
        _ = b
    }
}

/// `[Inbox] RetentionSec=` is an expiry too: an item leaves at the earliest of its own expiry
/// and the end of its retention; the index records the value and a writer with another one
/// finds it stale (rebuilt).
@Suite struct RetentionMomentTests {
    static let t0 = TimedTransitionsTests.t0

    @Test func retentionEndsAnItemAtItsMoment() async throws {
        let f = try InboxFixture()
        f.ingestMillis = Self.t0
        try await f.notification(title: "old")
        try await f.notification(title: "soon", expiresAt: Timestamp.iso8601(millis: Self.t0 + 1000))
        f.ingestMillis = Self.t0 + 5000
        try await f.notification(title: "new")
        let index = try InboxIndex(path: f.indexPath, retention: .seconds(10))
        try index.catchUp(journalDirectory: f.journalDirectory)
        // "soon" expired before "new" was journaled: applied before it. Next: "old"'s retention.
        #expect(try index.nextDue() == Self.t0 + 10_000)
        #expect(try index.timedChanges(.user("alice"), afterId: 0).map(\.item) == [2])
        try index.applyDue(now: Self.t0 + 10_000)
        #expect(try index.count(.user("alice"), now: Self.t0) == InboxCounts(unseen: 1, unread: 1))
        #expect(try index.list(.user("alice"), limit: 10, now: Self.t0).items.compactMap(\.title) == ["new"])
        #expect(try index.nextDue() == Self.t0 + 15_000)

        // Another RetentionSec= (or none): stale, so the follower rebuilds it.
        for other: Duration? in [nil, .seconds(11)] {
            #expect(throws: InboxError.self) { try InboxIndex(path: f.indexPath, retention: other) }
            do { _ = try InboxIndex(path: f.indexPath, retention: other) } catch { #expect(error.isStale) }
        }
        _ = try InboxIndex(path: f.indexPath, readOnly: true)
        let rebuilt = f.temp.appending("rebuilt.sqlite")
        _ = try InboxIndex.rebuild(path: rebuilt, journalDirectory: f.journalDirectory, retention: .seconds(10), now: Self.t0 + 10_000)
        #expect(try InboxIndex(path: rebuilt, readOnly: true).canonicalDump() == index.canonicalDump())
    }
}

/// FCM's time to live ends the item that long after its ingest, like an expiry.
@Suite struct TimeToLiveMomentTests {
    @Test func theTTLEndsTheItemAfterItsIngest() async throws {
        let t0 = TimedTransitionsTests.t0
        let f = try InboxFixture()
        f.ingestMillis = t0
        try await f.notification(title: "ttl", vendor: "fcm", extra: ["ttlMillis": .number("3500")])
        try await f.notification(title: "both", vendor: "fcm", expiresAt: Timestamp.iso8601(millis: t0 + 1000), extra: ["ttlMillis": .number("3500")])
        try await f.notification(title: "hostile", vendor: "fcm", extra: ["ttlMillis": .number("1e999")])
        let index = try InboxIndex(path: f.indexPath)
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.nextDue() == t0 + 1000)
        try index.applyDue(now: t0 + 3500)
        #expect(try index.list(.user("alice"), limit: 10, now: t0).items.compactMap(\.title) == ["hostile"])
        #expect(try index.count(.user("alice"), now: t0) == InboxCounts(unseen: 1, unread: 1))
    }
}
