@preconcurrency import Glibc
import Dispatch
import Foundation
import Testing
import TestSupport
@testable import PushJournal
import PushSystem

/// Issue 8, defect 4: ids compare as bytes everywhere. "café" spelled NFC (`c a f U+00E9`) and
/// NFD (`c a f e U+0301`) are equal `String`s but different ids; the writer's in-flight set,
/// its committed index and `verify` must all agree that they differ.
@Suite struct UnicodeDedupTests {
    static let nfc = "mindbox:caf\u{E9}"
    static let nfd = "mindbox:cafe\u{301}"

    @Test func theTwoSpellingsAreEqualStringsButDifferentBytes() {
        #expect(Self.nfc == Self.nfd, "the premise: Swift compares Strings by canonical equivalence")
        #expect(Array(Self.nfc.utf8) != Array(Self.nfd.utf8))
    }

    /// Dropped together: the second arrives while the first is still in flight.
    @Test(arguments: [true, false])
    func bothSpellingsInFlightAreBothJournaled(nfcFirst: Bool) throws {
        let temp = TempDir()
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: testOptions())
        // Hold the writer thread inside a completion, so both spellings are queued (in flight)
        // when the second is submitted. Tests only: real completions must not block.
        let entered = DispatchSemaphore(value: 0)
        let gate = DispatchSemaphore(value: 0)
        writer.submit(key: "blocker", body: [], ingestMillis: 0) { _ in
            entered.signal()
            gate.wait()
        }
        entered.wait()
        let results = Locked<[String: AppendResult]>([:])
        let done = DispatchSemaphore(value: 0)
        let order = nfcFirst ? [("nfc", Self.nfc), ("nfd", Self.nfd)] : [("nfd", Self.nfd), ("nfc", Self.nfc)]
        for (label, key) in order {
            writer.submit(key: key, body: Array("{}".utf8), ingestMillis: 0) { result in
                results.withLock { $0[label] = result }
                done.signal()
            }
        }
        gate.signal()
        done.wait()
        done.wait()
        let all = results.withLock { $0 }
        #expect(all.count == 2)
        #expect(all.values.allSatisfy { seq($0) != nil }, "neither spelling is a duplicate of the other: \(all)")
        try writer.close()
        #expect(try readAll(temp.journal).map { Array($0.key.utf8) }.filter { $0 == Array(Self.nfc.utf8) || $0 == Array(Self.nfd.utf8) }.count == 2)
        let verify = JournalVerifier.verify(directory: temp.journal)
        #expect(verify.exitCode == 0 && verify.duplicateKeys == 0, "\(verify.lines)")
    }

    /// Dropped apart: the second arrives after the first is committed, and again after a
    /// restart (index rebuilt from the frames, and from the checkpoint).
    @Test(arguments: [true, false])
    func spellingsDroppedApartAreBothJournaledAndVerifyIsClean(nfcFirst: Bool) throws {
        let temp = TempDir()
        let (first, second) = nfcFirst ? (Self.nfc, Self.nfd) : (Self.nfd, Self.nfc)
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: testOptions())
        #expect(seq(append(writer, first)) == 1)
        #expect(seq(append(writer, second)) == 2, "a different byte sequence is a different id")
        if case .duplicate = append(writer, first) {} else { Issue.record("the same bytes again are a duplicate") }
        try writer.close()

        let (reopened, _) = try JournalWriter.open(directory: temp.journal, options: testOptions())
        if case .duplicate = append(reopened, second) {} else { Issue.record("after reopen, the same bytes are a duplicate") }
        try reopened.close()

        let verify = JournalVerifier.verify(directory: temp.journal)
        #expect(verify.exitCode == 0 && verify.duplicateKeys == 0, "\(verify.lines)")
    }
}

/// Issue 8, defect 7 (journal part): `checkpointInterval` writes `dedup.ckpt` on a timer,
/// without waiting for `checkpointEvery` records or `close`.
@Suite struct CheckpointIntervalTests {
    func checkpoint(_ dir: String) -> DedupCheckpoint? {
        DedupCheckpoint.decode(readBytes(dir + "/" + JournalFiles.checkpoint))
    }

    func waitFor(_ what: String, timeout: Duration = .seconds(10), _ condition: () -> Bool) {
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        if !eventually(within: seconds, condition) { Issue.record("timed out waiting for \(what)") }
    }

    @Test func checkpointAppearsAndAdvancesOnTheIntervalWithoutClose() throws {
        let temp = TempDir()
        let options = testOptions {
            $0.checkpointEvery = 0
            $0.checkpointInterval = .milliseconds(50)
        }
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: options)
        for i in 1...3 { #expect(seq(append(writer, "k\(i)")) == UInt64(i)) }
        waitFor("a checkpoint through seq 3") { checkpoint(temp.journal)?.throughSeq == 3 }
        #expect(checkpoint(temp.journal)?.keys.count == 3)
        for i in 4...7 { #expect(seq(append(writer, "k\(i)")) == UInt64(i)) }
        waitFor("the checkpoint to advance to seq 7") { checkpoint(temp.journal)?.throughSeq == 7 }
        // The file is visible at its rename, the counter moves after the directory fsync.
        waitFor("the checkpoint counter") { writer.stats.checkpoints >= 2 }
        try writer.close()

        // What the timer wrote is trusted at the next start.
        let (reopened, report) = try JournalWriter.open(directory: temp.journal, options: testOptions())
        #expect(report.checkpointUsed && report.dedupKeys == 7)
        try reopened.close()
    }

    @Test func withoutAnIntervalNothingIsWrittenBeforeClose() throws {
        let temp = TempDir()
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: testOptions { $0.checkpointEvery = 0 })
        for i in 1...3 { _ = append(writer, "k\(i)") }
        usleep(200_000)  // why: the window under test: no timer exists, so no later event can prove its absence
        #expect(checkpoint(temp.journal) == nil)
        try writer.close()
        #expect(checkpoint(temp.journal)?.throughSeq == 3)
    }
}

/// Issue 8, defect 8 (part) and the FailureTests retry: `verify` on a missing directory, and
/// `verify` alongside a live writer that has just cut a segment it has not synced into yet.
@Suite struct VerifyEdgeTests {
    @Test func missingJournalDirectoryIsNoJournalNotCorruption() {
        let temp = TempDir()
        let report = JournalVerifier.verify(directory: temp.path + "/nonexistent")
        #expect(report.exitCode == 1)
        let text = report.lines.joined(separator: "\n")
        #expect(text.contains("no journal at \(temp.path)/nonexistent"), "\(text)")
        #expect(!text.contains("CORRUPTION"), "\(text)")
    }

    @Test func aFileInsteadOfADirectoryIsNoJournal() {
        let temp = TempDir()
        writeBytes(temp.path + "/file", [1, 2, 3])
        let report = JournalVerifier.verify(directory: temp.path + "/file")
        #expect(report.exitCode == 1)
        #expect(report.lines.joined().contains("no journal at"))
        #expect(!report.lines.joined().contains("CORRUPTION"))
    }

    /// What the ENOSPC integration test raced: the writer cut a new segment, and a write into
    /// it failed part-way and is about to be cut back. Nothing in that segment is acknowledged
    /// (COMMITTED names an older one), so it is a write in flight, not a torn tail.
    @Test func partialWriteInASegmentCutAfterTheLastSyncIsInFlight() throws {
        let temp = TempDir()
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: testOptions())
        for i in 1...3 { _ = append(writer, "k\(i)") }
        let first = readBytes(temp.journal + "/" + segmentNames(temp.journal)[0])
        let header = first.withUnsafeBytes { SegmentHeader.decode(UnsafeRawBufferPointer(rebasing: $0[0..<SegmentHeader.size])) }
        guard case .success(let existing) = header else { Issue.record("unreadable first segment"); return }
        let journalID = existing.journalID
        var bytes = SegmentHeader(firstSeq: 4, createdMillis: 0, journalID: journalID).encoded()
        var frame: [UInt8] = []
        RecordFrame.encode(seq: 4, ingestMillis: 0, key: Array("k4".utf8), body: [UInt8](repeating: 65, count: 200), into: &frame)
        bytes += frame.prefix(60)
        writeBytes(temp.journal + "/" + JournalFiles.segmentName(firstSeq: 4), bytes)

        let report = JournalVerifier.verify(directory: temp.journal)
        #expect(report.exitCode == 0, "\(report.lines)")
        try writer.close()
    }
}
