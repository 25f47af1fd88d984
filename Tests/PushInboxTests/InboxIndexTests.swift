@preconcurrency import Glibc
import Foundation
import PushFollow
import PushInbox
import PushJournal
import PushSystem
import Testing
import TestSupport

@Suite struct InboxIndexTests {
    let now: Int64 = 1_800_000_100_000

    @Test func userIsolationWithPrefixesOddCharactersAndEmptyIds() async throws {
        let f = try InboxFixture()
        let users = ["alice", "alice2", "ali", "a:lice", "u:alice", "al%ce", "al_ce", "ÄLICE ü", "alice\u{0}x", "🙂", " "]
        var seqs: [String: UInt64] = [:]
        for user in users { seqs[user] = try await f.notification(user: user, title: "for \(user)") }
        try await f.notification(user: nil, device: "alice", title: "device alice")
        try await f.notification(user: "", device: "dev-1", title: "empty user")
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        for user in users {
            let page = try index.list(.user(user), now: now)
            #expect(page.items.map(\.seq) == [seqs[user]!], "user \(user.debugDescription)")
            #expect(try index.count(.user(user), now: now) == InboxCounts(unseen: 1, unread: 1))
        }
        #expect(try index.list(.user(""), now: now).items.isEmpty)
        #expect(try index.list(.user("alic"), now: now).items.isEmpty)
        #expect(try index.list(.user("%"), now: now).items.isEmpty)
        // Items without a user belong to a device's shared inbox only.
        #expect(try index.list(.device("alice"), now: now).items.map(\.title) == ["device alice"])
        #expect(try index.list(.device("dev-1"), now: now).items.map(\.title) == ["empty user"])
    }

    @Test func eventsNeverCrossInboxes() async throws {
        let f = try InboxFixture()
        let bobs = try await f.notification(user: "bob")
        let shared = try await f.notification(user: nil, device: "dev-1")
        try await f.event("nc.read", user: "alice", item: .seq(bobs))
        try await f.event("nc.archive", user: "bo", item: .seq(bobs))
        try await f.event("nc.read", user: "alice", device: "dev-1", item: .seq(shared))
        try await f.event("nc.read-all", user: "alice")
        try await f.event("nc.read", user: "bob", item: .seq(999))  // unknown item
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.count(.user("bob"), now: now) == InboxCounts(unseen: 1, unread: 1))
        #expect(try index.count(.device("dev-1"), now: now) == InboxCounts(unseen: 1, unread: 1))
        try await f.event("nc.read", user: nil, device: "dev-1", item: .seq(shared))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.count(.device("dev-1"), now: now) == InboxCounts(unseen: 0, unread: 0))
    }

    @Test func seenReadArchivedAndExactCounts() async throws {
        let f = try InboxFixture()
        var seqs: [UInt64] = []
        for i in 0..<10 { seqs.append(try await f.notification(title: "n\(i)")) }
        try await f.event("nc.seen", item: .seq(seqs[0]))
        try await f.event("nc.seen", item: .seq(seqs[1]))
        try await f.event("nc.read", item: .seq(seqs[1]))
        try await f.event("nc.open", item: .seq(seqs[2]))
        try await f.event("nc.archive", item: .seq(seqs[3]))
        try await f.event("nc.seen", item: .seq(seqs[0]))  // again: no double count
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        // 9 visible; unseen: all but 0,1,2; unread: all but 1,2.
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 6, unread: 7))
        let page = try index.list(.user("alice"), limit: 500, now: now)
        #expect(page.items.count == 9)
        #expect(!page.items.contains { $0.seq == seqs[3] })
        let first = try #require(page.items.first { $0.seq == seqs[0] })
        #expect(first.seen && !first.read)
        #expect(try index.list(.user("alice"), unread: true, limit: 500, now: now).items.count == 7)

        try await f.event("nc.read-all")
        try await f.event("nc.archive-read")
        try await f.notification(title: "later")
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 1, unread: 1))
        #expect(try index.list(.user("alice"), now: now).items.map(\.title) == ["later"])
    }

    @Test func categoryFilterAndFields() async throws {
        let f = try InboxFixture()
        let actions: JSONValue = .array([.object(["id": .string("reply"), "title": .string("Reply"), "options": .array([]),
                                                  "textInput": .object(["buttonTitle": .string("Send"), "placeholder": .string("…")])])])
        try await f.notification(title: "plain")
        let rich = try await f.notification(title: "rich", category: "chat", extra: [
            "actions": actions, "actionsCut": .number("2"),
            "media": .object(["path": .string("ab/cd.jpg"), "thumbnail": .object(["path": .string("ab/cd.thumb.jpg")])]),
            "customPayload": .object(["pushName": .string("promo"), "pushDate": .number("1700000000")]),
            "buttons": .array([.object(["text": .string("Go"), "options": .array([])])]),
        ])
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        let page = try index.list(.user("alice"), category: "chat", now: now)
        let item = try #require(page.items.first)
        #expect(page.items.count == 1 && item.seq == rich)
        #expect(item.actions == actions && item.actionsCut == 2)
        #expect(item.mediaPath == "ab/cd.jpg" && item.thumbnailPath == "ab/cd.thumb.jpg")
        #expect(item.pushName == "promo" && item.pushDate == "1700000000")

        // The guide's other spelling (its step 4.7) names the push too.
        let snake = try await f.notification(title: "snake", category: "snake", extra: [
            "customPayload": .object(["push_name": .string("sale"), "push_date": .string("01.03.2026 10:00")]),
        ])
        try index.catchUp(journalDirectory: f.journalDirectory)
        let snakeItem = try #require(try index.list(.user("alice"), category: "snake", now: now).items.first)
        #expect(snakeItem.seq == snake && snakeItem.pushName == "sale" && snakeItem.pushDate == "01.03.2026 10:00")
        #expect(item.buttons.arrayValue?.count == 1)
    }

    @Test func cursorStaysCorrectWhileItemsArrive() async throws {
        let f = try InboxFixture()
        for i in 0..<25 { try await f.notification(title: "old\(i)") }
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        var seen: [UInt64] = []
        var cursor: String? = nil
        var pages = 0
        repeat {
            let page = try index.list(.user("alice"), limit: 7, cursor: cursor, now: now)
            seen += page.items.map(\.seq)
            cursor = page.nextCursor
            pages += 1
            // Newer items arrive between pages; they belong before the first page.
            for j in 0..<3 { try await f.notification(title: "new\(pages)-\(j)") }
            try index.catchUp(journalDirectory: f.journalDirectory)
        } while cursor != nil
        #expect(pages == 4)
        #expect(seen == Array((1...25).reversed()).map(UInt64.init))
    }

    @Test(arguments: ["", "c1.", "c1.zz", "c1.-1", "c1.0", "c1.ffffffffffffffffff", "c3.10", "c2.", "c2.x", "garbage", "c1.A", "c1.1 ", "c1.\u{0}"])
    func garbageCursorsAreRefused(cursor: String) async throws {
        let f = try InboxFixture()
        try await f.notification()
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(throws: InboxError.self) { try index.list(.user("alice"), cursor: cursor, now: now) }
        #expect(throws: InboxError.self) { try index.list(.user("alice"), limit: 0, now: now) }
        #expect(throws: InboxError.self) { try index.list(.user("alice"), limit: 501, now: now) }
    }

    @Test func expiryAndRetention() async throws {
        let f = try InboxFixture()
        try await f.notification(title: "expired", expiresAt: Timestamp.iso8601(millis: now - 1))
        try await f.notification(title: "valid", expiresAt: Timestamp.iso8601(millis: now + 60_000))
        try await f.notification(title: "offset", expiresAt: "2020-01-01T00:00:00+02:00")
        try await f.notification(title: "garbage expiry", expiresAt: "not a date")
        f.ingestMillis = now - 86_400_000 * 10
        try await f.notification(title: "ten days old")
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.list(.user("alice"), now: now).items.map(\.title) == ["ten days old", "garbage expiry", "valid"])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 3, unread: 3))
        let week = Duration.seconds(7 * 86_400)
        #expect(try index.list(.user("alice"), now: now, retention: week).items.map(\.title) == ["garbage expiry", "valid"])
        #expect(try index.count(.user("alice"), now: now, retention: week) == InboxCounts(unseen: 2, unread: 2))
        #expect(try index.count(.user("alice"), now: now + 120_000, retention: week) == InboxCounts(unseen: 1, unread: 1))
        #expect(try index.count(.user("alice"), now: now, retention: .seconds(Int64.max)) == InboxCounts(unseen: 3, unread: 3))
    }

    @Test func modalRuleOptOutAndBanners() async throws {
        let f = try InboxFixture()
        let index = try f.openIndex()
        try await f.notification(title: "banner", presentation: "banner")
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.inapp(.user("alice"), now: now) == nil)
        let older = try await f.notification(title: "older modal", presentation: "modal")
        let newer = try await f.notification(title: "newer modal", presentation: "modal",
                                             extra: ["inAppOpenTitle": .string("Open"), "inAppDismissTitle": .string("Later")])
        try index.catchUp(journalDirectory: f.journalDirectory)
        let shown = try #require(try index.inapp(.user("alice"), now: now))
        #expect(shown.seq == newer && shown.inAppOpenTitle == "Open" && shown.inAppDismissTitle == "Later")
        #expect(try index.inapp(.user("bob"), now: now) == nil)
        // Presenting does not mark it; the inapp-shown event does. The older one never shows.
        try await f.event("nc.inapp-shown", item: .seq(newer))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.inapp(.user("alice"), now: now) == nil)
        _ = older
        // An expired latest modal presents nothing.
        try await f.notification(title: "expired modal", presentation: "modal", expiresAt: Timestamp.iso8601(millis: now - 1))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.inapp(.user("alice"), now: now) == nil)
        // Opt-out, then back in.
        let latest = try await f.notification(title: "modal 3", presentation: "modal")
        try await f.event("nc.inapp-optout", enabled: false)
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.inapp(.user("alice"), now: now) == nil)
        try await f.event("nc.inapp-optout", enabled: true)
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.inapp(.user("alice"), now: now)?.seq == latest)
        // An acted-on modal is not presented; an acted-on banner leaves the inbox.
        func act(_ seq: UInt64, _ id: String) async throws {
            try await f.append(["kind": .string("event"), "type": .string("nc.action"), "eventId": .string(id), "user": .string("alice"),
                                "item": .seq(seq), "action": .string("mm_accept")], key: "event:" + id)
        }
        try await act(latest, "act-modal")
        let banner = try #require(try index.list(.user("alice"), limit: 500, now: now).items.first { $0.title == "banner" })
        try await act(banner.seq, "act-banner")
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.inapp(.user("alice"), now: now) == nil)
        #expect(try !index.list(.user("alice"), limit: 500, now: now).items.contains { $0.title == "banner" })
    }

    @Test func reapplyingIsIdempotent() async throws {
        let f = try InboxFixture()
        let a = try await f.notification()
        try await f.event("nc.read", item: .seq(a))
        try await f.notification()
        let records = Array(try JournalReader(directory: f.journalDirectory).records(fromSeq: 1))
        let index = try f.openIndex()
        #expect(try index.apply(records) == 3)
        let dump = try index.canonicalDump()
        #expect(try index.apply(records) == 0)
        for record in records { try index.apply(record: record) }
        #expect(try index.canonicalDump() == dump)
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 1, unread: 1))
        #expect(try index.appliedSeq() == 3)
    }

    @Test func hostileRecordsChangeNothingButTheSeq() async throws {
        let f = try InboxFixture()
        let a = try await f.notification(extra: ["actionsCut": .number("1e999"), "expiresAt": .number("1e999"),
                                                 "ingestedAt": .string("9999-99-99T99:99:99Z"), "media": .string("x")])
        for item in ["1e3", "-1", "1.5", "18446744073709551617", "9223372036854775808", "0", "\(a)e0"] {
            try await f.event("nc.archive", item: .number(item))
        }
        try await f.event("nc.archive", item: .string("\(a)"))
        try await f.event("nc.inapp-optout", enabled: nil)
        _ = try await f.appendRaw(Array("not json".utf8))
        _ = try await f.appendRaw(Array("[1,2]".utf8))
        try await f.append(["kind": .number("3")])
        let last = try await f.append(["kind": .string("event"), "type": .array([])])
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.appliedSeq() == last)
        let item = try #require(try index.list(.user("alice"), now: now).items.first)
        #expect(item.seq == a && !item.archived && item.actionsCut == 0 && item.expiresAtMillis == nil)
    }

    @Test func reindexEqualsIncrementalIndex() async throws {
        let f = try InboxFixture()
        let index = try f.openIndex()
        for i in 0..<40 {
            let seq = try await f.notification(user: i % 3 == 0 ? "bob" : "alice", title: "n\(i)", presentation: i % 5 == 0 ? "modal" : nil)
            if i % 4 == 0 { try await f.event("nc.read", user: i % 3 == 0 ? "bob" : "alice", item: .seq(seq)) }
            if i % 7 == 0 { try index.catchUp(journalDirectory: f.journalDirectory, batchSize: 3) }
        }
        try await f.event("nc.archive-read", user: "bob")
        try await f.event("nc.inapp-optout", user: "bob", enabled: false)
        try index.catchUp(journalDirectory: f.journalDirectory, batchSize: 5)
        let rebuilt = f.temp.appending("rebuilt.sqlite")
        _ = try InboxIndex.rebuild(path: rebuilt, journalDirectory: f.journalDirectory)
        #expect(try InboxIndex(path: rebuilt, readOnly: true).canonicalDump() == index.canonicalDump())
        // Rebuilding over the live index (open here) copies in place; the open connection stays valid.
        let result = try InboxIndex.rebuild(path: f.indexPath, journalDirectory: f.journalDirectory)
        #expect(result.items == 40)
        #expect(try index.canonicalDump() == InboxIndex(path: rebuilt, readOnly: true).canonicalDump())
    }

    @Test func readOnlyOpenOfMissingIndexSaysHowToBuildIt() throws {
        let temp = TempDir()
        #expect(throws: InboxError.self) { try InboxIndex(path: temp.appending("none/index.sqlite"), readOnly: true) }
        do { _ = try InboxIndex(path: temp.appending("none/index.sqlite"), readOnly: true) } catch {
            #expect("\(error)".contains("nc reindex"))
        }
    }

    @Test func followerAppliesOnItsOwnThreadAndReportsLag() async throws {
        let f = try InboxFixture()
        try await f.notification()
        let follower = try InboxFollower(stateDirectory: f.stateDirectory)
        #expect(follower.lag == 1)
        // Woken by the writer's commits, as in pushspoold: no timer.
        let runner = FollowerRunner(follower, commits: f.writer.commits)
        try runner.start()
        for _ in 0..<5 { try await f.notification() }
        _ = eventually(within: 5) { follower.appliedSeq >= 6 }
        #expect(follower.appliedSeq == 6)
        #expect(follower.lag == 0)
        #expect(follower.status.running)
        runner.stop()
        #expect(!follower.status.running)
        try await f.notification()
        #expect(try follower.catchUp() == 1)
        #expect(try InboxIndex(path: f.indexPath, readOnly: true).count(.user("alice"), now: now).unread == 7)
    }
}
