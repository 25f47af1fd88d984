@preconcurrency import Glibc
import Foundation
import PushExport
@testable import PushFleetOutbox
import PushOutbox
import PushOutboxStore
import PushSystem
import TestSupport
import Testing

/// The fleet outbox's delivery of one fetch without a NATS server: the messages answered
/// through a recording stand-in for the work consumer, the vendor a loopback stand-in.
@Suite struct FleetDeliveryTests {
    static let mindboxPath = "/v3/operations/async"

    /// Records how each held message was answered.
    final class RecordingQueue: HeldMessages {
        var answers: [UInt64: String] = [:]
        var held: Set<UInt64>

        init(_ seqs: [UInt64]) { held = Set(seqs) }

        func acknowledge(_ seq: UInt64) { answer(seq, "ack") }
        func refuse(_ seq: UInt64, delay: Duration) { answer(seq, delay > .zero ? "refuse-later" : "refuse-now") }
        func extend(_ seq: UInt64) {}
        func release(_ seq: UInt64) { answer(seq, "release") }
        var heldSeqs: [UInt64] { held.sorted() }

        private func answer(_ seq: UInt64, _ how: String) {
            #expect(answers[seq] == nil, "message \(seq) answered twice")
            answers[seq] = how
            held.remove(seq)
        }
    }

    struct Node {
        let fixture: OutboxFixture
        let worker: FleetWorker
        let store: OutboxStore

        init(erased: ErasedSubjects = ErasedSubjects()) throws {
            fixture = try OutboxFixture()
            let directory = fixture.state + "/inbox/outbox"
            let options = FleetOutboxOptions(outbox: try fixture.options(), export: ExportOptions(stateDirectory: fixture.state, instance: nil),
                                             directory: directory)
            try Posix.mkdirs(directory, mode: 0o750)
            store = OutboxStore(directory: directory)
            try store.create()
            worker = try FleetWorker(options: options, store: store, shouldStop: { false }, erased: erased)
        }

        /// Works `entries` as one fetch; returns how each message was answered.
        func deliver(_ entries: [FleetWorker.Entry]) throws -> [UInt64: String] {
            let queue = RecordingQueue(entries.map(\.message.streamSeq))
            var notices: [OutboxNotice] = []
            try worker.deliver(entries, consumer: queue, notices: &notices, stopRequested: { false })
            #expect(queue.held.isEmpty, "every message answered")
            return queue.answers
        }
    }

    static func entry(_ seq: UInt64, _ deliveries: [OutboxDelivery]) -> FleetWorker.Entry {
        FleetWorker.Entry(message: StreamRecord(streamSeq: seq, deliveries: 1, journalSeq: nil, ingestMillis: now, body: []),
                          delivery: deliveries[0], rest: Array(deliveries.dropFirst()))
    }

    static func mindbox(_ seq: UInt64, index: Int = 0, user: String = "alice", operation: String = "NCOpen") -> OutboxDelivery {
        OutboxDelivery(seq: seq, index: index, target: .mindbox, eventId: "ev-\(seq)", eventType: "nc.open", orderKey: "u:\(user)",
                       createdMillis: now, atMillis: now, operation: operation, device: "dev-1", payload: .object([:]))
    }

    static func infobip(_ seq: UInt64, index: Int, target: OutboxTarget) -> OutboxDelivery {
        OutboxDelivery(seq: seq, index: index, target: target, eventId: "ev-\(seq)", eventType: "nc.action", orderKey: "u:bob",
                       createdMillis: now, atMillis: now, operation: nil, device: "reg-1",
                       payload: .object(["messageId": .string("m-\(seq)")]))
    }

    @Test func a503OnTheClickHandsTheWholeMessageBack() throws {
        let node = try Node()
        node.fixture.server.route(Self.mindboxPath, .sequence([.ok([]), .status(503)]))
        let answers = try node.deliver([Self.entry(7, [Self.mindbox(7), Self.mindbox(7, index: 1, operation: "MobilePush.TrackClick")])])
        #expect(answers == [7: "refuse-later"])
        let sent = node.fixture.server.requests(Self.mindboxPath).map(\.target)
        #expect(sent.count == 2 && sent[0].hasSuffix("transactionId=ev-7") && sent[1].hasSuffix("transactionId=ev-7.1"))
        #expect(node.worker.status.delivered == 1 && node.worker.status.retried == 1)
    }

    @Test func anInfobipActionIsSeenThenMOAndAcknowledgedOnceNothingLeftOnTheNode() throws {
        let node = try Node()
        node.fixture.server.route("/mobile/2/messages/seen", .ok([]))
        node.fixture.server.route("/mobile/1/messages/mo", .ok([]))
        let answers = try node.deliver([Self.entry(9, [Self.infobip(9, index: 0, target: .infobipSeen),
                                                       Self.infobip(9, index: 1, target: .infobipMO)])])
        #expect(answers == [9: "ack"])
        let seen = node.fixture.server.requests("/mobile/2/messages/seen"), mo = node.fixture.server.requests("/mobile/1/messages/mo")
        #expect(seen.count == 1 && mo.count == 1)
        #expect(try node.store.names(node.store.pendingDirectory).isEmpty, "no part of the event kept on this node")
        #expect(node.worker.status.delivered == 2)
    }

    @Test func aUsersLaterMessageFollowsOneHandedBackAnotherUsersGoes() throws {
        let node = try Node()
        node.fixture.server.route(Self.mindboxPath, .sequence([.status(500), .ok([])]))
        let answers = try node.deliver([Self.entry(1, [Self.mindbox(1)]), Self.entry(2, [Self.mindbox(2)]),
                                        Self.entry(3, [Self.mindbox(3, user: "bob")])])
        #expect(answers == [1: "refuse-later", 2: "refuse-later", 3: "ack"])
        let ids = node.fixture.server.requests(Self.mindboxPath).map { $0.target.split(separator: "=").last.map(String.init) ?? "" }
        #expect(ids == ["ev-1", "ev-3"], "alice's second is not sent behind her first")
    }

    @Test func a400IsParkedOnTheNodeThenAcknowledged() throws {
        let node = try Node()
        node.fixture.server.route(Self.mindboxPath, .status(400))
        let answers = try node.deliver([Self.entry(4, [Self.mindbox(4)])])
        #expect(answers == [4: "ack"])
        let parked = try node.store.list(node.store.parkedDirectory)
        #expect(parked.map(\.parkedReason) == ["http_400"] && parked.map(\.attempts) == [1])
    }

    @Test func anErasedSubjectsMessageIsAcknowledgedUnsent() throws {
        let erased = ErasedSubjects([.init(erasureID: "e1", subject: .user("alice"), before: nil)])
        let node = try Node(erased: erased)
        node.fixture.server.route(Self.mindboxPath, .ok([]))
        let answers = try node.deliver([Self.entry(5, [Self.mindbox(5), Self.mindbox(5, index: 1)])])
        #expect(answers == [5: "ack"])
        #expect(node.fixture.server.hits(Self.mindboxPath) == 0)
        #expect(node.worker.status.erased == 1)
    }
}
