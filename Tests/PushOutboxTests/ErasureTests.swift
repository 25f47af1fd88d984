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

/// Issue 33 #5: an erasure stops the subject's queued vendor deliveries, even with the vendor
/// hung and across a restart (docs/design/erasure.md, "Outbox").
@Suite struct OutboxErasureTests {
    static let path = "/v3/operations/async"
    static let erasureID = "0123456789abcdef0123456789abcdef"

    /// The `transactionId`s the vendor received, in order.
    static func sent(_ server: LoopbackHTTPServer) -> [String] {
        server.requests(path).compactMap { request in
            request.target.split(separator: "&").first { $0.hasPrefix("transactionId=") }.map { String($0.dropFirst("transactionId=".count)) }
        }
    }

    static func opened(_ id: String, user: String) -> (String, JSONValue, Int64) {
        ("event:" + id, event("nc.opened", id, user: user, device: "dev-" + user), now)
    }

    /// Before the fix, the intake's erasure reached the outbox only through the eraser, after
    /// every follower had passed the record, while the worker kept sending from memory: all
    /// ten of alice's events went out once the hung vendor answered.
    @Test func anErasureWhileTheVendorHangsSendsNoneOfTheSubjectsQueuedEvents() async throws {
        let fixture = try OutboxFixture()
        let gate = HTTPGate()
        // bob's first POST hangs at the vendor; every later one is answered at once.
        fixture.server.route(Self.path, .sequence([.gated(gate, .ok([])), .ok([])]))
        let alice = (1...10).map { "a\($0)" }
        try await fixture.journal([Self.opened("b1", user: "bob")] + alice.map { Self.opened($0, user: "alice") }
            + [Self.opened("b2", user: "bob"), Self.opened("b3", user: "bob")])
        let requests = ErasureRequests(stateDirectory: fixture.state)
        let follower = try OutboxFollower(options: fixture.options(), erased: requests.erased)

        let finished = DispatchSemaphore(value: 0)
        let status = Locked<OutboxStatus?>(nil)
        let pass = Thread {
            let result = follower.catchUp()
            status.withLock { $0 = result }
            finished.signal()
        }
        pass.start()
        try #require(gate.waitForArrivals(1, seconds: 30), "bob's first POST never reached the vendor")
        // alice's ten events are queued behind it; the intake accepts her erasure now.
        try requests.storeSubject(ErasureRequest(scope: .user, id: "alice", erasureId: Self.erasureID))
        gate.release()
        #expect(finished.wait(timeout: .now() + 60) == .success, "the delivery pass did not end")

        #expect(Self.sent(fixture.server) == ["b1", "b2", "b3"])
        let result = try #require(status.withLock { $0 })
        #expect(result.delivered == 3 && result.erased == 10 && result.pending == 0 && result.parked == 0)
        let store = OutboxStore(stateDirectory: fixture.state)
        #expect(try store.names(store.pendingDirectory).isEmpty)
        // Nothing comes back on a later pass or a restart.
        follower.catchUp()
        #expect(try OutboxFollower(options: fixture.options()).catchUp().delivered == 0)
        #expect(Self.sent(fixture.server) == ["b1", "b2", "b3"])
    }

    /// A delivery whose POST fails after the erasure is not written back for a retry (or
    /// parked): the failure path checks the erased set too.
    @Test func aFailedPostOfAnErasedSubjectIsDroppedNotRetried() async throws {
        let fixture = try OutboxFixture()
        let gate = HTTPGate()
        fixture.server.route(Self.path, .gated(gate, .status(503)))
        try await fixture.journal([Self.opened("a1", user: "alice")])
        let requests = ErasureRequests(stateDirectory: fixture.state)
        let follower = try OutboxFollower(options: fixture.options(), erased: requests.erased)
        let finished = DispatchSemaphore(value: 0)
        Thread {
            follower.catchUp()
            finished.signal()
        }.start()
        try #require(gate.waitForArrivals(1, seconds: 30))
        try requests.storeSubject(ErasureRequest(scope: .user, id: "alice", erasureId: Self.erasureID))
        gate.release()
        #expect(finished.wait(timeout: .now() + 60) == .success)
        let store = OutboxStore(stateDirectory: fixture.state)
        #expect(try store.names(store.pendingDirectory).isEmpty && store.names(store.parkedDirectory).isEmpty)
        #expect(follower.status.retried == 0 && follower.status.erased == 1)
    }

    /// kill -9 with alice's deliveries on disk and her erasure journaled, the outbox past the
    /// record, the eraser not yet at its outbox step: the restarted daemon finds the erasure
    /// from its subject file and the journal, and the outbox sends none of what it covers.
    /// alice's event after the erasure record is new data and goes out.
    @Test func aRestartSendsNothingAPendingErasureCovers() async throws {
        let fixture = try OutboxFixture()
        let gate = HTTPGate()
        fixture.server.route(Self.path, .gated(gate, .ok([])))
        let erasure = ErasureRecord.body(erasureID: Self.erasureID, scope: .user, subjectHash: String(repeating: "ab", count: 32),
                                         requestedAt: "2026-12-04T12:00:00.000Z")
        try await fixture.journal([Self.opened("b1", user: "bob")] + (1...5).map { Self.opened("a\($0)", user: "alice") }
            + [("erasure:" + Self.erasureID, try #require(parse(erasure)), now),  // seq 7
               Self.opened("a6", user: "alice")])                                      // seq 8: after the erasure
        // The request was accepted (its subject file written) by the process that dies.
        try ErasureRequests(stateDirectory: fixture.state).storeSubject(ErasureRequest(scope: .user, id: "alice", erasureId: Self.erasureID))

        // The outbox of that process, which never learned of it, maps everything and hangs on
        // bob's POST; then the process goes (the aborted POST is no attempt).
        var options = try fixture.options()
        options.connectTimeout = .seconds(1)
        options.requestTimeout = .seconds(30)
        let dying = try OutboxFollower(options: options)
        let runner = try dying.running()
        try #require(gate.waitForArrivals(1, seconds: 30))
        runner.stop()
        let store = OutboxStore(stateDirectory: fixture.state)
        #expect(try store.names(store.pendingDirectory).count == 7)
        #expect(try store.cursor() == 8)

        // The restart, as pushspoold's Followers do it.
        fixture.server.route(Self.path, .ok([]))
        let requests = ErasureRequests(stateDirectory: fixture.state)
        requests.restoreErased(journalDirectory: fixture.state + "/journal")
        #expect(requests.erased.entries == [ErasedSubjects.Entry(erasureID: Self.erasureID, subject: .user("alice"), before: 7)])
        let restarted = try OutboxFollower(options: fixture.options(), erased: requests.erased)
        let status = restarted.catchUp()
        #expect(Self.sent(fixture.server).filter { $0.hasPrefix("a") } == ["a6"])
        #expect(Self.sent(fixture.server).filter { $0 == "b1" }.count == 2)  // the aborted one, then once delivered
        #expect(status.delivered == 2 && status.erased == 5 && status.pending == 0)
        #expect(try store.names(store.pendingDirectory).isEmpty)
    }
}
