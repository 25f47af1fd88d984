@preconcurrency import Glibc
import Foundation
import PushFollow
import PushJournal
import PushOutbox
import PushOutboxStore
import PushSystem
import Testing

/// Stopping the outbox while vendors hang.
@Suite struct OutboxStopTests {
    static let path = "/v3/operations/async"

    /// Issue 21 #10: `stop()` waited for every due POST in turn, each up to
    /// `RequestTimeoutSec=` (7 hanging users at 3 s: 21 s), past systemd's `TimeoutStopSec=`.
    @Test func stopAbortsAHangingPostAndReturnsWithinOneRequestTimeout() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.path, .silent)  // takes each POST and never answers
        try await fixture.journal((1...7).map { ("e\($0)", event("nc.opened", "e\($0)", user: "user\($0)"), now) })
        var options = try fixture.options()
        options.connectTimeout = .seconds(1)
        options.requestTimeout = .seconds(3)
        let follower = try OutboxFollower(options: options)
        let followerRunner = try follower.running()
        try #require(waitFor(20) { fixture.server.hits(Self.path) >= 1 })  // a POST is in flight
        let clock = ContinuousClock()
        let took = clock.measure { followerRunner.stop() }
        // Within one request timeout plus slack for a loaded machine (curl's progress callback
        // runs about once a second while nothing moves); before the fix, 7 × 3 s.
        #expect(took < .milliseconds(4500), "stop took \(took)")
        // The aborted POST was no attempt: nothing counts as retried, nothing was parked.
        let status = follower.status
        #expect(status.retried == 0 && status.parked == 0 && status.pending == 7)
        let store = OutboxStore(stateDirectory: fixture.state)
        #expect(try store.list(store.pendingDirectory).allSatisfy { $0.attempts == 0 && $0.notBeforeMillis == 0 })

        // After the restart everything goes out.
        fixture.server.route(Self.path, .ok([]))
        let restarted = try OutboxFollower(options: options)
        #expect(restarted.catchUp().delivered == 7)
    }
}
