import Glibc
import PushSystem

/// `dedup.ckpt`: a prefix snapshot of the dedup keys, so a start does not re-read the whole
/// journal (Kafka's recovery point). It covers only synced records, names where the journal
/// continues after them, and is trusted only if its CRC, journal id and resume point all check
/// out; otherwise it is ignored and the keys are rebuilt from the frames.
struct DedupCheckpoint: Equatable {
    static let magic: [UInt8] = Array("PNJDDP1\0".utf8)
    static let headerSize = 64

    var journalID: [UInt8]
    /// Every record with seq ≤ this is covered.
    var throughSeq: UInt64
    /// The segment and offset where the record `throughSeq + 1` starts (or will start).
    var segmentFirstSeq: UInt64
    var offset: Int64
    /// Fingerprints of the keys (`KeyFingerprints`), with the seq and frame offset of each
    /// one's record in `seqs`/`offsets` (version 4; missing entries are 0 = location unknown).
    var keys: [UInt64]
    /// First seqs of every segment up to and including `segmentFirstSeq`. Recovery trusts the
    /// segments before the resume point without reading them, so it must be able to tell that
    /// one of them was deleted (version 3; version 2 had no list and is not trusted).
    var segments: [UInt64]
    var seqs: [UInt64] = []
    var offsets: [Int64] = []

    init(journalID: [UInt8], throughSeq: UInt64, segmentFirstSeq: UInt64, offset: Int64, keys: [UInt64], segments: [UInt64],
         seqs: [UInt64] = [], offsets: [Int64] = []) {
        self.journalID = journalID
        self.throughSeq = throughSeq
        self.segmentFirstSeq = segmentFirstSeq
        self.offset = offset
        self.keys = keys
        self.segments = segments
        self.seqs = seqs
        self.offsets = offsets
    }

    init(journalID: [UInt8], throughSeq: UInt64, segmentFirstSeq: UInt64, offset: Int64, entries: [KeyFingerprints.Entry],
         segments: [UInt64]) {
        self.init(journalID: journalID, throughSeq: throughSeq, segmentFirstSeq: segmentFirstSeq, offset: offset,
                  keys: entries.map(\.fingerprint), segments: segments, seqs: entries.map(\.seq), offsets: entries.map(\.offset))
    }

    /// Missing locations and zero locations are the same thing on disk.
    static func == (a: DedupCheckpoint, b: DedupCheckpoint) -> Bool {
        a.journalID == b.journalID && a.throughSeq == b.throughSeq && a.segmentFirstSeq == b.segmentFirstSeq
            && a.offset == b.offset && a.segments == b.segments && a.entries == b.entries
    }

    var entries: [KeyFingerprints.Entry] {
        keys.indices.map { KeyFingerprints.Entry(fingerprint: keys[$0], seq: $0 < seqs.count ? seqs[$0] : 0,
                                                 offset: $0 < offsets.count ? offsets[$0] : 0) }
    }

    func encoded() -> [UInt8] {
        var encoder = Encoder(journalID: journalID, throughSeq: throughSeq, segmentFirstSeq: segmentFirstSeq, offset: offset,
                              keyCount: keys.count, chunkBytes: .max)
        for (index, key) in keys.enumerated() {
            encoder.append(key, index < seqs.count ? seqs[index] : 0, index < offsets.count ? offsets[index] : 0)
        }
        return encoder.finish(segments: segments)
    }

    /// The bytes of a checkpoint of `table`, encoded straight from it (no entry array).
    static func encoded(journalID: [UInt8], throughSeq: UInt64, segmentFirstSeq: UInt64, offset: Int64, table: KeyFingerprints,
                        segments: [UInt64]) -> [UInt8] {
        var encoder = Encoder(journalID: journalID, throughSeq: throughSeq, segmentFirstSeq: segmentFirstSeq, offset: offset,
                              keyCount: table.count, chunkBytes: .max)
        table.forEachEntry { encoder.append($0, $1, $2) }
        return encoder.finish(segments: segments)
    }

    /// The checkpoint through `throughSeq` of a table that keeps growing, handed to `emit` in
    /// chunks of about `chunkBytes`: `shard` returns one shard at a time as it is now, and only
    /// its entries up to `throughSeq` are written — exactly the `keyCount` the table held when
    /// `throughSeq` was its last record, since entries are only ever added above it. A whole
    /// snapshot instead was copied shard by shard by the writer's inserts while it was encoded
    /// (~11 MB at a million keys), beside 24 MB of bytes. A table rebased or pruned meanwhile
    /// (its generation moved) fails the checkpoint; the next one is taken as usual.
    static func stream(journalID: [UInt8], throughSeq: UInt64, segmentFirstSeq: UInt64, offset: Int64, keyCount: Int,
                       generation: Int, segments: [UInt64], chunkBytes: Int = 1 << 20,
                       shard: (Int) -> KeyFingerprints.ShardSnapshot,
                       emit: ([UInt8]) throws(JournalError) -> Void) throws(JournalError) {
        var encoder = Encoder(journalID: journalID, throughSeq: throughSeq, segmentFirstSeq: segmentFirstSeq, offset: offset,
                              keyCount: keyCount, chunkBytes: chunkBytes)
        var written = 0
        for index in 0..<KeyFingerprints.shardCount {
            let snapshot = shard(index)
            guard snapshot.generation == generation else { throw changedUnderneath(seen: written, expected: keyCount) }
            snapshot.forEachEntry { fingerprint, seq, offset in
                guard seq <= throughSeq else { return }
                encoder.append(fingerprint, seq, offset)
                written += 1
            }
            if let chunk = encoder.takeChunkIfFull() { try emit(chunk) }
        }
        guard written == keyCount else { throw changedUnderneath(seen: written, expected: keyCount) }
        try emit(encoder.finish(segments: segments))
    }

    private static func changedUnderneath(seen: Int, expected: Int) -> JournalError {
        JournalError(.io(SystemError(call: "checkpoint", errno: ESTALE,
                                     subject: "dedup index rebuilt while being written (\(seen) of \(expected) keys)")),
                     directory: "")
    }

    /// The format (version 4): header, `keyCount` × (fingerprint, seq, offset), the segment
    /// list, a masked CRC32C of everything before it. Exactly `keyCount` entries must be
    /// appended. The CRC runs over each chunk as it is taken, so no chunk is kept.
    private struct Encoder {
        private var out: [UInt8] = []
        private var crc = CRC32C.initial
        private let chunkBytes: Int

        init(journalID: [UInt8], throughSeq: UInt64, segmentFirstSeq: UInt64, offset: Int64, keyCount: Int, chunkBytes: Int) {
            self.chunkBytes = chunkBytes
            let expected = headerSize + keyCount * 24 + 4
            out.reserveCapacity(chunkBytes == .max ? expected : min(expected, chunkBytes + 4096))
            out += magic
            out.appendLE(UInt32(4))
            out.appendLE(UInt32(0))
            out += journalID
            out.appendLE(throughSeq)
            out.appendLE(segmentFirstSeq)
            out.appendLE(offset)
            out.appendLE(UInt64(keyCount))
        }

        mutating func append(_ fingerprint: UInt64, _ seq: UInt64, _ offset: Int64) {
            out.appendLE(fingerprint)
            out.appendLE(seq)
            out.appendLE(offset)
        }

        mutating func takeChunkIfFull() -> [UInt8]? {
            guard out.count >= chunkBytes else { return nil }
            crc = CRC32C.update(crc, out)
            defer { out.removeAll(keepingCapacity: true) }
            return out
        }

        mutating func finish(segments: [UInt64]) -> [UInt8] {
            out.appendLE(UInt64(segments.count))
            for segment in segments { out.appendLE(segment) }
            out.appendLE(CRC32C.mask(CRC32C.finalize(CRC32C.update(crc, out))))
            return out
        }
    }

    static func decode(_ bytes: [UInt8]) -> DedupCheckpoint? {
        var keys: [UInt64] = []
        var seqs: [UInt64] = []
        var offsets: [Int64] = []
        guard var checkpoint = parse(bytes, prepare: { count, _ in
            keys.reserveCapacity(count)
            seqs.reserveCapacity(count)
            offsets.reserveCapacity(count)
        }, entry: { fingerprint, seq, offset in
            keys.append(fingerprint)
            seqs.append(seq)
            offsets.append(offset)
        }) else { return nil }
        checkpoint.keys = keys
        checkpoint.seqs = seqs
        checkpoint.offsets = offsets
        return checkpoint
    }

    /// The checkpoint checked whole (format, checksum, every entry) without keeping its
    /// entries: all `journal verify` needs to say whether it is sound and what it covers.
    static func validated(_ bytes: [UInt8]) -> DedupCheckpoint? {
        parse(bytes, prepare: { _, _ in }, entry: { _, _, _ in })
    }

    /// What recovery uses: the checkpoint without its per-key arrays, its entries decoded
    /// straight into a table (three arrays and an entry array of 24 bytes a key each were held
    /// at once before, 360 MB at a start on five million keys).
    static func decodeWithTable(_ bytes: [UInt8]) -> (checkpoint: DedupCheckpoint, table: KeyFingerprints)? {
        var table = KeyFingerprints()
        guard let checkpoint = parse(bytes, prepare: { count, lowestSeq in
            table = KeyFingerprints(minimumCapacity: count, seqBase: lowestSeq)
        }, entry: { fingerprint, seq, offset in
            table.insert(fingerprint: fingerprint, seq: seq, offset: offset)
        }) else { return nil }
        return (checkpoint, table)
    }

    /// Checks the CRC, version and counts, then calls `prepare` with the entry count and the
    /// lowest located seq and `entry` with every entry. The result has no per-key arrays.
    private static func parse(_ bytes: [UInt8], prepare: (_ count: Int, _ lowestSeq: UInt64) -> Void,
                              entry: (_ fingerprint: UInt64, _ seq: UInt64, _ offset: Int64) -> Void) -> DedupCheckpoint? {
        guard bytes.count >= headerSize + 4, Array(bytes[0..<8]) == magic else { return nil }
        return bytes.withUnsafeBytes { raw -> DedupCheckpoint? in
            let body = UnsafeRawBufferPointer(rebasing: raw[0..<(raw.count - 4)])
            guard raw.loadLE(raw.count - 4, as: UInt32.self) == CRC32C.mask(CRC32C.checksum(body)) else { return nil }
            // Versions 1 to 3 are simply not trusted, so the keys are rebuilt from the frames
            // (version 3 had no record locations, which the exact dedup check needs).
            guard raw.loadLE(8, as: UInt32.self) == 4 else { return nil }
            // Counts come from a file: bound each by the bytes there before any arithmetic.
            let words = UInt64((body.count - headerSize) / 8)
            let count = raw.loadLE(56, as: UInt64.self)
            // Each key takes 3 words, and the segment count one more.
            guard words > 0, count <= (words - 1) / 3 else { return nil }
            let segmentCountAt = headerSize + Int(count) * 24
            let segmentCount = raw.loadLE(segmentCountAt, as: UInt64.self)
            guard segmentCount <= words - count * 3 - 1,
                  segmentCountAt + 8 + Int(segmentCount) * 8 == body.count
            else { return nil }
            var lowestSeq = UInt64.max
            for index in 0..<Int(count) {
                let seq = raw.loadLE(headerSize + index * 24 + 8, as: UInt64.self)
                if seq != 0 { lowestSeq = min(lowestSeq, seq) }
            }
            prepare(Int(count), lowestSeq == .max ? 0 : lowestSeq)
            for index in 0..<Int(count) {
                entry(raw.loadLE(headerSize + index * 24, as: UInt64.self), raw.loadLE(headerSize + index * 24 + 8, as: UInt64.self),
                      raw.loadLE(headerSize + index * 24 + 16, as: Int64.self))
            }
            let segments = (0..<Int(segmentCount)).map { raw.loadLE(segmentCountAt + 8 + $0 * 8, as: UInt64.self) }
            return DedupCheckpoint(
                journalID: Array(raw[16..<32]), throughSeq: raw.loadLE(32, as: UInt64.self),
                segmentFirstSeq: raw.loadLE(40, as: UInt64.self), offset: raw.loadLE(48, as: Int64.self), keys: [],
                segments: segments)
        }
    }
}
