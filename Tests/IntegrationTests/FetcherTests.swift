@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem
import PushJournal
import TestSupport

/// Privilege separation for media with the real daemon: downloads and decoding run in
/// `pushspool-fetch`, a child of `pushspoold`. The fetcher is killed with SIGKILL mid-download,
/// crashes with SIGSEGV, or hangs; each time intake of plain payloads goes on, the payloads
/// that were waiting for media land with their `_mediaAlt` fallback, the fetcher is
/// restarted, and every payload is journaled exactly once.
@Suite struct FetcherTests {
    enum Fault: String, CaseIterable, Sendable {
        /// SIGKILL from outside (what the OOM killer does), while a download is running.
        case sigkill
        /// A real SIGSEGV inside the fetcher (a decoder bug), armed by the test hook.
        case sigsegv
        /// The fetcher stops answering; pushspoold's request deadline kills it.
        case hang
    }

    /// Long enough that the slow download is still running when the fault strikes; short
    /// enough that the hang test's deadline (this + 10 s) comes soon.
    static let payloadDeadline = 4.0

    static func config() -> String {
        [
            "[Spool]", "StableAgeSec=0",
            "[Metrics]", "IntervalSec=3600",
            "[Media]", "Enabled=yes", "AllowHTTP=yes", "AllowNetworks=127.0.0.0/8",
            "ConnectTimeoutSec=1", "TransferTimeoutSec=4", "LowSpeedTimeSec=4", "Attempts=1",
            "PayloadDeadlineSec=\(Int(payloadDeadline))",
        ].joined(separator: "\n") + "\n"
    }

    /// Child processes of `parent` named pushspool-fetch, from /proc.
    static func fetchers(of parent: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { Int32($0) }.filter { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")"), stat.contains("(pushspool-fetch)") else { return false }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 2 && Int32(fields[1]) == parent
        }
    }

    static func plain(_ index: Int) -> [UInt8] {
        generatedPayload(index: index, tag: "plain")
    }

    @Test(arguments: Fault.allCases)
    func fetcherFailureCostsOnlyTheWaitingMedia(_ fault: Fault) throws {
        let server = try LoopbackHTTPServer()
        // ~1 byte per 0.5 s: still downloading when the fault strikes.
        server.route("/slow.png", .trickle(headers: [("Content-Type", "image/png")], body: MediaIngestTests.png, interval: 0.5))
        server.route("/crash.png", .ok(MediaIngestTests.png, contentType: "image/png"))
        server.route("/after.png", .ok(MediaIngestTests.png, contentType: "image/png"))
        let harness = try DaemonHarness(name: "fetcher-\(fault.rawValue)", config: Self.config())
        var environment: [String: String] = [:]
        switch fault {
        case .sigkill: break
        case .sigsegv: environment = ["PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_FETCH_FAULT": "segv:/crash"]
        case .hang: environment = ["PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_FETCH_FAULT": "hang:/crash"]
        }
        try harness.start(extraEnvironment: environment)
        let daemonPID = try #require(harness.process?.processIdentifier)
        try waitUntil(timeout: 30, "the fetcher process") { Self.fetchers(of: daemonPID).count == 1 }
        let first = Self.fetchers(of: daemonPID)[0]
        #expect(first != daemonPID)

        try harness.drop(MediaIngestTests.sfmc(id: "slow-1", mediaURL: server.url("/slow.png"), alt: "alt for slow", body: "slow body"),
                         name: "slow.json")
        try waitUntil(timeout: 20, "the slow download to start") { server.hits("/slow.png") == 1 }
        switch fault {
        case .sigkill:
            #expect(kill(first, SIGKILL) == 0)
        case .sigsegv, .hang:
            try harness.drop(MediaIngestTests.sfmc(id: "crash-1", mediaURL: server.url("/crash.png"), alt: "alt for crash",
                                                   body: "crash body"), name: "crash.json")
        }
        let waiting = fault == .sigkill ? 1 : 2

        // Intake goes on: plain payloads land while the fetcher is dead or hung.
        let started = Date()
        for index in 0..<20 { try harness.drop(Self.plain(index), name: "plain-\(index).json") }
        try waitUntil(timeout: 20, "the plain payloads") {
            try harness.records().filter { $0.key.contains("plain-") }.count == 20
        }
        if fault == .hang {
            // They landed before the hung fetcher's deadline (PayloadDeadlineSec= + 10 s) ran out.
            #expect(Date().timeIntervalSince(started) < Self.payloadDeadline + 10, "intake waited for the hung fetcher")
            #expect(try harness.records().count == 20, "a waiting payload landed before the deadline")
        }

        // The waiting payloads land with their fallback.
        try waitUntil(timeout: 40, "the waiting payloads") { MediaIngestTests.recordCount(harness) == 20 + waiting }
        let records = Dictionary(uniqueKeysWithValues: try harness.records().map { ($0.key, $0) })
        var expected = [("sfmc:slow-1", "alt for slow", "slow body")]
        if waiting == 2 { expected.append(("sfmc:crash-1", "alt for crash", "crash body")) }
        for (key, alt, body) in expected {
            let object = try MediaIngestTests.object(try #require(records[key], "\(records.keys.sorted())"))
            let media = try #require(object["media"] as? [String: Any])
            #expect(media["status"] as? String == "failed", "\(key): \(media)")
            let code = (media["error"] as? [String: Any])?["code"] as? String
            #expect(code == (fault == .hang ? "timeout" : "io"), "\(key): \(media)")
            #expect(object["body"] as? String == alt)
            #expect(object["originalBody"] as? String == body)
        }

        // A new fetcher serves the next payload.
        try waitUntil(timeout: 30, "a new fetcher") { Self.fetchers(of: daemonPID).contains { $0 != first } }
        #expect(kill(first, 0) == -1, "the old fetcher was not reaped")
        try harness.drop(MediaIngestTests.mindbox(id: "after-1", imageURL: server.url("/after.png")), name: "after.json")
        try waitUntil(timeout: 30, "the payload after the restart") { MediaIngestTests.recordCount(harness) == 21 + waiting }
        let after = try MediaIngestTests.media(try #require(try harness.records().first { $0.key == "mindbox:after-1" }))
        #expect(after["status"] as? String == "stored", "\(after)")
        #expect(harness.daemonStderr.contains("media fetcher lost"), "\(harness.daemonStderr)")

        // Nothing lost, nothing doubled, nothing left behind; the daemon stops cleanly.
        #expect(harness.stop() == 0)
        let keys = try harness.records().map(\.key)
        #expect(keys.count == 21 + waiting && Set(keys).count == keys.count)
        #expect(harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty && harness.files(in: "failed").isEmpty)
        #expect(Self.fetchers(of: daemonPID).isEmpty)
    }

    /// The journal, the spool and the index are never open in the fetcher: it holds only its
    /// connection (and stdio), whatever pushspoold had open when it started it.
    @Test func fetcherHoldsNoDescriptorOfTheDaemon() throws {
        let harness = try DaemonHarness(name: "fetcher-fds", config: Self.config())
        try harness.start()
        let daemonPID = try #require(harness.process?.processIdentifier)
        try waitUntil(timeout: 30, "the fetcher process") { Self.fetchers(of: daemonPID).count == 1 }
        let fetcher = Self.fetchers(of: daemonPID)[0]
        // NO_NEW_PRIVS is set first thing after exec, RLIMIT_FSIZE once the configuration has
        // come, the seccomp filter last, before the fetcher answers ready: once /proc/<pid>/status
        // shows the filter, every limit below is in place (waiting for NoNewPrivs alone read
        // the limits too early under load).
        try waitUntil(timeout: 20, "the fetcher to harden itself") {
            let status = (try? String(contentsOfFile: "/proc/\(fetcher)/status", encoding: .utf8)) ?? ""
            return status.contains("NoNewPrivs:\t1") && status.contains("Seccomp:\t2")
        }
        let targets = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(fetcher)/fd").compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(fetcher)/fd/\($0)")
        }
        #expect(!targets.contains { $0.hasPrefix(harness.state + "/journal") || $0.hasPrefix(harness.spool) }, "\(targets)")
        #expect(targets.contains { $0.hasPrefix("socket:") })
        // Its limits, from /proc/<pid>/limits: no core files, bounded address space and file size.
        let limits = try String(contentsOfFile: "/proc/\(fetcher)/limits", encoding: .utf8)
        let line = { (name: String) in limits.split(separator: "\n").first { $0.hasPrefix(name) }.map(String.init) ?? "" }
        #expect(line("Max core file size").contains(" 0 "), "\(limits)")
        #expect(line("Max address space").contains("2147483648"), "\(limits)")
        #expect(!line("Max file size").contains("unlimited"), "\(limits)")
        // SIGTERM before the daemon is ready would meet the default action, not its handler.
        try waitUntil(timeout: 60, "READY") { harness.daemonStderr.contains("EVENT=ready") }
        #expect(harness.stop() == 0)
    }

    /// pushspoold.service has no network; a daemon with `[Outbox] Enabled=yes` in such a
    /// sandbox says so at start (and goes on ingesting) instead of failing every delivery
    /// silently. `unshare --net` gives it what PrivateNetwork=yes gives it: only a loopback.
    @Test(.enabled(if: getuid() == 0, "unshare --net needs root"))
    func outboxWithoutNetworkIsReportedAtStart() throws {
        let message = "[Outbox] is enabled but pushspoold has no network"
        for isolated in [true, false] {
            let harness = try DaemonHarness(name: "outbox-no-net-\(isolated)",
                                            config: "[Spool]\nStableAgeSec=0\n[Media]\nEnabled=no\n[Outbox]\nEnabled=yes\n")
            let process = Process()
            let daemon = DaemonHarness.binDirectory + "/pushspoold"
            let arguments = ["--spool", harness.spool, "--state-dir", harness.state, "--config", harness.config]
            process.executableURL = URL(fileURLWithPath: isolated ? "/usr/bin/unshare" : daemon)
            process.arguments = isolated ? ["--net", "--", daemon] + arguments : arguments
            var environment = ProcessInfo.processInfo.environment
            environment.removeValue(forKey: "NOTIFY_SOCKET")
            environment.removeValue(forKey: "JOURNAL_STREAM")
            process.environment = environment
            let errors = harness.root + "/stderr"
            _ = FileManager.default.createFile(atPath: errors, contents: nil)
            process.standardError = FileHandle(forWritingAtPath: errors)
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            defer { if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() } }
            let stderr = { (try? String(contentsOfFile: errors, encoding: .utf8)) ?? "" }
            try waitUntil(timeout: 60, "READY") { stderr().contains("EVENT=ready") || !process.isRunning }
            #expect(process.isRunning, "\(stderr())")
            #expect(stderr().contains(message) == isolated, "isolated=\(isolated): \(stderr())")
            if isolated { #expect(stderr().contains("REASON_CODE=network_denied"), "\(stderr())") }
            // Intake is not affected either way.
            try harness.drop(generatedPayload(index: 1, tag: "no-net"), name: "p.json")
            try waitUntil(timeout: 30, "the payload") { ((try? harness.records().count) ?? 0) == 1 }
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
        }
    }
}
