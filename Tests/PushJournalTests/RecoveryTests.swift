@preconcurrency import Glibc
import Foundation
import Testing
@testable import PushJournal
import PushSystem
import TestSupport

@Suite struct RecoveryTests {
    /// The issue's acceptance test: cut the last segment at every byte offset inside its last
    /// record; recovery must cut back to the previous record, say so, keep everything earlier,
    /// accept appends, and be idempotent. As in a real crash, the cut record was never
    /// acknowledged: `COMMITTED` names the one before it (below the watermark a cut record is
    /// lost data, see `AcknowledgedLossTests`).
    @Test func tornTailAtEveryByteOffsetOfTheLastRecord() throws {
        let temp = TempDir()
        let pristine = temp.path + "/pristine"
        try makeJournal(pristine, count: 5, bodySize: 90)
        let segment = try #require(segmentNames(pristine).first)
        let original = readBytes(pristine + "/" + segment)
        let lastStart = try #require(frameOffsets(pristine + "/" + segment).last)
        #expect(original.count - lastStart == 136)

        for cut in lastStart..<original.count {
            let dir = temp.path + "/cut-\(cut)"
            try FileManager.default.copyItem(atPath: pristine, toPath: dir)
            writeBytes(dir + "/" + segment, Array(original[0..<cut]))
            writeBytes(dir + "/COMMITTED", CommittedMark(seq: 4, segmentFirstSeq: 1, endOffset: Int64(lastStart)).encoded())

            let (writer, report) = try JournalWriter.open(directory: dir, options: testOptions())
            #expect(report.lastSeq == 4, "cut \(cut)")
            #expect(report.tornBytesTruncated == Int64(cut - lastStart), "cut \(cut)")
            #expect(report.tornSegment == (cut > lastStart ? segment : nil))
            #expect(!report.checkpointUsed, "the checkpoint points past the cut and must be ignored")
            #expect(readBytes(dir + "/" + segment) == Array(original[0..<lastStart]))
            #expect(writer.contains(key: "k4") && !writer.contains(key: "k5"))
            try writer.close()
            let afterFirst = readBytes(dir + "/" + segment)

            // Idempotent: recovering the recovered journal changes nothing.
            let (again, second) = try JournalWriter.open(directory: dir, options: testOptions())
            #expect(second.tornBytesTruncated == 0 && second.lastSeq == 4)
            #expect(readBytes(dir + "/" + segment) == afterFirst)

            #expect(seq(append(again, "k5", body(for: 5, size: 90))) == 5)
            try again.close()
            #expect(readBytes(dir + "/" + segment) == original, "re-appending k5 restores the original bytes (cut \(cut))")
            let records = try readAll(dir)
            #expect(records.map(\.key) == ["k1", "k2", "k3", "k4", "k5"])
            #expect(JournalVerifier.verify(directory: dir).exitCode == 0)
            try FileManager.default.removeItem(atPath: dir)
        }
    }

    @Test(arguments: ["zeros", "garbage", "header-only"])
    func junkTailsAreCutAsTorn(kind: String) throws {
        let temp = TempDir()
        try makeJournal(temp.journal, count: 3)
        let segment = temp.journal + "/" + segmentNames(temp.journal)[0]
        let clean = readBytes(segment)
        var junk: [UInt8]
        switch kind {
        case "zeros": junk = [UInt8](repeating: 0, count: 4096)
        case "garbage":
            var rng = SystemRandomNumberGenerator()
            junk = (0..<5000).map { _ in UInt8.random(in: 0...255, using: &rng) }
        default:
            // A valid header whose body never made it: the writer died mid-write.
            var frame: [UInt8] = []
            RecordFrame.encode(seq: 4, ingestMillis: 1, key: Array("k4".utf8), body: [UInt8](repeating: 65, count: 500), into: &frame)
            junk = Array(frame[0..<100])
        }
        writeBytes(segment, clean + junk)
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 2)

        let (writer, report) = try JournalWriter.open(directory: temp.journal, options: testOptions())
        #expect(report.tornBytesTruncated == Int64(junk.count))
        #expect(report.description.contains("torn tail of \(junk.count) bytes cut from"))
        #expect(readBytes(segment) == clean)
        #expect(seq(append(writer, "k4")) == 4)
        try writer.close()
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 0)
        let kept = try FileManager.default.contentsOfDirectory(atPath: temp.journal + "/quarantine")
        #expect(kept.count == 1, "the cut bytes are kept for forensics")
    }

    /// A flipped byte in the middle is damage, not a torn tail: open refuses naming segment and
    /// offset, verify says where, and the quarantine policy moves the segment aside.
    @Test func flippedByteInTheMiddleIsRefusedReportedAndQuarantinable() throws {
        let temp = TempDir()
        try makeJournal(temp.journal, count: 10)
        let name = segmentNames(temp.journal)[0]
        let path = temp.journal + "/" + name
        let offsets = frameOffsets(path)
        var bytes = readBytes(path)
        bytes[offsets[2] + 40 + 10] ^= 0x20  // inside record 3's body
        writeBytes(path, bytes)

        do {
            _ = try JournalWriter.open(directory: temp.journal, options: testOptions())
            Issue.record("open must refuse a corrupt journal")
        } catch {
            let at = try #require(error.corruptAt)
            #expect(at.segment == name)
            #expect(at.offset == Int64(offsets[2]))
            #expect(error.description.contains("\(name):\(offsets[2])"))
        }
        // The refusal changed nothing and released the lock.
        #expect(readBytes(path) == bytes)

        let report = JournalVerifier.verify(directory: temp.journal)
        #expect(report.exitCode == 1)
        #expect(report.segments.first?.status == .fail)
        #expect(report.lines.joined(separator: "\n").contains("corruption detected at \(path):\(offsets[2])"))

        let options = testOptions { $0.corruptionPolicy = .quarantineSegment }
        let (writer, recovered) = try JournalWriter.open(directory: temp.journal, options: options)
        #expect(recovered.quarantined == [name])
        #expect(!FileManager.default.fileExists(atPath: path))
        let quarantined = try FileManager.default.contentsOfDirectory(atPath: temp.journal + "/quarantine")
        #expect(quarantined.contains { $0.hasPrefix(name) })
        #expect(!writer.contains(key: "k1"), "keys of the quarantined segment are not in the index")
        // Seqs of the quarantined records are not handed out again.
        #expect(seq(append(writer, "k11")) == 11)
        try writer.close()
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 0)
    }

    @Test func damagedSegmentHeaderIsRefused() throws {
        let temp = TempDir()
        try makeJournal(temp.journal, count: 2)
        let name = segmentNames(temp.journal)[0]
        var bytes = readBytes(temp.journal + "/" + name)
        bytes[20] ^= 1
        writeBytes(temp.journal + "/" + name, bytes)
        #expect(throws: JournalError.self) { try JournalWriter.open(directory: temp.journal, options: testOptions()) }
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 1)
    }

    @Test func segmentsRollWithSeqContinuityAcrossReopen() throws {
        let temp = TempDir()
        let options = testOptions { $0.segmentBytes = 4096 }
        try makeJournal(temp.journal, count: 100, options: options, bodySize: 200)
        var names = segmentNames(temp.journal)
        #expect(names.count >= 5)
        #expect(names.first == JournalFiles.segmentName(firstSeq: 1))

        let (writer, report) = try JournalWriter.open(directory: temp.journal, options: options)
        #expect(report.lastSeq == 100 && report.segments == names.count)
        for i in 101...150 { #expect(seq(append(writer, "k\(i)", body(for: i, size: 200))) == UInt64(i)) }
        #expect(writer.stats.segments > names.count)
        try writer.close()
        names = segmentNames(temp.journal)

        let records = try readAll(temp.journal)
        #expect(records.map(\.seq) == Array(1...150))
        #expect(records.map(\.key) == (1...150).map { "k\($0)" })
        #expect(Set(records.map(\.segment)) == Set(names))
        for name in names {
            // Every segment is named after its first record.
            #expect(records.first { $0.segment == name }.map { JournalFiles.segmentName(firstSeq: $0.seq) } == name)
        }
        let verify = JournalVerifier.verify(directory: temp.journal)
        #expect(verify.exitCode == 0 && verify.records == 150 && verify.seqGaps == 0)
        let stats = try journalStats(directory: temp.journal)
        #expect(stats.records == 150 && stats.firstSeq == 1 && stats.lastSeq == 150 && stats.segments == names.count)
    }

    @Test func missingMiddleSegmentIsRefusedUnlessQuarantined() throws {
        let temp = TempDir()
        try makeJournal(temp.journal, count: 30, options: testOptions { $0.segmentBytes = 1024 })
        let names = segmentNames(temp.journal)
        #expect(names.count >= 3)
        let middle = names[1]
        try FileManager.default.moveItem(atPath: temp.journal + "/" + middle, toPath: temp.path + "/" + middle)
        try FileManager.default.removeItem(atPath: temp.journal + "/dedup.ckpt")

        let verify = JournalVerifier.verify(directory: temp.journal)
        #expect(verify.exitCode == 1 && verify.seqGaps == 1)
        do {
            _ = try JournalWriter.open(directory: temp.journal, options: testOptions())
            Issue.record("a missing segment must stop start-up")
        } catch {
            #expect(error.corruptAt?.segment == names[2])
        }
        let (writer, report) = try JournalWriter.open(directory: temp.journal, options: testOptions { $0.corruptionPolicy = .quarantineSegment })
        #expect(report.missingSeqRanges.count == 1)
        #expect(report.description.contains("CRITICAL: records missing"))
        try writer.close()

        // Once the segment sits in quarantine/, the gap is explained.
        try FileManager.default.createDirectory(atPath: temp.journal + "/quarantine", withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: temp.path + "/" + middle, toPath: temp.journal + "/quarantine/" + middle + ".1")
        let explained = JournalVerifier.verify(directory: temp.journal)
        #expect(explained.exitCode == 0 && explained.seqGaps == 0 && !explained.notes.isEmpty)
        let (again, clean) = try JournalWriter.open(directory: temp.journal, options: testOptions())
        #expect(clean.missingSeqRanges.isEmpty)
        try again.close()
    }

    @Test func lostAcknowledgedRecordsAreRefusedOrReportedUnderQuarantine() throws {
        let temp = TempDir()
        try makeJournal(temp.journal, count: 4)
        let name = segmentNames(temp.journal)[0]
        let offsets = frameOffsets(temp.journal + "/" + name)
        // As if the device dropped a flushed write: the file is shorter than COMMITTED says.
        let bytes = readBytes(temp.journal + "/" + name)
        writeBytes(temp.journal + "/" + name, Array(bytes[0..<offsets[3]]))
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 1)
        do {
            _ = try JournalWriter.open(directory: temp.journal, options: testOptions())
            Issue.record("a lost acknowledged record must stop start-up")
        } catch {
            #expect(error.corruptAt?.segment == name && error.corruptAt?.offset == Int64(offsets[3]))
            #expect(error.description.contains("acknowledged records seq 4...4 are missing"))
        }
        let (writer, report) = try JournalWriter.open(directory: temp.journal, options: testOptions { $0.corruptionPolicy = .quarantineSegment })
        #expect(report.lostAcknowledgedRecords == 1 && report.lostSeqRange == 4...4)
        #expect(report.description.contains("CRITICAL: 1 acknowledged records are missing (seq 4...4)"))
        #expect(seq(append(writer, "k5")) == 5, "seq 4 is not handed out again")
        try writer.close()
    }
}
