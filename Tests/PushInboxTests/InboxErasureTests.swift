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
                            "user": .string(user), "muted": .object(muted.mapValues { .bool($0) })], key: "event:\(id)")
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
}
