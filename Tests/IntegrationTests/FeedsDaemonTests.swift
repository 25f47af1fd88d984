@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushJournal
import PushSystem

/// Issue 25, feeds: `[Feed NAME]` lists and counts through the real pushspoold (spool,
/// journal, index follower), pushspool-inbox and `pushspoolctl nc`, a SIGKILL between the
/// events and their application, a reindex, and a changed definition.
@Suite struct FeedsDaemonTests {
    static let feeds = "[Feed promo]\nCategories=promo\n[Feed vip]\nPayloadKey=tier\nPayloadValue=gold\n[Feed other]\nOther=yes\n"

    /// A push with a category and a `tier` custom key (APNs custom keys are the custom payload).
    static func push(_ daemon: DaemonHarness, user: String = "alice", title: String, category: String? = nil, tier: String? = nil) throws {
        let categoryText = category.map { ",\"category\":\"\($0)\"" } ?? ""
        let tierText = tier.map { ",\"tier\":\"\($0)\"" } ?? ""
        let json = """
            {"pushspool":1,"user":"\(user)","platform":"ios","payload":{"aps":{"alert":{"title":"\(title)","body":"b"}\(categoryText)},"n":"\(title)"\(tierText)}}
            """
        try daemon.drop(Array(json.utf8), name: UUID().uuidString + ".json")
    }

    static func ids(_ server: InboxServerHarness, feed: String) throws -> [String] {
        try server.items(query: "?limit=500&feed=\(feed)").compactMap { $0["item"]?.stringValue }
    }

    static func feedCounts(_ server: InboxServerHarness, _ feed: String) throws -> (unseen: Int, unread: Int) {
        let reply = try server.request("GET", "/v1/inbox/counts?feed=\(feed)")
        return (reply.json?["unseen"]?.intValue ?? -1, reply.json?["unread"]?.intValue ?? -1)
    }

    @Test func feedsListCountAndChangeThroughTheServerAndTheCLI() throws {
        let server = try InboxServerHarness(name: "inbox-feeds", extraConfig: Self.feeds)
        try Self.push(server.daemon, title: "p1", category: "promo")
        try Self.push(server.daemon, title: "p2", category: "promo", tier: "gold")
        try Self.push(server.daemon, title: "g1", tier: "gold")
        try Self.push(server.daemon, title: "o1", tier: "silver")
        try Self.push(server.daemon, user: "bob", title: "b1", category: "promo")
        try waitUntil(timeout: 30, "the pushes") { try server.counts().unread == 4 && server.counts("bob").unread == 1 }
        let stream = try StreamClient(server: server)
        defer { stream.close() }
        let all = try server.items(query: "?limit=500").compactMap { $0["item"]?.stringValue }
        try #require(all.count == 4)
        let (o1, g1, p2, p1) = (all[0], all[1], all[2], all[3])

        #expect(try Self.ids(server, feed: "promo") == [p2, p1])
        #expect(try Self.ids(server, feed: "vip") == [g1, p2])
        #expect(try Self.ids(server, feed: "other") == [o1])
        let counts = try server.request("GET", "/v1/inbox/counts").json
        #expect(counts == .object(["unseen": .integer(4), "unread": .integer(4), "feeds": .object([
            "promo": .object(["unseen": .integer(2), "unread": .integer(2)]),
            "vip": .object(["unseen": .integer(2), "unread": .integer(2)]),
            "other": .object(["unseen": .integer(1), "unread": .integer(1)]),
        ])]))
        #expect(try Self.feedCounts(server, "promo") == (2, 2))

        // An unknown feed is a 404 naming the feeds, on every route that takes one.
        for (method, path) in [("GET", "/v1/inbox?feed=news"), ("GET", "/v1/inbox/counts?feed=news"),
                               ("POST", "/v1/inbox/read-all?feed=news"), ("POST", "/v1/inbox/archive-read?feed=news")] {
            let reply = try server.request(method, path)
            #expect(reply.status == 404 && reply.json?["error"]?.stringValue == "unknown_feed", "\(method) \(path): \(reply.body)")
            #expect(reply.json?["message"]?.stringValue?.contains("promo, vip, other") == true)
        }

        // Read the vip feed: p2 is read in promo too; bob's promo item stays unread.
        let readAll = try server.request("POST", "/v1/inbox/read-all?feed=vip", headers: ["Idempotency-Key: vip-1"])
        #expect(readAll.status == 202 && readAll.json?["feed"]?.stringValue == "vip", "\(readAll.body)")
        try waitUntil(timeout: 30, "vip read") { try Self.feedCounts(server, "vip") == (0, 0) }
        #expect(try Self.feedCounts(server, "promo") == (1, 1))
        #expect(try Self.feedCounts(server, "other") == (1, 1))
        #expect(try server.counts() == (2, 2))
        #expect(try server.counts("bob") == (1, 1))

        // Archive the read promo items: p2 leaves every list, p1 (unread) stays.
        let archive = try server.request("POST", "/v1/inbox/archive-read?feed=promo")
        #expect(archive.status == 202 && archive.json?["feed"]?.stringValue == "promo", "\(archive.body)")
        try waitUntil(timeout: 30, "promo archived") { try Self.ids(server, feed: "promo") == [p1] }
        #expect(try Self.ids(server, feed: "vip") == [g1])

        // State changes of single items follow in every feed they are in.
        #expect(try server.request("POST", "/v1/inbox/\(p1)/read").status == 202)
        #expect(try server.request("POST", "/v1/inbox/\(g1)/unread").status == 202)
        #expect(try server.request("POST", "/v1/inbox/\(p2)/unarchive").status == 202)
        try waitUntil(timeout: 30, "the states applied") { try Self.feedCounts(server, "promo") == (0, 0) && Self.ids(server, feed: "promo") == [p2, p1] }
        #expect(try Self.feedCounts(server, "vip") == (0, 1))

        // The stream's counts carry the feeds.
        try waitUntil(timeout: 30, "feed counts on the stream") {
            stream.text.contains(#""feeds":{"other":{"unread":1,"unseen":1},"promo":{"unread":0,"unseen":0},"vip":{"unread":1,"unseen":0}}"#)
        }

        // pushspoolctl nc: the same lists and counts, and bulk changes by feed.
        let (status, out, err) = try server.daemon.ctl(["nc", "list", "--user", "alice", "--feed", "vip", "--json"])
        #expect(status == 0, "\(err)")
        #expect(out.split(separator: "\n").compactMap { try? JSONParser().parse(String($0)) }.compactMap { $0["item"]?.stringValue } == [g1, p2])
        let (_, count, _) = try server.daemon.ctl(["nc", "count", "--user", "alice", "--json"])
        #expect(try JSONParser().parse(count)["feeds"]?["other"] == .object(["unseen": .integer(1), "unread": .integer(1)]), "\(count)")
        let (_, one, _) = try server.daemon.ctl(["nc", "count", "--user", "alice", "--feed", "vip"])
        #expect(one == "unseen 0\nunread 1\n")
        let (bad, _, badErr) = try server.daemon.ctl(["nc", "list", "--user", "alice", "--feed", "news"])
        #expect(bad == 1 && badErr.contains("no feed 'news'; the feeds are promo, vip, other"), "\(badErr)")
        let (badRead, _, badReadErr) = try server.daemon.ctl(["nc", "read", "--user", "alice", "--all", "--feed", "news"])
        #expect(badRead == 1 && badReadErr.contains("no feed 'news'"), "\(badReadErr)")
        #expect(try server.daemon.ctl(["nc", "read", "--user", "alice", "--feed", "other", p1]).0 == 64)
        let (readStatus, _, readErr) = try server.daemon.ctl(["nc", "read", "--user", "alice", "--all", "--feed", "other"])
        #expect(readStatus == 0, "\(readErr)")
        try waitUntil(timeout: 30, "other read") { try Self.feedCounts(server, "other") == (0, 0) }
        #expect(try Self.feedCounts(server, "vip") == (0, 1))
        #expect(try server.daemon.ctl(["nc", "archive", "--user", "alice", "--all-read", "--feed", "other"]).0 == 0)
        try waitUntil(timeout: 30, "other archived") { try Self.ids(server, feed: "other").isEmpty }
        #expect(try server.counts("bob") == (1, 1))
    }

    /// pushspoold killed (SIGKILL) after feed events are journaled and synced, before they are
    /// applied: after a restart each counts once and every feed's counts are exact.
    @Test func aKillNineBetweenTheEventsAndTheirApplicationKeepsFeedCountsExact() throws {
        let server = try InboxServerHarness(name: "inbox-feeds-kill", extraConfig: Self.feeds)
        try Self.push(server.daemon, title: "p1", category: "promo")
        try Self.push(server.daemon, title: "p2", category: "promo", tier: "gold")
        try Self.push(server.daemon, title: "o1")
        try waitUntil(timeout: 30, "the pushes") { try server.counts().unread == 3 }
        let all = try server.items(query: "?limit=500").compactMap { $0["item"]?.stringValue }
        try #require(all.count == 3)
        #expect(server.daemon.stop() == 0)

        // Dropped while pushspoold is down (in any order: their effects do not overlap); it
        // journals them at start and dies right after.
        let events: [[String]] = [["read", "--all", "--feed", "vip", "--event-id", "kill-vip"],
                                  ["read", all[2], "--event-id", "kill-read"],
                                  ["archive", all[0], "--event-id", "kill-archive"]]
        for event in events {
            let (status, _, err) = try server.daemon.ctl(["nc", event[0], "--user", "alice"] + event.dropFirst())
            #expect(status == 0, "\(err)")
        }
        #expect(try server.daemon.crashAfterFirstSync(), "\(server.daemon.daemonStderr.suffix(1500))")

        try server.daemon.start()
        try waitUntil(timeout: 60, "the spool drained") {
            server.daemon.files(in: "incoming").isEmpty && server.daemon.files(in: "processing").isEmpty
        }
        // p2 read by vip's read-all, p1 read, o1 archived: every count is 0, promo still lists both.
        try waitUntil(timeout: 30, "the events applied") { try server.counts() == (0, 0) }
        #expect(try Self.ids(server, feed: "promo") == [all[1], all[2]])
        #expect(try Self.ids(server, feed: "other").isEmpty)
        for feed in ["promo", "vip", "other"] { #expect(try Self.feedCounts(server, feed) == (0, 0), "\(feed)") }
        let keys = try server.daemon.records().map(\.key)
        for id in ["kill-vip", "kill-read", "kill-archive"] { #expect(keys.filter { $0 == "event:" + id }.count == 1, "\(id)") }
    }

    /// `nc reindex` gives the same feed lists and counts; a changed definition rebuilds the
    /// index at pushspoold's next start, with the new memberships.
    @Test func reindexAndChangedDefinitions() throws {
        let harness = try DaemonHarness(name: "nc-feeds-reindex", config: "[Media]\nEnabled=no\n" + Self.feeds)
        try harness.start()
        for (i, category) in ["promo", "news", "promo", "sale", "news"].enumerated() {
            try Self.push(harness, title: "r\(i)", category: category, tier: i == 1 ? "gold" : nil)
        }
        func list(_ feed: String) throws -> String {
            let (status, out, err) = try harness.ctl(["nc", "list", "--user", "alice", "--feed", feed, "--limit", "500", "--json"])
            #expect(status == 0, "\(err)")
            return out
        }
        func count() throws -> String { try harness.ctl(["nc", "count", "--user", "alice", "--json"]).1 }
        func ids(_ feed: String) throws -> [String] {
            try list(feed).split(separator: "\n").compactMap { try? JSONParser().parse(String($0)) }.compactMap { $0["item"]?.stringValue }
        }
        try waitUntil(timeout: 30, "five items") { try ids("promo").count == 2 && ids("other").count == 2 && ids("vip").count == 1 }
        let promo = try ids("promo")
        #expect(try harness.ctl(["nc", "read", "--user", "alice", promo[0]]).0 == 0)
        #expect(try harness.ctl(["nc", "pin", "--user", "alice", promo[1]]).0 == 0)
        #expect(try harness.ctl(["nc", "read", "--user", "alice", "--all", "--feed", "vip"]).0 == 0)
        try waitUntil(timeout: 30, "the events applied") {
            let drained = harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty
            return try drained && count().contains(#""unread":3"#) && ids("promo") == [promo[1], promo[0]]
        }
        let before = try ["promo", "vip", "other"].map(list)
        let countsBefore = try count()
        #expect(countsBefore.contains(#""vip":{"unread":0,"unseen":0}"#), "\(countsBefore)")
        #expect(harness.stop() == 0)
        let (status, out, err) = try harness.ctl(["nc", "reindex"])
        #expect(status == 0, "\(out) \(err)")
        #expect(try ["promo", "vip", "other"].map(list) == before)
        #expect(try count() == countsBefore)

        // The operator moves `news` into promo and drops vip: at the next start the index is
        // rebuilt with the new definitions (no item keeps its vip or other membership). The
        // read-all of vip names a feed the rebuilt index does not have: it changes nothing now.
        try ("[Media]\nEnabled=no\n[Feed promo]\nCategories=promo news\n[Feed other]\nOther=yes\n").write(toFile: harness.config, atomically: true, encoding: .utf8)
        try harness.start()
        try waitUntil(timeout: 30, "rebuilt with the new feeds") { try ids("promo").count == 4 && ids("other").count == 1 }
        let (vipStatus, _, vipErr) = try harness.ctl(["nc", "list", "--user", "alice", "--feed", "vip"])
        #expect(vipStatus == 1 && vipErr.contains("the feeds are promo, other"), "\(vipErr)")
        let countsAfter = try count()
        #expect(countsAfter.contains(#""feeds":{"other":{"unread":1,"unseen":1},"promo":{"unread":3,"unseen":3}}"#), "\(countsAfter)")
    }
}
