import PushInbox
import PushSystem
import Testing
import TestSupport

/// Feeds (`[Feed NAME]`): which items each one takes, its list and its exact counts through
/// every state change, the bulk changes limited to a feed, and an index built with other
/// definitions being rebuilt rather than kept.
@Suite struct FeedsTests {
    let now: Int64 = 1_800_000_100_000

    static let feeds = [
        InboxFeed(name: "promo", categories: ["promo", "sale"]),
        InboxFeed(name: "infobip", vendors: ["infobip"]),
        InboxFeed(name: "vip", payloadKey: "tier", payloadValue: "gold"),
        InboxFeed(name: "flagged", payloadKey: "flag"),
        InboxFeed(name: "rest", rest: true),
    ]

    func index(_ f: InboxFixture, feeds: [InboxFeed] = Self.feeds) throws -> InboxIndex {
        try InboxIndex(path: f.indexPath, feeds: feeds)
    }

    /// Every listed item of a feed (pages of 500), newest first with pins first.
    func all(_ index: InboxIndex, _ owner: InboxOwner = .user("alice"), feed: String? = nil) throws -> [InboxItem] {
        var items: [InboxItem] = []
        var cursor: String?
        repeat {
            let page = try index.list(owner, feed: feed, limit: 500, cursor: cursor, now: now)
            items += page.items
            cursor = page.nextCursor
        } while cursor != nil
        return items
    }

    /// The counts a list implies: what `count` must equal, whatever happened before.
    func model(_ items: [InboxItem]) -> InboxCounts {
        InboxCounts(unseen: Int64(items.filter { !$0.seen }.count), unread: Int64(items.filter { !$0.read }.count))
    }

    @Test func eachFeedTakesItsItemsAndEverythingElseTheRest() async throws {
        let f = try InboxFixture()
        let promo = try await f.notification(title: "promo", category: "promo")
        let sale = try await f.notification(title: "sale", category: "sale")
        let infobip = try await f.notification(title: "infobip", vendor: "infobip")
        let both = try await f.notification(title: "both", vendor: "infobip", category: "sale")
        let gold = try await f.notification(title: "gold", extra: ["customPayload": .object(["tier": .string("gold"), "flag": .bool(false)])])
        let silver = try await f.notification(title: "silver", extra: ["customPayload": .object(["tier": .string("silver")])])
        let nullFlag = try await f.notification(title: "null flag", extra: ["customPayload": .object(["flag": .null])])
        let text = try await f.notification(title: "text", extra: ["customPayload": .string("tier gold")])
        let index = try index(f)
        try index.catchUp(journalDirectory: f.journalDirectory)

        #expect(try index.feedNames() == ["promo", "infobip", "vip", "flagged", "rest"])
        #expect(try all(index, feed: "promo").map(\.seq) == [both, sale, promo])
        #expect(try all(index, feed: "infobip").map(\.seq) == [both, infobip])
        #expect(try all(index, feed: "vip").map(\.seq) == [gold])
        // `false` is a value: the member is there. `null` is not.
        #expect(try all(index, feed: "flagged").map(\.seq) == [gold])
        // A string payload has no members; nothing else took these three.
        #expect(try all(index, feed: "rest").map(\.seq) == [text, nullFlag, silver])
        #expect(try all(index).count == 8)

        let counts = try index.feedCounts(.user("alice"), now: now)
        #expect(counts.map(\.feed) == ["promo", "infobip", "vip", "flagged", "rest"])
        #expect(counts.map(\.counts.unread) == [3, 2, 1, 1, 3])
        #expect(try index.count(.user("alice"), feed: "infobip", now: now) == InboxCounts(unseen: 2, unread: 2))
        // Another user's inbox has its own counts (none here).
        #expect(try index.feedCounts(.user("bob"), now: now).allSatisfy { $0.counts == InboxCounts(unseen: 0, unread: 0) })
    }

    @Test func anUnknownFeedIsAnErrorNamingTheFeeds() async throws {
        let f = try InboxFixture()
        try await f.notification(title: "a")
        let index = try index(f)
        try index.catchUp(journalDirectory: f.journalDirectory)
        let calls: [() throws -> Void] = [{ _ = try index.list(.user("alice"), feed: "nope", now: now) },
                                          { _ = try index.count(.user("alice"), feed: "nope", now: now) }]
        for call in calls {
            let error = try #require(throws: InboxError.self) { try call() }
            guard case .unknownFeed("nope", let known) = error.kind else { Issue.record("\(error)"); continue }
            #expect(known == ["promo", "infobip", "vip", "flagged", "rest"])
            #expect(error.description.contains("the feeds are promo, infobip"))
        }
        // Without feeds there is no feed to name, and counts carry none.
        let g = try InboxFixture("nofeeds")
        let plain = try InboxIndex(path: g.indexPath)
        #expect(try plain.feedCounts(.user("alice"), now: now).isEmpty)
        #expect(throws: InboxError.self) { try plain.list(.user("alice"), feed: "promo", now: now) }
    }

    /// Counts per feed follow every state change exactly: after each event the counters equal
    /// what the feed's list implies, for every feed.
    @Test func feedCountsStayExactThroughStateChanges() async throws {
        let f = try InboxFixture()
        var seqs: [UInt64] = []
        for i in 0..<24 {
            let category: String? = ["promo", "sale", nil, "news"][i % 4]
            let vendor = i % 3 == 0 ? "infobip" : "mindbox"
            let payload: JSONValue = i % 5 == 0 ? .object(["tier": .string("gold")]) : .object(["flag": .number("1")])
            // Some expire before `now`, so the counters' expired part is subtracted per feed too.
            let expires: String? = i % 7 == 3 ? Timestamp.iso8601(millis: now - 1) : nil
            seqs.append(try await f.notification(title: "n\(i)", vendor: vendor, expiresAt: expires, category: category,
                                                 extra: ["customPayload": payload]))
        }
        let index = try index(f)
        try index.catchUp(journalDirectory: f.journalDirectory)
        func check(_ step: String) throws {
            for feed in try index.feedNames() {
                let listed = try all(index, feed: feed)
                #expect(try index.count(.user("alice"), feed: feed, now: now) == model(listed), "\(step): feed \(feed)")
            }
            #expect(try index.count(.user("alice"), now: now) == model(try all(index)), "\(step): total")
        }
        try check("arrivals")
        let events: [(String, Int)] = [("nc.seen", 0), ("nc.read", 1), ("nc.open", 2), ("nc.archive", 4), ("nc.unread", 1),
                                       ("nc.unarchive", 4), ("nc.pin", 5), ("nc.read", 5), ("nc.delete", 6), ("nc.archive", 8),
                                       ("nc.action", 9), ("nc.unread", 9), ("nc.delete", 8), ("nc.pin", 10)]
        for (type, i) in events {
            try await f.event(type, item: .seq(seqs[i]))
            try index.catchUp(journalDirectory: f.journalDirectory)
            try check("\(type) \(i)")
        }
        // Bulk changes limited to a feed touch only its items.
        let restBefore = try index.count(.user("alice"), feed: "rest", now: now)
        try await f.append(["kind": .string("event"), "type": .string("nc.read-all"), "eventId": .string("bulk1"),
                            "user": .string("alice"), "feed": .string("promo")], key: "event:bulk1")
        try index.catchUp(journalDirectory: f.journalDirectory)
        try check("read-all promo")
        #expect(try index.count(.user("alice"), feed: "promo", now: now).unread == 0)
        #expect(try index.count(.user("alice"), feed: "rest", now: now) == restBefore)
        try await f.append(["kind": .string("event"), "type": .string("nc.archive-read"), "eventId": .string("bulk2"),
                            "user": .string("alice"), "feed": .string("promo")], key: "event:bulk2")
        try index.catchUp(journalDirectory: f.journalDirectory)
        try check("archive-read promo")
        #expect(try all(index, feed: "promo").isEmpty)
        // Every promo item was read, so all of them left; infobip keeps its others.
        let infobip = try all(index, feed: "infobip")
        #expect(!infobip.isEmpty && infobip.allSatisfy { $0.category != "promo" && $0.category != "sale" })
        // A feed the index does not know changes nothing (it is not "every item").
        let before = try index.canonicalDump().filter { !$0.hasPrefix("meta|last_seq") }
        try await f.append(["kind": .string("event"), "type": .string("nc.read-all"), "eventId": .string("bulk3"),
                            "user": .string("alice"), "feed": .string("gone")], key: "event:bulk3")
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.canonicalDump().filter { !$0.hasPrefix("meta|last_seq") } == before)
        try await f.event("nc.read-all")
        try index.catchUp(journalDirectory: f.journalDirectory)
        try check("read-all")

        // The journal alone rebuilds the same index, memberships and counters included.
        let rebuilt = f.temp.appending("rebuilt.sqlite")
        _ = try InboxIndex.rebuild(path: rebuilt, journalDirectory: f.journalDirectory, feeds: Self.feeds)
        let dump = try index.canonicalDump()
        #expect(try InboxIndex(path: rebuilt, readOnly: true).canonicalDump() == dump)
        #expect(dump.contains { $0.hasPrefix("feed-item|u:alice|") } && dump.contains { $0.hasPrefix("feed-count|u:alice|") })
    }

    /// Random arrivals, state changes and muted categories for three users, checked against
    /// the lists after every batch: a feed's counters never drift from what it lists.
    @Test(arguments: [1, 2, 3]) func randomHistoriesKeepEveryFeedCountExact(seed: UInt64) async throws {
        let f = try InboxFixture("random\(seed)")
        var random = SplitMix64(seed: seed)
        let users = ["alice", "bob", "carol"]
        var items: [String: [UInt64]] = [:]
        let index = try index(f)
        let types = ["nc.seen", "nc.read", "nc.open", "nc.archive", "nc.unread", "nc.unarchive", "nc.delete", "nc.pin",
                     "nc.unpin", "nc.action", "nc.read-all", "nc.archive-read", "nc.preferences"]
        for step in 0..<160 {
            let user = users[Int(random.next() % 3)]
            if random.next() % 3 == 0 || items[user, default: []].isEmpty {
                let category: String? = ["promo", "sale", "news", nil][Int(random.next() % 4)]
                let payload: JSONValue = [.object(["tier": .string("gold")]), .object(["flag": .string("x")]), .string("t"),
                                          .object([:])][Int(random.next() % 4)]
                let expires: String? = random.next() % 9 == 0 ? Timestamp.iso8601(millis: now - 5) : nil
                items[user, default: []].append(try await f.notification(
                    user: user, title: "s\(step)", vendor: random.next() % 2 == 0 ? "infobip" : "sfmc", expiresAt: expires,
                    category: category, extra: ["customPayload": payload]))
            } else {
                let type = types[Int(random.next() % UInt64(types.count))]
                if type == "nc.preferences" {
                    // Mute or unmute one category: its items leave or rejoin every list and count.
                    let category = ["promo", "sale", "news"][Int(random.next() % 3)]
                    try await f.append(["kind": .string("event"), "type": .string(type), "eventId": .string("r\(step)"),
                                        "user": .string(user), "muted": .object([category: .bool(random.next() % 2 == 0)])],
                                       key: "event:r\(step)")
                } else if type == "nc.read-all" || type == "nc.archive-read" {
                    var body: JSONObject = ["kind": .string("event"), "type": .string(type), "eventId": .string("r\(step)"),
                                                     "user": .string(user)]
                    if random.next() % 2 == 0 { body["feed"] = .string(Self.feeds[Int(random.next() % 5)].name) }
                    try await f.append(body, key: "event:r\(step)")
                } else {
                    let mine = items[user, default: []]
                    // Now and then another user's item: such an event must change nothing.
                    let seq = random.next() % 10 == 0 ? UInt64(random.next() % UInt64(step + 1) + 1) : mine[Int(random.next() % UInt64(mine.count))]
                    var body: JSONObject = ["kind": .string("event"), "type": .string(type), "eventId": .string("r\(step)"),
                                                     "user": .string(user), "item": .seq(seq)]
                    if type == "nc.action" { body["action"] = .string("a") }
                    try await f.append(body, key: "event:r\(step)")
                }
            }
            if step % 7 == 6 {
                try index.catchUp(journalDirectory: f.journalDirectory, batchSize: 5)
                for user in users {
                    for feed in Self.feeds.map(\.name) {
                        #expect(try index.count(.user(user), feed: feed, now: now) == model(try all(index, .user(user), feed: feed)),
                                "seed \(seed) step \(step) \(user) \(feed)")
                    }
                    // Each item is in a feed, since one takes everything else.
                    let union = Set(try Self.feeds.flatMap { try all(index, .user(user), feed: $0.name).map(\.seq) })
                    #expect(union == Set(try all(index, .user(user)).map(\.seq)))
                }
            }
        }
        // The journal alone gives the same index, whatever happened.
        try index.catchUp(journalDirectory: f.journalDirectory)
        let rebuilt = f.temp.appending("rebuilt.sqlite")
        _ = try InboxIndex.rebuild(path: rebuilt, journalDirectory: f.journalDirectory, feeds: Self.feeds)
        #expect(try InboxIndex(path: rebuilt, readOnly: true).canonicalDump() == index.canonicalDump())
    }

    @Test func pinnedItemsComeFirstInAFeedAndPagesNeitherRepeatNorSkip() async throws {
        let f = try InboxFixture()
        var promo: [UInt64] = []
        for i in 0..<9 {
            let seq = try await f.notification(title: "n\(i)", category: i % 3 == 2 ? "news" : "promo")
            if i % 3 != 2 { promo.append(seq) }
        }
        try await f.event("nc.pin", item: .seq(promo[1]))
        try await f.event("nc.pin", item: .seq(promo[4]))
        let index = try index(f)
        try index.catchUp(journalDirectory: f.journalDirectory)
        var seen: [UInt64] = []
        var cursor: String?
        repeat {
            let page = try index.list(.user("alice"), feed: "promo", limit: 2, cursor: cursor, now: now)
            seen += page.items.map(\.seq)
            cursor = page.nextCursor
        } while cursor != nil
        #expect(seen == [promo[4], promo[1]] + promo.filter { $0 != promo[1] && $0 != promo[4] }.reversed())
    }

    /// Other definitions make a writer's open fail as stale, and the follower then rebuilds
    /// the index with the new ones: no item keeps the membership of a feed that changed.
    @Test func changedDefinitionsRebuildTheIndex() async throws {
        let f = try InboxFixture()
        let promo = try await f.notification(title: "promo", category: "promo")
        let news = try await f.notification(title: "news", category: "news")
        do {
            let index = try index(f)
            try index.catchUp(journalDirectory: f.journalDirectory)
            #expect(try all(index, feed: "promo").map(\.seq) == [promo])
        }
        let changed = [InboxFeed(name: "promo", categories: ["news"]), InboxFeed(name: "rest", rest: true)]
        let error = try #require(throws: InboxError.self) { try InboxIndex(path: f.indexPath, feeds: changed) }
        #expect(error.isStale && error.shortDescription == "feeds-mismatch")
        // A reader does not care: it reads the feeds the index was built with.
        #expect(try InboxIndex(path: f.indexPath, readOnly: true).feedNames().count == 5)

        let notices = Locked([InboxNotice]())
        let follower = try InboxFollower(stateDirectory: f.stateDirectory, feeds: changed,
                                         notify: { [notices] notice in notices.withLock { $0.append(notice) } })
        #expect(notices.withLock { $0 } == [.indexOutdated(reason: "feeds-mismatch")])
        try follower.catchUp()
        let reader = try InboxIndex(path: f.indexPath, readOnly: true)
        #expect(try reader.feedNames() == ["promo", "rest"])
        #expect(try all(reader, feed: "promo").map(\.seq) == [news])
        #expect(try all(reader, feed: "rest").map(\.seq) == [promo])
        // The same definitions open as they are.
        #expect(throws: Never.self) { _ = try InboxIndex(path: f.indexPath, feeds: changed) }
    }

    @Test func definitionTextsTellDefinitionsApart() {
        let texts = Set([InboxFeed(name: "a", categories: ["x"]), InboxFeed(name: "a", vendors: ["x"]),
                         InboxFeed(name: "a", payloadKey: "x"), InboxFeed(name: "a", payloadKey: "x", payloadValue: "y"),
                         InboxFeed(name: "a", categories: ["x", "y"]), InboxFeed(name: "a", rest: true)].map(\.definitionText))
        #expect(texts.count == 6)
    }
}

/// A small deterministic generator, so a failing history can be replayed by its seed.
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
