@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
@testable import PushJournal
import PushSystem

/// Issue 14, part 2: `[Journal] RetainSec=` / `RetainBytes=` / `Archive=`. Real journals on
/// disk; a crash is the state a failed syscall leaves mid-pass (nothing after it ran).
@Suite struct RetentionTests {
    static let count = 120

    /// A journal of `count` records over many 2 KiB segments.
    func journal(_ temp: TempDir) throws -> [String] {
        try makeJournal(temp.journal, count: Self.count, options: testOptions { $0.segmentBytes = 2048 })
        let names = segmentNames(temp.journal)
        try #require(names.count >= 6)
        return names
    }

    /// Sets a file's mtime `seconds` into the past.
    func age(_ path: String, seconds: Int) {
        let then = timespec(tv_sec: time(nil) - seconds, tv_nsec: 0)
        var times = [then, then]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
    }

    func firstSeq(_ name: String) -> UInt64 { JournalFiles.firstSeq(ofSegment: name)! }

    func reopenAndAppend(_ temp: TempDir) throws -> (RecoveryReport, UInt64?) {
        let (writer, report) = try JournalWriter.open(directory: temp.journal, options: testOptions { $0.segmentBytes = 2048 })
        let next = seq(append(writer, "after-retention"))
        try writer.close()
        return (report, next)
    }

    @Test func segmentsPastTheAgeLimitGoTheNewestAndYoungOnesStay() throws {
        let temp = TempDir()
        let names = try journal(temp)
        // The older half is two hours old, the rest fresh.
        let old = names.count / 2
        for name in names.prefix(old) { age(temp.journal + "/" + name, seconds: 7200) }
        let result = try JournalRetention.runPass(directory: temp.journal, policy: RetentionPolicy(maxAge: .seconds(3600)),
                                                  retentionFloor: { nil })
        #expect(result.retired == Array(names.prefix(old)))
        #expect(segmentNames(temp.journal) == Array(names.dropFirst(old)))
        #expect(result.firstRetainedSeq == firstSeq(names[old]))
        #expect(readRetainedFloor(temp.journal) == firstSeq(names[old]))
        // Verify calls the missing prefix retired, not lost; recovery opens and continues.
        let verify = JournalVerifier.verify(directory: temp.journal)
        #expect(verify.exitCode == 0, "\(verify.lines)")
        #expect(verify.firstSeq == firstSeq(names[old]))
        let (report, next) = try reopenAndAppend(temp)
        #expect(report.missingSeqRanges.isEmpty)
        // The checkpoint still lists the retired segments; it must be trusted all the same.
        #expect(report.checkpointUsed)
        #expect(next == UInt64(Self.count + 1))
        #expect(try readAll(temp.journal).first?.seq == firstSeq(names[old]))
    }

    @Test func theNewestSegmentStaysHoweverOld() throws {
        let temp = TempDir()
        let names = try journal(temp)
        for name in names { age(temp.journal + "/" + name, seconds: 7200) }
        let result = try JournalRetention.runPass(directory: temp.journal, policy: RetentionPolicy(maxAge: .seconds(60)),
                                                  retentionFloor: { nil })
        #expect(segmentNames(temp.journal) == [names.last!])
        #expect(result.retired.count == names.count - 1)
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 0)
    }

    @Test func theSizeLimitRetiresTheOldestUntilTheJournalFits() throws {
        let temp = TempDir()
        let names = try journal(temp)
        let sizes = names.map { Int64(readBytes(temp.journal + "/" + $0).count) }
        let limit = sizes.suffix(3).reduce(0, +)
        let result = try JournalRetention.runPass(directory: temp.journal, policy: RetentionPolicy(maxBytes: limit),
                                                  retentionFloor: { nil })
        #expect(segmentNames(temp.journal) == Array(names.suffix(3)))
        #expect(result.bytesFreed == sizes.dropLast(3).reduce(0, +))
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 0)
    }

    @Test func segmentsWithUnexportedRecordsStay() throws {
        let temp = TempDir()
        let names = try journal(temp)
        for name in names { age(temp.journal + "/" + name, seconds: 7200) }
        // The exporter has had seqs up to the middle of segment 3 acknowledged.
        let exported = firstSeq(names[3]) + 1
        let result = try JournalRetention.runPass(directory: temp.journal, policy: RetentionPolicy(maxAge: .seconds(60)),
                                                  retentionFloor: { exported })
        #expect(result.retired == Array(names.prefix(3)))
        #expect(result.heldForExport == names.count - 1 - 3)
        #expect(segmentNames(temp.journal).first == names[3])
        // Every record above the export floor is still readable.
        let seqs = try readAll(temp.journal).map(\.seq)
        #expect(seqs == Array(firstSeq(names[3])...UInt64(Self.count)))
    }

    @Test func archivedSegmentsReadBackIdentically() throws {
        let temp = TempDir()
        let names = try journal(temp)
        let before = try readAll(temp.journal)
        let originals = names.map { readBytes(temp.journal + "/" + $0) }
        var policy = RetentionPolicy(maxBytes: 1)
        policy.archive = true
        let result = try JournalRetention.runPass(directory: temp.journal, policy: policy, retentionFloor: { nil })
        #expect(result.archived == Array(names.dropLast()))
        #expect(JournalArchive.list(directory: temp.journal).map(\.name) == names.dropLast().map { $0 + ".zst" })
        for (index, name) in names.dropLast().enumerated() {
            let restored = try JournalArchive.segmentBytes(directory: temp.journal, archiveName: name + ".zst")
            #expect(restored == originals[index], "\(name) differs after zstd round trip")
        }
        let archived = try JournalArchive.list(directory: temp.journal).flatMap {
            try JournalArchive.records(directory: temp.journal, archiveName: $0.name)
        }
        let live = try readAll(temp.journal)
        #expect(archived + live == before)
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 0)
    }

    @Test func aCorruptArchiveIsReportedNotReadAsRecords() throws {
        let temp = TempDir()
        let names = try journal(temp)
        var policy = RetentionPolicy(maxBytes: 1)
        policy.archive = true
        _ = try JournalRetention.runPass(directory: temp.journal, policy: policy, retentionFloor: { nil })
        let path = temp.journal + "/archive/" + names[0] + ".zst"
        var bytes = readBytes(path)
        bytes[bytes.count / 2] ^= 0xFF
        writeBytes(path, bytes)
        #expect(throws: JournalError.self) { try JournalArchive.records(directory: temp.journal, archiveName: names[0] + ".zst") }
    }

    /// A kill after `RETAINED` was raised and before the segment was unlinked: recovery
    /// finishes the removal and `verify` accepts the journal meanwhile.
    @Test func crashBetweenTheMarkAndTheUnlinkRecovers() throws {
        let temp = TempDir()
        let names = try journal(temp)
        var policy = RetentionPolicy(maxBytes: 1)
        policy.faultScope = "retention-\(UUID().uuidString)"
        #expect(throws: JournalError.self) {
            try FaultInjector.shared.withFault(call: policy.faultScope + ".unlinkat", errno: EIO) { () throws(JournalError) in
                _ = try JournalRetention.runPass(directory: temp.journal, policy: policy, retentionFloor: { nil })
            }
        }
        #expect(segmentNames(temp.journal) == names)
        #expect(readRetainedFloor(temp.journal) == firstSeq(names[1]))
        let verify = JournalVerifier.verify(directory: temp.journal)
        #expect(verify.exitCode == 0, "\(verify.lines)")
        let (report, next) = try reopenAndAppend(temp)
        #expect(report.missingSeqRanges.isEmpty)
        #expect(next == UInt64(Self.count + 1))
        #expect(segmentNames(temp.journal).first == names[1])
    }

    /// Every point an archiving pass can stop at: each mutating call of the pass is made to fail
    /// in turn (nothing after it runs, as in a crash). After each, the journal verifies, every
    /// archive present reads back, and the whole history (archives, then live segments) holds
    /// every record exactly once and in order; the next pass completes and changes none of that.
    @Test func everyStopOfAnArchivingPassKeepsEachRecordOnce() throws {
        var stops = 0
        for call in ["openat", "write", "fsync", "renameat", "unlinkat", "pwrite", "ftruncate", "mkdir"] {
            for skip in 0..<64 {
                let temp = TempDir()
                _ = try journal(temp)
                let before = try readAll(temp.journal)
                var policy = RetentionPolicy(maxBytes: 1)
                policy.archive = true
                policy.faultScope = "retention-\(UUID().uuidString)"
                let arming = FaultInjector.shared.arm(call: policy.faultScope + "." + call, errno: EIO, skip: skip, times: 1)
                let stopped: Bool
                do {
                    _ = try JournalRetention.runPass(directory: temp.journal, policy: policy, retentionFloor: { nil })
                    stopped = false
                } catch {
                    stopped = true
                }
                FaultInjector.shared.disarm(arming)
                let context = "\(call) #\(skip + 1)"
                #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 0, "\(context)")
                for archived in JournalArchive.list(directory: temp.journal) {
                    #expect(throws: Never.self, "\(context): \(archived.name)") {
                        _ = try JournalArchive.records(directory: temp.journal, archiveName: archived.name)
                    }
                }
                var history: [JournalRecord] = []
                try JournalArchive.forEachRecord(directory: temp.journal) { record, _ in
                    history.append(record)
                    return true
                }
                #expect(history.map(\.seq) == before.map(\.seq), "\(context)")
                #expect(history.map(\.body) == before.map(\.body), "\(context)")
                _ = try JournalRetention.runPass(directory: temp.journal, policy: policy, retentionFloor: { nil })
                var again: [JournalRecord] = []
                try JournalArchive.forEachRecord(directory: temp.journal) { record, _ in
                    again.append(record)
                    return true
                }
                #expect(again.map(\.seq) == before.map(\.seq), "\(context), after the next pass")
                let leftovers = try FileManager.default.contentsOfDirectory(atPath: temp.journal + "/archive").filter { $0.hasSuffix(".tmp") }
                #expect(leftovers.isEmpty, "\(context)")
                guard stopped else { break }
                stops += 1
            }
        }
        // Several segments, each written, synced, renamed and unlinked: dozens of stops.
        #expect(stops >= 30)
    }

    /// A kill mid-archive (the compressed copy written, not yet renamed): the segment is still
    /// there and the journal whole; the next pass removes the leftover and archives again.
    @Test func crashMidArchiveRecoversAndTheNextPassRedoesIt() throws {
        let temp = TempDir()
        let names = try journal(temp)
        let original = readBytes(temp.journal + "/" + names[0])
        var policy = RetentionPolicy(maxBytes: 1)
        policy.archive = true
        policy.faultScope = "retention-\(UUID().uuidString)"
        #expect(throws: JournalError.self) {
            try FaultInjector.shared.withFault(call: policy.faultScope + ".renameat", errno: EIO) { () throws(JournalError) in
                _ = try JournalRetention.runPass(directory: temp.journal, policy: policy, retentionFloor: { nil })
            }
        }
        #expect(segmentNames(temp.journal) == names)
        #expect(readRetainedFloor(temp.journal) == 1)
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 0)
        let (report, next) = try reopenAndAppend(temp)
        #expect(report.missingSeqRanges.isEmpty)
        #expect(next == UInt64(Self.count + 1))
        let result = try JournalRetention.runPass(directory: temp.journal, policy: policy, retentionFloor: { nil })
        #expect(result.archived.first == names[0])
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: temp.journal + "/archive").filter { $0.hasSuffix(".tmp") }
        #expect(leftovers.isEmpty)
        #expect(try JournalArchive.segmentBytes(directory: temp.journal, archiveName: names[0] + ".zst") == original)
    }

    /// Retention explains only the prefix it retired: a segment missing above `RETAINED` is
    /// still acknowledged loss, and recovery refuses as before.
    @Test func aSegmentMissingAboveTheRetainedFloorIsStillLoss() throws {
        let temp = TempDir()
        let names = try journal(temp)
        _ = try JournalRetention.runPass(directory: temp.journal, policy: RetentionPolicy(maxBytes: 1 + Int64(readBytes(temp.journal + "/" + names.last!).count) * 4),
                                         retentionFloor: { nil })
        let left = segmentNames(temp.journal)
        try #require(left.count >= 3)
        unlink(temp.journal + "/" + left[1])
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 1)
        #expect(throws: JournalError.self) { _ = try JournalWriter.open(directory: temp.journal, options: testOptions()) }
    }
}
