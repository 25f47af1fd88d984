import PushSystem

/// On-disk formats of the journal: segment header, record frame, COMMITTED watermark.
/// Pure encoding and decoding, no I/O, so every rule is testable byte by byte
/// (docs/design/journal.md, "Framing" and "The COMMITTED watermark"; the byte layout is
/// docs/journal-format.md).
/// All integers are little-endian.

extension Array where Element == UInt8 {
    @inline(__always) mutating func appendLE<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }

    @inline(__always) mutating func storeLE<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        Swift.withUnsafeBytes(of: value.littleEndian) { raw in
            for i in 0..<raw.count { self[offset + i] = raw[i] }
        }
    }
}

extension UnsafeRawBufferPointer {
    @inline(__always) func loadLE<T: FixedWidthInteger>(_ offset: Int, as: T.Type) -> T {
        T(littleEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}

/// The 64-byte header that opens every segment file.
package struct SegmentHeader: Sendable, Equatable {
    package static let size = 64
    package static let magic: [UInt8] = Array("PNJSEG1\0".utf8)
    package static let version: UInt16 = 1

    package var firstSeq: UInt64
    package var createdMillis: Int64
    /// Random per journal; a segment from another journal is refused (systemd's `seqnum_id`).
    package var journalID: [UInt8]

    package init(firstSeq: UInt64, createdMillis: Int64, journalID: [UInt8]) {
        precondition(journalID.count == 16)
        self.firstSeq = firstSeq
        self.createdMillis = createdMillis
        self.journalID = journalID
    }

    package func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.size)
        out += Self.magic
        out.appendLE(Self.version)
        out.appendLE(UInt16(0))  // flags
        out.appendLE(UInt32(Self.size))
        out.appendLE(firstSeq)
        out.appendLE(createdMillis)
        out += journalID
        out += [UInt8](repeating: 0, count: 12)
        out.appendLE(CRC32C.mask(CRC32C.checksum(out)))
        return out
    }

    /// Decodes and validates a header; the error text names the field that failed.
    package static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<SegmentHeader, FrameDefect> {
        guard bytes.count >= size else { return .failure(.init("segment header incomplete (\(bytes.count) of \(size) bytes)")) }
        guard Array(bytes[0..<8]) == magic else { return .failure(.init("bad segment magic")) }
        let stored = bytes.loadLE(60, as: UInt32.self)
        let computed = CRC32C.mask(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[0..<60])))
        guard stored == computed else { return .failure(.init("segment header checksum mismatch")) }
        guard bytes.loadLE(8, as: UInt16.self) == version else {
            return .failure(.init("unsupported segment format version \(bytes.loadLE(8, as: UInt16.self))"))
        }
        guard bytes.loadLE(10, as: UInt16.self) == 0 else { return .failure(.init("unknown segment flags")) }
        guard bytes.loadLE(12, as: UInt32.self) == UInt32(size) else { return .failure(.init("bad segment header size")) }
        // Reserved for later versions: a header that sets them is not one this version wrote
        // (and would not re-encode to the same bytes). Found by the journal-frame fuzzer.
        guard bytes[48..<60].allSatisfy({ $0 == 0 }) else { return .failure(.init("reserved segment header bytes are not zero")) }
        return .success(SegmentHeader(
            firstSeq: bytes.loadLE(16, as: UInt64.self),
            createdMillis: bytes.loadLE(24, as: Int64.self),
            journalID: Array(bytes[32..<48])))
    }
}

/// Why bytes did not decode as a frame or header. `Sendable` value.
package struct FrameDefect: Error, Sendable, Equatable, CustomStringConvertible {
    package var detail: String
    package init(_ detail: String) { self.detail = detail }
    package var description: String { detail }
}

/// The fixed 40-byte header of a record frame (docs/design/journal.md, "Framing").
package struct RecordHeader: Sendable, Equatable {
    package static let size = 40
    package static let magic: UInt32 = 0x3152_4A50  // "PJR1"; never zero, so zero-filled tails never parse
    package static let typeData: UInt8 = 1
    /// Readers check lengths against this before allocating; the writer's own limit is smaller.
    package static let maxBodyBytes = 64 << 20

    package var bodyLength: UInt32
    package var keyLength: UInt16
    package var type: UInt8
    package var seq: UInt64
    package var ingestMillis: Int64
    package var bodyCRC: UInt32

    /// Bytes the whole frame occupies, padding included.
    package var frameLength: Int { RecordFrame.padded(Self.size + Int(bodyLength)) }

    /// Decodes and checks everything the header alone can prove: magic, header CRC, reserved
    /// bytes, type, length bounds. The body is checked by `RecordFrame.checkBody`.
    package static func decode(_ bytes: UnsafeRawBufferPointer) -> Result<RecordHeader, FrameDefect> {
        guard bytes.count >= size else { return .failure(.init("record header incomplete")) }
        guard bytes.loadLE(0, as: UInt32.self) == magic else { return .failure(.init("bad record magic")) }
        let stored = bytes.loadLE(4, as: UInt32.self)
        let computed = CRC32C.mask(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: bytes[8..<40])))
        guard stored == computed else { return .failure(.init("record header checksum mismatch")) }
        let header = RecordHeader(
            bodyLength: bytes.loadLE(8, as: UInt32.self),
            keyLength: bytes.loadLE(12, as: UInt16.self),
            type: bytes[14],
            seq: bytes.loadLE(16, as: UInt64.self),
            ingestMillis: bytes.loadLE(24, as: Int64.self),
            bodyCRC: bytes.loadLE(32, as: UInt32.self))
        guard header.type == typeData else { return .failure(.init("unknown record type \(header.type)")) }
        guard bytes[15] == 0, bytes.loadLE(36, as: UInt32.self) == 0 else {
            return .failure(.init("reserved record header bytes are not zero"))
        }
        guard header.keyLength >= 1, header.keyLength <= 255 else { return .failure(.init("bad key length \(header.keyLength)")) }
        guard Int(header.bodyLength) >= Int(header.keyLength), Int(header.bodyLength) <= maxBodyBytes else {
            return .failure(.init("bad body length \(header.bodyLength)"))
        }
        return .success(header)
    }
}

/// Encoding of a whole record frame: header, key, JSON body, zero padding to 8 bytes.
package enum RecordFrame {
    @inline(__always) package static func padded(_ n: Int) -> Int { (n + 7) & ~7 }

    /// Appends one frame to `out`. `key` must be 1...255 bytes of UTF-8.
    package static func encode(seq: UInt64, ingestMillis: Int64, key: [UInt8], body: [UInt8], into out: inout [UInt8]) {
        precondition(!key.isEmpty && key.count <= 255)
        let start = out.count
        let bodyLength = key.count + body.count
        let bodyCRC = CRC32C.mask(CRC32C.finalize(CRC32C.update(CRC32C.update(CRC32C.initial, key), body)))
        out.appendLE(RecordHeader.magic)
        out.appendLE(UInt32(0))  // header CRC, filled below
        out.appendLE(UInt32(bodyLength))
        out.appendLE(UInt16(key.count))
        out.append(RecordHeader.typeData)
        out.append(0)  // flags
        out.appendLE(seq)
        out.appendLE(ingestMillis)
        out.appendLE(bodyCRC)
        out.appendLE(UInt32(0))  // reserved
        let headerCRC = out.withUnsafeBytes {
            CRC32C.mask(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[(start + 8)..<(start + 40)])))
        }
        out.storeLE(headerCRC, at: start + 4)
        out += key
        out += body
        let pad = padded(RecordHeader.size + bodyLength) - (RecordHeader.size + bodyLength)
        if pad > 0 { out += repeatElement(0, count: pad) }
    }

    /// Checks the body CRC and the key's UTF-8, and splits key from JSON.
    package static func checkBody(_ header: RecordHeader, _ body: UnsafeRawBufferPointer) -> Result<(key: String, json: [UInt8]), FrameDefect> {
        checkBody(header, body, copyJSON: true).map { ($0.key, $0.json ?? []) }
    }

    /// `checkBody` that copies the JSON out only when asked: scans that need keys alone
    /// (dedup rebuild, verify) allocate nothing per record for the body.
    static func checkBody(_ header: RecordHeader, _ body: UnsafeRawBufferPointer, copyJSON: Bool) -> Result<(key: String, json: [UInt8]?), FrameDefect> {
        guard body.count >= Int(header.bodyLength) else { return .failure(.init("record body incomplete")) }
        let bytes = UnsafeRawBufferPointer(rebasing: body[0..<Int(header.bodyLength)])
        guard CRC32C.mask(CRC32C.checksum(bytes)) == header.bodyCRC else { return .failure(.init("record body checksum mismatch")) }
        let keyBytes = UnsafeRawBufferPointer(rebasing: bytes[0..<Int(header.keyLength)])
        guard let key = UTF8Text.string(keyBytes) else { return .failure(.init("record key is not UTF-8")) }
        guard copyJSON else { return .success((key, nil)) }
        return .success((key, Array(UnsafeRawBufferPointer(rebasing: bytes[Int(header.keyLength)...]))))
    }
}

/// The 32-byte `COMMITTED` watermark: the highest seq known synced, rewritten in place after
/// every sync without an fsync of its own. It can prove loss (a recovered journal shorter than
/// it) and tells readers which records are durable, never that data is safe
/// (docs/design/journal.md, "The COMMITTED watermark").
package struct CommittedMark: Sendable, Equatable {
    package static let size = 32
    package static let magic: UInt32 = 0x4D43_4A50  // "PJCM"

    package var seq: UInt64
    package var segmentFirstSeq: UInt64
    package var endOffset: Int64

    package init(seq: UInt64, segmentFirstSeq: UInt64, endOffset: Int64) {
        self.seq = seq
        self.segmentFirstSeq = segmentFirstSeq
        self.endOffset = endOffset
    }

    package func encoded() -> [UInt8] {
        SealedMark.encode(magic: Self.magic, (seq, segmentFirstSeq, UInt64(bitPattern: endOffset)))
    }

    package static func decode(_ bytes: [UInt8]) -> CommittedMark? {
        guard bytes.count >= size, let words = SealedMark.decode(bytes, magic: magic) else { return nil }
        return CommittedMark(seq: words.0, segmentFirstSeq: words.1, endOffset: Int64(bitPattern: words.2))
    }
}

/// The 32-byte shape the `COMMITTED` and `RETAINED` marks share: magic, the masked CRC32C of
/// bytes 8..<32, then three 64-bit words. Written once so the two marks cannot drift apart.
enum SealedMark {
    static let size = 32

    static func encode(magic: UInt32, _ words: (UInt64, UInt64, UInt64)) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(size)
        out.appendLE(magic)
        out.appendLE(UInt32(0))  // CRC, filled below
        out.appendLE(words.0)
        out.appendLE(words.1)
        out.appendLE(words.2)
        let crc = out.withUnsafeBytes { CRC32C.mask(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[8..<32]))) }
        out.storeLE(crc, at: 4)
        return out
    }

    /// The three words of the first 32 bytes, or `nil` if the magic or the CRC does not match.
    static func decode(_ bytes: [UInt8], magic: UInt32) -> (UInt64, UInt64, UInt64)? {
        guard bytes.count >= size else { return nil }
        return bytes.withUnsafeBytes { raw -> (UInt64, UInt64, UInt64)? in
            guard raw.loadLE(0, as: UInt32.self) == magic,
                  raw.loadLE(4, as: UInt32.self) == CRC32C.mask(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[8..<32])))
            else { return nil }
            return (raw.loadLE(8, as: UInt64.self), raw.loadLE(16, as: UInt64.self), raw.loadLE(24, as: UInt64.self))
        }
    }
}

/// File names inside the journal directory.
package enum JournalFiles {
    package static let lock = "LOCK"
    package static let committed = "COMMITTED"
    package static let checkpoint = "dedup.ckpt"
    package static let quarantine = "quarantine"
    package static let segmentSuffix = ".seg"

    /// 20 digits of first seq, like Kafka, so names sort by seq.
    package static func segmentName(firstSeq: UInt64) -> String {
        let digits = String(firstSeq)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + segmentSuffix
    }

    package static func firstSeq(ofSegment name: String) -> UInt64? {
        guard name.hasSuffix(segmentSuffix) else { return nil }
        let stem = name.dropLast(segmentSuffix.count)
        guard stem.count == 20, stem.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return UInt64(stem)
    }
}
