@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushSystem

/// Issue 22, HTTP parity: what `pushspoolctl nc open`, `nc inapp-shown` and `nc inapp-optout`
/// write, an app writes over HTTP — through the real pushspoold (journal, index follower,
/// outbox to a receiver on 127.0.0.1) and pushspool-inbox.
@Suite struct InboxParityTests {
    /// A Mindbox iOS push for `user`, with the push name and date NCPushOpen reports: a
    /// Cyrillic name and a `dd.MM.yyyy HH:mm` date, as a Russian campaign writes them.
    static func mindboxPush(user: String, key: String) -> [UInt8] {
        Array(#"""
            {"pushspool":1,"user":"\#(user)","payload":{"aps":{"alert":{"title":"T","body":"B"},"mutable-content":1},"clickUrl":"https://shop.example/p","uniqueKey":"\#(key)","payload":"{\"pushName\":\"Весенняя распродажа\",\"pushDate\":\"01.03.2026 10:00\"}"}}
            """#.utf8)
    }

    /// An Infobip mirror push (a MODAL) for `user` with its own message id.
    static func modalPush(user: String, messageId: String) throws -> [UInt8] {
        let example = try String(contentsOfFile: DaemonHarness.packageRoot + "/spool-examples/infobip-ios-mirror-modal.json", encoding: .utf8)
            .replacingOccurrences(of: "ib-ios-0013", with: messageId)
        return Array((#"{"pushspool":1,"user":"\#(user)","payload":"# + example + "}").utf8)
    }

    @Test func anItemOpenedOverHTTPSendsExactlyOneNCPushOpen() throws {
        let receiver = try LoopbackHTTPServer()
        receiver.route("/v3/operations/async", .ok([]))
        let keyFile = NSTemporaryDirectory() + "pushspool-parity-key-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try "secret-key-parity\n".write(toFile: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile, 0o600)
        defer { unlink(keyFile) }
        let server = try InboxServerHarness(name: "inbox-open", extraConfig: """
            [Outbox]
            Enabled=yes
            AllowHTTP=yes
            AllowNetworks=127.0.0.1/32
            MindboxURL=\(receiver.url(""))
            MindboxEndpointId=app-fallback
            MindboxEndpointIOS=app-ios
            MindboxEndpointAndroid=app-android
            MindboxSecretKeyFile=\(keyFile)
            """)
        try server.daemon.drop(Self.mindboxPush(user: "alice", key: "parity-1"), name: "alice.json")
        try server.daemon.drop(Self.mindboxPush(user: "bob", key: "parity-2"), name: "bob.json")
        try waitUntil(timeout: 30, "the pushes") { try server.counts().unread == 1 && server.counts("bob").unread == 1 }
        let item = try #require(try server.items().first?["item"]?.stringValue)
        let bobItem = try #require(try server.items("bob").first?["item"]?.stringValue)
        let stream = try StreamClient(server: server, lastEventId: item)
        defer { stream.close() }

        // A tap, and the app's retry of it (it never saw the answer): one event.
        let headers = ["Idempotency-Key: tap-1", "X-Pushspool-Device: dev-a"]
        let open = try server.request("POST", "/v1/inbox/\(item)/open", headers: headers)
        #expect(open.status == 202, "\(open.body)")
        #expect(open.json?["item"]?["state"]?["read"]?.boolValue == true)
        let eventId = try #require(open.json?["eventId"]?.stringValue)
        let retry = try server.request("POST", "/v1/inbox/\(item)/open", headers: headers)
        #expect(retry.status == 202 && retry.json?["eventId"]?.stringValue == eventId)
        // The key belongs to the open: reused for another request it is refused.
        #expect(try server.request("POST", "/v1/inapp/\(item)/shown", headers: headers).status == 422)
        #expect(try server.request("POST", "/v1/inbox/\(item)/open", headers: ["Idempotency-Key: tap-1"]).status == 422,
                "another device is another request")
        // Bob's item is not alice's to open: the same 404 as a missing item, nothing written.
        let cross = try server.request("POST", "/v1/inbox/\(bobItem)/open")
        #expect(cross.status == 404)
        #expect(cross.body == (try server.request("POST", "/v1/inbox/999999/open")).body)
        #expect(try server.request("POST", "/v1/inbox/\(item)/open", user: nil).status == 401)

        try waitUntil(timeout: 30, "the open applied") { try server.counts().unread == 0 }
        try waitUntil(timeout: 30, "NCPushOpen at the receiver") { receiver.hits("/v3/operations/async") >= 1 }
        try waitUntil(timeout: 30, "the state event") { stream.text.contains("event: state") }
        try waitUntil(timeout: 30, "the spool drained") {
            server.daemon.files(in: "incoming").isEmpty && server.daemon.files(in: "processing").isEmpty
        }
        // The outbox empty again: past the point where a second send would already have gone out.
        try waitUntil(timeout: 30, "the outbox empty") { try server.daemon.ctl(["outbox", "list"]).2.contains("0 pending, 0 parked") }
        let requests = receiver.requests("/v3/operations/async")
        #expect(requests.count == 1, "\(requests.map(\.target))")
        let request = try #require(requests.first)
        #expect(request.target.contains("operation=mobileapp.NCPushOpen"))
        // An iOS push: the iOS endpoint, not the fallback.
        #expect(request.target.hasPrefix("/v3/operations/async?endpointId=app-ios&"), "\(request.target)")
        #expect(request.target.contains("transactionId=\(eventId)"))
        #expect(request.target.contains("deviceUUID=dev-a"))
        let body = try JSONParser().parse(request.body)
        // The transliterated push name (ICU's Any-Latin; Latin-ASCII) and the date in one form.
        #expect(body["customerAction"]?["customFields"]?["mobPushTranslateName"]?.stringValue == "Vesennaa rasprodaza")
        #expect(body["customerAction"]?["customFields"]?["mobPushSendDateTime"]?.stringValue == "2026-03-01T10:00:00.000Z")
        // Bob's item stayed unread; the stream showed alice's item read.
        #expect(try server.counts("bob").unread == 1)
        #expect(stream.text.contains(#""read":true"#), "\(stream.text)")
        #expect(server.daemon.files(in: "failed").isEmpty)
    }

    @Test func anInAppMessageShownOverHTTPIsNotServedAgainAndAnOptOutStopsThem() throws {
        let server = try InboxServerHarness(name: "inbox-inapp")
        try server.daemon.drop(try Self.modalPush(user: "alice", messageId: "ib-parity-1"), name: "m1.json")
        try server.daemon.drop(try Self.modalPush(user: "bob", messageId: "ib-parity-b"), name: "mb.json")
        var shown = ""
        try waitUntil(timeout: 30, "the modal served") {
            shown = try server.request("GET", "/v1/inapp").json?["item"]?["item"]?.stringValue ?? ""
            return !shown.isEmpty
        }
        // A MODAL is presented in-app, not listed (ListModals=no).
        #expect(try server.items("bob").isEmpty)
        var bobModal = ""
        try waitUntil(timeout: 30, "bob's modal served") {
            bobModal = try server.request("GET", "/v1/inapp", user: "bob").json?["item"]?["item"]?.stringValue ?? ""
            return !bobModal.isEmpty
        }
        let stream = try StreamClient(server: server, lastEventId: shown)
        defer { stream.close() }

        let reply = try server.request("POST", "/v1/inapp/\(shown)/shown", headers: ["Idempotency-Key: modal-1"])
        #expect(reply.status == 202, "\(reply.body)")
        #expect(reply.json?["item"]?["state"]?["inAppShown"]?.boolValue == true)
        #expect(try server.request("POST", "/v1/inapp/\(bobModal)/shown").status == 404)
        try waitUntil(timeout: 30, "the modal no longer served") { try server.request("GET", "/v1/inapp").json?["item"]?.isNull == true }
        try waitUntil(timeout: 30, "the state event") { stream.text.contains("event: state") && stream.text.contains(#""inAppShown":true"#) }
        // Shown is not read; the modal is not listed or counted, and says so.
        #expect(reply.json?["item"]?["state"]?["read"]?.boolValue == false)
        #expect(reply.json?["item"]?["listed"]?.boolValue == false)
        #expect(try server.counts().unread == 0)
        // Bob's modal was not shown by alice's request.
        #expect(try server.request("GET", "/v1/inapp", user: "bob").json?["item"]?["item"]?.stringValue == bobModal)

        // A new modal is served…
        try server.daemon.drop(try Self.modalPush(user: "alice", messageId: "ib-parity-2"), name: "m2.json")
        var second = ""
        try waitUntil(timeout: 30, "the second modal served") {
            second = try server.request("GET", "/v1/inapp").json?["item"]?["item"]?.stringValue ?? ""
            return !second.isEmpty
        }
        #expect(second != shown)
        // …until the user opts out; opting back in serves it again (it was never shown).
        let optOut = try server.request("PUT", "/v1/inapp/optout", body: #"{"enabled":true}"#, headers: ["Idempotency-Key: opt-1"])
        #expect(optOut.status == 202, "\(optOut.body)")
        #expect(optOut.json?["enabled"]?.boolValue == true)
        #expect(try server.request("PUT", "/v1/inapp/optout", body: #"{"enabled":false}"#, headers: ["Idempotency-Key: opt-1"]).status == 422)
        for bad in [#"{"enabled":"yes"}"#, "{}", "[true]", "not json"] {
            #expect(try server.request("PUT", "/v1/inapp/optout", body: bad).status == 400, "\(bad)")
        }
        // A known path with a method it does not take: 405 naming the one it takes (RFC 9110).
        let wrongMethod = try server.request("POST", "/v1/inapp/optout", body: #"{"enabled":true}"#)
        #expect(wrongMethod.status == 405, "PUT only")
        try waitUntil(timeout: 30, "the opt-out applied") { try server.request("GET", "/v1/inapp").json?["item"]?.isNull == true }
        #expect(try server.request("GET", "/v1/inapp", user: "bob").json?["item"]?["item"]?.stringValue == bobModal,
                "alice's opt-out is hers")
        #expect(try server.request("PUT", "/v1/inapp/optout", body: #"{"enabled":false}"#).status == 202)
        try waitUntil(timeout: 30, "the opt-in applied") {
            try server.request("GET", "/v1/inapp").json?["item"]?["item"]?.stringValue == second
        }

        // The events are the ones `pushspoolctl nc` writes.
        let events = try server.daemon.records().compactMap { record -> JSONValue? in
            guard record.key.hasPrefix("event:") else { return nil }
            return try JSONParser().parse(record.body)
        }
        #expect(events.map { $0["type"]?.stringValue ?? "" } == ["nc.inapp-shown", "nc.inapp-optout", "nc.inapp-optout"])
        #expect(events.dropFirst().map { $0["enabled"]?.boolValue } == [false, true])
        #expect(server.daemon.files(in: "failed").isEmpty)
    }
}
