@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushSystem

/// Issue 22, "What a person sees", through the real pushspoold (journal, index follower) and
/// pushspool-inbox: silent pushes are journaled but not counted, listed or streamed; a MODAL
/// is presented in-app, not listed; an item carries its loc keys, badge, sound, Infobip's link
/// kinds and the Mindbox rendering data, the same over HTTP and `pushspoolctl nc`.
@Suite struct InboxContentTests {
    static func envelope(user: String, _ payload: String) -> [UInt8] {
        Array(#"{"pushspool":1,"user":"\#(user)","payload":\#(payload)}"#.utf8)
    }

    static let silentPayloads = [
        #"{"aps":{"content-available":1,"badge":3},"sync":"inbox"}"#,
        #"{"data":{"type":"sync","version":"42"}}"#,
        #"{"messageId":"ib-silent","aps":{"content-available":1},"internalData":{"silent":{"title":"Quiet","body":"Silent body"}}}"#,
    ]
    static let localised = #"""
        {"messageId":"ib-loc","aps":{"alert":{"loc-key":"ORDER_SHIPPED","loc-args":["A-1001"],"title-loc-key":"ORDER_TITLE","title-loc-args":["Ann"]},"badge":5,"sound":"chime.caf"},
         "internalData":{"deeplink":"myapp://orders/A-1001","webViewUrl":"https://shop.example/w","browserUrl":"https://shop.example/b"}}
        """#
    static let mindbox = #"""
        {"aps":{"alert":{"title":"Sale","body":"Until Sunday"},"mutable-content":1,"content-available":1},"clickUrl":"https://shop.example/p","uniqueKey":"mb-1",
         "payload":"{\"expires\":\"2026-12-31T23:59:59Z\",\"pushName\":\"sale\",\"pushDate\":\"2026-11-30T10:00:00Z\"}"}
        """#
    static let modal = #"{"messageId":"ib-modal","aps":{"alert":{"title":"Mirror","body":"Shown in the app"}},"internalData":{"inAppStyle":0}}"#

    @Test func silentPushesAreNotCountedAndItemsCarryWhatTheAppRenders() throws {
        let server = try InboxServerHarness(name: "inbox-content")
        let stream = try StreamClient(server: server)
        defer { stream.close() }
        try waitUntil(timeout: 30, "the stream open") { stream.text.contains("event: counts") }
        for (index, payload) in Self.silentPayloads.enumerated() {
            try server.daemon.drop(Self.envelope(user: "alice", payload), name: "silent-\(index).json")
        }
        try server.daemon.drop(Self.envelope(user: "alice", Self.localised), name: "loc.json")
        try server.daemon.drop(Self.envelope(user: "alice", Self.mindbox), name: "mindbox.json")
        try server.daemon.drop(Self.envelope(user: "alice", Self.modal), name: "modal.json")

        // Everything is journaled; only the two visible pushes are counted.
        var records: [(seq: UInt64, body: JSONValue)] = []
        try waitUntil(timeout: 30, "six records journaled") {
            records = try server.daemon.records().map { ($0.seq, try JSONParser().parse($0.body)) }
            return records.count == 6
        }
        let silentSeqs = records.filter { $0.body["silent"]?.boolValue == true }.map(\.seq)
        #expect(silentSeqs.count == 3, "\(records.map(\.body))")
        let modalSeq = try #require(records.first { $0.body["presentation"]?.stringValue == "modal" }?.seq)
        try waitUntil(timeout: 30, "the modal served in-app") {
            try server.request("GET", "/v1/inapp").json?["item"]?["item"]?.stringValue == String(modalSeq)
        }
        #expect(try server.counts() == (unseen: 2, unread: 2))

        // HTTP and nc list the same two items.
        let items = try server.items()
        #expect(items.count == 2, "\(items)")
        let (status, out, err) = try server.daemon.ctl(["nc", "list", "--user", "alice", "--json"])
        #expect(status == 0, "\(err)")
        let ncItems = try out.split(separator: "\n").map { try JSONParser().parse(String($0)) }
        #expect(ncItems == items, "nc list --json and GET /v1/inbox serve the same items")
        let (_, countOut, _) = try server.daemon.ctl(["nc", "count", "--user", "alice", "--json"])
        #expect(countOut == "{\"unread\":2,\"unseen\":2}\n")
        let (_, text, _) = try server.daemon.ctl(["nc", "list", "--user", "alice"])
        for line in ["    deeplink: myapp://orders/A-1001", "    web view: https://shop.example/w", "    browser: https://shop.example/b",
                     "    title key: ORDER_TITLE Ann", "    body key: ORDER_SHIPPED A-1001", "    sound: chime.caf", "    badge: 5"] {
            #expect(text.contains(line + "\n"), "\(line) in \(text)")
        }

        let loc = try #require(items.first { $0["id"]?.stringValue == "ib-loc" })
        #expect(loc["title"] == nil && loc["body"] == nil)
        #expect(loc["locKey"]?.stringValue == "ORDER_SHIPPED" && loc["locArgs"] == .array([.string("A-1001")]))
        #expect(loc["titleLocKey"]?.stringValue == "ORDER_TITLE" && loc["titleLocArgs"] == .array([.string("Ann")]))
        #expect(loc["badge"]?.intValue == 5 && loc["sound"]?.stringValue == "chime.caf")
        #expect(loc["deeplink"]?.stringValue == "myapp://orders/A-1001")
        #expect(loc["webViewUrl"]?.stringValue == "https://shop.example/w" && loc["browserUrl"]?.stringValue == "https://shop.example/b")
        #expect(loc["clickUrl"]?.stringValue == "myapp://orders/A-1001", "kept, derived, for existing clients")
        let sale = try #require(items.first { $0["id"]?.stringValue == "mb-1" })
        #expect(sale["customPayload"]?["expires"]?.stringValue == "2026-12-31T23:59:59Z")
        #expect(sale["pushName"]?.stringValue == "sale")

        // A silent push is not an item: events on it answer as for a missing one.
        for seq in silentSeqs {
            #expect(try server.request("POST", "/v1/inbox/\(seq)/read").status == 404)
        }
        // The stream sent the two items and an in-app notice for the modal, nothing silent.
        // The stream sends by seq: once the last counts it sends are the final ones, every
        // earlier change (the silent records' included) has been sent or never will be.
        try waitUntil(timeout: 30, "the live events") {
            stream.items.count == 2 && stream.text.contains("event: inapp")
                && InboxIndexLifecycleTests.events(stream.text).last { $0.event == "counts" }?.data == #"{"unread":2,"unseen":2}"#
        }
        let events = InboxIndexLifecycleTests.events(stream.text)
        #expect(Set(events.filter { $0.event == "item" }.map(\.id)) == Set(items.compactMap { $0["item"]?.stringValue }))
        #expect(events.filter { $0.event == "inapp" }.map(\.id) == [String(modalSeq)])
        #expect(!events.contains { event in silentSeqs.contains { String($0) == event.id } && event.event != "counts" })
        let lastCounts = try #require(events.last { $0.event == "counts" })
        #expect(lastCounts.data == #"{"unread":2,"unseen":2}"#)
        #expect(server.daemon.files(in: "failed").isEmpty)
    }
}
