@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
@testable import PushJournal
import PushSystem

/// Issue 14: the dedup index is exact (a fingerprint hit is confirmed against the stored key)
/// and bounded by `[Journal] DedupWindowSec=`.
@Suite struct RetentionDedupTests {
    /// Every key has the same fingerprint: each hit is a collision unless the keys are equal.
    static func colliding() -> JournalOptions {
        testOptions {
            $0.keyFingerprint = { _ in 0x1234_5678_9ABC_DEF0 }
            $0.segmentBytes = 2048
        }
    }

    func age(_ path: String, seconds: Int) {
        let then = timespec(tv_sec: time(nil) - seconds, tv_nsec: 0)
        var times = [then, then]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
    }

    @Test func aFingerprintCollisionNeverDropsAPayload() throws {
        let temp = TempDir()
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: Self.colliding())
        #expect(seq(append(writer, "mindbox:a")) == 1)
        // Same fingerprint, different key: confirmed against the record, so it is journaled.
        #expect(seq(append(writer, "mindbox:b")) == 2)
        #expect(seq(append(writer, "mindbox:c")) == 3)
        // The real duplicates are still refused, whichever slot they match.
        guard case .duplicate = append(writer, "mindbox:b") else { Issue.record("b was not a duplicate"); return }
        guard case .duplicate = append(writer, "mindbox:a") else { Issue.record("a was not a duplicate"); return }
        try writer.close()
        #expect(try readAll(temp.journal).map(\.key) == ["mindbox:a", "mindbox:b", "mindbox:c"])
    }

    @Test func collisionsStayExactAfterARestartFromTheCheckpointAndFromTheSegments() throws {
        let temp = TempDir()
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: Self.colliding())
        for i in 1...40 { #expect(seq(append(writer, "k\(i)", body(for: i))) == UInt64(i)) }
        try writer.close()
        for dropCheckpoint in [false, true] {
            if dropCheckpoint { unlink(temp.journal + "/" + JournalFiles.checkpoint) }
            let (reopened, report) = try JournalWriter.open(directory: temp.journal, options: Self.colliding())
            #expect(report.checkpointUsed == !dropCheckpoint)
            guard case .duplicate = append(reopened, "k17") else { Issue.record("k17 not a duplicate"); return }
            guard case .duplicate = append(reopened, "k1") else { Issue.record("k1 not a duplicate"); return }
            #expect(seq(append(reopened, "new-\(dropCheckpoint)")) != nil)
            try reopened.close()
        }
    }

    /// Inside the window a retired segment's keys still count as duplicates (confirmed from
    /// `keys/`); past it, the index drops them and a re-delivery is journaled again.
    @Test func dedupHoldsInsideTheWindowAfterRetirementAndEndsAfterIt() throws {
        let temp = TempDir()
        let options = Self.colliding()
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: options)
        for i in 1...60 { #expect(seq(append(writer, "k\(i)", body(for: i, size: 200))) == UInt64(i)) }
        let names = segmentNames(temp.journal)
        try #require(names.count >= 4)
        // Retention by size retires all sealed segments; they were written just now, well
        // inside a one-day dedup window.
        var policy = RetentionPolicy(maxBytes: 1)
        policy.dedupWindow = .seconds(86_400)
        let result = try JournalRetention.runPass(directory: temp.journal, policy: policy, retentionFloor: { nil })
        #expect(result.retired.count == names.count - 1)
        #expect(result.dedupFloorSeq == 1)
        #expect(writer.pruneDedupIndex(belowSeq: result.dedupFloorSeq) == 0)
        guard case .duplicate = append(writer, "k1") else { Issue.record("k1 inside the window was journaled again"); return }
        guard case .duplicate = append(writer, "k20") else { Issue.record("k20 inside the window was journaled again"); return }
        // And the collision check still holds for retired records: a new key is journaled.
        #expect(seq(append(writer, "fresh")) == 61)

        // Two days later the retired segments' keys are past the window.
        for name in try FileManager.default.contentsOfDirectory(atPath: temp.journal + "/keys") {
            let path = temp.journal + "/keys/" + name
            var bytes = readBytes(path)
            bytes.withUnsafeMutableBytes { $0.storeBytes(of: (Posix.wallClockMillis() - 2 * 86_400_000).littleEndian, toByteOffset: 8, as: Int64.self) }
            writeBytes(path, bytes)
        }
        let later = try JournalRetention.runPass(directory: temp.journal, policy: policy, retentionFloor: { nil })
        #expect(later.dedupFloorSeq == JournalFiles.firstSeq(ofSegment: names.last!))
        #expect(try FileManager.default.contentsOfDirectory(atPath: temp.journal + "/keys").isEmpty)
        #expect(writer.pruneDedupIndex(belowSeq: later.dedupFloorSeq) > 0)
        // What docs/operations.md promises: a re-delivery after the window is a new record.
        #expect(seq(append(writer, "k1")) == 62)
        try writer.close()
    }

    /// After a restart too: the reopened writer knows only the live segments, and a retired
    /// record's key is confirmed from `keys/` (it was journaled again before).
    @Test func dedupHoldsInsideTheWindowAfterARestart() throws {
        let temp = TempDir()
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: testOptions { $0.segmentBytes = 2048 })
        for i in 1...60 { #expect(seq(append(writer, "k\(i)", body(for: i, size: 200))) == UInt64(i)) }
        var policy = RetentionPolicy(maxBytes: 1)
        policy.dedupWindow = .seconds(86_400)
        let result = try JournalRetention.runPass(directory: temp.journal, policy: policy, retentionFloor: { nil })
        try #require(result.retired.count >= 3)
        try writer.close()
        let (reopened, report) = try JournalWriter.open(directory: temp.journal, options: testOptions { $0.segmentBytes = 2048 })
        #expect(report.checkpointUsed)
        guard case .duplicate = append(reopened, "k1") else { Issue.record("k1 inside the window was journaled again"); return }
        guard case .duplicate = append(reopened, "k20") else { Issue.record("k20 inside the window was journaled again"); return }
        #expect(seq(append(reopened, "fresh")) == 61)
        try reopened.close()
    }

    @Test func theIndexKeepsLocationsThroughGrowthAndPruning() {
        var index = KeyFingerprints()
        for i in 1...5_000 { index.insert(fingerprint: UInt64(i % 100) + 1, seq: UInt64(i), offset: Int64(i) * 64) }
        #expect(index.count == 5_000)
        let hits = index.locations(fingerprint: 8).map(\.seq).sorted()
        #expect(hits == Array(stride(from: 7, through: 5_000, by: 100)).map(UInt64.init))
        #expect(index.locations(fingerprint: 8).allSatisfy { $0.offset == Int64($0.seq) * 64 })
        let pruned = index.keeping(fromSeq: 4_001)
        #expect(pruned.count == 1_000)
        #expect(pruned.locations(fingerprint: 8).map(\.seq).sorted() == Array(stride(from: 4_007, through: 5_000, by: 100)).map(UInt64.init))
    }

    /// `journal verify`: an id journaled again after the dedup window is a note; inside the
    /// window the same repeat is still reported as damage.
    @Test func verifyTellsARedeliveryAfterTheWindowFromADuplicate() throws {
        let temp = TempDir()
        let day: Int64 = 86_400_000
        let t0: Int64 = 1_700_000_000_000
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: testOptions())
        #expect(seq(append(writer, "late", ingest: t0)) == 1)
        #expect(seq(append(writer, "soon", ingest: t0)) == 2)
        var policy = RetentionPolicy()
        policy.dedupWindow = .seconds(86_400)
        _ = try JournalRetention.runPass(directory: temp.journal, policy: policy, retentionFloor: { nil })
        // As if the window had passed for both (the daemon prunes by segment age).
        writer.pruneDedupIndex(belowSeq: 3)
        #expect(seq(append(writer, "late", ingest: t0 + 2 * day)) == 3)
        try writer.close()
        let clean = JournalVerifier.verify(directory: temp.journal)
        #expect(clean.exitCode == 0, "\(clean.lines)")
        #expect(clean.notes.contains { $0.contains("after the dedup window") })

        let (again, _) = try JournalWriter.open(directory: temp.journal, options: testOptions())
        again.pruneDedupIndex(belowSeq: 4)
        #expect(seq(append(again, "soon", ingest: t0 + day / 24)) == 4)
        try again.close()
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 1)
    }
}
