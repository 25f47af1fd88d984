@preconcurrency import Glibc
import Foundation
import Testing

/// What an operator sees of a running daemon: the metrics textfile, `pushspoolctl stats`,
/// `config show`, `journal tail`, `failed` admin.
@Suite struct OperatorViewTests {
    @Test func metricsTextfileAndStatsReflectTheIngest() throws {
        let harness = try DaemonHarness(name: "metrics", config: "[Media]\nEnabled=no\n[Metrics]\nIntervalSec=1s\n")
        try "[Media]\nEnabled=no\n[Metrics]\nIntervalSec=1s\nTextfilePath=\(harness.root)/pushspool.prom\n"
            .write(toFile: harness.config, atomically: true, encoding: .utf8)
        try harness.start()
        for index in 0..<5 { try harness.drop(generatedPayload(index: index, tag: "metrics"), name: "m\(index).json") }
        try harness.drop(Array("{not json".utf8), name: "broken.json")
        try waitUntil(timeout: 30, "metrics textfile with 5 ingested") {
            let text = (try? String(contentsOfFile: harness.root + "/pushspool.prom", encoding: .utf8)) ?? ""
            return text.contains("pushspool_ingested_total 5")
        }
        let text = try String(contentsOfFile: harness.root + "/pushspool.prom", encoding: .utf8)
        #expect(text.contains("pushspool_refused_total{reason=\"invalid_json\"} 1"))
        // Every follower in the daemon's group has its series (the index is on by default).
        #expect(text.contains("pushspool_follower_lag_records{follower=\"inbox\"}"), "\(text)")
        #expect(text.contains("pushspool_follower_failing{follower=\"inbox\"} 0"))
        let fsyncCount = text.split(separator: "\n").first { $0.hasPrefix("pushspool_journal_fsync_seconds_count") }
        let count = fsyncCount.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
        #expect(count >= 1, "the fsync latency histogram is fed by the journal: \(fsyncCount ?? "missing")")

        let (status, output, _) = try harness.ctl(["stats", "--json"])
        #expect(status == 0)
        let stats = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        #expect(stats["ingested"] as? Int == 5)
        #expect(stats["refused"] as? Int == 1)

        let (tailStatus, tail, _) = try harness.ctl(["journal", "tail", "-n", "2", "--json"])
        #expect(tailStatus == 0)
        #expect(tail.split(separator: "\n").count == 2)

        let (showStatus, shown, _) = try harness.ctl(["config", "show"])
        #expect(showStatus == 0)
        #expect(shown.contains("# command line\nDirectory=\(harness.spool)"))

        let (listStatus, failed, _) = try harness.ctl(["failed", "list", "--json"])
        #expect(listStatus == 0)
        #expect(failed.contains("\"code\":\"invalid_json\""))
        let (retryStatus, _, _) = try harness.ctl(["failed", "retry", "ALL"])
        #expect(retryStatus == 0)
        // Retried, refused again: still exactly one quarantined payload, never lost.
        try waitUntil(timeout: 30, "re-quarantine after retry") {
            harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty
                && harness.files(in: "failed").count == 2
        }
        let (purgeStatus, _, _) = try harness.ctl(["failed", "purge", "ALL"])
        #expect(purgeStatus == 0)
        #expect(harness.files(in: "failed").isEmpty)
        #expect(harness.stop() == 0)
    }
}
