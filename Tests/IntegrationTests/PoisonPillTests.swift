@preconcurrency import Glibc
import Foundation
import Testing

/// A payload that crashes the daemon must not crash it at every start (issue 8, defect 1):
/// after one crash the leftovers are processed one at a time, and the file that crashes the
/// daemon while alone is quarantined as `crashed_daemon`; its neighbours are ingested.
@Suite struct PoisonPillTests {
    static let marker = "POISON-4b1d"

    private func waitForCrash(_ harness: DaemonHarness) throws -> Process.TerminationReason {
        let process = try #require(harness.process)
        try waitUntil(timeout: 60, "pushspoold to crash on the poison payload") { !process.isRunning }
        return process.terminationReason
    }

    @Test func aPayloadThatCrashesTheDaemonIsQuarantinedAfterItCrashesItAlone() throws {
        let harness = try DaemonHarness(name: "poison")
        let environment = ["PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_TEST_CRASH_ON": Self.marker]
        try harness.start(extraEnvironment: environment)
        for index in 0..<3 { try harness.drop(generatedPayload(index: index, tag: "innocent"), name: "innocent-\(index).json") }
        try harness.drop(generatedPayload(index: 99, tag: Self.marker), name: "poison.json")

        // First crash: in the middle of ordinary work.
        #expect(try waitForCrash(harness) == .uncaughtSignal)
        // Read in place (no claim rename): the poison is still in incoming/, named in the in-flight record.
        #expect(harness.files(in: "incoming").contains("poison.json"))
        let runFile = try String(contentsOfFile: harness.state + "/pushspoold.run", encoding: .utf8)
        #expect(runFile.hasPrefix("C"), "the crash handler marks the run as crashed")

        // Second start: the leftovers go one at a time; the poison crashes the daemon while alone.
        try harness.start(extraEnvironment: environment)
        #expect(try waitForCrash(harness) == .uncaughtSignal)
        #expect(try String(contentsOfFile: harness.state + "/pushspoold.run", encoding: .utf8) == "Cpoison.json")

        // Third start: the proven cause is quarantined, everything else is ingested, and the
        // daemon keeps running.
        try harness.start(extraEnvironment: environment)
        try waitUntil(timeout: 60, "the poison to be quarantined and the rest ingested") {
            let records = try harness.records().count
            return harness.files(in: "processing").isEmpty && harness.files(in: "incoming").isEmpty && records == 3
        }
        #expect(harness.files(in: "failed") == ["poison.json", "poison.json.reason.json"])
        let reason = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: harness.spool + "/failed/poison.json.reason.json"))) as? [String: Any]
        #expect(reason?["code"] as? String == "crashed_daemon")
        #expect(try harness.records().map(\.key).sorted() == (0..<3).map { generatedKey(index: $0, tag: "innocent") }.sorted())
        #expect(harness.process?.isRunning == true)
        #expect(harness.stop() == 0)
        // A deliberate exit clears the evidence: the next start trusts what it finds.
        #expect(!FileManager.default.fileExists(atPath: harness.state + "/pushspoold.run"))
        #expect(!FileManager.default.fileExists(atPath: harness.state + "/crash-suspects.json"))
    }

    @Test func aKillWithoutACrashSignalQuarantinesNothing() throws {
        let harness = try DaemonHarness(name: "killnopoison")
        try harness.start()
        try harness.drop(generatedPayload(index: 1, tag: "k"), name: "k.json")
        try waitUntil(timeout: 30, "the file to be ingested") { (try harness.records().count) == 1 }
        harness.stop(signal: SIGKILL)
        #expect(try String(contentsOfFile: harness.state + "/pushspoold.run", encoding: .utf8).hasPrefix("R"))
        try harness.start()
        try harness.drop(generatedPayload(index: 2, tag: "k"), name: "k2.json")
        try waitUntil(timeout: 30, "the next file to be ingested") { (try harness.records().count) == 2 }
        #expect(harness.files(in: "failed").isEmpty)
        #expect(harness.stop() == 0)
    }
}
