@preconcurrency import Glibc
import PushFollow
import PushOutbox
import PushOutboxStore
import PushSystem
import Testing

/// The cursor file is written when a step queued a delivery (before its POST), not for
/// records that queue nothing; what the file lags by is written at stop.
@Suite struct OutboxCursorWriteTests {
    @Test func recordsThatQueueNothingDoNotRewriteTheCursorFile() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(OutboxDeliveryTests.mindboxPath, .ok(Array("{}".utf8), contentType: "application/json"))
        var records: [(String, JSONValue, Int64)] = (1...20).map { ("mindbox:mb-\($0):alice", mindboxItem(id: "mb-\($0)"), now) }
        records.append(("event:ev-1", event("nc.open", "ev-1", item: 1), now))  // 21: one POST
        records += (22...30).map { ("mindbox:mb-\($0):alice", mindboxItem(id: "mb-\($0)"), now) }
        try await fixture.journal(records)
        let store = OutboxStore(stateDirectory: fixture.state)
        let follower = try OutboxFollower(options: fixture.options())
        let context = FollowerContext(journalLastSeq: 30, stopRequested: { false })

        // One step maps all 30 (limit 1,024): the event at 21 queues a delivery, so the file
        // holds 30 before the POST; then nothing new.
        _ = try follower.step(context)
        #expect(follower.status.cursor == 30)
        #expect(try store.cursor() == 30)
        #expect(fixture.server.requests(OutboxDeliveryTests.mindboxPath).count == 1)
        follower.finish()

        // Records that queue nothing: the cursor moves in memory, the file stays until stop.
        try await fixture.journal((31...40).map { ("mindbox:mb-\($0):alice", mindboxItem(id: "mb-\($0)"), now) })
        let again = try OutboxFollower(options: fixture.options())
        #expect(again.status.cursor == 30)
        _ = try again.step(FollowerContext(journalLastSeq: 40, stopRequested: { false }))
        #expect(again.status.cursor == 40)
        #expect(again.durableSeq() == 40, "nothing of 31...40 needs keeping: retention and the eraser may pass them")
        #expect(try store.cursor() == 30)
        again.finish()
        #expect(try store.cursor() == 40)
        // Mapped again from 30 after a crash, they would still queue nothing: no POST was made.
        #expect(fixture.server.requests(OutboxDeliveryTests.mindboxPath).count == 1)
    }
}
