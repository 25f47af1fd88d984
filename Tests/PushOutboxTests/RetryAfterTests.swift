@preconcurrency import Glibc
import Foundation
@testable import PushOutbox
import PushOutboxStore
import PushSystem
import Testing

/// Issue 21 #12: a 429's (or 503's) `Retry-After` was ignored; the next attempt came after the
/// ordinary backoff (milliseconds here), and other users' POSTs went on hitting the vendor.
@Suite struct OutboxRetryAfterTests {
    static let path = "/v3/operations/async"

    func run(status: Int, retryAfter: String, ceiling: Duration = .seconds(60)) async throws -> (fixture: OutboxFixture, sentAt: Int64, pending: [OutboxDelivery]) {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.path, .sequence([.status(status, headers: [("Retry-After", retryAfter)]), .ok([])]))
        try await fixture.journal([("e1", event("nc.opened", "e1", user: "alice"), now), ("e2", event("nc.opened", "e2", user: "bob"), now)])
        var options = try fixture.options()
        options.retryCeiling = ceiling
        let follower = try OutboxFollower(options: options)
        let sentAt = Posix.wallClockMillis()
        follower.catchUp()
        follower.catchUp()
        let store = OutboxStore(stateDirectory: fixture.state)
        return (fixture, sentAt, try store.list(store.pendingDirectory))
    }

    @Test(arguments: [429, 503])
    func delaySecondsHoldTheVendorForEveryUser(status: Int) async throws {
        let (fixture, sentAt, pending) = try await run(status: status, retryAfter: "5")
        // alice's POST got the answer; bob's waits too, and neither went out again.
        #expect(fixture.server.hits(Self.path) == 1)
        #expect(pending.count == 2)
        let alice = try #require(pending.first { $0.eventId == "e1" })
        #expect(alice.attempts == 1 && alice.lastStatus == status)
        #expect(alice.notBeforeMillis >= sentAt + 5000)
        #expect(alice.notBeforeMillis <= Posix.wallClockMillis() + 5000)
    }

    @Test func anHTTPDateIsHonoured() async throws {
        // An hour ahead (under a two-hour ceiling): a loaded machine may take a minute to get
        // the POST out, and a date already past would rightly not hold anything.
        let epochSeconds = Posix.wallClockMillis() / 1000 + 3600
        let (fixture, _, pending) = try await run(status: 429, retryAfter: RetryAfterTests.imfDate(epochSeconds: epochSeconds),
                                                  ceiling: .seconds(7200))
        #expect(fixture.server.hits(Self.path) == 1)
        let alice = try #require(pending.first { $0.eventId == "e1" })
        // Not before the very second the vendor named (under the ceiling).
        #expect(alice.notBeforeMillis == epochSeconds * 1000)
    }

    @Test func anAbsurdValueIsBoundedByTheRetryCeiling() async throws {
        let (_, sentAt, pending) = try await run(status: 429, retryAfter: "99999999999999999999999", ceiling: .seconds(20))
        let alice = try #require(pending.first { $0.eventId == "e1" })
        #expect(alice.notBeforeMillis >= sentAt + 20_000)
        #expect(alice.notBeforeMillis <= Posix.wallClockMillis() + 20_000)
    }
}

/// The `Retry-After` parser alone: every form RFC 9110 allows, and values that must neither
/// trap nor be believed.
@Suite struct RetryAfterTests {
    /// 2026-12-01T12:00:00Z.
    static let noon: Int64 = 1_796_126_400_000

    static func imfDate(epochSeconds: Int64) -> String {
        var seconds = time_t(epochSeconds)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let length = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    @Test(arguments: [
        ("120", 120_000),
        ("0", 0),
        (" 7 ", 7_000),
        ("99999999", RetryAfter.ceilingMillis),
        (String(repeating: "9", count: 100), RetryAfter.ceilingMillis),
        ("Tue, 01 Dec 2026 12:00:30 GMT", 30_000),
        ("Tuesday, 01-Dec-26 12:01:00 GMT", 60_000),
        ("Tue Dec  1 12:00:10 2026", 10_000),
        ("Tue, 01 Dec 2026 11:00:00 GMT", 0),        // in the past: at once
        ("Fri, 31 Dec 9999 23:59:59 GMT", RetryAfter.ceilingMillis),
    ] as [(String, Int64)])
    func parses(value: String, millis: Int64) {
        #expect(RetryAfter.delayMillis(value, nowMillis: Self.noon) == millis)
    }

    @Test(arguments: [
        "", "-5", "1.5", "soon", "Tue, 01 Dec 99999 12:00:30 GMT", "Tue, 01 Dec 2026 25:00:00 GMT",
        "Tue, 41 Dec 2026 12:00:00 GMT", "Tue, 01 Foo 2026 12:00:00 GMT", "Tue, 01 Dec 2026 12:00:00 PST",
        "Tue, 1 Dec 2026 12:00:00 GMT", "Tue, 01 Dec 2026 12:00:00 GMT" + String(repeating: " ", count: 60) + "x",
    ])
    func refuses(value: String) {
        #expect(RetryAfter.delayMillis(value, nowMillis: Self.noon) == nil)
    }
}
