@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem
import PushJournal

/// The daemon binary against real directories: every accepted payload journaled exactly once,
/// every refused one quarantined with a reason, nothing left behind, across SIGKILLs.
@Suite struct DaemonEndToEndTests {
    /// The expected outcome of each example, from spool-examples/README.md's table.
    static func exampleExpectations() throws -> [String: Bool] {
        let table = try String(contentsOfFile: DaemonHarness.packageRoot + "/spool-examples/README.md", encoding: .utf8)
        var expectations: [String: Bool] = [:]
        for line in table.split(separator: "\n") where line.hasPrefix("|") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "`", with: "") }
            guard cells.count >= 2, cells[0].hasSuffix(".json") else { continue }
            expectations[cells[0]] = cells[1].lowercased().hasPrefix("accept") || cells[1].lowercased().hasPrefix("event ")
        }
        return expectations
    }

    @Test func examplesAndTenThousandGeneratedPayloadsLandExactlyOnce() throws {
        let harness = try DaemonHarness(name: "e2e")
        try harness.start()
        let expectations = try Self.exampleExpectations()
        #expect(expectations.count >= 25)
        for name in expectations.keys.sorted() {
            let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: DaemonHarness.packageRoot + "/spool-examples/" + name)))
            try harness.drop(bytes, name: "example-" + name)
        }
        let generated = 10_000
        for index in 0..<generated {
            try harness.drop(generatedPayload(index: index, tag: "e2e"), name: "gen-\(index).json")
        }
        // Re-deliver a few: same ids, different files → duplicates, not second records.
        for index in 0..<50 {
            try harness.drop(generatedPayload(index: index, tag: "e2e"), name: "again-\(index).json")
        }
        try waitUntil(timeout: 180, "spool to drain") {
            harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty
        }
        #expect(harness.stop() == 0)

        let records = try harness.records()
        let keys = records.map(\.key)
        #expect(Set(keys).count == keys.count, "no payload id journaled twice")
        let generatedKeys = Set(keys.filter { payloadId(ofKey: $0)?.hasPrefix("e2e-") == true })
        #expect(generatedKeys.count == generated)
        let acceptedExamples = expectations.values.filter { $0 }.count
        let refusedExamples = expectations.count - acceptedExamples
        // Some accepted examples may share an id on purpose (duplicates); they may not add records.
        #expect(records.count <= generated + acceptedExamples)
        #expect(records.count >= generated + 1)

        let failed = harness.files(in: "failed")
        let reasons = failed.filter { $0.hasSuffix(".reason.json") }
        #expect(reasons.count == refusedExamples, "one reason file per refused example: \(failed)")
        #expect(failed.count == 2 * refusedExamples)
        for reasonFile in reasons {
            let data = try Data(contentsOf: URL(fileURLWithPath: harness.spool + "/failed/" + reasonFile))
            let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
            for key in ["code", "message", "stage", "at", "daemonVersion"] {
                #expect(object[key] != nil, "\(reasonFile) lacks \(key)")
            }
            let original = String(reasonFile.dropLast(".reason.json".count))
            #expect(expectations[String(original.dropFirst("example-".count))] == false, "\(original) was expected to be accepted")
        }
        #expect(harness.files(in: "incoming").isEmpty)
        #expect(harness.files(in: "processing").isEmpty)

        let (status, output, _) = try harness.ctl(["journal", "verify"])
        #expect(status == 0, "journal verify: \(output)")
    }

    /// SIGKILL at random moments while 20,000 files are ingested; after each restart the
    /// journal holds every file that left the spool exactly once.
    @Test func sigkillDuringIngestLosesNothingAndDuplicatesNothing() throws {
        let cycles = Int(ProcessInfo.processInfo.environment["PUSHSPOOL_KILL_CYCLES"] ?? "") ?? 20
        let total = Int(ProcessInfo.processInfo.environment["PUSHSPOOL_KILL_FILES"] ?? "") ?? 20_000
        let harness = try DaemonHarness(name: "kill")
        try harness.start()
        harness.stop(signal: SIGKILL)
        for index in 0..<total {
            try harness.drop(generatedPayload(index: index, tag: "kill"), name: "k-\(index).json")
        }
        var generator = SystemRandomNumberGenerator()
        for cycle in 0..<cycles {
            try harness.start()
            usleep(UInt32.random(in: 20_000...400_000, using: &generator))  // why: the fault: a random kill moment
            harness.stop(signal: SIGKILL)
            // Whatever left the spool must be in the journal; nothing twice.
            let records = try harness.records()
            let keys = records.map(\.key)
            #expect(Set(keys).count == keys.count, "cycle \(cycle): duplicate record")
            let remaining = Set(harness.files(in: "incoming") + harness.files(in: "processing"))
            let journaled = Set(keys.compactMap { key -> String? in
                guard let index = key.split(separator: "-").last else { return nil }
                return "k-\(index).json"
            })
            for index in 0..<total where !remaining.contains("k-\(index).json") {
                if !journaled.contains("k-\(index).json") {
                    Issue.record("cycle \(cycle): k-\(index).json left the spool but is not in the journal")
                    return
                }
            }
        }
        try harness.start()
        try waitUntil(timeout: 300, "spool to drain after the kill cycles") {
            harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty
        }
        #expect(harness.stop() == 0)
        let keys = try harness.records().map(\.key)
        #expect(keys.count == total)
        #expect(Set(keys).count == total)
        #expect(harness.files(in: "failed").isEmpty)
        let (status, output, _) = try harness.ctl(["journal", "verify"])
        #expect(status == 0, "journal verify after kills: \(output)")
    }
}
