@preconcurrency import Glibc
import Foundation
import Testing

/// The configuration as the built binaries see it: a mistyped `--config` path, durations
/// past their range at start and on SIGHUP, and the [Log] settings that the event log used
/// to be made without.
@Suite struct ConfigFileTests {
    /// `harness.start()` returns once the spool exists, before the signal handlers and the
    /// inotify watch: wait for READY before sending SIGHUP or dropping files.
    static func waitForReady(_ harness: DaemonHarness) throws {
        try waitUntil(timeout: 60, "READY") { harness.daemonStderr.contains("EVENT=ready") }
    }

    /// `pushspoold --config` naming a file that does not exist exits 78 (EX_CONFIG) with a
    /// message naming it, instead of running on defaults.
    @Test func daemonRefusesAMissingExplicitConfigFile() throws {
        let harness = try DaemonHarness(name: "config-missing")
        let missing = harness.root + "/no-such.conf"
        let (status, stderr) = try harness.runExpectingExit(config: missing, timeout: 20)
        #expect(status == 78, "\(stderr)")
        #expect(stderr.contains(missing))
        #expect(stderr.contains("no such file"))
        // The event log of a failed start carries the default identifier.
        #expect(stderr.hasPrefix("pushspoold["))
        #expect(!FileManager.default.fileExists(atPath: harness.state + "/journal"))
    }

    @Test func configCheckRefusesAMissingFile() throws {
        let harness = try DaemonHarness(name: "config-check-missing")
        let missing = harness.root + "/no-such.conf"
        let ctl = DaemonHarness.binDirectory + "/pushspoolctl"
        let (status, stdout, stderr) = try DaemonHarness.run(ctl, ["config", "check", missing])
        #expect(status == 1)
        #expect(!stdout.contains("valid"))
        #expect(stderr.contains(missing) && stderr.contains("no such file"), "\(stderr)")
        let (showStatus, _, showErr) = try DaemonHarness.run(ctl, ["--config", missing, "config", "show"])
        #expect(showStatus == 1, "\(showErr)")
        // An existing file is still fine.
        #expect(try DaemonHarness.run(ctl, ["config", "check", harness.config]).0 == 0)
    }

    /// `config reference` prints what scripts/gen-docs.sh puts into the checked-in documents,
    /// markers included, without reading a configuration; a missing or unknown format is a
    /// usage error.
    @Test func configReferencePrintsTheCheckedInBlocks() throws {
        let ctl = DaemonHarness.binDirectory + "/pushspoolctl"
        for (format, path, begin) in [("--markdown", "docs/configuration.md", "<!-- BEGIN generated"),
                                      ("--man", "man/pushspool.conf.5.scd", "; BEGIN generated")] {
            // A configuration that does not load must not matter: nothing is read.
            let (status, stdout, stderr) = try DaemonHarness.run(ctl, ["--config", "/nonexistent.conf", "config", "reference", format])
            #expect(status == 0, "\(stderr)")
            #expect(stdout.hasPrefix(begin))
            let document = try String(contentsOfFile: DaemonHarness.packageRoot + "/" + path, encoding: .utf8)
            #expect(document.contains(stdout), "\(path) differs from `config reference \(format)`: run scripts/gen-docs.sh")
        }
        for arguments in [["config", "reference"], ["config", "reference", "--html"], ["config", "reference", "--man", "--markdown"]] {
            let (status, _, stderr) = try DaemonHarness.run(ctl, arguments)
            #expect(status == 64, "\(arguments)")
            #expect(stderr.contains("see pushspoolctl config reference --help"), "\(stderr)")
        }
    }

    /// `RescanIntervalSec=99999999999` passed `config check` and then trapped the daemon
    /// (`Int64(seconds * 1e9)`); both now refuse it, naming key, value and range.
    @Test(arguments: [("Spool", "RescanIntervalSec", "1s to 1d"), ("Metrics", "IntervalSec", "1s to 1d"),
                      ("Media", "DedupWindowSec", "0 to 7d"), ("Media", "PayloadDeadlineSec", "1ms to 1d")])
    func hugeDurationIsRefusedByCheckAndAtStart(section: String, key: String, range: String) throws {
        let harness = try DaemonHarness(name: "config-huge", config: "[\(section)]\n\(key)=99999999999\n")
        let (checkStatus, _, checkErr) = try DaemonHarness.run(DaemonHarness.binDirectory + "/pushspoolctl", ["config", "check", harness.config])
        #expect(checkStatus == 1)
        #expect(checkErr.contains("[\(section)] \(key): must be from \(range), got '99999999999'"), "\(checkErr)")
        let (status, stderr) = try harness.runExpectingExit(config: harness.config, timeout: 20)
        #expect(status == 78, "\(stderr)")
        #expect(stderr.contains("\(key): must be from \(range)"))
    }

    /// An outbox the daemon cannot run passed `config check` ("configuration is valid"), then
    /// pushspoold recovered the journal and exited 1. Both now run one check and refuse it,
    /// the daemon with 78 (EX_CONFIG) before it opens the journal.
    @Test(arguments: ["http-endpoint", "missing-key", "loose-key"])
    func outboxTheDaemonRefusesIsRefusedByCheckToo(defect: String) throws {
        let harness = try DaemonHarness(name: "config-outbox-\(defect)")
        let key = harness.root + "/mindbox.key"
        try "secretsecret\n".write(toFile: key, atomically: true, encoding: .utf8)
        chmod(key, defect == "loose-key" ? 0o644 : 0o600)
        if defect == "missing-key" { unlink(key) }
        let url = defect == "http-endpoint" ? "http://127.0.0.1:9/" : "https://127.0.0.1:9/"
        try """
            [Media]
            Enabled=no
            [Outbox]
            Enabled=yes
            MindboxURL=\(url)
            MindboxEndpointId=app
            MindboxSecretKeyFile=\(key)

            """.write(toFile: harness.config, atomically: true, encoding: .utf8)
        let expected = ["http-endpoint": "is plain http", "missing-key": "cannot open key file", "loose-key": "has mode 644"][defect]!
        let (checkStatus, checkOut, checkErr) = try DaemonHarness.run(DaemonHarness.binDirectory + "/pushspoolctl",
                                                                     ["config", "check", harness.config])
        #expect(checkStatus == 1, "\(checkOut)")
        #expect(checkErr.contains(expected), "\(checkErr)")
        #expect(!checkOut.contains("configuration is valid"))
        let (status, stderr) = try harness.runExpectingExit(config: harness.config, timeout: 20)
        #expect(status == 78, "\(stderr)")
        #expect(stderr.contains(expected), "\(stderr)")
        // Refused before recovery: no journal was opened.
        #expect(!FileManager.default.fileExists(atPath: harness.state + "/journal"))
    }

    /// Issue 22: a transliteration scheme ICU does not know is refused by `config check` (and
    /// so by the daemon, which loads the same way) with the key, the value and ICU's reason.
    @Test func anUnknownTransliterationFailsTheCheck() throws {
        let harness = try DaemonHarness(name: "config-translit")
        let ctl = DaemonHarness.binDirectory + "/pushspoolctl"
        try "[Media]\nEnabled=no\n[Outbox]\nMindboxTransliteration=Latin-Klingon\n".write(toFile: harness.config, atomically: true, encoding: .utf8)
        let (status, stdout, stderr) = try DaemonHarness.run(ctl, ["config", "check", harness.config])
        #expect(status != 0, "\(stdout)")
        #expect(stderr.contains("MindboxTransliteration"), "\(stderr)")
        #expect(stderr.contains("'Latin-Klingon'") && stderr.contains("U_INVALID_ID"), "\(stderr)")
        try "[Media]\nEnabled=no\n[Outbox]\nMindboxTransliteration=Russian-Latin/BGN; Latin-ASCII\n".write(toFile: harness.config, atomically: true, encoding: .utf8)
        #expect(try DaemonHarness.run(ctl, ["config", "check", harness.config]).0 == 0)
    }

    /// The SIGHUP half: the reload is refused, the daemon keeps running on the old
    /// configuration and still ingests.
    @Test func reloadWithAHugeDurationIsRefusedAndTheDaemonLives() throws {
        let harness = try DaemonHarness(name: "config-huge-reload")
        try harness.start()
        try Self.waitForReady(harness)
        try "[Media]\nEnabled=no\n[Spool]\nRescanIntervalSec=99999999999\n".write(toFile: harness.config, atomically: true, encoding: .utf8)
        kill(try #require(harness.process).processIdentifier, SIGHUP)
        try waitUntil(timeout: 30, "the reload to be refused") { harness.daemonStderr.contains("configuration reload failed") }
        #expect(harness.daemonStderr.contains("RescanIntervalSec: must be from 1s to 1d"))
        try harness.drop(generatedPayload(index: 1, tag: "after-hup"), name: "after-hup.json")
        try waitUntil(timeout: 30, "the payload to be journaled") { harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty }
        #expect(try #require(harness.process).isRunning)
        #expect(harness.stop() == 0)
        #expect(try harness.records().map(\.key) == [generatedKey(index: 1, tag: "after-hup")])
    }

    /// `[Log] UserIds=hash` (the default) names users in events by the keyed hash
    /// `pushspoolctl user hash` prints, never by id; `plain` logs the id.
    @Test(arguments: ["", "plain"]) func userIdsInEventsFollowLogUserIds(mode: String) throws {
        let config = "[Media]\nEnabled=no\n" + (mode.isEmpty ? "" : "[Log]\nUserIds=\(mode)\n")
        let harness = try DaemonHarness(name: "config-userids-\(mode.isEmpty ? "default" : mode)", config: config)
        try harness.start()
        try Self.waitForReady(harness)
        // generatedPayload(index: 5) is for "user-5", an id distinct from every other field.
        try harness.drop(generatedPayload(index: 5, tag: "uid"), name: "uid.json")
        try waitUntil(timeout: 30, "the payload to be journaled") { harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty }
        #expect(harness.stop() == 0)
        let ingested = try #require(harness.daemonStderr.split(separator: "\n").first { $0.contains("EVENT=ingested") })
        let (status, hash, errors) = try harness.ctl(["user", "hash", "user-5"])
        if mode == "plain" {
            #expect(ingested.contains("PUSH_USER=user-5"), "\(ingested)")
            #expect(!ingested.contains("PUSH_USER_HASH="))
        } else {
            #expect(status == 0, "\(errors)")
            let expected = hash.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(expected.count == 16 && expected.allSatisfy(\.isHexDigit), "\(hash)")
            #expect(ingested.contains("PUSH_USER_HASH=\(expected)"), "\(ingested)")
            #expect(!ingested.contains("user-5"), "\(ingested)")
            // Another user hashes differently.
            #expect(try harness.ctl(["user", "hash", "user-6"]).1 != hash)
        }
    }

    /// `[Log] Identifier=` names the events, and `[Log] MaxEventsPerSec=` summarises a burst
    /// (both were parsed and ignored: the event log was made before the configuration).
    @Test func logSettingsAreUsed() throws {
        let harness = try DaemonHarness(name: "config-log", config: "[Media]\nEnabled=no\n[Log]\nIdentifier=spooltest\nMaxEventsPerSec=1\n")
        try harness.start()
        try Self.waitForReady(harness)
        for index in 0..<20 {
            try harness.drop(generatedPayload(index: index, tag: "log"), name: "log-\(index).json")
        }
        try waitUntil(timeout: 60, "the spool to drain") { harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty }
        // A summary goes out with the next event after the second ends; stopping logs more.
        sleep(2) // why: the summary is per-second window; it goes out only after the window has ended
        #expect(harness.stop() == 0)
        let lines = harness.daemonStderr.split(separator: "\n")
        #expect(!lines.isEmpty)
        #expect(lines.allSatisfy { $0.hasPrefix("spooltest[") }, "\(lines.prefix(3))")
        #expect(lines.filter { $0.contains("EVENT=ingested") }.count < 20)
        #expect(lines.contains { $0.contains("EVENT=aggregated") && $0.contains("AGGREGATED_EVENT=ingested") }, "\(lines)")
        #expect(try harness.records().count == 20)
    }

    /// Every duration and size at its maximum: the daemon starts, ingests, reloads and
    /// stops without any conversion trapping.
    @Test func everyDurationAndSizeAtItsMaximumRuns() throws {
        let config = """
            [Spool]
            RescanIntervalSec=1d
            StableAgeSec=1h
            MaxFileSize=1G
            [Journal]
            SegmentSize=16G
            MaxBatchDelaySec=1s
            CheckpointIntervalSec=1d
            [Media]
            ConnectTimeoutSec=1h
            TransferTimeoutSec=1d
            LowSpeedLimit=1G
            LowSpeedTimeSec=1h
            MaxSize=4G
            PayloadDeadlineSec=1d
            DedupWindowSec=7d
            [Limits]
            MaxPayloadSize=16M
            [Metrics]
            TextfilePath=/dev/null/never.prom
            IntervalSec=1d
            [Status]
            IntervalSec=1h

            """
        let harness = try DaemonHarness(name: "config-max", config: config.replacingOccurrences(of: "TextfilePath=/dev/null/never.prom\n", with: ""))
        try harness.start()
        try Self.waitForReady(harness)
        try harness.drop(generatedPayload(index: 1, tag: "max"), name: "max.json")
        try waitUntil(timeout: 30, "the payload to be journaled") { harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty }
        kill(try #require(harness.process).processIdentifier, SIGHUP)
        try waitUntil(timeout: 30, "the reload") { harness.daemonStderr.contains("configuration reloaded") }
        #expect(try #require(harness.process).isRunning)
        #expect(harness.stop() == 0)
        #expect(try harness.records().count == 1)
    }
}
