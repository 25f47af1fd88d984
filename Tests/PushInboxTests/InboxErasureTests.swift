import Foundation
import PushInbox
import PushJournal
import PushSystem
import Testing
import TestSupport

/// `InboxIndex.erase`: after it, the index is the one a journal without the subject's records
/// would have built — no row of any table keyed by the owner or naming its items (feed
/// memberships and counters, muted categories, timers) — and no byte of the subject is left in
/// the file or its WAL.
@Suite struct InboxErasureTests {
    static let feeds = [InboxFeed(name: "promo", categories: ["promo"]), InboxFeed(name: "rest", rest: true)]
    let now: Int64 = 1_800_000_100_000

    func preferences(_ f: InboxFixture, user: String, _ muted: [String: Bool], id: String) async throws {
        try await f.append(["kind": .string("event"), "type": .string("nc.preferences"), "eventId": .string(id),
                            "user": .string(user), "muted": .object(JSONObject(muted.mapValues { JSONValue.bool($0) }))], key: "event:\(id)")
    }

    /// Pushes in both feeds, a muted category and a snoozed item, for `user`.
    func history(_ f: InboxFixture, user: String) async throws {
        let promo = try await f.notification(user: user, title: "\(user)-promo", category: "promo")
        try await f.notification(user: user, title: "\(user)-news", category: "news")
        try await f.notification(user: user, title: "\(user)-other")
        try await preferences(f, user: user, ["news": true], id: "mute-\(user)")
        try await f.append(["kind": .string("event"), "type": .string("nc.snooze"), "eventId": .string("snooze-\(user)"),
                            "user": .string(user), "item": .seq(promo), "until": .string(Timestamp.iso8601(millis: now + 3_600_000))],
                           key: "event:snooze-\(user)")
    }

    func records(_ f: InboxFixture) throws -> [JournalRecord] {
        let reader = try JournalReader(directory: f.journalDirectory, fromSeq: 1)
        var records: [JournalRecord] = []
        while let record = try reader.next() { records.append(record) }
        return records
    }

    /// An index built from `records` alone, at `path`.
    func built(_ path: String, from records: [JournalRecord]) throws -> [String] {
        let index = try InboxIndex(path: path, feeds: Self.feeds)
        _ = try index.apply(records)
        return try index.canonicalDump()
    }

    func fileHolds(_ path: String, _ needle: String) -> Bool {
        [path, path + "-wal"].contains { file in
            guard let data = FileManager.default.contents(atPath: file) else { return false }
            return data.range(of: Data(needle.utf8)) != nil
        }
    }

    func isAlices(_ record: JournalRecord) -> Bool {
        String(decoding: record.body, as: UTF8.self).contains(#""user":"alice""#)
    }

    @Test func anErasedUsersIndexIsOneThatNeverSawThem() async throws {
        let f = try InboxFixture()
        try await history(f, user: "alice")
        try await history(f, user: "bob")
        try await f.notification(user: "bob", title: "bob-last", category: "promo")
        let all = try records(f)
        _ = try built(f.indexPath, from: all)
        try #require(fileHolds(f.indexPath, "u:alice"))

        let deleted = try InboxIndex.erase(path: f.indexPath, subject: .user("alice"))
        #expect(deleted == 3)
        let expected = try built(f.temp.appending("without-alice.sqlite"), from: all.filter { !isAlices($0) })
        let erased = try InboxIndex(path: f.indexPath, readOnly: true, feeds: Self.feeds)
        #expect(try erased.canonicalDump() == expected)
        #expect(try erased.mutedCategories(.user("alice")).isEmpty)
        #expect(try erased.mutedCategories(.user("bob")) == ["news"])
        #expect(!fileHolds(f.indexPath, "alice"))
        #expect(fileHolds(f.indexPath, "u:bob") && fileHolds(f.indexPath, "bob-news"))
    }

    /// Bounded by the erasure record (pushspoold running): the items after it stay, counted in
    /// their feeds and no longer muted — the mute was erased with the rest.
    @Test func aBoundedErasureKeepsLaterItemsAsIfTheEarlierNeverWere() async throws {
        let f = try InboxFixture()
        try await history(f, user: "alice")
        try await history(f, user: "bob")
        let boundary = try await f.notification(user: "bob", title: "bob-last", category: "promo")
        try await f.notification(user: "alice", title: "alice-later-news", category: "news")
        try await f.notification(user: "alice", title: "alice-later-promo", category: "promo")
        let all = try records(f)
        _ = try built(f.indexPath, from: all)

        #expect(try InboxIndex.erase(path: f.indexPath, subject: .user("alice"), before: boundary) == 3)
        let expected = try built(f.temp.appending("later-only.sqlite"), from: all.filter { !(isAlices($0) && $0.seq < boundary) })
        let erased = try InboxIndex(path: f.indexPath, readOnly: true, feeds: Self.feeds)
        #expect(try erased.canonicalDump() == expected)
        #expect(try erased.count(.user("alice"), now: now) == InboxCounts(unseen: 2, unread: 2))
        #expect(try erased.count(.user("alice"), feed: "promo", now: now) == InboxCounts(unseen: 1, unread: 1))
        #expect(try erased.mutedCategories(.user("alice")).isEmpty)
    }

    /// A device's erasure takes the items naming it, its own (`d:<device>`) and users' alike,
    /// and recounts those users: the index is one built without the device's records.
    @Test func anErasedDevicesIndexIsOneThatNeverSawIt() async throws {
        let f = try InboxFixture()
        try await f.notification(user: nil, device: "tv1", title: "tv1-own", category: "promo")
        try await f.notification(user: "bob", device: "tv1", title: "bob-on-tv1", category: "promo")
        try await f.notification(user: "bob", device: "phone", title: "bob-on-phone", category: "promo")
        try await f.notification(user: nil, device: "tv2", title: "tv2-own")
        let all = try records(f)
        _ = try built(f.indexPath, from: all)
        try #require(fileHolds(f.indexPath, "d:tv1"))

        #expect(try InboxIndex.erase(path: f.indexPath, subject: .device("tv1")) == 2)
        let expected = try built(f.temp.appending("without-tv1.sqlite"), from: all.filter {
            !String(decoding: $0.body, as: UTF8.self).contains(#""device":"tv1""#)
        })
        let erased = try InboxIndex(path: f.indexPath, readOnly: true, feeds: Self.feeds)
        #expect(try erased.canonicalDump() == expected)
        #expect(!fileHolds(f.indexPath, "tv1"))
        #expect(fileHolds(f.indexPath, "bob-on-phone") && fileHolds(f.indexPath, "d:tv2"))
    }

    /// Each scope's statements read `items` through its index (`items_owner`, `items_device`):
    /// one statement for both scopes, `device = ?1 OR owner = ?2`, scanned the whole table.
    @Test(arguments: [false, true]) func eachErasureScopeReadsItemsThroughAnIndex(device: Bool) throws {
        let temp = TempDir()
        let path = temp.appending("index.sqlite")
        _ = try InboxIndex(path: path, feeds: Self.feeds)
        let db = try SQLiteDatabase(path: path, mode: .readOnly)
        let sql = device ? InboxIndex.ErasureSQL.device : InboxIndex.ErasureSQL.user
        for statement in sql.all {
            let plan = try db.queryPlan(statement)
            let items = plan.filter { $0.hasPrefix("SEARCH items ") || $0.hasPrefix("SCAN items") }
            #expect(!items.isEmpty, "\(statement): \(plan)")
            #expect(items.allSatisfy { $0.contains("USING INDEX") || $0.contains("USING COVERING INDEX") }, "\(statement): \(plan)")
            #expect(!plan.contains { $0.hasPrefix("SCAN items") }, "\(statement): \(plan)")
        }
    }
}
