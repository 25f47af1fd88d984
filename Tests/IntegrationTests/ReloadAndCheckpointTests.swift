@preconcurrency import Glibc
import Foundation
import Testing

/// Configuration keys that used to do nothing, observed in the running daemon (issue 8,
/// defect 7): a reloaded `[Spool] MaxFileSize` applies to the next file, and `[Journal]
/// CheckpointIntervalSec` checkpoints while the daemon runs, not only at stop.
@Suite struct ReloadAndCheckpointTests {
    /// A payload padded to about `bytes` bytes.
    static func payload(bytes: Int, tag: String) -> [UInt8] {
        let padding = String(repeating: "x", count: max(0, bytes - 200))
        return Array("""
            {"aps":{"alert":{"title":"t","body":"\(padding)"}},"uniqueKey":"\(tag)"}
            """.utf8)
    }

    @Test func aReloadedMaxFileSizeAppliesToTheNextFile() throws {
        let harness = try DaemonHarness(name: "maxfile", config: "[Media]\nEnabled=no\n[Spool]\nMaxFileSize=1K\n[Limits]\nMaxPayloadSize=1K\n")
        try harness.start()
        try waitUntil(timeout: 30, "READY") { harness.daemonStderr.contains("EVENT=ready") }
        try harness.drop(Self.payload(bytes: 3000, tag: "big-1"), name: "big-1.json")
        try waitUntil(timeout: 30, "the big file to be refused") { harness.files(in: "failed").contains("big-1.json") }

        try "[Media]\nEnabled=no\n[Spool]\nMaxFileSize=8K\n[Limits]\nMaxPayloadSize=8K\n".write(toFile: harness.config, atomically: true, encoding: .utf8)
        kill(try #require(harness.process).processIdentifier, SIGHUP)
        try waitUntil(timeout: 30, "the reload") { harness.daemonStderr.contains("EVENT=reload ") || harness.daemonStderr.contains("configuration reloaded") }
        #expect(!harness.daemonStderr.contains("RESTART_NEEDED_FOR=Spool.MaxFileSize"), "applied, not deferred")
        try harness.drop(Self.payload(bytes: 3000, tag: "big-2"), name: "big-2.json")
        try waitUntil(timeout: 30, "the same size to be ingested after the reload") { (try harness.records().count) == 1 }
        #expect(!harness.files(in: "failed").contains("big-2.json"))
        #expect(harness.stop() == 0)
    }

    @Test func theDedupIndexIsCheckpointedOnTheIntervalWhileRunning() throws {
        let harness = try DaemonHarness(name: "ckpt", config: "[Media]\nEnabled=no\n[Journal]\nCheckpointIntervalSec=1s\n")
        try harness.start()
        let checkpoint = harness.state + "/journal/dedup.ckpt"
        try harness.drop(generatedPayload(index: 1, tag: "ckpt"), name: "c1.json")
        try waitUntil(timeout: 30, "the record") { (try harness.records().count) == 1 }
        try waitUntil(timeout: 15, "a checkpoint before any stop") { FileManager.default.fileExists(atPath: checkpoint) }
        #expect(harness.process?.isRunning == true)
        #expect(harness.stop() == 0)
    }
}
