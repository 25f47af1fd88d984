import Foundation
import PushPayload
import PushSpool
import PushSystem
import Testing
import TestSupport
@testable import PushInboxMain
@testable import PushInboxServer

/// Each sink owns its event-id rule: the spool's ids tell two requests under one key apart
/// (pushspoold's dedup would drop the second otherwise), the stream's do not (the stream tells
/// a retry from a reuse by the fingerprint that travels with the event).
@Suite struct EventSinkTests {
    static let fingerprintA = String(repeating: "a", count: 64)
    static let fingerprintB = String(repeating: "b", count: 64)

    /// A sink of the tests' own: it states no rule, so it gets the protocol's default.
    final class Bare: EventSink {
        func accept(_ event: PushEvent, fingerprint: String?) -> EventSinkFailure? { nil }
    }

    @Test func theSpoolsIdDependsOnTheRequestUnderOneKey() {
        let sink = SpoolEventSink(layout: SpoolLayout(root: "/nonexistent"))
        let first = sink.eventID(user: "alice", idempotencyKey: "k1", fingerprint: Self.fingerprintA)
        #expect(first == sink.eventID(user: "alice", idempotencyKey: "k1", fingerprint: Self.fingerprintA))
        #expect(first != sink.eventID(user: "alice", idempotencyKey: "k1", fingerprint: Self.fingerprintB))
        #expect(first != sink.eventID(user: "bob", idempotencyKey: "k1", fingerprint: Self.fingerprintA))
        #expect(first != sink.eventID(user: "alice", idempotencyKey: "k2", fingerprint: Self.fingerprintA))
        #expect(first == IdempotencyBindings.eventId(user: "alice", key: "k1", fingerprint: Self.fingerprintA))
        #expect(first.hasPrefix("http.") && first.utf8.count == 45)
    }

    @Test func theStreamsIdIsTheKeysWhateverTheRequest() {
        let first = StreamEventSink.eventID(user: "alice", idempotencyKey: "k1")
        #expect(first == IdempotencyBindings.eventId(user: "alice", key: "k1"))
        #expect(first != StreamEventSink.eventID(user: "bob", idempotencyKey: "k1"))
        #expect(first != StreamEventSink.eventID(user: "alice", idempotencyKey: "k2"))
        // The spool's rule would tell these two requests apart; the stream's does not.
        let spool = SpoolEventSink(layout: SpoolLayout(root: "/nonexistent"))
        #expect(spool.eventID(user: "alice", idempotencyKey: "k1", fingerprint: Self.fingerprintA)
                != spool.eventID(user: "alice", idempotencyKey: "k1", fingerprint: Self.fingerprintB))
        let bare = Bare()
        #expect(bare.eventID(user: "alice", idempotencyKey: "k1", fingerprint: Self.fingerprintA) == first)
        #expect(bare.eventID(user: "alice", idempotencyKey: "k1", fingerprint: Self.fingerprintB) == first)
    }

    @Test func withoutAKeyEveryEventGetsAFreshId() {
        let spool = SpoolEventSink(layout: SpoolLayout(root: "/nonexistent"))
        let ids = (0..<4).map { _ in spool.eventID(user: "alice", idempotencyKey: nil, fingerprint: Self.fingerprintA) }
            + (0..<4).map { _ in StreamEventSink.eventID(user: "alice", idempotencyKey: nil) }
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { !$0.hasPrefix("http.") })
    }

    @Test func theSpoolSinkDropsTheEventAndErasureEnvelopes() throws {
        let temp = TempDir("event-sink-spool")
        let layout = SpoolLayout(root: temp.appending("spool"))
        try layout.create()
        let sink = SpoolEventSink(layout: layout)
        var event = PushEvent(type: .opened, eventId: "", user: "alice", at: Timestamp.now())
        event.eventId = sink.eventID(user: "alice", idempotencyKey: nil, fingerprint: "")
        #expect(sink.accept(event, fingerprint: nil) == nil)
        let request = ErasureRequest(scope: .user, id: "alice", erasureId: ErasureRequest.newErasureId())
        #expect(try sink.acceptErasure(request, stateDirectory: temp.appending("state")).get() == ErasureReceipt(statusScope: nil))
        let dropped = try FileManager.default.contentsOfDirectory(atPath: layout.incoming).map { name in
            Normalizer.classify(try Posix.readFile(layout.incoming + "/" + name))
        }
        #expect(dropped.count == 2)
        #expect(dropped.contains { if case .event(let read) = $0 { read == event } else { false } })
        #expect(dropped.contains { if case .erasure(let read) = $0 { read == request } else { false } })
    }

    @Test func aSpoolThatIsNotThereIsA503() {
        let temp = TempDir("event-sink-missing")
        let sink = SpoolEventSink(layout: SpoolLayout(root: temp.appending("absent")))
        let event = PushEvent(type: .opened, eventId: "x1", user: "alice", at: Timestamp.now())
        let failure = sink.accept(event, fingerprint: nil)
        #expect(failure?.status == 503)
        #expect(failure?.code == "spool_unavailable")
        #expect(failure?.retryAfterSeconds == nil)
    }
}
