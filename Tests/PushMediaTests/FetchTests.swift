import Testing
@preconcurrency import Glibc
@testable import PushMedia
import PushMediaCore
import PushSystem
import TestSupport

/// Downloads against real HTTP servers on 127.0.0.1 started by each test.
@Suite struct FetchTests {
    static let images: [(String, [UInt8], String, String)] = [
        ("png", ImageFixtures.png, "image/png", "png"), ("jpeg", ImageFixtures.jpeg, "image/jpeg", "jpg"),
        ("gif", ImageFixtures.gif, "image/gif", "gif"), ("webp", ImageFixtures.webp, "image/webp", "webp"),
        ("heic", ImageFixtures.heic, "image/heic", "heic"),
    ]

    @Test(arguments: images.indices)
    func storesGoodImageContentAddressed(index: Int) async throws {
        let (name, bytes, mime, ext) = Self.images[index]
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        // The declared type is deliberately wrong: the bytes decide.
        server.route("/img", .ok(bytes, contentType: "text/plain"))
        let fetcher = try MediaFetcher(options: testOptions(dir))
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: server.url("/img"))
        #expect(outcome.status == .stored, "\(name): \(outcome.encodeJSON())")
        let sha = SHA256.hex(of: bytes)
        #expect(outcome.sha256 == sha)
        #expect(outcome.contentType == mime)
        #expect(outcome.bytes == Int64(bytes.count))
        #expect(outcome.attempts == 1)
        #expect(outcome.error == nil)
        let path = try #require(outcome.path)
        #expect(path == dir.store + "/" + sha.prefix(2) + "/" + sha.dropFirst(2) + "." + ext)
        #expect(readBytes(path) == bytes)
        #expect(filesUnder(dir.store + "/.tmp").isEmpty)
    }

    @Test func trickleEndsAtTransferDeadline() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/slow", .trickle(headers: [("Content-Type", "image/png")], body: ImageFixtures.png, interval: 1))
        var options = testOptions(dir)
        options.attempts = 1
        let fetcher = try MediaFetcher(options: options)
        defer { fetcher.shutdown() }

        let start = Posix.monotonicNanos()
        let outcome = await fetcher.fetched(url: server.url("/slow"))
        let elapsed = elapsedSeconds(since: start)
        #expect(outcome.status == .failed)
        #expect(outcome.error?.code == .timeout)
        // The fetcher's own clock says when the transfer ended; the test's wall clock also
        // counts waiting for a cooperative thread to resume on, which a loaded CI machine
        // stretches by seconds. The loose wall-clock bound still catches an ignored deadline.
        let took = Double(outcome.durationMillis) / 1000
        #expect(took >= 1.9 && took < options.transferDeadline.secondsValue + 1, "took \(took) s")
        #expect(elapsed < options.transferDeadline.secondsValue + 10, "returned after \(elapsed) s")
        #expect(filesUnder(dir.store).isEmpty)
    }

    @Test func lowSpeedCutOffStopsTrickleBeforeDeadline() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/slow", .trickle(headers: [], body: ImageFixtures.png, interval: 1))
        var options = testOptions(dir)
        options.attempts = 1
        options.transferDeadline = .seconds(20)
        options.lowSpeedLimitBytesPerSecond = 100
        options.lowSpeedTime = .seconds(1)
        let fetcher = try MediaFetcher(options: options)
        defer { fetcher.shutdown() }

        let start = Posix.monotonicNanos()
        let outcome = await fetcher.fetched(url: server.url("/slow"))
        #expect(outcome.error?.code == .timeout)
        #expect(Double(outcome.durationMillis) / 1000 < 3.5, "took \(outcome.durationMillis) ms")
        #expect(elapsedSeconds(since: start) < 13.5)
    }

    @Test func serverThatNeverAnswersTimesOutWithinPayloadDeadline() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/silent", .silent)
        var options = testOptions(dir)
        options.transferDeadline = .seconds(1.5)
        options.payloadDeadline = .seconds(3)
        let fetcher = try MediaFetcher(options: options)
        defer { fetcher.shutdown() }

        let start = Posix.monotonicNanos()
        let outcome = await fetcher.fetched(url: server.url("/silent"))
        let elapsed = elapsedSeconds(since: start)
        #expect(outcome.error?.code == .timeout)
        #expect(outcome.error?.isTransient == true)
        // A timeout is transient: retried, but never past the payload deadline.
        #expect(outcome.attempts == 2)
        #expect(Double(outcome.durationMillis) / 1000 < options.payloadDeadline.secondsValue + 1, "took \(outcome.durationMillis) ms")
        #expect(elapsed < options.payloadDeadline.secondsValue + 10, "returned after \(elapsed) s")
    }

    @Test func bodyOverCapIsCutOffAndRemoved() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        let chunk = ImageFixtures.png + [UInt8](repeating: 0x41, count: 64 * 1024)
        server.route("/endless", .endless(headers: [("Content-Type", "image/png")], chunk: chunk))
        server.route("/announced", .ok(ImageFixtures.png + [UInt8](repeating: 0, count: 300_000), contentType: "image/png"))
        var options = testOptions(dir)
        options.maxBytes = 256 * 1024
        let fetcher = try MediaFetcher(options: options)
        defer { fetcher.shutdown() }

        for path in ["/endless", "/announced"] {
            let outcome = await fetcher.fetched(url: server.url(path))
            #expect(outcome.status == .failed)
            #expect(outcome.error?.code == .tooLarge, "\(path): \(outcome.encodeJSON())")
            #expect(outcome.attempts == 1)
        }
        #expect(filesUnder(dir.store).isEmpty)
    }

    @Test func redirectLoopStops() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/a", .redirect(location: "/b"))
        server.route("/b", .redirect(location: "/a"))
        let fetcher = try MediaFetcher(options: testOptions(dir))
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: server.url("/a"))
        #expect(outcome.error?.code == .tooManyRedirects)
        #expect(outcome.attempts == 1)
        #expect(server.hits("/a") + server.hits("/b") == 6)
    }

    @Test func redirectWithinLimitIsFollowed() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/r", .redirect(location: "/img.png"))
        server.route("/img.png", .ok(ImageFixtures.gif))
        let fetcher = try MediaFetcher(options: testOptions(dir))
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: server.url("/r"))
        #expect(outcome.status == .stored)
        #expect(outcome.contentType == "image/gif")
    }

    @Test func redirectToRefusedAddressNeverConnects() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        let inner = try LoopbackHTTPServer(host: "127.0.0.2")
        inner.route("/secret.png", .ok(ImageFixtures.png))
        server.route("/r", .redirect(location: inner.url("/secret.png")))
        let fetcher = try MediaFetcher(options: testOptions(dir))
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: server.url("/r"))
        #expect(outcome.error?.code == .ssrfRefused, "\(outcome.encodeJSON())")
        #expect(outcome.attempts == 1)
        #expect(server.hits("/r") == 1)
        #expect(inner.connections == 0)
    }

    @Test func redirectToOtherSchemeIsRefused() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/to-file", .redirect(location: "file:///etc/passwd"))
        server.route("/to-ftp", .redirect(location: "ftp://127.0.0.1:\(server.port)/a.png"))
        let fetcher = try MediaFetcher(options: testOptions(dir))
        defer { fetcher.shutdown() }

        for path in ["/to-file", "/to-ftp"] {
            let outcome = await fetcher.fetched(url: server.url(path))
            #expect(outcome.error?.code == .insecureScheme, "\(path): \(outcome.encodeJSON())")
            #expect(outcome.attempts == 1)
        }
        #expect(server.connections == 2)
    }

    @Test func loopbackRefusedWithoutAllowList() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/img", .ok(ImageFixtures.png))
        var options = testOptions(dir)
        options.allowNetworks = []
        let fetcher = try MediaFetcher(options: options)
        defer { fetcher.shutdown() }

        for host in ["127.0.0.1", "localhost"] {
            let outcome = await fetcher.fetched(url: "http://\(host):\(server.port)/img")
            #expect(outcome.error?.code == .ssrfRefused, "\(host): \(outcome.encodeJSON())")
            #expect(outcome.error?.isTransient == false)
        }
        #expect(server.connections == 0)
    }

    @Test func notFoundIsNotRetried() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        let fetcher = try MediaFetcher(options: testOptions(dir))
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: server.url("/missing.png"))
        #expect(outcome.error?.code == .httpStatus)
        #expect(outcome.error?.httpStatus == 404)
        #expect(outcome.attempts == 1)
        #expect(server.hits("/missing.png") == 1)
        #expect(filesUnder(dir.store).isEmpty)
    }

    @Test func serviceUnavailableThenOkIsRetried() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/flaky", .sequence([.status(503), .ok(ImageFixtures.jpeg)]))
        let fetcher = try MediaFetcher(options: testOptions(dir))
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: server.url("/flaky"))
        #expect(outcome.status == .stored, "\(outcome.encodeJSON())")
        #expect(outcome.attempts == 2)
        #expect(server.hits("/flaky") == 2)
        #expect(fetcher.stats.retries == 1)
    }

    @Test func tooManyRequestsHonoursRetryAfter() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/limited", .sequence([.status(429, headers: [("Retry-After", "1")]), .ok(ImageFixtures.png)]))
        server.route("/limited-no-hint", .sequence([.status(429), .ok(ImageFixtures.png)]))
        let fetcher = try MediaFetcher(options: testOptions(dir))
        defer { fetcher.shutdown() }

        let start = Posix.monotonicNanos()
        let outcome = await fetcher.fetched(url: server.url("/limited"))
        #expect(outcome.status == .stored)
        #expect(outcome.attempts == 2)
        #expect(elapsedSeconds(since: start) >= 0.95)

        let noHint = await fetcher.fetched(url: server.url("/limited-no-hint"))
        #expect(noHint.error?.httpStatus == 429)
        #expect(noHint.attempts == 1)
    }

    @Test func retriesStopAtAttemptLimit() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/down", .status(500))
        let fetcher = try MediaFetcher(options: testOptions(dir))
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: server.url("/down"))
        #expect(outcome.error?.httpStatus == 500)
        #expect(outcome.attempts == 3)
        #expect(server.hits("/down") == 3)
    }

    @Test func htmlServedAsPNGIsRefused() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/fake.png", .ok(Array("<!DOCTYPE html><html><body>Not found</body></html>".utf8), contentType: "image/png"))
        server.route("/tiny", .ok(Array("<p>".utf8), contentType: "image/png"))
        server.route("/empty", .ok([], contentType: "image/png"))
        let fetcher = try MediaFetcher(options: testOptions(dir))
        defer { fetcher.shutdown() }

        for path in ["/fake.png", "/tiny", "/empty"] {
            let outcome = await fetcher.fetched(url: server.url(path))
            #expect(outcome.error?.code == .unsupportedType, "\(path)")
            #expect(outcome.attempts == 1)
        }
        #expect(filesUnder(dir.store).isEmpty)
    }

    @Test func disallowedTypeIsRefused() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/a.gif", .ok(ImageFixtures.gif))
        var options = testOptions(dir)
        options.allowedTypes = [.png, .jpeg]
        let fetcher = try MediaFetcher(options: options)
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: server.url("/a.gif"))
        #expect(outcome.error?.code == .unsupportedType)
    }

    @Test func connectionRefusedIsRetriedThenFails() async throws {
        let dir = TempDir()
        let fetcher = try MediaFetcher(options: testOptions(dir))
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: "http://127.0.0.1:\(closedLoopbackPort())/a.png")
        #expect(outcome.error?.code == .connectFailed, "\(outcome.encodeJSON())")
        #expect(outcome.attempts == 3)
    }

    @Test func unresolvableHostFails() async throws {
        let dir = TempDir()
        let fetcher = try MediaFetcher(options: testOptions(dir))
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: "https://media.pushspool.invalid/a.png")
        #expect(outcome.status == .failed)
        #expect(outcome.error?.code == .dnsFailed)
        #expect(outcome.error?.isTransient == false)
    }

    @Test func httpRefusedWithoutAllowHTTP() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/a.png", .ok(ImageFixtures.png))
        server.route("/to-http", .redirect(location: "/a.png"))
        var options = testOptions(dir)
        options.allowHTTP = false
        let fetcher = try MediaFetcher(options: options)
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: server.url("/a.png"))
        #expect(outcome.error?.code == .insecureScheme)
        #expect(outcome.attempts == 0)
        #expect(server.connections == 0)
        for url in ["ftp://127.0.0.1/a.png", "not a url", "https:///a.png", "javascript:alert(1)"] {
            let bad = await fetcher.fetched(url: url)
            #expect(bad.error?.code == .invalidURL, "\(url): \(bad.encodeJSON())")
        }
    }

    @Test func mediaAltFallbackAppliesToFailedDownload() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/ok.png", .ok(ImageFixtures.png))
        let fetcher = try MediaFetcher(options: testOptions(dir))
        defer { fetcher.shutdown() }

        let failed = await fetcher.fetched(url: server.url("/gone.png"))
        let fallback = try #require(MediaFallback.apply(outcome: failed, body: "See the picture", mediaAlt: "A red bicycle"))
        #expect(fallback.body == "A red bicycle")
        #expect(fallback.originalBody == "See the picture")
        let stored = await fetcher.fetched(url: server.url("/ok.png"))
        #expect(MediaFallback.apply(outcome: stored, body: "See the picture", mediaAlt: "A red bicycle") == nil)
    }

    @Test func sameURLIsDownloadedOnce() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/slowish.png", .trickle(headers: [], body: ImageFixtures.webp, interval: 0.002))
        let fetcher = try MediaFetcher(options: testOptions(dir))
        defer { fetcher.shutdown() }

        let url = server.url("/slowish.png")
        let outcomes = await withTaskGroup(of: MediaOutcome.self) { group in
            for _ in 0..<8 { group.addTask { await fetcher.fetched(url: url) } }
            var all: [MediaOutcome] = []
            for await outcome in group { all.append(outcome) }
            return all
        }
        #expect(outcomes.allSatisfy { $0.status == .stored })
        #expect(Set(outcomes.compactMap(\.path)).count == 1)
        #expect(outcomes.filter { !$0.reused }.count == 1)
        let later = await fetcher.fetched(url: url)
        #expect(later.reused && later.status == .stored && later.attempts == 0)
        #expect(server.hits("/slowish.png") == 1)
        #expect(fetcher.stats.stored == 1)
        #expect(fetcher.stats.reused == 8)
    }

    @Test func dedupWindowZeroFetchesAgainButStoresOnce() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/a.png", .ok(ImageFixtures.png))
        server.route("/b.png", .ok(ImageFixtures.png))
        var options = testOptions(dir)
        options.dedupWindow = .seconds(0)
        let fetcher = try MediaFetcher(options: options)
        defer { fetcher.shutdown() }

        let first = await fetcher.fetched(url: server.url("/a.png"))
        let second = await fetcher.fetched(url: server.url("/a.png"))
        let other = await fetcher.fetched(url: server.url("/b.png"))
        #expect(server.hits("/a.png") == 2)
        #expect(first.path == second.path && second.path == other.path)
        let stats = try MediaStore.stats(directory: dir.store)
        #expect(stats.files == 1)
        #expect(stats.bytes == Int64(ImageFixtures.png.count))
        #expect(stats.tempFiles == 0)
    }

    @Test func callbackFormDeliversOnce() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/a.jpg", .ok(ImageFixtures.jpeg))
        let fetcher = try MediaFetcher(options: testOptions(dir))
        defer { fetcher.shutdown() }

        let outcome = await withCheckedContinuation { continuation in
            fetcher.fetch(url: server.url("/a.jpg")) { continuation.resume(returning: $0) }
        }
        #expect(outcome.status == .stored)
        #expect(outcome.contentType == "image/jpeg")
    }

    @Test func staleTempFilesAreRemovedAtStart() throws {
        let dir = TempDir()
        try Posix.mkdirs(dir.store + "/.tmp")
        try Posix.writeFileAtomically(directory: dir.store + "/.tmp", name: "123-1.part", bytes: [1, 2, 3])
        let fetcher = try MediaFetcher(options: testOptions(dir))
        fetcher.shutdown()
        #expect(filesUnder(dir.store).isEmpty)
    }

    @Test func unusableOptionsAreRejected() {
        let dir = TempDir()
        let mutations: [(inout MediaOptions) -> Void] = [
            { $0.allowNetworks = ["127.0.0.1/40"] }, { $0.maxConcurrent = 0 }, { $0.attempts = 0 },
            { $0.maxBytes = 0 }, { $0.transferDeadline = .seconds(0) }, { $0.thumbnailMaxPixels = 0 },
        ]
        for index in mutations.indices {
            var options = testOptions(dir)
            mutations[index](&options)
            #expect(performing: { try MediaFetcher(options: options) }, throws: { ($0 as? MediaFailure)?.code == .config })
        }
    }

    @Test func trickleEndsWithinPayloadDeadlineAcrossRetries() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/slow", .trickle(headers: [], body: ImageFixtures.png, interval: 1))
        var options = testOptions(dir)
        options.transferDeadline = .seconds(2)
        options.payloadDeadline = .seconds(3)
        let fetcher = try MediaFetcher(options: options)
        defer { fetcher.shutdown() }

        let start = Posix.monotonicNanos()
        let outcome = await fetcher.fetched(url: server.url("/slow"))
        let elapsed = elapsedSeconds(since: start)
        #expect(outcome.error?.code == .timeout)
        #expect(outcome.attempts == 2)
        #expect(Double(outcome.durationMillis) / 1000 < options.payloadDeadline.secondsValue + 1, "took \(outcome.durationMillis) ms")
        #expect(elapsed < options.payloadDeadline.secondsValue + 10, "returned after \(elapsed) s")
        #expect(server.hits("/slow") == 2)
    }
}
