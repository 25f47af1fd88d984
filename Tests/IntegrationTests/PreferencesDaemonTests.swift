@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushJournal
import PushSystem

/// Issue 25, preferences: muting a category through pushspool-inbox (`PUT /v1/preferences`)
/// and `pushspoolctl nc mute|unmute`, through the journal; a reindex keeps the result.
@Suite struct PreferencesDaemonTests {
    @Test func mutedCategoriesLeaveTheInboxAndComeBack() throws {
        let server = try InboxServerHarness(name: "inbox-prefs", extraConfig: "[Feed promo]\nCategories=promo\n[Feed other]\nOther=yes\n")
        try server.push(user: "alice", title: "p1", category: "promo")
        try server.push(user: "alice", title: "n1", category: "news")
        try waitUntil(timeout: 30, "the pushes") { try server.counts().unread == 2 }
        let stream = try StreamClient(server: server)
        defer { stream.close() }

        #expect(try server.request("GET", "/v1/preferences").json == .object(["muted": .object([:])]))
        let put = try server.request("PUT", "/v1/preferences", body: #"{"muted":{"promo":true}}"#, headers: ["Idempotency-Key: mute-1"])
        #expect(put.status == 202, "\(put.body)")
        #expect(put.json?["muted"] == .object(["promo": .bool(true)]))
        try waitUntil(timeout: 30, "promo muted") { try server.counts() == (1, 1) }
        #expect(try server.items().compactMap { $0["title"]?.stringValue } == ["n1"])
        #expect(try server.request("GET", "/v1/inbox/counts?feed=promo").json?["unread"]?.intValue == 0)
        #expect(try server.request("GET", "/v1/preferences").json == .object(["muted": .object(["promo": .bool(true)])]))
        // A push of the muted category is journaled but not shown.
        try server.push(user: "alice", title: "p2", category: "promo")
        try waitUntil(timeout: 30, "p2 journaled") {
            try server.daemon.records().contains { String(decoding: $0.body, as: UTF8.self).contains(#""title":"p2""#) }
        }
        try server.push(user: "alice", title: "n2", category: "news")
        try waitUntil(timeout: 30, "n2 listed") { try server.items().count == 2 }
        #expect(try server.items().compactMap { $0["title"]?.stringValue } == ["n2", "n1"])

        for body in [#"{"muted":{"promo":"yes"}}"#, #"{"muted":{}}"#, #"{"mute":{"promo":true}}"#, "[]"] {
            let reply = try server.request("PUT", "/v1/preferences", body: body)
            #expect(reply.status == 400 && reply.json?["error"]?.stringValue == "invalid_body", "\(body): \(reply.body)")
        }
        #expect(try server.request("PUT", "/v1/preferences", user: nil, body: #"{"muted":{"promo":false}}"#).status == 401)

        // pushspoolctl: unmute promo, mute news.
        #expect(try server.daemon.ctl(["nc", "unmute", "--user", "alice", "promo"]).0 == 0)
        #expect(try server.daemon.ctl(["nc", "mute", "--user", "alice", "news"]).0 == 0)
        try waitUntil(timeout: 30, "the preferences applied") {
            try server.items().compactMap { $0["title"]?.stringValue } == ["p2", "p1"]
        }
        #expect(try server.counts() == (2, 2))
        let (_, shown, _) = try server.daemon.ctl(["nc", "preferences", "--user", "alice"])
        #expect(shown == "muted news\n")
        #expect(try server.daemon.ctl(["nc", "mute", "--user", "alice"]).0 == 64)
        // The stream told the app to refetch.
        try waitUntil(timeout: 30, "a refresh on the stream") { stream.text.contains(#"{"type":"nc.preferences"}"#) }

        // The journal alone gives the same inbox.
        let before = try server.daemon.ctl(["nc", "list", "--user", "alice", "--json"]).1
        let (status, out, err) = try server.daemon.ctl(["nc", "reindex"])
        #expect(status == 0, "\(out) \(err)")
        #expect(try server.daemon.ctl(["nc", "list", "--user", "alice", "--json"]).1 == before)
        #expect(try server.daemon.ctl(["nc", "preferences", "--user", "alice", "--json"]).1 == #"{"muted":{"news":true}}"# + "\n")
    }

    /// pushspoold killed (SIGKILL) after a mute and a read are journaled and synced, before
    /// they are applied: after a restart each applies once and the counts are exact.
    @Test func aKillNineBetweenAMuteAndItsApplication() throws {
        let server = try InboxServerHarness(name: "inbox-prefs-kill", extraConfig: "[Feed promo]\nCategories=promo\n[Feed other]\nOther=yes\n")
        try server.push(user: "alice", title: "p1", category: "promo")
        try server.push(user: "alice", title: "n1", category: "news")
        try server.push(user: "alice", title: "n2", category: "news")
        try waitUntil(timeout: 30, "the pushes") { try server.counts().unread == 3 }
        let ids = try server.items().compactMap { $0["item"]?.stringValue }
        try #require(ids.count == 3)
        #expect(server.daemon.stop() == 0)
        for arguments in [["mute", "--user", "alice", "promo", "--event-id", "kill-mute"],
                          ["read", "--user", "alice", ids[0], "--event-id", "kill-read"]] {
            let (status, _, err) = try server.daemon.ctl(["nc"] + arguments)
            #expect(status == 0, "\(err)")
        }
        #expect(try server.daemon.crashAfterFirstSync(), "\(server.daemon.daemonStderr.suffix(1500))")

        try server.daemon.start()
        try waitUntil(timeout: 60, "the spool drained") {
            server.daemon.files(in: "incoming").isEmpty && server.daemon.files(in: "processing").isEmpty
        }
        try waitUntil(timeout: 30, "the events applied") { try server.counts() == (1, 1) }
        #expect(try server.items().compactMap { $0["title"]?.stringValue } == ["n2", "n1"])
        #expect(try server.request("GET", "/v1/inbox/counts").json?["feeds"]?["promo"] == .object(["unseen": .integer(0), "unread": .integer(0)]))
        #expect(try server.request("GET", "/v1/preferences").json == .object(["muted": .object(["promo": .bool(true)])]))
        let keys = try server.daemon.records().map(\.key)
        for id in ["kill-mute", "kill-read"] { #expect(keys.filter { $0 == "event:" + id }.count == 1, "\(id)") }
    }
}
