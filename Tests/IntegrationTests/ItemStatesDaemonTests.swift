@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushJournal
import PushSystem

/// Issue 25, first slice: unread, unarchive, delete, pin and unpin through the real pushspoold
/// (spool, journal, index follower) and pushspool-inbox, and through `pushspoolctl nc`.
@Suite struct ItemStatesDaemonTests {
    /// alice's item ids, newest first, as the inbox lists them.
    static func order(_ server: InboxServerHarness) throws -> [String] {
        try server.items(query: "?limit=500").compactMap { $0["item"]?.stringValue }
    }

    @Test func eachRouteChangesTheStateOnceItIsApplied() throws {
        let server = try InboxServerHarness(name: "inbox-states")
        for i in 1...3 {
            try server.push(user: "alice", title: "a\(i)")
            try waitUntil(timeout: 30, "push a\(i)") { try server.counts().unread == i }
        }
        try server.push(user: "bob", title: "b1")
        try waitUntil(timeout: 30, "bob's push") { try server.counts("bob").unread == 1 }
        let bobItem = try #require(try server.items("bob").first?["item"]?.stringValue)
        let ids = try Self.order(server)
        try #require(ids.count == 3)
        let (a3, a2, a1) = (ids[0], ids[1], ids[2])
        let stream = try StreamClient(server: server, lastEventId: a3)
        defer { stream.close() }

        // Unread: read, then unread again; seen stays.
        #expect(try server.request("POST", "/v1/inbox/\(a1)/read").status == 202)
        try waitUntil(timeout: 30, "a1 read") { try server.counts() == (unseen: 2, unread: 2) }
        let unread = try server.request("POST", "/v1/inbox/\(a1)/unread", headers: ["Idempotency-Key: unread-1"])
        #expect(unread.status == 202, "\(unread.body)")
        #expect(unread.json?["item"]?["state"]?["read"]?.boolValue == false)
        #expect(unread.json?["item"]?["state"]?["seen"]?.boolValue == true)
        let retry = try server.request("POST", "/v1/inbox/\(a1)/unread", headers: ["Idempotency-Key: unread-1"])
        #expect(retry.json?["eventId"] == unread.json?["eventId"])
        try waitUntil(timeout: 30, "a1 unread") { try server.counts() == (unseen: 2, unread: 3) }

        // Archive and unarchive.
        #expect(try server.request("POST", "/v1/inbox/\(a2)/archive").status == 202)
        try waitUntil(timeout: 30, "a2 archived") { try Self.order(server) == [a3, a1] }
        #expect(try server.counts() == (unseen: 1, unread: 2))
        let unarchive = try server.request("POST", "/v1/inbox/\(a2)/unarchive")
        #expect(unarchive.status == 202 && unarchive.json?["item"]?["state"]?["archived"]?.boolValue == false)
        try waitUntil(timeout: 30, "a2 back") { try Self.order(server) == [a3, a2, a1] }
        #expect(try server.counts() == (unseen: 2, unread: 3))

        // Pin the oldest: first in the list; unpin: back in its place.
        let pin = try server.request("POST", "/v1/inbox/\(a1)/pin")
        #expect(pin.status == 202 && pin.json?["item"]?["state"]?["pinned"]?.boolValue == true)
        try waitUntil(timeout: 30, "a1 pinned first") { try Self.order(server) == [a1, a3, a2] }
        #expect(try server.items().first?["state"]?["pinned"]?.boolValue == true)
        let page = try server.request("GET", "/v1/inbox?limit=1")
        let cursor = try #require(page.json?["nextCursor"]?.stringValue)
        #expect(try server.items(query: "?limit=2&cursor=\(cursor)").compactMap { $0["item"]?.stringValue } == [a3, a2])
        #expect(try server.request("POST", "/v1/inbox/\(a1)/unpin").json?["item"]?["state"]?["pinned"]?.boolValue == false)
        try waitUntil(timeout: 30, "a1 unpinned") { try Self.order(server) == [a3, a2, a1] }

        // Delete: gone from the list and the counts; then every request about it is a 404,
        // except the DELETE's own retry.
        let delete = try server.request("DELETE", "/v1/inbox/\(a2)", headers: ["Idempotency-Key: del-1"])
        #expect(delete.status == 202, "\(delete.body)")
        #expect(delete.json?["item"] == .object(["item": .string(a2), "deleted": .bool(true)]))
        try waitUntil(timeout: 30, "a2 deleted") { try Self.order(server) == [a3, a1] }
        #expect(try server.counts() == (unseen: 1, unread: 2))
        let missing = try server.request("POST", "/v1/inbox/999999/unarchive")
        for (method, path) in [("POST", "/v1/inbox/\(a2)/unarchive"), ("POST", "/v1/inbox/\(a2)/read"), ("POST", "/v1/inbox/\(a2)/pin"),
                               ("DELETE", "/v1/inbox/\(a2)")] {
            let reply = try server.request(method, path)
            #expect(reply.status == 404 && reply.body == missing.body, "\(method) \(path)")
        }
        #expect(try server.request("DELETE", "/v1/inbox/\(a2)", headers: ["Idempotency-Key: del-2"]).status == 404,
                "a new key is a new request")
        let deleteRetry = try server.request("DELETE", "/v1/inbox/\(a2)", headers: ["Idempotency-Key: del-1"])
        #expect(deleteRetry.status == 202 && deleteRetry.json?["eventId"] == delete.json?["eventId"])

        // Bob's item is not alice's: the same 404 for every new route, nothing written.
        for (method, path) in [("POST", "/v1/inbox/\(bobItem)/unread"), ("POST", "/v1/inbox/\(bobItem)/unarchive"),
                               ("POST", "/v1/inbox/\(bobItem)/pin"), ("POST", "/v1/inbox/\(bobItem)/unpin"),
                               ("DELETE", "/v1/inbox/\(bobItem)")] {
            let reply = try server.request(method, path)
            #expect(reply.status == 404 && reply.body == missing.body, "\(method) \(path)")
            #expect(try server.request(method, path, user: nil).status == 401)
        }
        #expect(try server.counts("bob") == (unseen: 1, unread: 1))

        // The stream announced each change: the states as they were then, and the deletion.
        try waitUntil(timeout: 30, "the deletion on the stream") { stream.text.contains(#""deleted":true"#) }
        let states = InboxIndexLifecycleTests.events(stream.text).filter { $0.event == "state" }
            .compactMap { try? JSONParser().parse($0.data) }
        #expect(states.contains { $0["item"]?.stringValue == a1 && $0["state"]?["pinned"]?.boolValue == true })
        #expect(states.contains { $0 == .object(["item": .string(a2), "deleted": .bool(true)]) })
        // One journal record per event id, the retried ones included.
        let events = try server.daemon.records().filter { $0.key.hasPrefix("event:") }
        #expect(Set(events.map(\.key)).count == events.count)
    }

    /// pushspoold killed (SIGKILL) after the event is journaled and synced, before its spool
    /// file is removed or the follower applies it: after a restart each event counts once.
    @Test func aKillNineBetweenDropAndApplicationAppliesEachEventOnce() throws {
        let server = try InboxServerHarness(name: "inbox-states-kill")
        for i in 1...4 {
            try server.push(user: "alice", title: "k\(i)")
            try waitUntil(timeout: 30, "push k\(i)") { try server.counts().unread == i }
        }
        let ids = try Self.order(server)
        try #require(ids.count == 4)
        let (_, s1, _) = try server.daemon.ctl(["nc", "read", "--user", "alice", ids[0], "--event-id", "kill-read"])
        #expect(!s1.isEmpty)
        try waitUntil(timeout: 30, "the read") { try server.counts().unread == 3 }
        #expect(server.daemon.stop() == 0)

        // Dropped while pushspoold is down; it journals them at start and dies right after.
        let events: [[String]] = [["unread", ids[0], "kill-unread"], ["pin", ids[3], "kill-pin"], ["delete", ids[1], "kill-delete"],
                                  ["archive", ids[2], "kill-archive"]]
        for event in events {
            let (status, _, err) = try server.daemon.ctl(["nc", event[0], "--user", "alice", event[1], "--event-id", event[2]])
            #expect(status == 0, "\(err)")
        }
        #expect(try server.daemon.crashAfterFirstSync(), "\(server.daemon.daemonStderr.suffix(1500))")
        #expect(!server.daemon.files(in: "incoming").isEmpty || !server.daemon.files(in: "processing").isEmpty,
                "killed before the spool files were removed")

        try server.daemon.start()
        try waitUntil(timeout: 60, "the spool drained") {
            server.daemon.files(in: "incoming").isEmpty && server.daemon.files(in: "processing").isEmpty
        }
        try waitUntil(timeout: 30, "the states applied") { try Self.order(server) == [ids[3], ids[0]] }
        #expect(try server.counts() == (unseen: 1, unread: 2))
        #expect(try server.items().first?["state"]?["pinned"]?.boolValue == true)
        let keys = try server.daemon.records().map(\.key)
        for event in events { #expect(keys.filter { $0 == "event:" + event[2] }.count == 1, "\(event[2])") }
    }

    /// `nc reindex` rebuilds the index from the journal: every user's `nc list --json` and
    /// counts are the same before and after, whatever states the items were left in.
    @Test func reindexGivesTheSameListsAfterEveryState() throws {
        let harness = try DaemonHarness(name: "nc-states-reindex", config: "[Media]\nEnabled=no\n")
        try harness.start()
        for i in 1...6 {
            try harness.drop(Array(#"""
                {"pushspool":1,"user":"alice","payload":{"aps":{"alert":{"title":"r\#(i)","body":"b"}},"n":"r-\#(i)"}}
                """#.utf8), name: "r\(i).json")
        }
        func list() throws -> String {
            let (status, out, err) = try harness.ctl(["nc", "list", "--user", "alice", "--limit", "500", "--json"])
            #expect(status == 0, "\(err)")
            return out
        }
        func count() throws -> String { try harness.ctl(["nc", "count", "--user", "alice", "--json"]).1 }
        var ids: [String] = []
        try waitUntil(timeout: 30, "six items") {
            ids = try list().split(separator: "\n").compactMap { try? JSONParser().parse(String($0)) }.compactMap { $0["item"]?.stringValue }
            return ids.count == 6
        }
        for (word, i) in [("read", 0), ("unread", 0), ("pin", 5), ("pin", 3), ("unpin", 3), ("archive", 1), ("unarchive", 1),
                          ("archive", 2), ("delete", 4), ("unarchive", 4)] {
            let (status, _, err) = try harness.ctl(["nc", word, "--user", "alice", ids[i]])
            #expect(status == 0, "nc \(word): \(err)")
        }
        func order() throws -> [String] {
            try list().split(separator: "\n").compactMap { try? JSONParser().parse(String($0)) }.compactMap { $0["item"]?.stringValue }
        }
        // Pinned first; ids[2] archived, ids[4] deleted (its unarchive changes nothing).
        try waitUntil(timeout: 30, "the states applied") {
            let drained = harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty
            return try drained && order() == [ids[5], ids[0], ids[1], ids[3]]
        }
        let (before, countsBefore) = (try list(), try count())
        #expect(countsBefore.contains(#""unread":4"#) && countsBefore.contains(#""unseen":3"#), "\(countsBefore)")
        #expect(harness.stop() == 0)
        let (status, out, err) = try harness.ctl(["nc", "reindex"])
        #expect(status == 0, "\(out) \(err)")
        #expect(try list() == before)
        #expect(try count() == countsBefore)
    }
}
