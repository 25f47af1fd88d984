@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushInbox
import PushJournal
import PushSystem

/// Issue 25, collapse and action completion, through pushspoold and pushspool-inbox: a push
/// with a collapse id replaces the earlier item (the stream says the old one went), an action
/// is kept on the item and reverted over HTTP and `pushspoolctl nc`, a kill -9 between the
/// events and their application applies each once, and `nc reindex` dumps identically.
@Suite struct CollapseDaemonTests {
    /// An APNs push for `user` with an envelope `collapseId` and/or an `aps.thread-id`.
    static func push(_ daemon: DaemonHarness, user: String = "alice", title: String, collapseId: String? = nil,
                     threadId: String? = nil) throws {
        let collapse = collapseId.map { ",\"collapseId\":\"\($0)\"" } ?? ""
        let thread = threadId.map { ",\"thread-id\":\"\($0)\"" } ?? ""
        let json = """
            {"pushspool":1,"user":"\(user)","platform":"ios"\(collapse),"payload":{"aps":{"alert":{"title":"\(title)","body":"b"}\(thread)},"n":"\(UUID().uuidString)"}}
            """
        try daemon.drop(Array(json.utf8), name: UUID().uuidString + ".json")
    }

    /// An FCM send request (HTTP v1 shape) with `android.collapse_key`.
    static func fcmPush(_ daemon: DaemonHarness, title: String, collapseKey: String) throws {
        let json = """
            {"pushspool":1,"user":"alice","payload":{"notification":{"title":"\(title)","body":"b"},"data":{"n":"\(UUID().uuidString)"},"android":{"collapse_key":"\(collapseKey)"}}}
            """
        try daemon.drop(Array(json.utf8), name: UUID().uuidString + ".json")
    }

    static func titles(_ server: InboxServerHarness) throws -> [String] { try server.items().compactMap { $0["title"]?.stringValue } }

    static func dump(_ server: InboxServerHarness) throws -> [String] {
        try InboxIndex(path: InboxIndex.path(stateDirectory: server.daemon.state), readOnly: true).canonicalDump()
    }

    @Test func aCollapseIdReplacesTheEarlierItemAndTheStreamSaysSo() throws {
        let server = try InboxServerHarness(name: "inbox-collapse", extraConfig: "[Feed scores]\nCategories=score\n[Feed other]\nOther=yes\n")
        try Self.push(server.daemon, title: "1:0", collapseId: "match-7")
        try waitUntil(timeout: 30, "the first score") { try server.counts().unread == 1 }
        try server.push(user: "alice", title: "other")
        try waitUntil(timeout: 30, "the other push") { try server.counts().unread == 2 }
        let first = try #require(try server.items().last?["item"]?.stringValue)
        #expect(try server.request("POST", "/v1/inbox/\(first)/read").status == 202)
        try waitUntil(timeout: 30, "the read applied") { try server.counts() == (1, 1) }
        let stream = try StreamClient(server: server)
        defer { stream.close() }

        try Self.push(server.daemon, title: "2:0", collapseId: "match-7")
        try waitUntil(timeout: 30, "the replacement") { try Self.titles(server) == ["2:0", "other"] }
        // Newest content, unread again; the old one is gone for good.
        #expect(try server.counts() == (2, 2))
        let second = try #require(try server.items().first)
        let seq = try #require(second["item"]?.stringValue)
        #expect(second["collapseId"] == .string("match-7") && second["replaces"] == .string(first))
        #expect(second["state"]?["read"] == .bool(false))
        #expect(try server.request("POST", "/v1/inbox/\(first)/read").status == 404)
        try waitUntil(timeout: 30, "the stream's item and the old one's removal") {
            stream.text.contains(#""title":"2:0""#) && stream.text.contains(#"{"deleted":true,"item":"\#(first)","replacedBy":"\#(seq)"}"#)
        }
        let (_, listed, _) = try server.daemon.ctl(["nc", "list", "--user", "alice", "--json"])
        #expect(listed.contains(#""collapseId":"match-7""#) && listed.contains(#""replaces":"\#(first)""#), "\(listed)")

        // FCM's android.collapse_key collapses too; an APNs thread-id only groups.
        try Self.fcmPush(server.daemon, title: "fcm 1", collapseKey: "news")
        try Self.fcmPush(server.daemon, title: "fcm 2", collapseKey: "news")
        try Self.push(server.daemon, title: "chat 1", threadId: "chat")
        try Self.push(server.daemon, title: "chat 2", threadId: "chat")
        try waitUntil(timeout: 30, "the FCM and thread pushes") { try Self.titles(server).count == 5 }
        #expect(try Self.titles(server) == ["chat 2", "chat 1", "fcm 2", "2:0", "other"])
        #expect(try server.items().first?["threadId"] == .string("chat"))
        #expect(try server.counts() == (5, 5))

        // The journal alone gives the same index.
        let before = try Self.dump(server)
        let (status, out, err) = try server.daemon.ctl(["nc", "reindex"])
        #expect(status == 0, "\(out) \(err)")
        #expect(try Self.dump(server) == before)
    }

    @Test func anActionIsKeptAndRevertedOverHTTPAndTheCLI() throws {
        // Only an action the push offered is taken (issue 37): its category offers these.
        let server = try InboxServerHarness(name: "inbox-action-revert", extraConfig: "[Category chat]\nAction=reply:Reply:\nAction=later:Later:\n")
        try server.push(user: "alice", title: "reply?", category: "chat")
        try waitUntil(timeout: 30, "the push") { try server.counts().unread == 1 }
        let item = try #require(try server.items().first?["item"]?.stringValue)
        func state() throws -> JSONValue? { try server.items().first { $0["item"]?.stringValue == item }?["state"] }

        let acted = try server.request("POST", "/v1/inbox/\(item)/actions/reply", body: #"{"text":"on my way"}"#)
        #expect(acted.status == 202, "\(acted.body)")
        #expect(acted.json?["item"]?["state"]?["acted"] == .string("reply") && acted.json?["item"]?["state"]?["actedText"] == .string("on my way"))
        try waitUntil(timeout: 30, "the action applied") { try state()?["acted"] == .string("reply") }
        #expect(try state()?["actedText"] == .string("on my way"))

        let stream = try StreamClient(server: server)
        defer { stream.close() }
        // Reverting another action changes nothing; reverting the kept one undoes it.
        let other = try server.request("POST", "/v1/inbox/\(item)/actions/other/revert")
        #expect(other.status == 202 && other.json?["item"]?["state"]?["acted"] == .string("reply"), "\(other.body)")
        let revert = try server.request("POST", "/v1/inbox/\(item)/actions/reply/revert", headers: ["Idempotency-Key: revert-1"])
        #expect(revert.status == 202 && revert.json?["item"]?["state"]?["acted"] == .bool(false), "\(revert.body)")
        try waitUntil(timeout: 30, "the revert applied") { try state()?["acted"] == .bool(false) }
        // The stream sends the item's new state.
        try waitUntil(timeout: 30, "the revert on the stream") {
            stream.text.contains("event: state") && stream.text.contains(#""acted":false"#)
        }
        #expect(try state()?["actedText"] == nil && state()?["read"] == .bool(true))
        #expect(try server.request("POST", "/v1/inbox/999999/actions/reply/revert").status == 404)

        // The same through pushspoolctl.
        #expect(try server.daemon.ctl(["nc", "action", "--user", "alice", item, "mm_accept"]).0 == 65, "not offered")
        #expect(try server.daemon.ctl(["nc", "action", "--user", "alice", item, "later"]).0 == 0)
        try waitUntil(timeout: 30, "the CLI action") { try state()?["acted"] == .string("later") }
        let (_, listed, _) = try server.daemon.ctl(["nc", "list", "--user", "alice", "--json"])
        #expect(listed.contains(#""acted":"later""#), "\(listed)")
        let (_, text, _) = try server.daemon.ctl(["nc", "list", "--user", "alice"])
        #expect(text.contains("    acted: later\n"), "\(text)")
        #expect(try server.daemon.ctl(["nc", "action", "--user", "alice", item, "later", "--revert", "--text", "x"]).0 == 64)
        #expect(try server.daemon.ctl(["nc", "action", "--user", "alice", item, "later", "--revert"]).0 == 0)
        try waitUntil(timeout: 30, "the CLI revert") { try state()?["acted"] == .bool(false) }
        let types = try server.daemon.records().compactMap { record -> String? in
            guard let body = try? JSONParser(maxDepth: 16).parse(record.body), body["kind"]?.stringValue == "event" else { return nil }
            return body["type"]?.stringValue
        }
        #expect(types == ["nc.action", "nc.action-revert", "nc.action-revert", "nc.action", "nc.action-revert"])
    }

    /// pushspoold killed (SIGKILL) after an action, its revert, another action and a collapsing
    /// push are journaled and synced, before they are applied: after a restart each applies
    /// once, and `nc reindex` gives the same dump.
    @Test func aKillNineBetweenTheEventsAndTheirApplication() throws {
        let server = try InboxServerHarness(name: "inbox-collapse-kill", extraConfig: "[Category yesno]\nAction=yes:Yes:\nAction=no:No:\n")
        try Self.push(server.daemon, title: "v1", collapseId: "k")
        try server.push(user: "alice", title: "plain", category: "yesno")
        try waitUntil(timeout: 30, "the pushes") { try server.counts().unread == 2 }
        let plain = try #require(try server.items().first?["item"]?.stringValue)
        #expect(server.daemon.stop() == 0)
        for arguments in [["action", "--user", "alice", plain, "yes", "--event-id", "kill-act"],
                          ["action", "--user", "alice", plain, "yes", "--revert", "--event-id", "kill-revert"],
                          ["action", "--user", "alice", plain, "no", "--text", "later", "--event-id", "kill-act-2"]] {
            let (status, _, err) = try server.daemon.ctl(["nc"] + arguments)
            #expect(status == 0, "\(err)")
        }
        try Self.push(server.daemon, title: "v2", collapseId: "k")
        #expect(try server.daemon.crashAfterFirstSync(), "\(server.daemon.daemonStderr.suffix(1500))")

        try server.daemon.start()
        try waitUntil(timeout: 60, "the spool drained") {
            server.daemon.files(in: "incoming").isEmpty && server.daemon.files(in: "processing").isEmpty
        }
        try waitUntil(timeout: 30, "everything applied") {
            try Self.titles(server) == ["v2", "plain"]
                && server.items().last?["state"]?["acted"] == .string("no")
        }
        #expect(try server.items().last?["state"]?["actedText"] == .string("later"))
        #expect(try server.counts() == (1, 1))
        let keys = try server.daemon.records().map(\.key)
        for id in ["kill-act", "kill-revert", "kill-act-2"] { #expect(keys.filter { $0 == "event:" + id }.count == 1, "\(id)") }

        let before = try Self.dump(server)
        let (status, out, err) = try server.daemon.ctl(["nc", "reindex"])
        #expect(status == 0, "\(out) \(err)")
        #expect(try Self.dump(server) == before)
    }
}
