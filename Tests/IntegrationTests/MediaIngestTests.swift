@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem
import PushJournal
import PushMedia
import PushMediaCore
import TestSupport

/// The daemon's media path end to end: the real `pushspoold` downloading from real HTTP
/// servers on 127.0.0.1 that each test starts (and nothing but 127.0.0.1).
@Suite struct MediaIngestTests {
    /// A 1×1 RGBA PNG: enough for sniffing and the store; its bytes name the stored file.
    static let png: [UInt8] = Array(Data(base64Encoded:
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")!)

    /// Media on, loopback allowed, failures fast; `extra` lines go into `[Media]`. No periodic
    /// status.json: the counts the tests read are the ones written at shutdown.
    static func config(_ extra: [String] = []) -> String {
        ([
            "[Spool]", "StableAgeSec=0",
            "[Metrics]", "IntervalSec=3600",
            "[Media]", "Enabled=yes", "AllowHTTP=yes", "AllowNetworks=127.0.0.0/8",
            "ConnectTimeoutSec=1", "TransferTimeoutSec=3", "PayloadDeadlineSec=5", "Attempts=1",
        ] + extra).joined(separator: "\n") + "\n"
    }

    /// A bare Mindbox iOS payload (no envelope) with `imageUrl`.
    static func mindbox(id: String, imageURL: String) -> [UInt8] {
        Array("""
            {"aps":{"alert":{"title":"Sale","body":"Only today \(id)"},"mutable-content":1},\
            "clickUrl":"https://shop.example/sale","imageUrl":"\(imageURL)","uniqueKey":"\(id)"}
            """.utf8)
    }

    /// A bare SFMC iOS payload with `_mediaUrl` and `_mediaAlt`.
    static func sfmc(id: String, mediaURL: String, alt: String, body: String) -> [UInt8] {
        Array("""
            {"_sid":"SFMC","_m":"\(id)","_mediaUrl":"\(mediaURL)","_mediaAlt":"\(alt)",\
            "aps":{"alert":{"title":"Rich","body":"\(body)"},"mutable-content":1}}
            """.utf8)
    }

    static func object(_ record: JournalRecord) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(record.body)) as? [String: Any])
    }

    static func media(_ record: JournalRecord) throws -> [String: Any] {
        try #require(try object(record)["media"] as? [String: Any], "record \(record.key) has no media object")
    }

    /// Records so far; an empty or not yet created journal counts as none.
    static func recordCount(_ harness: DaemonHarness) -> Int {
        (try? harness.records().count) ?? 0
    }

    /// `pushspoolctl media stats --json` as an object.
    static func mediaStats(_ harness: DaemonHarness) throws -> [String: Any] {
        let (status, output, errors) = try harness.ctl(["media", "stats", "--json"])
        #expect(status == 0, "media stats: \(errors)")
        let line = try #require(output.split(separator: "\n").first, "media stats printed nothing")
        return try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
    }

    @Test func mindboxImageIsStoredAndTheRecordNamesIt() throws {
        let server = try LoopbackHTTPServer()
        server.route("/sale.png", .ok(Self.png, contentType: "image/png"))
        let harness = try DaemonHarness(name: "media-stored", config: Self.config())
        try harness.start()
        try harness.drop(Self.mindbox(id: "mb-image-1", imageURL: server.url("/sale.png")), name: "mb.json")
        try waitUntil(timeout: 20, "the record") { Self.recordCount(harness) == 1 }
        #expect(harness.stop() == 0)

        let record = try #require(try harness.records().first)
        #expect(record.key == "mindbox:mb-image-1")
        let media = try Self.media(record)
        let sha = PushSystem.SHA256.hex(of: Self.png)
        #expect(media["status"] as? String == "stored", "\(media)")
        #expect(media["sha256"] as? String == sha)
        #expect(media["contentType"] as? String == "image/png")
        let path = try #require(media["path"] as? String)
        #expect(path.hasPrefix(harness.state + "/media/"), "\(path)")
        #expect(FileManager.default.contents(atPath: path).map(Array.init) == Self.png)
        #expect(harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty)
        #expect(server.hits("/sale.png") == 1)

        let stats = try Self.mediaStats(harness)
        let store = try #require(stats["store"] as? [String: Any])
        #expect(store["files"] as? Int == 1)
        #expect(store["bytes"] as? Int == Self.png.count)
        let daemon = try #require(stats["daemon"] as? [String: Any], "\(stats)")
        #expect(daemon["stored"] as? Int == 1)
        #expect(daemon["failed"] as? Int == 0)
    }

    /// A 404 with `_mediaAlt` swaps the body; a timeout without one keeps it; both land.
    @Test func failedDownloadsStillLandAndAltReplacesTheBody() throws {
        let server = try LoopbackHTTPServer()
        server.route("/slow.png", .trickle(headers: [("Content-Type", "image/png")], body: Self.png, interval: 1))
        let harness = try DaemonHarness(name: "media-failed", config: Self.config(["TransferTimeoutSec=1.5"]))
        try harness.start()
        try harness.drop(Self.sfmc(id: "sfmc-alt-1", mediaURL: server.url("/gone.jpg"), alt: "A red bicycle",
                                   body: "See the picture"), name: "sfmc.json")
        try harness.drop(Self.mindbox(id: "mb-slow-1", imageURL: server.url("/slow.png")), name: "slow.json")
        try waitUntil(timeout: 20, "both records") { Self.recordCount(harness) == 2 }
        #expect(harness.stop() == 0)

        let records = Dictionary(uniqueKeysWithValues: try harness.records().map { ($0.key, $0) })
        let alt = try Self.object(try #require(records["sfmc:sfmc-alt-1"], "\(records.keys)"))
        let altMedia = try #require(alt["media"] as? [String: Any])
        #expect(altMedia["status"] as? String == "failed", "\(altMedia)")
        #expect((altMedia["error"] as? [String: Any])?["code"] as? String == "http_status")
        #expect(alt["body"] as? String == "A red bicycle")
        #expect(alt["originalBody"] as? String == "See the picture")

        let slow = try Self.object(try #require(records["mindbox:mb-slow-1"]))
        let slowMedia = try #require(slow["media"] as? [String: Any])
        #expect(slowMedia["status"] as? String == "failed")
        #expect((slowMedia["error"] as? [String: Any])?["code"] as? String == "timeout")
        #expect(slow["body"] as? String == "Only today mb-slow-1")
        #expect(slow["originalBody"] == nil)
        #expect(harness.files(in: "failed").isEmpty && harness.files(in: "incoming").isEmpty)

        let stats = try Self.mediaStats(harness)
        let daemon = try #require(stats["daemon"] as? [String: Any], "\(stats)")
        #expect(daemon["failed"] as? Int == 2)
        let byCode = try #require(daemon["failedByCode"] as? [String: Any])
        #expect(byCode["http_status"] as? Int == 1)
        #expect(byCode["timeout"] as? Int == 1)
        #expect((stats["store"] as? [String: Any])?["files"] as? Int == 0)
    }

    /// Issue 22, SFMC's sample extension: `_mediaAlt` becomes the body whenever the push ends
    /// without an attachment — `_mediaUrl` missing, empty or unusable, and an image that
    /// downloads but cannot be decoded — not only when a download fails. A good image keeps
    /// the body.
    @Test func sfmcAltTextFollowsTheSampleExtension() throws {
        let server = try LoopbackHTTPServer()
        server.route("/good.png", .ok(Self.png, contentType: "image/png"))
        server.route("/cut.png", .ok(Array(ImageFixtures.png.prefix(ImageFixtures.png.count / 2)), contentType: "image/png"))
        let harness = try DaemonHarness(name: "media-sfmc-alt", config: Self.config())
        try harness.start()
        let withoutURL = Array(#"{"_sid":"SFMC","_m":"no-url","_mediaAlt":"Alt no-url","aps":{"alert":{"title":"T","body":"Body no-url"}}}"#.utf8)
        try harness.drop(withoutURL, name: "no-url.json")
        try harness.drop(Self.sfmc(id: "empty-url", mediaURL: "", alt: "Alt empty-url", body: "Body empty-url"), name: "empty.json")
        try harness.drop(Self.sfmc(id: "bad-url", mediaURL: "not a url", alt: "Alt bad-url", body: "Body bad-url"), name: "bad.json")
        try harness.drop(Self.sfmc(id: "cut", mediaURL: server.url("/cut.png"), alt: "Alt cut", body: "Body cut"), name: "cut.json")
        try harness.drop(Self.sfmc(id: "good", mediaURL: server.url("/good.png"), alt: "Alt good", body: "Body good"), name: "good.json")
        try waitUntil(timeout: 30, "five records") { Self.recordCount(harness) == 5 }
        #expect(harness.stop() == 0)

        let records = Dictionary(uniqueKeysWithValues: try harness.records().map { ($0.key, try Self.object($0)) })
        for id in ["no-url", "empty-url", "bad-url", "cut"] {
            let record = try #require(records["sfmc:\(id)"], "\(records.keys)")
            #expect(record["body"] as? String == "Alt \(id)", "\(id): \(record)")
            #expect(record["originalBody"] as? String == "Body \(id)", "\(id)")
        }
        let cut = try #require(records["sfmc:cut"]?["media"] as? [String: Any])
        #expect(cut["status"] as? String == "stored" && cut["decodable"] as? Bool == false, "\(cut)")
        let warnings = records["sfmc:no-url"]?["warnings"] as? [String]
        #expect(warnings == ["media_alt_without_url"], "\(String(describing: warnings))")
        #expect((records["sfmc:bad-url"]?["warnings"] as? [String])?.contains("invalid_url:_mediaUrl") == true)
        let good = try #require(records["sfmc:good"])
        #expect(good["body"] as? String == "Body good" && good["originalBody"] == nil, "\(good)")
    }

    /// Media the daemon refuses to fetch (plain http with AllowHTTP=no) is recorded as
    /// skipped with its reason, and `_mediaAlt` replaces the body as for a failed download.
    @Test func skippedMediaIsRecordedAndAltStillApplies() throws {
        // Nothing listens there and nothing may connect: the scheme is refused before any I/O.
        let url = "http://127.0.0.1:9/never.jpg"
        let harness = try DaemonHarness(name: "media-skipped", config: Self.config(["AllowHTTP=no"]))
        try harness.start()
        try harness.drop(Self.sfmc(id: "sfmc-skip-1", mediaURL: url, alt: "alt text", body: "body text"), name: "skip.json")
        try waitUntil(timeout: 20, "the record") { Self.recordCount(harness) == 1 }
        #expect(harness.stop() == 0)
        let record = try Self.object(try #require(try harness.records().first))
        let media = try #require(record["media"] as? [String: Any])
        #expect(media["status"] as? String == "skipped", "\(media)")
        #expect(media["reason"] as? String == "insecure_scheme")
        #expect(media["url"] as? String == url)
        #expect(record["body"] as? String == "alt text")
        #expect(record["originalBody"] as? String == "body text")
        let daemon = try #require(try Self.mediaStats(harness)["daemon"] as? [String: Any])
        #expect(daemon["skipped"] as? Int == 1)
    }

    /// 100 downloads hang (16 at a time, the rest queued) while 1,000 payloads without media
    /// go straight through to the journal.
    @Test func payloadsWithoutMediaDoNotWaitForHangingDownloads() throws {
        let server = try LoopbackHTTPServer()
        server.route("/hang", .silent)
        let harness = try DaemonHarness(name: "media-isolation", config: Self.config([
            "TransferTimeoutSec=60", "PayloadDeadlineSec=60", "LowSpeedTimeSec=60", "MaxConcurrent=16",
        ]))
        try harness.start()
        for index in 0..<100 {
            try harness.drop(Self.mindbox(id: "hang-\(index)", imageURL: server.url("/hang?n=\(index)")), name: "m-\(index).json")
        }
        try waitUntil(timeout: 15, "16 hanging downloads") { server.hits("/hang") >= 16 && harness.files(in: "incoming").count == 100 }
        let started = Date()
        for index in 0..<1000 {
            try harness.drop(generatedPayload(index: index, tag: "iso"), name: "p-\(index).json")
        }
        try waitUntil(timeout: 60, "1,000 payloads without media") { Self.recordCount(harness) >= 1000 }
        let elapsed = Date().timeIntervalSince(started)

        // Still hanging: nothing of the media payloads is journaled, all are claimed, and
        // no more than MaxConcurrent connections were opened.
        let records = try harness.records()
        #expect(records.count == 1000)
        #expect(records.allSatisfy { payloadId(ofKey: $0.key)?.hasPrefix("iso-") == true })
        // Read in place (issue 36): a payload waiting for its media stays in incoming/.
        // (Plain payloads may still be there for a moment: unlinked after the commit.)
        #expect(harness.files(in: "incoming").filter { $0.hasPrefix("m-") }.count == 100)
        #expect(server.hits("/hang") == 16)
        #expect(elapsed < 60)

        let stopped = Date()
        #expect(harness.stop() == 0)
        #expect(Date().timeIntervalSince(stopped) < 5)
        #expect(harness.files(in: "incoming").count == 100)
    }

    /// Past `MaxWaiting` payloads waiting for media, records land at once with the media
    /// skipped, so a dead image server cannot fill the daemon's in-flight bound.
    @Test func mediaBacklogPastMaxWaitingLandsWithoutMedia() throws {
        let server = try LoopbackHTTPServer()
        server.route("/hang", .silent)
        let harness = try DaemonHarness(name: "media-backlog", config: Self.config([
            "TransferTimeoutSec=60", "PayloadDeadlineSec=60", "LowSpeedTimeSec=60", "MaxConcurrent=4", "MaxWaiting=8",
        ]))
        try harness.start()
        for index in 0..<20 {
            try harness.drop(Self.mindbox(id: "backlog-\(index)", imageURL: server.url("/hang?n=\(index)")), name: "b-\(index).json")
        }
        try waitUntil(timeout: 30, "12 records without media") { Self.recordCount(harness) == 12 }
        let records = try harness.records()
        for record in records {
            let media = try Self.media(record)
            #expect(media["status"] as? String == "skipped")
            #expect(media["reason"] as? String == "media_backlog_full", "\(media)")
        }
        // Waited for, not sampled: on a loaded machine the fetcher may connect, and the
        // acknowledger unlink the twelve, a moment after the records land.
        try waitUntil(timeout: 30, "MaxWaiting payloads still waiting for their media, on MaxConcurrent connections") {
            harness.files(in: "incoming").count == 8 && server.hits("/hang") == 4
        }
        #expect(harness.files(in: "incoming").count == 8, "MaxWaiting payloads still wait for their media")
        #expect(server.hits("/hang") == 4)
        #expect(harness.stop() == 0)
        #expect(harness.files(in: "incoming").count == 8)
    }

    /// SIGTERM cancels hanging downloads at once; their payloads go back to incoming/ (not
    /// failed/, not journaled) and are taken again at the next start.
    @Test func shutdownCancelsDownloadsAndARestartFinishesThem() throws {
        let server = try LoopbackHTTPServer()
        server.route("/img", .silent)
        let harness = try DaemonHarness(name: "media-shutdown", config: Self.config([
            "TransferTimeoutSec=60", "PayloadDeadlineSec=60", "LowSpeedTimeSec=60", "MaxConcurrent=16",
        ]))
        try harness.start()
        let names = (0..<20).map { "m-\($0).json" }
        for index in 0..<20 {
            try harness.drop(Self.mindbox(id: "cut-\(index)", imageURL: server.url("/img?n=\(index)")), name: names[index])
        }
        try waitUntil(timeout: 15, "hanging downloads") { server.hits("/img") >= 16 && harness.files(in: "incoming").count == 20 }

        let stopped = Date()
        #expect(harness.stop() == 0)
        let stopSeconds = Date().timeIntervalSince(stopped)
        // Measured at well under 0.1 s; the bound leaves room for a loaded machine.
        #expect(stopSeconds < 2, "stopping took \(stopSeconds) s")
        #expect(harness.files(in: "incoming") == names.sorted())
        #expect(harness.files(in: "processing").isEmpty)
        #expect(harness.files(in: "failed").isEmpty)
        #expect(Self.recordCount(harness) == 0)

        server.route("/img", .ok(Self.png, contentType: "image/png"))
        try harness.start()
        try waitUntil(timeout: 20, "the 20 records after restart") { Self.recordCount(harness) == 20 }
        #expect(harness.stop() == 0)
        let records = try harness.records()
        #expect(Set(records.map(\.key)) == Set((0..<20).map { "mindbox:cut-\($0)" }))
        for record in records {
            #expect(try Self.media(record)["status"] as? String == "stored")
        }
        #expect(harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty)
    }

    /// kill -9 mid-download leaves the payloads in incoming/; the next start fetches and
    /// journals them (once each), with no partial download left in the store.
    @Test func sigkillDuringDownloadsLosesNoPayload() throws {
        let server = try LoopbackHTTPServer()
        server.route("/img", .trickle(headers: [("Content-Type", "image/png")], body: Self.png, interval: 0.5))
        let harness = try DaemonHarness(name: "media-kill", config: Self.config([
            "TransferTimeoutSec=60", "PayloadDeadlineSec=60", "LowSpeedTimeSec=60",
        ]))
        try harness.start()
        for index in 0..<5 {
            try harness.drop(Self.mindbox(id: "kill-\(index)", imageURL: server.url("/img?n=\(index)")), name: "k-\(index).json")
        }
        try waitUntil(timeout: 15, "downloads under way") { server.hits("/img") == 5 }
        usleep(700_000) // why: the fault's timing: SIGKILL while the trickling bodies (0.5 s a chunk) are part-read
        harness.stop(signal: SIGKILL)
        // Read in place (issue 36): the payloads wait in incoming/.
        #expect(harness.files(in: "incoming").count == 5)
        #expect(Self.recordCount(harness) == 0)

        server.route("/img", .ok(Self.png, contentType: "image/png"))
        try harness.start()
        try waitUntil(timeout: 20, "the 5 records after the crash") { Self.recordCount(harness) == 5 }
        #expect(harness.stop() == 0)
        let records = try harness.records()
        #expect(Set(records.map(\.key)) == Set((0..<5).map { "mindbox:kill-\($0)" }))
        for record in records {
            #expect(try Self.media(record)["status"] as? String == "stored")
        }
        #expect(harness.files(in: "processing").isEmpty && harness.files(in: "incoming").isEmpty)
        let store = try #require(try Self.mediaStats(harness)["store"] as? [String: Any])
        #expect(store["files"] as? Int == 1, "one image, stored once by content")
        #expect(store["tempFiles"] as? Int == 0, "the crashed run's partial downloads are cleared at start")
    }

    @Test func mediaStatsWithoutADaemonRunReportsTheStoreOnly() throws {
        let harness = try DaemonHarness(name: "media-stats", config: Self.config())
        try FileManager.default.createDirectory(atPath: harness.state + "/media/ab", withIntermediateDirectories: true)
        try Data(repeating: 7, count: 100).write(to: URL(fileURLWithPath: harness.state + "/media/ab/cdef.png"))
        let stats = try Self.mediaStats(harness)
        #expect((stats["store"] as? [String: Any])?["files"] as? Int == 1)
        #expect((stats["store"] as? [String: Any])?["bytes"] as? Int == 100)
        #expect(stats["daemon"] == nil)

        let (status, text, _) = try harness.ctl(["media", "stats"])
        #expect(status == 0)
        #expect(text.contains("files: 1") && text.contains("bytes: 100"), "\(text)")
        let (usage, _, errors) = try harness.ctl(["media", "stats", "--bogus"])
        #expect(usage == 64, "\(errors)")
        let (missing, _, _) = try harness.ctl(["media"])
        #expect(missing == 64)
    }
}
