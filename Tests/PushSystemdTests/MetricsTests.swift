@preconcurrency import Glibc
import Foundation
import Testing
@testable import PushSystemd
import PushSystem
import TestSupport

@Suite struct MetricsTests {
    /// A strict reading of the text exposition format 0.0.4: every sample belongs to a family
    /// announced by HELP and TYPE before it, names and labels are well-formed, values parse.
    static func validate(_ text: String) -> [String] {
        var problems: [String] = []
        var types: [String: String] = [:]
        var helped: Set<String> = []
        let name = try! Regex("^[a-zA-Z_:][a-zA-Z0-9_:]*$")
        #expect(text.hasSuffix("\n"))
        for line in text.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            if line.hasPrefix("# HELP ") {
                let parts = line.split(separator: " ", maxSplits: 3)
                helped.insert(String(parts[2]))
            } else if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                if parts.count != 4 || !["counter", "gauge", "histogram", "summary", "untyped"].contains(parts[3]) { problems.append("bad TYPE: \(line)") }
                if !helped.contains(String(parts[2])) { problems.append("TYPE before HELP: \(line)") }
                if types[String(parts[2])] != nil { problems.append("TYPE twice: \(line)") }
                types[String(parts[2])] = String(parts[3])
            } else {
                guard let sample = MetricsSnapshot.parseSample(line) else { problems.append("unparseable: \(line)"); continue }
                if (try? name.wholeMatch(in: sample.name)) == nil { problems.append("bad name: \(line)") }
                var family = sample.name
                for suffix in ["_bucket", "_sum", "_count"] where family.hasSuffix(suffix) && types[family] == nil {
                    family.removeLast(suffix.count)
                }
                if types[family] == nil { problems.append("sample without TYPE: \(line)") }
                if sample.name.hasSuffix("_bucket"), sample.labels["le"] == nil { problems.append("bucket without le: \(line)") }
            }
        }
        return problems
    }

    @Test func renderingIsValidPrometheusText() {
        let metrics = Metrics()
        metrics.increment(MetricFamily.ingested, by: 3)
        metrics.increment(MetricFamily.refused, labels: ["reason": "json_invalid"])
        metrics.increment(MetricFamily.refused, labels: ["reason": "json_invalid"])
        metrics.increment(MetricFamily.refused, labels: ["reason": "odd \"name\"\\with\nnewline"])
        metrics.set(MetricFamily.backlog, to: 17)
        metrics.set(MetricFamily.startTime, to: 1_764_400_000.25)
        metrics.increment(MetricFamily.media, labels: ["status": "failed"])
        for seconds in [0.0002, 0.0007, 0.003, 0.003, 4.0] { metrics.observeFsync(seconds: seconds) }

        let text = metrics.renderPrometheus()
        #expect(Self.validate(text) == [])
        #expect(text.contains("# HELP pushspool_ingested_total Payloads written durably to the journal.\n# TYPE pushspool_ingested_total counter\npushspool_ingested_total 3\n"))
        #expect(text.contains("pushspool_refused_total{reason=\"json_invalid\"} 2\n"))
        #expect(text.contains("pushspool_refused_total{reason=\"odd \\\"name\\\"\\\\with\\nnewline\"} 1\n"))
        #expect(text.contains("pushspool_backlog_files 17\n"))
        #expect(text.contains("pushspool_start_time_seconds 1764400000.25\n"))
        // Untouched families still appear, so rate() and alerts see a zero.
        #expect(text.contains("pushspool_duplicates_total 0\n"))
        // Histogram buckets are cumulative and end with +Inf == count.
        #expect(text.contains("pushspool_journal_fsync_seconds_bucket{le=\"0.0005\"} 1\n"))
        #expect(text.contains("pushspool_journal_fsync_seconds_bucket{le=\"0.001\"} 2\n"))
        #expect(text.contains("pushspool_journal_fsync_seconds_bucket{le=\"0.005\"} 4\n"))
        #expect(text.contains("pushspool_journal_fsync_seconds_bucket{le=\"2.5\"} 4\n"))
        #expect(text.contains("pushspool_journal_fsync_seconds_bucket{le=\"+Inf\"} 5\n"))
        #expect(text.contains("pushspool_journal_fsync_seconds_count 5\n"))
        let sum = MetricsSnapshot(prometheusText: text).value("pushspool_journal_fsync_seconds_sum")
        #expect(abs((sum ?? 0) - 4.0069) < 1e-9)
    }

    @Test func snapshotReadsBackWhatWasRendered() throws {
        let metrics = Metrics()
        metrics.increment(MetricFamily.refused, labels: ["reason": "a\"b\\c\nd"])
        metrics.increment(MetricFamily.duplicates, by: 2)
        let snapshot = metrics.snapshot()
        #expect(snapshot.value(MetricFamily.refused, labels: ["reason": "a\"b\\c\nd"]) == 1)
        #expect(snapshot.value(MetricFamily.duplicates) == 2)

        let lines = snapshot.jsonLines().split(separator: "\n")
        #expect(lines.count == snapshot.samples.count)
        #expect(lines.contains("{\"labels\":{},\"name\":\"pushspool_duplicates_total\",\"value\":2}"))
        let decoded = try lines.map { try JSONDecoder().decode(MetricsSnapshot.Sample.self, from: Data($0.utf8)) }
        #expect(decoded == snapshot.samples)
        #expect(snapshot.table().contains("pushspool_duplicates_total"))
        #expect(!snapshot.table().contains("_bucket"))
    }

    @Test func textfileIsReplacedAtomicallyAndWorldReadable() throws {
        let temp = TempDir()
        let dir = temp.path
        let path = dir + "/pushspool.prom"
        let metrics = Metrics()
        metrics.increment(MetricFamily.ingested)
        try metrics.writeTextfile(path: path)
        metrics.increment(MetricFamily.ingested)
        try metrics.writeTextfile(path: path)
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text == metrics.renderPrometheus())
        #expect(text.contains("pushspool_ingested_total 2\n"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["pushspool.prom"])
        var st = stat()
        #expect(stat(path, &st) == 0)
        #expect(st.st_mode & 0o777 == 0o644)
        #expect(throws: SystemError.self) { try metrics.writeTextfile(path: dir + "/missing/x.prom") }
    }

    @Test func concurrentUpdatesAreAllCounted() async {
        let metrics = Metrics()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask { for _ in 0..<1000 { metrics.increment(MetricFamily.ingested); metrics.observeFsync(seconds: 0.001) } }
            }
        }
        #expect(metrics.value(MetricFamily.ingested) == 8000)
        #expect(metrics.snapshot().value("pushspool_journal_fsync_seconds_count") == 8000)
    }
}
