import Testing
import TestSupport
@preconcurrency import Glibc
@testable import PushMedia
import PushMediaCore
import PushSystem

/// Numbers a server or a configuration chooses must never meet a trapping conversion (issue 8,
/// defect 1). Before the fix, `Retry-After: Fri, 31 Dec 99999999999 23:59:59 GMT` trapped in
/// `Transfer.parseRetryAfter` ("Not enough bits to represent the passed value"): SIGILL, which
/// kills the whole test process, so on the old code these tests fail by crashing the run.
@Suite struct HostileNumberTests {
    /// Header values that once trapped or are malformed in the ways an attacker would try.
    static let hostileRetryAfter = [
        "Fri, 31 Dec 99999999999 23:59:59 GMT",
        "Fri, 31 Dec 9223372036854775807 23:59:59 GMT",
        "Fri, 31 Dec -9223372036854775808 23:59:59 GMT",
        "Fri, 99999999999 Dec 2030 23:59:59 GMT",
        "Fri, 31 Dec 2030 99999999999:59:59 GMT",
        "Fri, 31 Dec 2030 23:59:99999999999 GMT",
        "Fri, 31 Dec 2030 -1:-1:-1 GMT",
        "99999999999999999999999999999",
        "9223372036854775808",
        "9223372036854775807",
        "-1",
        "-9223372036854775808",
        "+5",
        "1e308",
        "",
        "\u{0}",
        "Fri, 31 Dec 2030 23:59 GMT",
    ]

    @Test(arguments: hostileRetryAfter)
    func retryAfterNeverTrapsAndStaysBounded(_ value: String) {
        let parsed = Transfer.parseRetryAfter(value, nowEpochSeconds: 1_700_000_000)
        if let parsed {
            #expect(parsed >= 0 && parsed <= Transfer.retryAfterCeiling, "\(value) -> \(parsed)")
        }
    }

    @Test func retryAfterExactValues() {
        // Huge delay-seconds saturate instead of trapping or being dropped.
        #expect(Transfer.parseRetryAfter("9223372036854775808", nowEpochSeconds: 0) == Transfer.retryAfterCeiling)
        #expect(Transfer.parseRetryAfter("120", nowEpochSeconds: 0) == 120)
        // A negative or signed delay is not 1*DIGIT.
        #expect(Transfer.parseRetryAfter("-1", nowEpochSeconds: 0) == nil)
        #expect(Transfer.parseRetryAfter("+5", nowEpochSeconds: 0) == nil)
        // Dates outside a 4-digit year are malformed, not "far future".
        #expect(Transfer.parseRetryAfter("Fri, 31 Dec 99999999999 23:59:59 GMT", nowEpochSeconds: 0) == nil)
        // A date in the past means "now".
        #expect(Transfer.parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", nowEpochSeconds: 1_700_000_000) == 0)
        // A far-future 4-digit year saturates at the ceiling.
        #expect(Transfer.parseRetryAfter("Fri, 31 Dec 9999 23:59:59 GMT", nowEpochSeconds: 0) == Transfer.retryAfterCeiling)
    }

    /// The reported case end to end: a 200 with a PNG and the hostile header is stored, and a
    /// 429 with it is retried within the configured bounds, the process alive throughout.
    @Test(arguments: ["Fri, 31 Dec 99999999999 23:59:59 GMT", "9223372036854775808", "-1", "garbage", "Fri, 31 Dec 9999 23:59:59 GMT"])
    func hostileRetryAfterFromAServerDoesNotCrash(_ header: String) async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/ok", .respond(status: 200, headers: [("Content-Type", "image/png"), ("Retry-After", header)], body: ImageFixtures.png))
        server.route("/limited", .sequence([.status(429, headers: [("Retry-After", header)]), .ok(ImageFixtures.png)]))
        var options = testOptions(dir)
        options.maxRetryAfter = 0.2
        let fetcher = try MediaFetcher(options: options)
        defer { fetcher.shutdown() }

        let stored = await fetcher.fetched(url: server.url("/ok"))
        #expect(stored.status == .stored, "\(stored.encodeJSON())")
        let limited = await fetcher.fetched(url: server.url("/limited"))
        // A parseable delay is honoured up to MaxRetryAfter= and the retry succeeds; an
        // unparseable one makes the 429 final. Either way the process lives.
        if Transfer.parseRetryAfter(header, nowEpochSeconds: 0) != nil {
            #expect(limited.status == .stored, "\(limited.encodeJSON())")
        } else {
            #expect(limited.status == .failed && limited.error?.httpStatus == 429, "\(limited.encodeJSON())")
        }
    }

    /// Huge durations from the configuration saturate instead of trapping (the schema bounds
    /// them too; this is the second line).
    @Test func hugeConfiguredDurationsDoNotTrap() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/img", .ok(ImageFixtures.png))
        server.route("/limited", .sequence([.status(429, headers: [("Retry-After", "99999999999")]), .ok(ImageFixtures.png)]))
        var options = testOptions(dir)
        options.dedupWindow = .seconds(99_999_999_999)
        options.payloadDeadline = .seconds(Int64.max)
        options.transferDeadline = .seconds(Int64.max)
        options.connectTimeout = .seconds(99_999_999_999)
        options.lowSpeedTime = .seconds(Int64.max)
        options.maxRetryAfter = 1e300
        options.retryBaseDelay = 1e300
        options.maxConcurrent = Int.max
        let fetcher = try MediaFetcher(options: options)
        defer { fetcher.shutdown() }
        let first = await fetcher.fetched(url: server.url("/img"))
        #expect(first.status == .stored, "\(first.encodeJSON())")
        let again = await fetcher.fetched(url: server.url("/img"))
        #expect(again.reused)
    }

    @Test func conversionsSaturate() {
        #expect(Bounded.nanos(seconds: .infinity) == Bounded.maxSpanNanos)
        #expect(Bounded.nanos(seconds: .nan) == 0)
        #expect(Bounded.nanos(seconds: -5) == 0)
        #expect(Bounded.nanos(seconds: 1.5) == 1_500_000_000)
        #expect(Bounded.millis(.seconds(Int64.max)) == Int(Int32.max))
        #expect(Bounded.millis(.microseconds(100)) == 1)
        #expect(Bounded.millis(.seconds(-3)) == 1)
        #expect(Bounded.wholeSeconds(.seconds(Int64.max)) == Int(Int32.max))
        #expect(Bounded.wholeSeconds(.milliseconds(1500)) == 2)
        #expect(Bounded.deadline(.max - 1, plus: 10) == .max)
        #expect(Bounded.sum(.max, 1) == .max)
        #expect(Bounded.sum(3, 4) == 7)
    }
}
