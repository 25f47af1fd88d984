@preconcurrency import Glibc
import Foundation
import PushOutbox
import PushOutboxStore
import PushSystem
import TestSupport
import Testing

/// The outbox killed with SIGKILL in a child process (`pushspool-outbox-child`), then
/// restarted over the same state directory.
@Suite struct OutboxCrashTests {
    static let path = "/v3/operations/async"

    func spawnChild(_ fixture: OutboxFixture) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ProcessRunner.executable("pushspool-outbox-child"))
        process.arguments = [fixture.state, fixture.server.url("")]
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
        follower.start()
        #expect(waitFor(10) { follower.status.delivered == 3 })
        follower.stop()
        let after = Array(fixture.server.requests(Self.path).dropFirst(before))
        let ids = transactionIds(after)
        #expect(ids.sorted() == ["e1", "e2", "e3"])  // each once
        #expect(ids.firstIndex(of: "e1")! < ids.firstIndex(of: "e3")!)  // alice's order kept
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
