@preconcurrency import Glibc
import Foundation
import PushFollow
import PushJournal
import PushOutbox
import PushOutboxStore
import PushPayload
import PushSystem
import PushErasure
import TestSupport
import Testing

/// Issue 37, Mindbox: what the SDK's back end expects beyond the Notification Center guide —
/// the customer, the push clicks, the project's operation names, `pushDate` in milliseconds —
/// sent through the journal's outbox to a recording receiver on 127.0.0.1, byte for byte.
@Suite struct MindboxReportsTests {
    static let path = "/v3/operations/async"

    /// A Mindbox push with two buttons (their ids are the buttons' `uniqueKey`s).
    static func pushWithButtons(id: String = "mb-1", user: String = "alice", warnings: [String] = []) -> JSONValue {
        guard case .object(var item) = mindboxItem(id: id, user: user) else { return .null }
        item["buttons"] = .array([
            .object(["id": .string("btn-docs"), "text": .string("Docs"), "url": .string("https://e.example/d"), "options": .array([])]),
            .object(["id": .string("btn-shop"), "text": .string("Shop"), "options": .array([])]),
        ])
        item["warnings"] = .array(warnings.map { .string($0) })
        return .object(item)
    }

    static func text(_ request: LoopbackHTTPServer.Request) -> String { String(decoding: request.body, as: UTF8.self) }

    /// `MindboxCustomerIdKey=` puts the user into NCOpen and NCPushOpen as the SDK's
    /// `CustomerRequest.ids` does; the project's operation names replace the guide's.
    @Test func theCustomerAndTheProjectsOperationNamesGoOut() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.path, .ok(Array("{}".utf8), contentType: "application/json"))
        try await fixture.journal([
            ("mindbox:mb-1:alice", mindboxItem(), now),                                  // 1
            ("event:ev-1", event("nc.opened", "ev-1"), now),                            // 2
            ("event:ev-2", event("nc.open", "ev-2", item: 1), now),                     // 3
            ("event:ev-3", event("nc.opened", "ev-3", user: nil, device: "dev-9"), now), // 4: no user, no customer
        ])
        var options = try fixture.options()
        options.mindboxCustomerIdKey = "websiteID"
        options.mindboxOperationNCOpen = "Acme.NotificationCenterOpen"
        options.mindboxOperationNCPushOpen = "Acme.NotificationCenterPushOpen"
        let status = try OutboxFollower(options: options).catchUp()
        #expect(status.delivered == 3 && status.parked == 0 && status.pending == 0)

        let sent = fixture.server.requests(Self.path)
        try #require(sent.count == 3)
        #expect(sent[0].target == "/v3/operations/async?endpointId=app-ios&operation=Acme.NotificationCenterOpen&deviceUUID=dev-1&transactionId=ev-1")
        #expect(Self.text(sent[0]) == #"{"customer":{"ids":{"websiteID":"alice"}}}"#)
        #expect(sent[1].target == "/v3/operations/async?endpointId=app-ios&operation=Acme.NotificationCenterPushOpen&deviceUUID=dev-1&transactionId=ev-2")
        #expect(Self.text(sent[1])
            == #"{"customer":{"ids":{"websiteID":"alice"}},"customerAction":{"customFields":{"mobPushSendDateTime":"2026-11-30T10:00:00.000Z","mobPushTranslateName":"sale_november"}}}"#)
        #expect(sent[2].target == "/v3/operations/async?endpointId=app-ios&operation=Acme.NotificationCenterOpen&deviceUUID=dev-9&transactionId=ev-3")
        #expect(Self.text(sent[2]) == "{}")
    }

    /// Without `MindboxCustomerIdKey=` and with the default names the bodies are as before.
    @Test func withoutTheKeysTheBodiesAreTheGuides() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.path, .ok([]))
        try await fixture.journal([("mindbox:mb-1:alice", mindboxItem(), now), ("event:ev-1", event("nc.opened", "ev-1"), now),
                                   ("event:ev-2", event("nc.open", "ev-2", item: 1), now)])
        try OutboxFollower(options: fixture.options()).catchUp()
        let sent = fixture.server.requests(Self.path)
        try #require(sent.count == 2)
        #expect(sent[0].target.contains("operation=mobileapp.NCOpen&") && Self.text(sent[0]) == "{}")
        #expect(sent[1].target.contains("operation=mobileapp.NCPushOpen&"))
        #expect(Self.text(sent[1]).hasPrefix(#"{"customerAction":"#))
    }

    /// `MindboxPushClicks=yes`: an open is NCPushOpen and then the SDK's `MobilePush.TrackClick`
    /// with the push's `uniqueKey`; a button acted on is a click with the button's `uniqueKey`
    /// too. Each once, also across a second pass and a restart.
    @Test func opensAndButtonsAreReportedAsTheSDKsPushClicks() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.path, .ok([]))
        try await fixture.journal([
            ("mindbox:mb-1:alice", Self.pushWithButtons(), now),                                              // 1
            ("mindbox:mb-2:alice", Self.pushWithButtons(id: "derived-2", warnings: ["derived_id"]), now),    // 2
            ("event:ev-1", event("nc.open", "ev-1", item: 1), now),                                          // 3
            ("event:ev-2", event("nc.action", "ev-2", item: 1, action: "btn-shop"), now),                    // 4
            ("event:ev-3", event("nc.action", "ev-3", item: 1, action: "no-such-button"), now),              // 5: nothing
            ("event:ev-4", event("nc.open", "ev-4", item: 2), now),                                          // 6: no click, no key
            ("event:ev-5", event("nc.action", "ev-5", item: 2, action: "btn-docs"), now),                    // 7: nothing
        ])
        var options = try fixture.options()
        options.mindboxPushClicks = true
        let status = try OutboxFollower(options: options).catchUp()
        #expect(status.delivered == 4 && status.parked == 0 && status.pending == 0)

        let sent = fixture.server.requests(Self.path)
        try #require(sent.count == 4)
        #expect(sent[0].target == "/v3/operations/async?endpointId=app-ios&operation=mobileapp.NCPushOpen&deviceUUID=dev-1&transactionId=ev-1")
        #expect(sent[1].target == "/v3/operations/async?endpointId=app-ios&operation=MobilePush.TrackClick&deviceUUID=dev-1&transactionId=ev-1.1")
        #expect(Self.text(sent[1]) == #"{"messageUniqueKey":"mb-1"}"#)
        #expect(sent[2].target == "/v3/operations/async?endpointId=app-ios&operation=MobilePush.TrackClick&deviceUUID=dev-1&transactionId=ev-2")
        #expect(Self.text(sent[2]) == #"{"buttonUniqueKey":"btn-shop","messageUniqueKey":"mb-1"}"#)
        #expect(sent[3].target.contains("operation=mobileapp.NCPushOpen&") && sent[3].target.hasSuffix("&transactionId=ev-4"))
        #expect(sent[1].header("Authorization") == "SecretKey \(OutboxFixture.mindboxKey)")

        try OutboxFollower(options: options).catchUp()
        #expect(fixture.server.requests(Self.path).count == 4, "nothing twice after a restart")
    }

    /// Clicks are off by default: an open is NCPushOpen alone and a button action sends nothing.
    @Test func clicksAreOffByDefault() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.path, .ok([]))
        try await fixture.journal([("mindbox:mb-1:alice", Self.pushWithButtons(), now), ("event:ev-1", event("nc.open", "ev-1", item: 1), now),
                                   ("event:ev-2", event("nc.action", "ev-2", item: 1, action: "btn-shop"), now)])
        #expect(try OutboxFollower(options: fixture.options()).catchUp().delivered == 1)
        #expect(fixture.server.requests(Self.path).map(\.target).allSatisfy { $0.contains("operation=mobileapp.NCPushOpen&") })
    }

    /// An erasure accepted while the vendor hangs drops the subject's queued clicks with the
    /// rest of its deliveries.
    @Test func anErasureDropsTheQueuedClicks() async throws {
        let fixture = try OutboxFixture()
        let gate = HTTPGate()
        fixture.server.route(Self.path, .sequence([.gated(gate, .ok([])), .ok([])]))
        try await fixture.journal([
            ("mindbox:mb-1:alice", Self.pushWithButtons(), now),                                            // 1
            ("event:b1", event("nc.opened", "b1", user: "bob", device: "dev-bob"), now),                    // 2
            ("event:a1", event("nc.open", "a1", item: 1), now),                                            // 3
            ("event:a2", event("nc.action", "a2", item: 1, action: "btn-docs"), now),                      // 4
            ("event:b2", event("nc.opened", "b2", user: "bob", device: "dev-bob"), now),                    // 5
        ])
        var options = try fixture.options()
        options.mindboxPushClicks = true
        let requests = ErasureRequests(stateDirectory: fixture.state)
        let follower = try OutboxFollower(options: options, erased: requests.erased)
        let finished = DispatchSemaphore(value: 0)
        Thread {
            follower.catchUp()
            finished.signal()
        }.start()
        try #require(gate.waitForArrivals(1, seconds: 30), "bob's first POST never reached the vendor")
        try requests.storeSubject(ErasureRequest(scope: .user, id: "alice", erasureId: "0123456789abcdef0123456789abcdef"))
        gate.release()
        #expect(finished.wait(timeout: .now() + 60) == .success)
        let sent = fixture.server.requests(Self.path).map(\.target)
        #expect(sent.count == 2 && sent.allSatisfy { $0.contains("operation=mobileapp.NCOpen&") }, "\(sent)")
    }

    /// `pushDate` in epoch milliseconds, as a JSON number or a string of digits, is the send date.
    @Test(arguments: [JSONValue.number("1772359200000"), .string("1772359200000"), .number("1772359200")])
    func aPushDateInMillisecondsIsSent(date: JSONValue) async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.path, .ok([]))
        guard case .object(var item) = mindboxItem() else { return }
        item["customPayload"] = .object(["pushName": .string("sale"), "pushDate": date])
        try await fixture.journal([("mindbox:mb-1:alice", .object(item), now), ("event:ev-1", event("nc.open", "ev-1", item: 1), now)])
        try OutboxFollower(options: fixture.options()).catchUp()
        let sent = try #require(fixture.server.requests(Self.path).first)
        #expect(Self.text(sent) == #"{"customerAction":{"customFields":{"mobPushSendDateTime":"2026-03-01T10:00:00.000Z","mobPushTranslateName":"sale"}}}"#)
    }
}
