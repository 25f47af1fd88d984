@preconcurrency import Glibc
import Foundation
import PushExport
import PushFleetOutbox
import PushFollow
import PushJournal
import PushOutbox
import PushOutboxStore
import PushSystem
import TestSupport
import Testing

/// Issue 37 on an inbox node: a parked push click that `pushspoolctl outbox retry` hands back
/// goes out from the fleet's retry sender as the SDK's click, with its own transactionId.
@Suite struct FleetRetryClickTests {
    static let path = "/v3/operations/async"

    @Test func aRetriedClickGoesOutAsTheSDKsClick() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.path, .ok([]))
        let directory = fixture.state + "/inbox/outbox"
        let fleet = try FleetOutbox(options: FleetOutboxOptions(outbox: fixture.options(), export: ExportOptions(stateDirectory: fixture.state, instance: nil),
                                                                directory: directory),
                                    appliedSeq: { 0 })
        let store = OutboxStore(directory: directory)
        let click = OutboxDelivery(seq: 7, index: 1, target: .mindbox, eventId: "ev-7", eventType: "nc.open", orderKey: "u:alice",
                                   createdMillis: now, atMillis: now, operation: "MobilePush.TrackClick", device: "dev-1",
                                   payload: .object(["messageUniqueKey": .string("mb-1")]))
        try store.write(click, in: store.retryDirectory)

        let sender = fleet.retrySender
        let delivered = DispatchSemaphore(value: 0)
        sender.observe { if sender.counts.delivered >= 1 { delivered.signal() } }
        let runner = FollowerRunner(sender, commits: CommitFeed(), niceness: 0)
        try runner.start()
        defer { runner.stop() }
        #expect(delivered.wait(timeout: .now() + 30) == .success)
        let sent = try #require(fixture.server.requests(Self.path).first)
        #expect(sent.target == "/v3/operations/async?endpointId=app-ios&operation=MobilePush.TrackClick&deviceUUID=dev-1&transactionId=ev-7.1")
        #expect(String(decoding: sent.body, as: UTF8.self) == #"{"messageUniqueKey":"mb-1"}"#)
    }
}
