@preconcurrency import Glibc
import Foundation
import Testing

/// Lost acknowledged records are corruption, not a torn tail (issue 8, defect 3): the daemon
/// refuses to start on them; under the quarantine policy it starts, logs the loss at crit and
/// never hands a lost sequence number out again.
@Suite struct JournalLossDaemonTests {
    private func lastSegment(_ harness: DaemonHarness) throws -> String {
        let journal = harness.state + "/journal"
        let segments = try FileManager.default.contentsOfDirectory(atPath: journal).filter { $0.hasSuffix(".seg") }.sorted()
        return journal + "/" + (try #require(segments.last))
    }

    @Test func aTruncatedAcknowledgedRecordRefusesStartAndItsSeqIsNeverReused() throws {
        let harness = try DaemonHarness(name: "lost")
        try harness.start()
        for index in 0..<5 { try harness.drop(generatedPayload(index: index, tag: "lost"), name: "l\(index).json") }
        try waitUntil(timeout: 30, "five records") { (try harness.records().count) == 5 }
        #expect(harness.stop() == 0)

        let segment = try lastSegment(harness)
        let size = try #require(try FileManager.default.attributesOfItem(atPath: segment)[.size] as? Int)
        #expect(truncate(segment, off_t(size - 10)) == 0)

        let (status, stderr) = try harness.runExpectingExit(timeout: 20)
        #expect(status == 1, "refuses to start: \(stderr)")
        #expect(stderr.contains("acknowledged records"), "says what was lost: \(stderr)")
        #expect(!stderr.contains("EVENT=tornTail"), "not reported as a torn tail")

        // The operator accepts the loss: the daemon starts, says so at crit, and continues
        // above the watermark.
        try harness.start(arguments: ["--quarantine-corrupt-segment"])
        try harness.drop(generatedPayload(index: 9, tag: "after"), name: "after.json")
        try waitUntil(timeout: 30, "the new record") { (try harness.records().contains { $0.key == generatedKey(index: 9, tag: "after") }) }
        let after = try #require(try harness.records().first { $0.key == generatedKey(index: 9, tag: "after") })
        #expect(after.seq == 6, "seq 5 was acknowledged and lost: it is not handed out again")
        let text = harness.daemonStderr
        #expect(text.contains("<2> acknowledged journal records are lost"), "crit event: \(text)")
        #expect(text.contains("JOURNAL_LOST_FROM=5") && text.contains("JOURNAL_LOST_TO=5"))
        #expect(harness.stop() == 0)
    }
}
