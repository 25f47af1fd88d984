@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushSystem
import PushExport
import PushInbox

/// Issue 37 on an inbox node: the fleet outbox sends the Mindbox reports the journal's outbox
/// sends — the customer, and an open's two deliveries (NCPushOpen, then the push click) from
/// one stream message, the click of a button acted on — with exact bodies at a recording
/// receiver on 127.0.0.1. In ``InboxFromStreamTests`` (serialized: servers of their own).
extension InboxFromStreamTests {
    /// `operation` and `transactionId` of a POST, and its body.
    static func mindboxCalls(_ vendor: LoopbackHTTPServer) -> [(operation: String, transaction: String, body: String)] {
        vendor.requests("/v3/operations/async").map { request in
            let query = request.target.split(separator: "?", maxSplits: 1).last ?? ""
            func value(_ name: String) -> String {
                query.split(separator: "&").first { $0.hasPrefix(name + "=") }.map { String($0.dropFirst(name.count + 1)) } ?? ""
            }
            return (value("operation"), value("transactionId"), String(decoding: request.body, as: UTF8.self))
        }
    }

    @Test func theFleetOutboxSendsTheCustomerAndTheSDKsPushClicks() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let vendor = try LoopbackHTTPServer()
        // The open's NCPushOpen is taken, its click answered 503: the message is handed back
        // whole and both go out again, with the same transactionIds.
        vendor.route("/v3/operations/async", .sequence([.ok([]), .status(503), .ok([])]))
        let ingest = try DaemonHarness(name: "fleet-mindbox-ingest", config: Self.ingestConfig(url: server.url))
        try ingest.start()
        defer { ingest.stop() }
        let push = #"""
            {"pushspool":1,"user":"user-1","platform":"ios","payload":{"aps":{"alert":{"title":"Sale","body":"Half price"}},"clickUrl":"https://shop.example/p","uniqueKey":"fc-1","buttons":[{"text":"Shop","url":"https://shop.example/s","uniqueKey":"btn-shop"}],"payload":"{\"pushName\":\"sale\",\"pushDate\":1764410400000}"}}
            """#
        try ingest.drop(Array(push.utf8), name: "fc-1.json")
        try Self.waitIngestedAndExported(ingest, count: 1)

        let node = try Self.outboxNode("fleet-mindbox-node", url: server.url, vendor: vendor)
        let config = try String(contentsOfFile: node.config, encoding: .utf8) + "MindboxPushClicks=yes\nMindboxCustomerIdKey=websiteID\n"
        try config.write(toFile: node.config, atomically: true, encoding: .utf8)
        let process = try Self.launchInbox(node)
        defer { Self.stopInbox(process) }
        let port = try Self.port(node, process)
        try waitUntil(timeout: 60, "the node at stream seq 1") { Self.appliedSeq(node) == 1 }

        let item = try #require(try Self.http(port, "GET", "/v1/inbox", user: "user-1").json?["items"]?.arrayValue?.first?["item"]?.stringValue)
        let open = try Self.http(port, "POST", "/v1/inbox/\(item)/open", user: "user-1")
        #expect(open.status == 202, "\(open.body)")
        let openId = try #require(open.json?["eventId"]?.stringValue)
        try waitUntil(timeout: 30, "the open's click delivered after the 503") { Self.mindboxCalls(vendor).count >= 4 }

        let acted = try Self.http(port, "POST", "/v1/inbox/\(item)/actions/btn-shop", user: "user-1")
        #expect(acted.status == 202, "\(acted.body)")
        let actionId = try #require(acted.json?["eventId"]?.stringValue)
        try waitUntil(timeout: 30, "the button's click") { Self.mindboxCalls(vendor).count >= 5 }
        // The node done with what it fetched: past any further call it would have made.
        try Self.waitFleetIdle([port])

        let pushOpen = #"{"customer":{"ids":{"websiteID":"user-1"}},"customerAction":{"customFields":{"mobPushSendDateTime":"2025-11-29T10:00:00.000Z","mobPushTranslateName":"sale"}}}"#
        let calls = Self.mindboxCalls(vendor)
        try #require(calls.count == 5, "\(calls)")
        #expect(calls[0] == ("mobileapp.NCPushOpen", openId, pushOpen))
        #expect(calls[1] == ("MobilePush.TrackClick", openId + ".1", #"{"messageUniqueKey":"fc-1"}"#))
        #expect(calls[2] == ("mobileapp.NCPushOpen", openId, pushOpen))
        #expect(calls[3] == ("MobilePush.TrackClick", openId + ".1", #"{"messageUniqueKey":"fc-1"}"#))
        #expect(calls[4] == ("MobilePush.TrackClick", actionId, #"{"buttonUniqueKey":"btn-shop","messageUniqueKey":"fc-1"}"#))
        #expect(Self.parked(node).isEmpty)
    }
}
