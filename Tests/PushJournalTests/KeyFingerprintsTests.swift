import Testing
@testable import PushJournal

@Suite struct KeyFingerprintsTests {
    @Test func membershipAcrossGrowth() {
        var set = KeyFingerprints()
        for i in 0..<50_000 { set.insert("mindbox:key-\(i)") }
        set.insert("mindbox:key-7")  // again: no second entry
        #expect(set.count == 50_000)
        for i in stride(from: 0, to: 50_000, by: 97) { #expect(set.contains("mindbox:key-\(i)")) }
        var absent = 0
        for i in 50_000..<60_000 where !set.contains("mindbox:key-\(i)") { absent += 1 }
        #expect(absent == 10_000, "no false positives among 10,000 absent keys")
    }

    @Test func roundTripThroughTheCheckpointForm() {
        var set = KeyFingerprints()
        for i in 0..<1_000 { set.insert("infobip:\(i)") }
        let copy = KeyFingerprints(fingerprints: set.fingerprints)
        #expect(copy.count == 1_000)
        #expect((0..<1_000).allSatisfy { copy.contains("infobip:\($0)") })
        #expect(!copy.contains("infobip:1000"))
    }

    @Test func aZeroFingerprintIsStillAMember() {
        var set = KeyFingerprints()
        set.insert(fingerprint: 0)
        #expect(set.contains(fingerprint: 0))
        #expect(set.count == 1)
    }

    /// At most 26 bytes a located key whatever the growth phase (16-byte slots at ≤ 1.56 slots
    /// a key), where 20-byte slots at up to 1.9 reached 37.5 and a `Set<String>` over a hundred.
    @Test func staysCompact() {
        var set = KeyFingerprints()
        for i in 0..<100_000 {
            set.insert(fingerprint: UInt64(i) &* 0x9E37_79B9_7F4A_7C15 | 1, seq: UInt64(i + 1), offset: Int64(i) * 512)
            if i % 997 == 0 && i > 20_000 { #expect(capacityOf(set) * 16 <= (i + 1) * 26, "after \(i + 1) keys") }
        }
        #expect(set.fingerprints.count == 100_000)
        #expect(capacityOf(set) * 16 <= 100_000 * 26)
    }

    /// Seqs are 32-bit offsets from a base: one below the base moves the base down, and a
    /// window wider than 32 bits keeps the newest records' locations exact and drops the oldest.
    @Test func seqsOutsideTheBaseAreRebased() {
        var set = KeyFingerprints()
        set.insert(fingerprint: 11, seq: 1_000, offset: 64)
        set.insert(fingerprint: 12, seq: 5, offset: 128)        // below the base
        set.insert(fingerprint: 13, seq: 1_000_000_000_000, offset: 4096)
        #expect(set.locations(fingerprint: 11).map(\.seq) == [], "more than 2^32 below the newest: dropped")
        #expect(set.locations(fingerprint: 12).map(\.seq) == [])
        #expect(set.locations(fingerprint: 13).map(\.seq) == [1_000_000_000_000])
        #expect(set.locations(fingerprint: 13).map(\.offset) == [4096])
        var near = KeyFingerprints()
        near.insert(fingerprint: 21, seq: 70_000, offset: 8)
        near.insert(fingerprint: 22, seq: 3, offset: 16)
        near.insert(fingerprint: 23, seq: 70_000 + UInt64(UInt32.max) - 10, offset: 24)
        #expect(near.locations(fingerprint: 21).map(\.seq) == [70_000])
        #expect(near.locations(fingerprint: 22).map(\.seq) == [], "older than the 32-bit window below the newest")
        #expect(near.locations(fingerprint: 23).map(\.seq) == [70_000 + UInt64(UInt32.max) - 10])
        #expect(near.count == 2)
    }

    /// A shard snapshot keeps the entries it was taken with while the table goes on; the
    /// table keeps every entry and its own later inserts.
    @Test func shardSnapshotsStayAsTakenWhileTheTableGrows() {
        var live = KeyFingerprints()
        for i in 0..<20_000 { live.insert(fingerprint: KeyFingerprints.fingerprint("k\(i)"), seq: UInt64(i + 1), offset: Int64(i) * 8) }
        var seen = 0
        for shard in 0..<KeyFingerprints.shardCount {
            let snapshot = live.snapshot(shard: shard)
            for n in 0..<64 { live.insert(fingerprint: UInt64(shard) << 56 | UInt64(n + 1), seq: UInt64(30_000 + shard * 64 + n), offset: 0) }
            snapshot.forEachEntry { _, seq, _ in if seq <= 20_000 { seen += 1 } else { Issue.record("a later insert in the snapshot") } }
        }
        #expect(seen == 20_000)
        #expect(live.count == 20_000 + 256 * 64)
        #expect((0..<20_000).allSatisfy { live.locations(fingerprint: KeyFingerprints.fingerprint("k\($0)")).map(\.seq) == [UInt64($0 + 1)] })
    }

    /// The writer gives freed pages back once a megabyte of slot arrays has been freed by
    /// growth; the count goes on across a prune, which frees the whole old table.
    @Test func freedBytesCountEveryGrowthAndPrune() {
        var set = KeyFingerprints()
        #expect(set.freedBytes == 0)
        for i in 0..<50_000 { set.insert(fingerprint: UInt64(i + 1) &* 0x9E37_79B9_7F4A_7C15, seq: UInt64(i + 1), offset: 0) }
        // Every shard grew from 8 slots by quarters: it freed the geometric series below what
        // it holds, about four times that.
        #expect(set.freedBytes >= KeyFingerprints.shardCount * 8 * KeyFingerprints.slotBytes)
        #expect(set.freedBytes < 5 * set.slotCapacity * KeyFingerprints.slotBytes)
        let pruned = set.keeping(fromSeq: 25_001)
        #expect(pruned.count == 25_000)
        #expect(pruned.freedBytes == set.freedBytes + set.slotCapacity * KeyFingerprints.slotBytes)
    }

    private func capacityOf(_ set: KeyFingerprints) -> Int { set.slotCapacity }
}
