@preconcurrency import Glibc
import Dispatch
import Foundation
import Synchronization
import Testing
@testable import PushJournal
import PushSystem
import TestSupport
import PushConfig
import PushModuleOptions

/// Black-box kill -9 (docs/design/journal.md, "Crash testing"): a child process (this test binary,
/// re-executed to run `crashChildWriter` only) appends records and logs every acknowledgement; the
/// parent kills it with SIGKILL at a random moment, recovers, and checks that every acknowledged id
/// is in the journal exactly once and that verify is clean.
@Suite struct CrashTests {
    static let childDirVariable = "PUSHSPOOL_JOURNAL_CRASH_DIR"

    static var isChild: Bool { ProcessInfo.processInfo.environment[childDirVariable] != nil }

    static func childOptions() -> JournalOptions {
        var options = JournalOptions(settings: Configuration().journal)
        options.segmentBytes = 16 << 10
        options.checkpointEvery = 40
        options.maxBatchDelay = .milliseconds(1)
        return options
    }

    @Test(.enabled(if: !isChild))
    func killNineAtRandomMomentsLosesNoAcknowledgedRecord() throws {
        let temp = TempDir()
        let journal = temp.journal
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        var acked = Set<String>()
        var generator = SystemRandomNumberGenerator()
        for cycle in 0..<6 {
            let acks = temp.path + "/acks-\(cycle)"
            let child = Process()
            child.executableURL = URL(fileURLWithPath: executable)
            child.arguments = ["--testing-library", "swift-testing", "--filter", "crashChildWriter"]
            var environment = ProcessInfo.processInfo.environment
            environment[Self.childDirVariable] = journal
            environment["PUSHSPOOL_JOURNAL_CRASH_ACKS"] = acks
            environment["PUSHSPOOL_JOURNAL_CRASH_CYCLE"] = String(cycle)
            child.environment = environment
            child.standardOutput = FileHandle.nullDevice
            child.standardError = FileHandle.nullDevice
            try child.run()
            // Kill once it is writing, at a random point of its stream.
            _ = eventually(within: 10) {
                (try? FileManager.default.attributesOfItem(atPath: acks)[.size] as? Int) ?? 0 >= 200 || !child.isRunning
            }
            usleep(UInt32.random(in: 0...150_000, using: &generator))  // why: the fault: the kill comes at a random moment
            kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
            #expect(child.terminationReason == .uncaughtSignal, "cycle \(cycle): the child must still be running when killed")

            let lines = (try? String(contentsOfFile: acks, encoding: .utf8)) ?? ""
            // A line cut by the kill is not a finished acknowledgement.
            let complete = lines.hasSuffix("\n") ? lines : String(lines[..<(lines.lastIndex(of: "\n") ?? lines.startIndex)])
            let newAcks = complete.split(separator: "\n").map(String.init)
            #expect(newAcks.count > 0, "cycle \(cycle)")
            acked.formUnion(newAcks)

            let (writer, report) = try JournalWriter.open(directory: journal, options: Self.childOptions())
            let missing = acked.filter { !writer.contains(key: $0) }
            #expect(missing.isEmpty, "cycle \(cycle): acknowledged but lost: \(missing.prefix(5))")
            try writer.close()
            let records = try readAll(journal)
            #expect(records.map(\.seq) == Array(1...UInt64(records.count)), "cycle \(cycle): seqs contiguous")
            #expect(Set(records.map(\.key)).count == records.count, "cycle \(cycle): no id twice")
            #expect(Set(records.map(\.key)).isSuperset(of: acked))
            let verify = JournalVerifier.verify(directory: journal)
            #expect(verify.exitCode == 0, "cycle \(cycle): \(verify.lines) (recovery: torn \(report.tornBytesTruncated))")
        }
    }

    /// Not a test on its own: the body of the child process above. Disabled unless the parent
    /// starts it.
    @Test(.enabled(if: isChild))
    func crashChildWriter() throws {
        let environment = ProcessInfo.processInfo.environment
        let directory = try #require(environment[Self.childDirVariable])
        let acksPath = try #require(environment["PUSHSPOOL_JOURNAL_CRASH_ACKS"])
        let cycle = Int(environment["PUSHSPOOL_JOURNAL_CRASH_CYCLE"] ?? "0") ?? 0
        let acks = open(acksPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        let (writer, _) = try JournalWriter.open(directory: directory, options: Self.childOptions())
        let window = DispatchSemaphore(value: 32)
        for i in 0..<1_000_000 {
            // Every fifth record redelivers an id of the previous run, as a restarted daemon would.
            let key = cycle > 0 && i % 5 == 0 ? "c\(cycle - 1)-\(i / 5)" : "c\(cycle)-\(i)"
            window.wait()
            writer.submit(key: key, body: Array(body(for: i, size: 150 + i % 700).utf8), ingestMillis: Int64(i)) { result in
                switch result {
                case .committed, .duplicate:
                    let line = Array((key + "\n").utf8)
                    _ = line.withUnsafeBytes { write(acks, $0.baseAddress, $0.count) }
                case .failed:
                    break
                }
                window.signal()
            }
        }
        try writer.close()
    }
}
