import Foundation
import Glibc
import Synchronization
import PushJournal
import PushSystemd
import Testing
@testable import PushspoolDaemon

/// status.json and the metrics textfile are written together; an operator who reads a count in
/// one must not find a smaller count in the other (a CI run once saw the textfile at 5 ingested
/// and `pushspoolctl stats` at 4).
@Suite struct ReporterSnapshotTests {
    @Test func textfileNeverCountsMoreThanStatusJSONWhileFilesAreIngested() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushspool-reporter-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let devNull = open("/dev/null", O_WRONLY | O_CLOEXEC)
        defer { close(devNull) }
        let reporter = Reporter(counters: Counters(), events: EventLog(identifier: "reporter-test", destination: .lines(fd: devNull)),
                                notifier: SystemdNotifier(), metrics: Metrics(), stateDirectory: directory)
        let textfile = directory + "/pushspool.prom"

        // Files being ingested all the while, as on a busy daemon.
        let stop = Atomic<Bool>(false)
        let ingesting = Thread {
            while !stop.load(ordering: .relaxed) { reporter.ingested(fields: [], seq: 1, durationNanos: 0) }
        }
        ingesting.start()
        defer { stop.store(true, ordering: .relaxed) }

        var rounds = 0, moving = 0
        var lastStatus = -1
        for _ in 0..<300 {
            reporter.publish(textfilePath: textfile, journal: JournalWriterStats(), media: nil, inFlight: 0)
            reporter.flush()
            let status = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: directory + "/status.json"))) as? [String: Any]
            let statusCount = try #require(status?["ingested"] as? Int)
            let text = try String(contentsOfFile: textfile, encoding: .utf8)
            let line = try #require(text.split(separator: "\n").first { $0.hasPrefix(MetricFamily.ingested + " ") })
            let textCount = try #require(Double(line.split(separator: " ").last ?? ""))
            #expect(Int(textCount) <= statusCount, "textfile \(Int(textCount)) ingested, status.json \(statusCount)")
            rounds += 1
            if statusCount != lastStatus { moving += 1 }
            lastStatus = statusCount
        }
        // The counts really moved between publishes, so the comparison was made under load.
        #expect(rounds == 300 && moving > 100)
    }
}
