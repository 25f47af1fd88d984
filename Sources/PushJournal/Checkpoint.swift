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
    /// Fingerprints of the keys (`KeyFingerprints`), 8 bytes each.
    var keys: [UInt64]

    func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out += Self.magic
        out.appendLE(UInt32(2))
        out.appendLE(UInt32(0))
        out += journalID
        out.appendLE(throughSeq)
        out.appendLE(segmentFirstSeq)
        out.appendLE(offset)
        out.appendLE(UInt64(keys.count))
        out.reserveCapacity(out.count + keys.count * 8 + 4)
        for key in keys { out.appendLE(key) }
        out.appendLE(CRC32C.mask(CRC32C.checksum(out)))
        return out
    }

    static func decode(_ bytes: [UInt8]) -> DedupCheckpoint? {
        guard bytes.count >= headerSize + 4, Array(bytes[0..<8]) == magic else { return nil }
        return bytes.withUnsafeBytes { raw -> DedupCheckpoint? in
            let body = UnsafeRawBufferPointer(rebasing: raw[0..<(raw.count - 4)])
            guard raw.loadLE(raw.count - 4, as: UInt32.self) == CRC32C.mask(CRC32C.checksum(body)) else { return nil }
            // Version 1 held the keys themselves; it is simply not trusted, so the keys are rebuilt.
            guard raw.loadLE(8, as: UInt32.self) == 2 else { return nil }
            let count = raw.loadLE(56, as: UInt64.self)
            guard count <= UInt64((body.count - headerSize) / 8), headerSize + Int(count) * 8 == body.count else { return nil }
            var keys: [UInt64] = []
            keys.reserveCapacity(Int(count))
            for index in 0..<Int(count) { keys.append(raw.loadLE(headerSize + index * 8, as: UInt64.self)) }
            return DedupCheckpoint(
                journalID: Array(raw[16..<32]), throughSeq: raw.loadLE(32, as: UInt64.self),
                segmentFirstSeq: raw.loadLE(40, as: UInt64.self), offset: raw.loadLE(48, as: Int64.self), keys: keys)
        }
    }
}
