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

/// Issue 33 #5 on an inbox node: the fleet outbox's retry sender, which POSTs the dead letters
/// `pushspoolctl outbox retry` handed back, sends none of an erased subject's once the node
/// applied the erasure, even when it listed them before (the vendor hung meanwhile). Needs no
/// NATS: the retry sender works from files.
@Suite struct FleetRetryErasureTests {
    static let path = "/v3/operations/async"

    static func deadLetter(seq: UInt64, id: String, user: String) -> OutboxDelivery {
        OutboxDelivery(seq: seq, index: 0, target: .mindbox, eventId: id, eventType: "nc.opened", orderKey: "u:" + user,
                       createdMillis: now, atMillis: now, operation: "mobileapp.NCOpen", device: "dev-" + user, payload: .object([:]))
    }

    @Test func anErasureWhileTheVendorHangsSendsNoneOfTheSubjectsRetriedDeadLetters() async throws {
        let fixture = try OutboxFixture()
        let gate = HTTPGate()
        fixture.server.route(Self.path, .sequence([.gated(gate, .ok([])), .ok([])]))
        let directory = fixture.state + "/inbox/outbox"
        let erased = ErasedSubjects()
        let fleet = try FleetOutbox(options: FleetOutboxOptions(outbox: fixture.options(), export: ExportOptions(stateDirectory: fixture.state, instance: nil),
                                                                directory: directory),
                                    appliedSeq: { 0 }, erased: erased)
        let store = OutboxStore(directory: directory)
        let letters = [Self.deadLetter(seq: 1, id: "b1", user: "bob")] + (2...6).map { Self.deadLetter(seq: UInt64($0), id: "a\($0)", user: "alice") }
            + [Self.deadLetter(seq: 7, id: "b2", user: "bob"), Self.deadLetter(seq: 8, id: "b3", user: "bob")]
        for letter in letters { try store.write(letter, in: store.retryDirectory) }

        let sender = fleet.retrySender
        let allOfBob = DispatchSemaphore(value: 0)
        sender.observe { if sender.counts.delivered >= 3 { allOfBob.signal() } }
        let runner = FollowerRunner(sender, commits: CommitFeed(), niceness: 0)
        try runner.start()
        defer { runner.stop() }
        try #require(gate.waitForArrivals(1, seconds: 30), "bob's first POST never reached the vendor")
        // The node's index applied alice's erasure (stream seq 100) while the vendor hangs.
        erased.add(ErasedSubjects.Entry(erasureID: "0123456789abcdef0123456789abcdef", subject: .user("alice"), before: 100))
        gate.release()
        #expect(allOfBob.wait(timeout: .now() + 60) == .success, "bob's three dead letters were not delivered")

        let sent = fixture.server.requests(Self.path).compactMap { request in
            request.target.split(separator: "&").first { $0.hasPrefix("transactionId=") }.map { String($0.dropFirst("transactionId=".count)) }
        }
        #expect(sent == ["b1", "b2", "b3"])
        #expect(try store.names(store.pendingDirectory).isEmpty && store.names(store.retryDirectory).isEmpty)
    }
}
