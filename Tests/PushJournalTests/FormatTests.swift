import Testing
@testable import PushJournal
import PushSystem

@Suite struct FormatTests {
    @Test func crc32cMatchesTheCheckValue() {
        #expect(CRC32C.checksum(Array("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum([]) == 0)
        // Chaining pieces gives the same as one buffer.
        let chained = CRC32C.finalize(CRC32C.update(CRC32C.update(CRC32C.initial, Array("1234".utf8)), Array("56789".utf8)))
        #expect(chained == 0xE306_9283)
        for value: UInt32 in [0, 1, 0xE306_9283, 0xFFFF_FFFF] { #expect(CRC32C.unmask(CRC32C.mask(value)) == value) }
        #expect(CRC32C.mask(0xE306_9283) != 0xE306_9283)
    }

    static let shapes: [(key: Int, body: Int)] = [(1, 0), (17, 333), (255, 4096)]

    static func frame(key: Int, body: Int, seq: UInt64 = 42) -> [UInt8] {
        var out: [UInt8] = []
        let keyBytes = (0..<key).map { UInt8(97 + $0 % 26) }
        let bodyBytes = (0..<body).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        RecordFrame.encode(seq: seq, ingestMillis: 1_700_000_000_123, key: keyBytes, body: bodyBytes, into: &out)
        return out
    }

    /// Decodes a frame the way readers do; `nil` = rejected.
    static func decode(_ bytes: [UInt8]) -> (RecordHeader, String, [UInt8])? {
        bytes.withUnsafeBytes { raw -> (RecordHeader, String, [UInt8])? in
            guard case .success(let header) = RecordHeader.decode(raw), header.frameLength == raw.count,
                  case .success(let parts) = RecordFrame.checkBody(header, UnsafeRawBufferPointer(rebasing: raw[40...]))
            else { return nil }
            return (header, parts.key, parts.json)
        }
    }

    @Test(arguments: shapes)
    func frameRoundTrips(shape: (key: Int, body: Int)) throws {
        let bytes = Self.frame(key: shape.key, body: shape.body)
        #expect(bytes.count % 8 == 0)
        #expect(bytes.count == RecordFrame.padded(40 + shape.key + shape.body))
        let (header, key, json) = try #require(Self.decode(bytes))
        #expect(header.seq == 42)
        #expect(header.ingestMillis == 1_700_000_000_123)
        #expect(key.utf8.count == shape.key)
        #expect(json == (0..<shape.body).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
    }

    @Test(arguments: shapes)
    func everyHeaderBitFlipIsDetected(shape: (key: Int, body: Int)) {
        let pristine = Self.frame(key: shape.key, body: shape.body)
        var undetected: [Int] = []
        for bit in 0..<(40 * 8) {
            var bytes = pristine
            bytes[bit / 8] ^= UInt8(1 << (bit % 8))
            if Self.decode(bytes) != nil { undetected.append(bit) }
        }
        #expect(undetected.isEmpty)
    }

    @Test func everyBodyBitFlipIsDetected() {
        let pristine = Self.frame(key: 20, body: 4096)
        var undetected = 0
        for bit in (40 * 8)..<((40 + 20 + 4096) * 8) {
            var bytes = pristine
            bytes[bit / 8] ^= UInt8(1 << (bit % 8))
            if Self.decode(bytes) != nil { undetected += 1 }
        }
        #expect(undetected == 0)
    }

    @Test func zeroesAndTruncationsNeverDecode() {
        #expect(Self.decode([UInt8](repeating: 0, count: 64)) == nil)
        let bytes = Self.frame(key: 5, body: 100)
        for cut in 0..<bytes.count { #expect(Self.decode(Array(bytes[0..<cut])) == nil) }
    }

    @Test func segmentHeaderRoundTripsAndEveryBitFlipIsDetected() throws {
        let header = SegmentHeader(firstSeq: 52312, createdMillis: 1_700_000_000_000, journalID: Array(1...16))
        let bytes = header.encoded()
        #expect(bytes.count == 64)
        let decoded = try bytes.withUnsafeBytes { try SegmentHeader.decode($0).get() }
        #expect(decoded == header)
        for bit in 0..<(64 * 8) {
            var flipped = bytes
            flipped[bit / 8] ^= UInt8(1 << (bit % 8))
            let ok = flipped.withUnsafeBytes { (try? SegmentHeader.decode($0).get()) != nil }
            #expect(!ok, "bit \(bit)")
        }
    }

    @Test func committedMarkAndCheckpointRoundTrip() {
        let mark = CommittedMark(seq: 99, segmentFirstSeq: 64, endOffset: 12345)
        #expect(CommittedMark.decode(mark.encoded()) == mark)
        var bad = mark.encoded()
        bad[9] ^= 1
        #expect(CommittedMark.decode(bad) == nil)

        let checkpoint = DedupCheckpoint(journalID: Array(0..<16), throughSeq: 7, segmentFirstSeq: 1, offset: 640,
                                         keys: ["a", "bé", String(repeating: "z", count: 255)].map(KeyFingerprints.fingerprint),
                                         segments: [1])
        #expect(DedupCheckpoint.decode(checkpoint.encoded()) == checkpoint)
        var damaged = checkpoint.encoded()
        damaged[70] ^= 0x40
        #expect(DedupCheckpoint.decode(damaged) == nil)
    }

    /// The writer encodes its checkpoint straight from the table: the same bytes as through
    /// an instance, and they decode to the table's entries with their record locations.
    @Test func checkpointEncodedFromTheTableMatchesTheInstance() {
        var table = KeyFingerprints()
        for index in 0..<1_000 {
            table.insert(fingerprint: KeyFingerprints.fingerprint("key-\(index)"), seq: UInt64(index + 1), offset: Int64(index) * 64)
        }
        let direct = DedupCheckpoint.encoded(journalID: Array(0..<16), throughSeq: 1_000, segmentFirstSeq: 1, offset: 64_000,
                                             table: table, segments: [1])
        let instance = DedupCheckpoint(journalID: Array(0..<16), throughSeq: 1_000, segmentFirstSeq: 1, offset: 64_000,
                                       entries: table.entries, segments: [1])
        #expect(direct == instance.encoded())
        let decoded = DedupCheckpoint.decode(direct)
        #expect(decoded?.entries == table.entries)
        #expect(decoded?.entries.count == 1_000)
    }

    /// Streamed in small chunks, one shard at a time from a table that keeps growing above the
    /// checkpoint's seq: the same entries as the table encoded whole at that seq (a shard that
    /// grew meanwhile lists them in another order).
    @Test func checkpointStreamedInChunksMatchesTheWholeEncoding() throws {
        var table = KeyFingerprints()
        for index in 0..<5_000 {
            table.insert(fingerprint: KeyFingerprints.fingerprint("key-\(index)"), seq: UInt64(index + 1), offset: Int64(index) * 64)
        }
        let whole = DedupCheckpoint.encoded(journalID: Array(0..<16), throughSeq: 5_000, segmentFirstSeq: 1, offset: 320_000,
                                            table: table, segments: [1, 2_001])
        var chunks: [[UInt8]] = []
        var later = 5_001
        try DedupCheckpoint.stream(journalID: Array(0..<16), throughSeq: 5_000, segmentFirstSeq: 1, offset: 320_000,
                                   keyCount: table.count, generation: table.generation, segments: [1, 2_001], chunkBytes: 4_096,
                                   shard: { index in
                                       // The writer goes on committing while the checkpoint is written.
                                       for _ in 0..<20 {
                                           table.insert(fingerprint: KeyFingerprints.fingerprint("key-\(later)"), seq: UInt64(later), offset: 0)
                                           later += 1
                                       }
                                       return table.snapshot(shard: index)
                                   }, emit: { chunks.append($0) })
        #expect(chunks.count > 10)
        let streamed = try #require(DedupCheckpoint.decode(Array(chunks.joined())))
        let reference = try #require(DedupCheckpoint.decode(whole))
        let order = { (a: KeyFingerprints.Entry, b: KeyFingerprints.Entry) in a.seq < b.seq }
        #expect(streamed.entries.count == 5_000)
        #expect(streamed.entries.sorted(by: order) == reference.entries.sorted(by: order))
        #expect(streamed.throughSeq == 5_000 && streamed.segments == [1, 2_001] && streamed.offset == 320_000)
        // Recovery's decoding, straight into a table, gives every entry back with its location.
        let loaded = try #require(DedupCheckpoint.decodeWithTable(whole))
        #expect(loaded.table.count == 5_000)
        #expect(loaded.checkpoint.throughSeq == 5_000 && loaded.checkpoint.segments == [1, 2_001] && loaded.checkpoint.keys.isEmpty)
        #expect((0..<5_000).allSatisfy {
            loaded.table.locations(fingerprint: KeyFingerprints.fingerprint("key-\($0)")).map(\.seq) == [UInt64($0 + 1)]
                && loaded.table.locations(fingerprint: KeyFingerprints.fingerprint("key-\($0)")).map(\.offset) == [Int64($0) * 64]
        })
        var damaged = whole
        damaged[100] ^= 1
        #expect(DedupCheckpoint.decodeWithTable(damaged) == nil)
    }

    /// A prune or rebase while a checkpoint is streamed fails that checkpoint instead of
    /// writing a wrong key count.
    @Test func checkpointOfATableRebuiltUnderneathFails() {
        var table = KeyFingerprints()
        for index in 0..<1_000 { table.insert(fingerprint: UInt64(index + 1) << 20, seq: UInt64(index + 1), offset: 0) }
        let (count, generation) = (table.count, table.generation)
        #expect(throws: JournalError.self) {
            try DedupCheckpoint.stream(journalID: Array(0..<16), throughSeq: 1_000, segmentFirstSeq: 1, offset: 64, keyCount: count,
                                       generation: generation, segments: [1],
                                       shard: { index in
                                           if index == 100 { table = table.keeping(fromSeq: 500) }
                                           return table.snapshot(shard: index)
                                       }, emit: { _ in })
        }
    }

    @Test func segmentNamesSortBySeq() {
        #expect(JournalFiles.segmentName(firstSeq: 1) == "00000000000000000001.seg")
        #expect(JournalFiles.firstSeq(ofSegment: "00000000000000052312.seg") == 52312)
        #expect(JournalFiles.firstSeq(ofSegment: "52312.seg") == nil)
        #expect(JournalFiles.firstSeq(ofSegment: "00000000000000052312.seg.tmp") == nil)
    }
}

/// The state layout names the archive directory the journal writes retired segments into.
@Suite struct StateLayoutJournalTests {
    @Test func archiveIsWhereRetentionWritesIt() {
        let state = StateLayout(root: "/var/lib/pushspool")
        #expect(state.journalArchive == state.journal + "/" + JournalFiles.archive)
    }
}
