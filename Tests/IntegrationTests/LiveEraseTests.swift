@preconcurrency import Glibc
import Foundation
import Testing
import PushJournal
import PushSystem
import TestSupport

/// Erasure by the running daemon (docs/design/erasure.md, "The chosen design"): `pushspoolctl
/// user erase` while pushspoold runs drops the request into the spool, pushspoold journals an
/// `erasure` record and its eraser follower performs it on sealed segments while ingest goes
/// on. Then a raw-byte search of the state directory and the spool finds nothing of alice and
/// all of bob; and a kill -9 at a named step of the erasure ends, after a restart, with the
/// erasure complete and nothing else lost.
@Suite struct LiveEraseTests {
    static let bobPNG: [UInt8] = Array(Data(base64Encoded:
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")!)

    /// alice and bob: pushes (one with an image each, all in a feed), an opened event pending
    /// in the outbox, a muted category, a quarantined payload; plus `fill` generated records.
    static func populate(_ harness: DaemonHarness, server: LoopbackHTTPServer, fill: Int) throws -> Int {
        for (user, device) in [("alice", "dev-a"), ("bob", "dev-b")] {
            for index in 0..<3 {
                try harness.drop(UserExportTests.push(user: user, device: device, tag: "\(user)-secret-\(index)"), name: "\(user)-\(index).json")
            }
            try harness.drop(UserExportTests.push(user: user, device: device, tag: "\(user)-image", imageURL: server.url("/\(user).png")),
                             name: "\(user)-image.json")
            try harness.drop(Array(#"{"pushspool":1,"user":"\#(user)","payload":{"note":"\#(user)-quarantined"}}"#.utf8),
                             name: "\(user)-bad.json")
            let (status, _, err) = try harness.ctl(["nc", "opened", "--user", user, "--device", device])
            #expect(status == 0, "\(err)")
            let (muted, _, muteErr) = try harness.ctl(["nc", "mute", "--user", user, "promo"])
            #expect(muted == 0, "\(muteErr)")
        }
        for index in 0..<fill { try harness.drop(generatedPayload(index: index, tag: "fill"), name: "fill-\(index).json") }
        let total = 12 + fill
        try waitUntil(timeout: 60, "\(total) records journaled") { (try? harness.records().count) == total }
        try waitUntil(timeout: 30, "both quarantined payloads") { harness.files(in: "failed").filter { !$0.hasSuffix(".reason.json") }.count == 2 }
        try waitUntil(timeout: 30, "alice's items in the index") {
            let (status, out, _) = try harness.ctl(["nc", "count", "--user", "alice", "--json"])
            return status == 0 && out.contains(#""unread":4"#)
        }
        // The index keeps rows by owner beside the items: the feed's and the muted category.
        try waitUntil(timeout: 30, "alice's muted category in the index") {
            let (status, out, _) = try harness.ctl(["nc", "preferences", "--user", "alice", "--json"])
            return status == 0 && out.contains("promo")
        }
        let (feedStatus, feedList, _) = try harness.ctl(["nc", "list", "--user", "alice", "--feed", "all", "--json"])
        #expect(feedStatus == 0 && feedList.split(separator: "\n").filter { $0.contains(#""item":"#) }.count == 4, "\(feedList)")
        return total
    }

    static func server() throws -> LoopbackHTTPServer {
        let server = try LoopbackHTTPServer()
        server.route("/alice.png", .ok(ImageFixtures.png, contentType: "image/png"))
        server.route("/bob.png", .ok(bobPNG, contentType: "image/png"))
        server.route("/v3/operations/async", .status(503))
        return server
    }

    static func keyFile() throws -> String {
        let keyFile = NSTemporaryDirectory() + "pushspool-erase-key-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try "erase-key\n".write(toFile: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile, 0o600)
        return keyFile
    }

    static func config(server: LoopbackHTTPServer, keyFile: String) -> String {
        // 64K segments (the least): a few hundred records span several.
        UserExportTests.config(server: server, keyFile: keyFile, feeds: true)
    }

    /// No byte of alice under the state directory and the spool; every one of bob's; verify clean.
    static func expectAliceGoneBobKept(_ harness: DaemonHarness, live: [String] = []) throws {
        let after = try RawFiles.everyRegularFile(under: harness.state) + RawFiles.everyRegularFile(under: harness.spool)
        #expect(UserEraseTests.holding(Array("alice".utf8), after).isEmpty, "alice in \(UserEraseTests.holding(Array("alice".utf8), after))")
        #expect(UserEraseTests.holding(ImageFixtures.png, after).isEmpty, "alice's image in \(UserEraseTests.holding(ImageFixtures.png, after))")
        for needle in ["bob-secret-0", "bob-secret-1", "bob-secret-2", "bob-image", "bob-quarantined", "u:bob"] + live {
            #expect(!UserEraseTests.holding(Array(needle.utf8), after).isEmpty, "\(needle) is gone")
        }
        #expect(!UserEraseTests.holding(bobPNG, after).isEmpty, "bob's image is gone")
        let (verify, verifyOut, verifyErr) = try harness.ctl(["journal", "verify"])
        #expect(verify == 0, "\(verifyOut) \(verifyErr)")
    }

    @Test func anErasureByTheRunningDaemonLetsIngestGoOn() throws {
        let server = try Self.server()
        let keyFile = try Self.keyFile()
        defer { unlink(keyFile) }
        let harness = try DaemonHarness(name: "live-erase", config: Self.config(server: server, keyFile: keyFile))
        let textfile = harness.root + "/pushspool.prom"
        try UserExportTests.config(server: server, keyFile: keyFile, feeds: true, textfile: textfile)
            .write(toFile: harness.config, atomically: true, encoding: .utf8)
        try harness.start()
        let populated = try Self.populate(harness, server: server, fill: 300)

        // A producer keeps dropping carol's pushes for as long as the erasure runs.
        let stopFeeding = Locked(false)
        let dropped = Locked(0)
        let feeder = Thread {
            var index = 0
            while !stopFeeding.withLock({ $0 }) {
                try? harness.drop(UserExportTests.push(user: "carol", device: "dev-c", tag: "carol-during-\(index)"), name: "carol-\(index).json")
                index += 1
                dropped.withLock { $0 = index }
                usleep(2_000) // why: the feeder's pacing: pushes keep arriving during the erase
            }
        }
        feeder.start()
        let startedMillis = Posix.wallClockMillis()
        let (status, out, err) = try harness.ctl(["user", "erase", "alice", "--json"])
        let endedMillis = Posix.wallClockMillis()
        stopFeeding.withLock { $0 = true }
        #expect(eventually(within: 10) { feeder.isFinished })
        #expect(status == 0, "\(err)")
        let summary = try JSONParser().parse(String(out.split(separator: "\n").last ?? ""))
        #expect(summary["complete"]?.boolValue == true, "\(out)")
        // Four pushes, the opened event and the mute.
        #expect(summary["journalRecords"]?.intValue == 6, "\(out)")

        let total = populated + 1 + dropped.withLock { $0 }
        try waitUntil(timeout: 60, "every drop journaled") { (try? harness.records().count) == total }
        let records = try harness.records()
        let erasure = try #require(records.first { $0.key.hasPrefix("erasure:") })
        #expect(!String(decoding: erasure.body, as: UTF8.self).contains("alice"))
        // Ingest went on: carol's pushes were journaled after the request, while it ran.
        let during = records.filter { $0.key.contains("carol-during") && $0.seq > erasure.seq
            && $0.ingestMillis >= startedMillis && $0.ingestMillis <= endedMillis }
        #expect(!during.isEmpty, "no push was journaled while the erasure ran")
        // What arrived after the request is new data, not erased.
        #expect(records.filter { $0.key.hasPrefix(ErasureSecret.tombstoneKeyPrefix) }.count == 6)
        #expect(records.filter { $0.key.contains("carol-during") }.count == dropped.withLock { $0 })

        let (listed, list, _) = try harness.ctl(["user", "erase", "--status", "--json"])
        #expect(listed == 0 && list.contains(#""complete":true"#), "\(list)")
        #expect(try UserEraseTests.listed(harness, "alice") == 0)
        #expect(try UserEraseTests.listed(harness, "bob") == 4)
        #expect(harness.stop() == 0)
        try Self.expectAliceGoneBobKept(harness, live: ["carol-during-0"])

        // The erasure in the metrics and status.json, as written at the stop.
        let metrics = try String(contentsOfFile: textfile, encoding: .utf8)
        #expect(metrics.contains("\npushspool_erasures_pending 0\n"), "\(metrics)")
        #expect(metrics.contains("\npushspool_erasure_records_total 6\n"), "\(metrics)")
        let statusFile = try JSONParser().parse(Array(try Data(contentsOf: URL(fileURLWithPath: harness.state + "/status.json"))))
        #expect(statusFile["erasures"]?["pending"]?.intValue == 0, "\(statusFile)")
        #expect(statusFile["erasures"]?["recordsErased"]?.intValue == 6, "\(statusFile)")

        // A redelivery of an erased push is still a duplicate after a restart.
        try harness.start()
        let last = try #require(try JournalReader.lastSeq(directory: harness.state + "/journal"))
        try harness.drop(UserExportTests.push(user: "alice", device: "dev-a", tag: "alice-secret-1"), name: "alice-again.json")
        try waitUntil(timeout: 30, "the spool drained") { harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty }
        #expect(try JournalReader.lastSeq(directory: harness.state + "/journal") == last, "the erased push was journaled again")
        #expect(harness.stop() == 0)
    }

    /// `pushspoolctl user erase` waits for pushspoold by default. When pushspoold dies before
    /// the erasure is complete (here killed at a step of it), the wait ends at once with exit
    /// 1 and what to do, instead of waiting forever on a daemon that is gone.
    @Test func aWaitingEraseNoticesThatPushspooldIsGone() throws {
        let server = try Self.server()
        let keyFile = try Self.keyFile()
        defer { unlink(keyFile) }
        let harness = try DaemonHarness(name: "live-erase-gone", config: Self.config(server: server, keyFile: keyFile))
        try harness.start(extraEnvironment: ["PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_TEST_ERASE_KILL_AT": "planned"])
        _ = try Self.populate(harness, server: server, fill: 10)
        let daemon = try #require(harness.process)
        let ctl = Process()
        ctl.executableURL = URL(fileURLWithPath: DaemonHarness.binDirectory + "/pushspoolctl")
        ctl.arguments = ["--spool", harness.spool, "--state-dir", harness.state, "--config", harness.config, "user", "erase", "alice"]
        let out = Pipe(), err = Pipe()
        ctl.standardOutput = out
        ctl.standardError = err
        try ctl.run()
        defer { if ctl.isRunning { kill(ctl.processIdentifier, SIGKILL) } }
        try waitUntil(timeout: 60, "pushspoold killed at the erasure's plan") { !daemon.isRunning }
        try waitUntil(timeout: 30, "pushspoolctl user erase to notice pushspoold is gone") { !ctl.isRunning }
        let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(ctl.terminationStatus == 1, "\(stderr)")
        #expect(stderr.contains("pushspoold stopped before erasure"), "\(stderr)")
        #expect(stderr.contains("systemctl start pushspoold"), "\(stderr)")
        // The request was kept: a restarted pushspoold completes it, and a wait then succeeds.
        try harness.start()
        try waitUntil(timeout: 60, "the erasure complete after the restart") {
            let (_, list, _) = try harness.ctl(["user", "erase", "--status", "--json"])
            return list.contains(#""complete":true"#)
        }
        #expect(harness.stop() == 0)
    }

    /// A damaged archive makes the eraser's step throw at every try. That must not stop
    /// pushspoold: the eraser backs off (parked), one followerFailing event says why, STATUS=
    /// names it, and ingest goes on. Once the archive is whole again the erasure completes.
    @Test func anEraserThatFailsParksAndIngestGoesOn() throws {
        let server = try Self.server()
        let keyFile = try Self.keyFile()
        defer { unlink(keyFile) }
        let harness = try DaemonHarness(name: "live-erase-park", config: Self.config(server: server, keyFile: keyFile))
        try harness.start()
        let populated = try Self.populate(harness, server: server, fill: 300)
        #expect(harness.stop() == 0)
        try UserExportTests.config(server: server, keyFile: keyFile, retention: "RetainBytes=1\nArchive=zstd\n", feeds: true)
            .write(toFile: harness.config, atomically: true, encoding: .utf8)
        try harness.start()
        let journal = harness.state + "/journal"
        try waitUntil(timeout: 60, "retention to archive the sealed segments") { !JournalArchive.list(directory: journal).isEmpty }
        let archive = journal + "/archive/" + (try #require(JournalArchive.list(directory: journal).first)).name
        let whole = try Posix.readFile(archive, limit: 1 << 30)
        var damaged = whole
        damaged[damaged.count / 2] ^= 0xFF
        try Posix.writeFileAtomically(directory: journal + "/archive", name: (archive as NSString).lastPathComponent, bytes: damaged)

        let (status, _, err) = try harness.ctl(["user", "erase", "alice", "--no-wait"])
        #expect(status == 0, "\(err)")
        do {
            try waitUntil(timeout: 60, "the eraser to report it is failing") { harness.daemonStderr.contains("follower erase is failing") }
        } catch {
            Issue.record("\(harness.daemonStderr.suffix(3000))")
            throw error
        }
        let daemon = try #require(harness.process)
        #expect(daemon.isRunning)
        // Ingest goes on while the eraser is parked.
        try harness.drop(generatedPayload(index: 9_999, tag: "while-parked"), name: "while-parked.json")
        try waitUntil(timeout: 60, "a push ingested while the eraser fails") {
            (try? harness.records().contains { $0.body.count > 0 && String(decoding: $0.body, as: UTF8.self).contains("while-parked") }) == true
        }
        #expect(harness.daemonStderr.components(separatedBy: "follower erase is failing").count == 2, "logged once, not per retry")
        // Repaired, the erasure completes (the runner is woken by the retry backoff's end).
        try Posix.writeFileAtomically(directory: journal + "/archive", name: (archive as NSString).lastPathComponent, bytes: whole)
        try waitUntil(timeout: 120, "the erasure complete once the archive is whole") {
            let (_, list, _) = try harness.ctl(["user", "erase", "--status", "--json"])
            return list.contains(#""complete":true"#)
        }
        #expect(harness.daemonStderr.contains("follower erase recovered"))
        #expect((try JournalReader.lastSeq(directory: journal) ?? 0) >= UInt64(populated + 2))
        #expect(harness.stop() == 0)
    }

    /// An erasure whose step crashes pushspoold (a crash signal on the eraser's thread) would
    /// crash it at every start, since the request stays pending. After two such crashes the
    /// next start parks the eraser: one followerParked event, STATUS= says so, ingest goes on.
    /// A deliberate restart (the cause fixed: here the hook gone) completes the erasure.
    @Test func anEraserThatCrashesTheProcessIsParkedAfterTwoCrashes() throws {
        let server = try Self.server()
        let keyFile = try Self.keyFile()
        defer { unlink(keyFile) }
        let harness = try DaemonHarness(name: "live-erase-crash", config: Self.config(server: server, keyFile: keyFile))
        let crashing = ["PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_TEST_ERASE_CRASH_AT": "planned"]
        try harness.start(extraEnvironment: crashing)
        _ = try Self.populate(harness, server: server, fill: 10)
        let (status, _, err) = try harness.ctl(["user", "erase", "alice", "--no-wait"])
        #expect(status == 0, "\(err)")
        for start in 1...2 {
            let daemon = try #require(harness.process)
            do {
                try waitUntil(timeout: 60, "pushspoold crashed by the eraser (\(start))") { !daemon.isRunning }
            } catch {
                Issue.record("\(harness.daemonStderr.suffix(3000))")
                throw error
            }
            #expect(daemon.terminationReason == .uncaughtSignal && daemon.terminationStatus != SIGKILL, "\(harness.daemonStderr.suffix(2000))")
            // The pending erasure may crash it again before start() has looked: the next round
            // waits for that crash.
            do { try harness.start(extraEnvironment: crashing) } catch is TimeoutError {}
        }
        // The third start: parked, so it stays up and ingests.
        try waitUntil(timeout: 30, "the eraser parked") { harness.daemonStderr.contains("follower erase parked") }
        try harness.drop(generatedPayload(index: 7_777, tag: "while-eraser-parked"), name: "while-parked.json")
        try waitUntil(timeout: 60, "a push ingested while the eraser is parked") {
            (try? harness.records().contains { String(decoding: $0.body, as: UTF8.self).contains("while-eraser-parked") }) == true
        }
        #expect(harness.process?.isRunning == true)
        let (_, pending, _) = try harness.ctl(["user", "erase", "--status", "--json"])
        #expect(!pending.contains(#""complete":true"#))
        #expect(harness.stop() == 0)
        // Fixed and restarted deliberately: the eraser runs again and completes the erasure.
        try harness.start()
        try waitUntil(timeout: 60, "the erasure complete after a deliberate restart") {
            let (_, list, _) = try harness.ctl(["user", "erase", "--status", "--json"])
            return list.contains(#""complete":true"#)
        }
        #expect(!harness.daemonStderr.contains("follower erase parked"))
        #expect(harness.stop() == 0)
        try Self.expectAliceGoneBobKept(harness)
    }

    /// Steps of the live erasure where pushspoold is killed (the design's crash points 2–8).
    static let crashSteps = ["started", "planned", "journal segment-temp", "journal segment-renamed", "journal before-checkpoint",
                             "journal-done", "inbox-done", "outbox-done", "quarantine-done", "media-done", "subject-removed"]

    @Test(arguments: crashSteps)
    func aKillAtAStepOfTheErasureEndsCompleteAfterARestart(_ step: String) throws {
        let server = try Self.server()
        let keyFile = try Self.keyFile()
        defer { unlink(keyFile) }
        let harness = try DaemonHarness(name: "live-erase-kill", config: Self.config(server: server, keyFile: keyFile))
        try harness.start(extraEnvironment: ["PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_TEST_ERASE_KILL_AT": step])
        let populated = try Self.populate(harness, server: server, fill: 60)
        let daemon = try #require(harness.process)
        let (status, out, err) = try harness.ctl(["user", "erase", "alice", "--no-wait"])
        #expect(status == 0, "\(err)")
        let id = try #require(out.split(separator: " ").dropFirst().first.map(String.init))
        try waitUntil(timeout: 60, "pushspoold killed at \(step)") { !daemon.isRunning }
        #expect(daemon.terminationReason == .uncaughtSignal && daemon.terminationStatus == SIGKILL, "\(harness.daemonStderr.suffix(2000))")

        try harness.start()
        try waitUntil(timeout: 60, "erasure \(id) complete after the restart") {
            let (_, list, _) = try harness.ctl(["user", "erase", "--status", "--json"])
            return list.contains(id) && list.contains(#""complete":true"#)
        }
        // Nothing else lost: every record is there once, the erasure record included.
        let records = try harness.records()
        #expect(records.count == populated + 1)
        #expect(records.filter { $0.key.hasPrefix(ErasureSecret.tombstoneKeyPrefix) }.count == 6)
        #expect(try UserEraseTests.listed(harness, "bob") == 4)
        #expect(harness.stop() == 0)
        try Self.expectAliceGoneBobKept(harness)
    }
}
