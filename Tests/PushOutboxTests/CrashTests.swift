@preconcurrency import Glibc
import Foundation
import PushFollow
import PushJournal
import PushOutbox
import PushOutboxStore
import PushSystem
import TestSupport
import Testing
import TestTraits

/// The outbox killed with SIGKILL in a child process (`pushspool-outbox-child`), then
/// restarted over the same state directory.
@Suite(.tags(.slow)) struct OutboxCrashTests {
    static let path = "/v3/operations/async"

    func spawnChild(_ fixture: OutboxFixture, renames: Int? = nil) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ProcessRunner.executable("pushspool-outbox-child"))
        process.arguments = [fixture.state, fixture.server.url("")] + (renames.map { ["\($0)"] } ?? [])
        try process.run()
        return process
    }

    func transactionIds(_ requests: [LoopbackHTTPServer.Request]) -> [String] {
        requests.map { $0.target.components(separatedBy: "transactionId=").last ?? "" }
    }

    @Test func pendingEventsAreDeliveredOnceAfterSigkill() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.path, .status(503))
        try await fixture.journal([
            ("e1", event("nc.opened", "e1", user: "alice"), now),
            ("e2", event("nc.opened", "e2", user: "bob"), now),
            ("e3", event("nc.opened", "e3", user: "alice"), now),
        ])
        let child = try spawnChild(fixture)
        // Both users' heads were tried at least twice: everything is queued and in backoff.
        let tried = waitFor(20) { Set(transactionIds(fixture.server.requests(Self.path))).isSuperset(of: ["e1", "e2"]) && fixture.server.hits(Self.path) >= 4 }
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        try #require(tried, "the child never tried: \(fixture.server.requests(Self.path).map(\.target))")
        #expect(child.terminationReason == .uncaughtSignal)
        let before = fixture.server.hits(Self.path)
        // e3 waits behind e1 (same user) and never went out.
        #expect(!transactionIds(fixture.server.requests(Self.path)).contains("e3"))

        fixture.server.route(Self.path, .ok([]))
        let follower = try OutboxFollower(options: fixture.options())
        #expect(follower.status.pending == 3)
        let followerRunner = try follower.running()
        #expect(waitFor(10) { follower.status.delivered == 3 })
        followerRunner.stop()
        let after = Array(fixture.server.requests(Self.path).dropFirst(before))
        let ids = transactionIds(after)
        #expect(ids.sorted() == ["e1", "e2", "e3"])  // each once
        #expect(ids.firstIndex(of: "e1")! < ids.firstIndex(of: "e3")!)  // alice's order kept
    }

    /// Issue 21 #9: records past the cursor whose pending files were written before the crash
    /// were mapped and queued a second time after the restart, so one Infobip POST carried the
    /// same reports twice. The child writes 24 pending files (alice's seen reports, bob's
    /// actions' seen reports and MOs) and can never move
    /// its cursor (see `pushspool-outbox-child`), then dies by SIGKILL.
    @Test func eventsQueuedJustBeforeTheCrashArePostedOnceAfterSigkill() async throws {
        let fixture = try OutboxFixture()
        let seenPath = "/mobile/2/messages/seen", moPath = "/mobile/1/messages/mo"
        fixture.server.route(seenPath, .ok([]))
        fixture.server.route(moPath, .ok([]))
        let count = 20
        var records: [(String, JSONValue, Int64)] = []
        for i in 1...count { records.append(("a\(i)", infobipItem(id: "ibm-\(i)", user: "alice"), now)) }        // seq i
        for i in 1...count { records.append(("b\(i)", infobipItem(id: "ibb-\(i)", user: "bob"), now)) }          // seq count + i
        for i in 1...count {
            records.append(("o\(i)", event("nc.open", "open-\(i)", user: "alice", item: UInt64(i)), now))
            records.append(("m\(i)", event("nc.action", "mo-\(i)", user: "bob", item: UInt64(count + i), action: "mm_accept"), now))
        }
        try await fixture.journal(records)

        let store = OutboxStore(stateDirectory: fixture.state)
        let child = try spawnChild(fixture, renames: 24)
        let queued = waitFor(20) { ((try? store.names(store.pendingDirectory)) ?? []).count >= 24 }
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        try #require(queued, "the child wrote \((try? store.names(store.pendingDirectory))?.count ?? 0) pending files")
        try #require(try store.names(store.pendingDirectory).count == 24)
        try #require(try store.cursor() == 0)  // the files are past the cursor: the crash state
        #expect(fixture.server.hits(seenPath) == 0 && fixture.server.hits(moPath) == 0)

        let follower = try OutboxFollower(options: fixture.options())
        #expect(follower.status.pending == 24)
        follower.catchUp()
        let status = follower.catchUp()
        // Alice's opens: one seen each; bob's actions: a seen and an MO each.
        #expect(status.delivered == 3 * count)
        #expect(status.pending == 0 && status.parked == 0)
        #expect(try store.names(store.pendingDirectory).isEmpty)

        func ids(_ path: String) throws -> [[String]] {
            try fixture.server.requests(path).map { request in
                try #require(parse(request.body)?["messages"]?.arrayValue).compactMap { $0["messageId"]?.stringValue }
            }
        }
        let seen = try ids(seenPath), mo = try ids(moPath)
        // Each event in exactly one POST, once, in journal order.
        #expect(seen.flatMap { $0 }.filter { $0.hasPrefix("ibm-") } == (1...count).map { "ibm-\($0)" }, "seen POSTs: \(seen)")
        #expect(seen.flatMap { $0 }.filter { $0.hasPrefix("ibb-") } == (1...count).map { "ibb-\($0)" }, "seen POSTs: \(seen)")
        #expect(seen.flatMap { $0 }.count == 2 * count)
        #expect(mo.flatMap { $0 } == (1...count).map { "mo-\($0)" }, "MO POSTs: \(mo)")
    }

    @Test func aPostInFlightAtTheCrashIsRepeatedWithTheSameTransactionId() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.path, .silent)  // the receiver takes the POST and never answers
        try await fixture.journal([("e1", event("nc.opened", "e1"), now)])
        let child = try spawnChild(fixture)
        let inFlight = waitFor(20) { fixture.server.hits(Self.path) == 1 }
        kill(child.processIdentifier, SIGKILL)
        child.waitUntilExit()
        try #require(inFlight)

        fixture.server.route(Self.path, .ok([]))
        let follower = try OutboxFollower(options: fixture.options())
        #expect(follower.catchUp().delivered == 1)
        follower.catchUp()
        let requests = fixture.server.requests(Self.path)
        #expect(requests.count == 2)
        #expect(Set(requests.map(\.target)).count == 1)  // the same transactionId both times
    }
}
