@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
@testable import PushJournal
import PushSystem

/// Issue 8, defect 3: a record at or below the `COMMITTED` watermark was acknowledged to a
/// producer. Losing one is corruption, never a torn tail: recovery refuses to open under the
/// default policy, and under the quarantine policy accepts the loss on the record (report and
/// a marker in `quarantine/`) without ever handing its seq out again.
@Suite struct AcknowledgedLossTests {
    enum Damage: String, CaseIterable, CustomTestStringConvertible {
        /// The last segment loses its last 10 bytes (inside the last record).
        case truncateLastSegment
        /// One byte of the last record's body flips.
        case flipByteInLastRecord
        /// The newest segment is gone.
        case deleteLastSegment
        /// A segment in the middle is gone; the checkpoint, which trusts the segments before
        /// its resume point without reading them, stays in place.
        case deleteMiddleSegment
        /// The oldest segment is gone.
        case deleteFirstSegment

        var testDescription: String { rawValue }
    }

    static let count = 50

    /// Builds a journal of `count` records over several segments, applies `damage`, and
    /// returns the seqs that are gone.
    func damagedJournal(_ temp: TempDir, _ damage: Damage) throws -> ClosedRange<UInt64> {
        try makeJournal(temp.journal, count: Self.count, options: testOptions { $0.segmentBytes = 1024 })
        let names = segmentNames(temp.journal)
        try #require(names.count >= 4)
        func path(_ name: String) -> String { temp.journal + "/" + name }
        func firstSeq(_ index: Int) -> UInt64 { JournalFiles.firstSeq(ofSegment: names[index])! }
        switch damage {
        case .truncateLastSegment:
            let bytes = readBytes(path(names.last!))
            writeBytes(path(names.last!), Array(bytes.dropLast(10)))
            return UInt64(Self.count)...UInt64(Self.count)
        case .flipByteInLastRecord:
            var bytes = readBytes(path(names.last!))
            let last = try #require(frameOffsets(path(names.last!)).last)
            bytes[last + RecordHeader.size + 3] ^= 0x01
            writeBytes(path(names.last!), bytes)
            return UInt64(Self.count)...UInt64(Self.count)
        case .deleteLastSegment:
            try FileManager.default.removeItem(atPath: path(names.last!))
            return firstSeq(names.count - 1)...UInt64(Self.count)
        case .deleteMiddleSegment:
            try FileManager.default.removeItem(atPath: path(names[1]))
            return firstSeq(1)...(firstSeq(2) - 1)
        case .deleteFirstSegment:
            try FileManager.default.removeItem(atPath: path(names[0]))
            return 1...(firstSeq(1) - 1)
        }
    }

    /// Size and CRC of every file of the journal directory, to prove a refusal changed nothing.
    func snapshot(_ dir: String) -> [String: String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []
        return Dictionary(uniqueKeysWithValues: names.filter { $0 != "LOCK" }.map { name in
            let bytes = readBytes(dir + "/" + name)
            return (name, "\(bytes.count) bytes, crc \(CRC32C.checksum(bytes))")
        })
    }

    @Test(arguments: Damage.allCases)
    func lostAcknowledgedRecordsRefuseToOpen(damage: Damage) throws {
        let temp = TempDir()
        _ = try damagedJournal(temp, damage)
        let before = snapshot(temp.journal)
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 1, "verify sees the loss")

        do {
            let (writer, report) = try JournalWriter.open(directory: temp.journal, options: testOptions())
            try writer.close()
            Issue.record("open must refuse a journal that lost acknowledged records; it recovered: \(report)")
        } catch {
            #expect(error.corruptAt != nil, "a .corrupt error, which the daemon turns into a refusal: \(error)")
        }
        #expect(snapshot(temp.journal) == before, "a refusal changes nothing on disk")
        // Still visible to verify: the refusal did not paper over it.
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 1)
    }

    @Test(arguments: Damage.allCases)
    func quarantinePolicyNeverReusesALostSeq(damage: Damage) throws {
        let temp = TempDir()
        let lost = try damagedJournal(temp, damage)
        let quarantine = testOptions { $0.corruptionPolicy = .quarantineSegment }
        let (writer, report) = try JournalWriter.open(directory: temp.journal, options: quarantine)
        #expect(report.description.contains("CRITICAL"), "the report says so: \(report)")
        let next = try #require(seq(append(writer, "after-loss")))
        #expect(next == UInt64(Self.count) + 1, "no lost seq (\(lost)) is handed out again")
        try writer.close()

        let records = try readAll(temp.journal)
        #expect(records.allSatisfy { !lost.contains($0.seq) || $0.key != "after-loss" })
        #expect(Set(records.map(\.seq)).count == records.count)
        #expect(records.last?.seq == next && records.last?.key == "after-loss")
        let marked = try FileManager.default.contentsOfDirectory(atPath: temp.journal + "/quarantine")
        #expect(!marked.isEmpty, "quarantine/ records what was lost or moved")

        // The loss is on the record: verify explains the gap, and a default start opens and goes on.
        let verify = JournalVerifier.verify(directory: temp.journal)
        #expect(verify.exitCode == 0, "\(verify.lines)")
        let (again, second) = try JournalWriter.open(directory: temp.journal, options: testOptions())
        #expect(second.lostAcknowledgedRecords == 0 && second.quarantined.isEmpty)
        #expect(seq(append(again, "later")) == next + 1)
        try again.close()
    }

    /// Accepting the loss and stopping before any new record: the empty segment above the
    /// watermark is what keeps the lost seqs from coming back, and verify accepts it.
    @Test(arguments: [Damage.truncateLastSegment, .deleteLastSegment])
    func quarantinePolicyThenCloseAtOnceStaysConsistent(damage: Damage) throws {
        let temp = TempDir()
        _ = try damagedJournal(temp, damage)
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: testOptions { $0.corruptionPolicy = .quarantineSegment })
        try writer.close()
        let verify = JournalVerifier.verify(directory: temp.journal)
        #expect(verify.exitCode == 0, "\(verify.lines)")
        let (again, report) = try JournalWriter.open(directory: temp.journal, options: testOptions())
        #expect(report.lostAcknowledgedRecords == 0)
        #expect(seq(append(again, "later")) == UInt64(Self.count) + 1)
        try again.close()
    }

    /// The normal crash: a batch written but never synced, so above the watermark. Cut quietly.
    @Test func tornTailAboveTheWatermarkStillRecovers() throws {
        let temp = TempDir()
        try makeJournal(temp.journal, count: 5)
        let name = segmentNames(temp.journal)[0]
        let path = temp.journal + "/" + name
        var frame: [UInt8] = []
        RecordFrame.encode(seq: 6, ingestMillis: 1, key: Array("k6".utf8), body: [UInt8](repeating: 65, count: 300), into: &frame)
        let clean = readBytes(path)
        writeBytes(path, clean + frame.dropLast(50))

        let (writer, report) = try JournalWriter.open(directory: temp.journal, options: testOptions())
        #expect(report.tornBytesTruncated == Int64(frame.count - 50))
        #expect(report.lostAcknowledgedRecords == 0 && !report.description.contains("CRITICAL"))
        #expect(readBytes(path) == clean)
        #expect(seq(append(writer, "k6")) == 6)
        try writer.close()
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 0)
    }
}
