import Testing
@preconcurrency import Glibc
@testable import PushMedia
import PushMediaCore
import PushSystem
import TestSupport

/// Concurrency bound, isolation from stalled servers, and shutdown.
@Suite struct LifecycleTests {
    @Test func concurrencyIsBoundedAndStalledDownloadsDoNotBlockOthers() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        for index in 0..<4 { server.route("/stall\(index)", .silent) }
        server.route("/ok.png", .ok(ImageFixtures.png))
        var options = testOptions(dir)
        options.maxConcurrent = 3
        options.transferDeadline = .seconds(30)
        options.payloadDeadline = .seconds(30)
        let fetcher = try MediaFetcher(options: options)

        let results = Locked<[MediaOutcome]>([])
        for index in 0..<4 {
            fetcher.fetch(url: server.url("/stall\(index)")) { outcome in results.withLock { $0.append(outcome) } }
        }
        try await waitUntil { server.connections == 3 }
        // The fetcher's own account: three running, one queued (a fourth started would count
        // four in flight, and this wait would fail).
        try await waitUntil { fetcher.stats.inFlight == 3 && fetcher.stats.queued == 1 }
        #expect(server.connections == 3, "at most maxConcurrent transfers")
        #expect(fetcher.stats.inFlight == 3)
        #expect(fetcher.stats.queued == 1)

        // With every slot stalled a new URL waits for a slot; with one slot free it goes through.
        var roomy = testOptions(dir)
        roomy.maxConcurrent = 16
        let second = try MediaFetcher(options: roomy)
        for index in 0..<4 { second.fetch(url: server.url("/stall\(index)")) { _ in } }
        let start = Posix.monotonicNanos()
        let outcome = await second.fetched(url: server.url("/ok.png"))
        #expect(outcome.status == .stored)
        // The fetcher's clock: the test's also counts the wait to be resumed, which a loaded
        // parallel run stretches; the loose bound still catches a fetch queued behind stalls.
        #expect(outcome.durationMillis < 1000, "took \(outcome.durationMillis) ms")
        #expect(elapsedSeconds(since: start) < 10)

        second.shutdown()
        fetcher.shutdown()
        #expect(results.withLock { $0.count } == 4)
    }

    @Test func shutdownCancelsInFlightWithinASecond() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/silent", .silent)
        server.route("/trickle", .trickle(headers: [], body: ImageFixtures.png, interval: 1))
        server.route("/retry", .status(503))
        var options = testOptions(dir)
        options.maxConcurrent = 2
        options.transferDeadline = .seconds(30)
        options.payloadDeadline = .seconds(60)
        options.retryBaseDelay = 20
        let fetcher = try MediaFetcher(options: options)

        let results = Locked<[MediaOutcome]>([])
        let urls = ["/silent", "/trickle", "/retry", "/queued"].map { server.url($0) }
        // "/retry" first: it fails at once and then sits in its 10–20 s backoff.
        fetcher.fetch(url: urls[2]) { outcome in results.withLock { $0.append(outcome) } }
        try await waitUntil { server.hits("/retry") == 1 }
        for url in [urls[0], urls[1], urls[3]] {
            fetcher.fetch(url: url) { outcome in results.withLock { $0.append(outcome) } }
        }
        try await waitUntil { server.hits("/silent") == 1 && server.hits("/trickle") == 1 }
        try await Task.sleep(for: .milliseconds(300))  // why: the scenario: the trickle is mid-body when the shutdown comes

        let start = Posix.monotonicNanos()
        fetcher.shutdown()
        let elapsed = elapsedSeconds(since: start)
        #expect(elapsed < 1, "shutdown took \(elapsed) s")
        let outcomes = results.withLock { $0 }
        #expect(outcomes.count == 4)
        #expect(outcomes.allSatisfy { $0.status == .failed && $0.wasCancelled })
        #expect(filesUnder(dir.store).isEmpty)

        let after = await fetcher.fetched(url: urls[0])
        #expect(after.wasCancelled)
        #expect(fetcher.stats.failedByCode["cancelled"] == 5)
    }

    @Test func asyncFetchDoesNotHoldCooperativeThreads() async throws {
        // More stalled awaits than cooperative threads: if fetch blocked a thread, the last
        // fetch below could not run.
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/silent", .silent)
        server.route("/ok.gif", .ok(ImageFixtures.gif))
        var options = testOptions(dir)
        options.transferDeadline = .seconds(30)
        options.payloadDeadline = .seconds(30)
        options.dedupWindow = .seconds(0)
        let fetcher = try MediaFetcher(options: options)
        let tasks = (0..<12).map { index in
            Task { await fetcher.fetched(url: server.url("/silent") + "?\(index)") }
        }
        try await waitUntil { server.connections >= 12 }
        let outcome = await fetcher.fetched(url: server.url("/ok.gif"))
        #expect(outcome.status == .stored)
        fetcher.shutdown()
        for task in tasks { #expect(await task.value.wasCancelled) }
    }
}

/// Waits for `condition` up to 30 s: a budget for a loaded CI machine running other suites in
/// parallel, not a performance bound.
func waitUntil(_ condition: () -> Bool) async throws {
    guard try await eventuallyAsync(within: 30, condition) else { throw WaitTimeout() }
}

struct WaitTimeout: Error {}

@Suite struct ShutdownFromCallbackTests {
    @Test(.timeLimit(.minutes(1)), arguments: ["/missing", "/ok.png"])
    func shutdownInsideCompletionDoesNotDeadlock(path: String) async throws {
        // "/missing" completes on the network thread, "/ok.png" on a finishing thread.
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/ok.png", .ok(ImageFixtures.png))
        server.route("/silent", .silent)
        var options = testOptions(dir)
        options.transferDeadline = .seconds(30)
        options.payloadDeadline = .seconds(30)
        let fetcher = try MediaFetcher(options: options)
        let silent = Locked<MediaOutcome?>(nil)
        fetcher.fetch(url: server.url("/silent")) { outcome in silent.withLock { $0 = outcome } }
        let outcome = await withCheckedContinuation { continuation in
            fetcher.fetch(url: server.url(path)) { outcome in
                fetcher.shutdown()
                continuation.resume(returning: outcome)
            }
        }
        #expect(outcome.status == (path == "/ok.png" ? .stored : .failed))
        // A second shutdown from outside waits for the loop and returns.
        fetcher.shutdown()
        #expect(silent.withLock { $0?.wasCancelled } == true)
    }
}

@Suite struct DedupTableTests {
    @Test func sweepDropsExpiredThenOldestHalf() {
        var state = SharedState()
        for index in 0..<100 {
            state.recent["u\(index)"] = (MediaOutcome(url: "u\(index)", status: .stored), UInt64(index))
        }
        FetcherCore.sweep(&state, now: 49, limit: 1000)
        #expect(state.recent.count == 50)
        #expect(state.recent["u49"] == nil && state.recent["u50"] != nil)
        FetcherCore.sweep(&state, now: 0, limit: 20)
        #expect(state.recent.count == 10)
        #expect(state.recent.keys.sorted() == (90..<100).map { "u\($0)" }.sorted())
        #expect(state.sweepAt == 1024)
    }
}
