import PushSystem

/// The one place that reads record frames out of a segment's bytes (docs/design/journal.md,
/// "Framing"). The scanner, the reader, verify, retention, the archive and erasure all walk
/// segments through it, so the header check, the range check on a length read from the file,
/// the body CRC and the torn-tail test are written once.

/// Where a walker reads a segment: a file through its read buffer (`SegmentFile`), or a whole
/// segment in memory (`SegmentBuffer`: a decompressed archive, erasure's rewrite buffer).
protocol SegmentBytes {
    associatedtype Failure: Error
    /// Bytes in the segment; nothing at or past it is read.
    var size: Int64 { get }
    /// Calls `body` with exactly `count` bytes at `offset`, or with fewer if the segment ends first.
    func withBytes<R>(at offset: Int64, count: Int, _ body: (UnsafeRawBufferPointer) -> R) throws(Failure) -> R
}

extension SegmentFile: SegmentBytes {
    typealias Failure = SystemError
}

/// A whole segment in memory. Reading it cannot fail, so walking it needs no `try`.
struct SegmentBuffer: SegmentBytes {
    typealias Failure = Never
    let raw: UnsafeRawBufferPointer
    var size: Int64 { Int64(raw.count) }

    init(_ raw: UnsafeRawBufferPointer) { self.raw = raw }

    func withBytes<R>(at offset: Int64, count: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        // Offsets and counts come from lengths in the bytes themselves: clamp, never trap.
        let start = Int(max(0, min(offset, size)))
        let end = start + max(0, min(count, raw.count - start))
        return body(UnsafeRawBufferPointer(rebasing: raw[start..<end]))
    }
}

/// What is at one offset of a segment.
enum FrameProbe {
    /// A whole, valid frame. `key`/`json` are filled per `ScanMode`.
    case record(RecordHeader, key: String?, json: [UInt8]?)
    /// Exactly at end of file.
    case end
    /// The frame runs past end of file (a torn write, or a writer mid-`write`).
    case incomplete(String)
    /// Bytes that are not a valid frame.
    case invalid(String)
}

enum ScanMode {
    /// Check body CRCs, return key and JSON.
    case full
    /// Check body CRCs, return the key only (dedup rebuild).
    case keys
    /// Trust headers, skip bodies (stats).
    case headers
}

/// The header of the frame at one offset, its length checked against the segment's end.
enum FrameHead {
    case frame(RecordHeader)
    case end
    /// The frame runs past the end; `header` is set when the header itself is whole and checks.
    case incomplete(String, header: RecordHeader?)
    case invalid(String)
}

/// Why a walk stopped before the end of the segment. Typed, so callers switch on what
/// happened rather than on text; `detail` is the text the journal has always reported.
enum FrameFault: Equatable {
    /// The frame runs past the end of the segment.
    case incomplete(String)
    /// The bytes are not a valid frame (magic, a CRC, a length out of range, the key's UTF-8).
    case invalid(String)
    /// A valid frame whose seq is not the next one.
    case outOfOrder(seq: UInt64, expected: UInt64)
    /// In a closed segment: a frame out of order or running past the end, found before its
    /// body is read.
    case outOfOrderOrCut(seq: UInt64)

    var detail: String {
        switch self {
        case .incomplete(let detail), .invalid(let detail): detail
        case .outOfOrder(let seq, let expected): "record sequence \(seq), expected \(expected)"
        case .outOfOrderOrCut(let seq): "record \(seq) out of order or cut"
        }
    }
}

/// One step of a walk.
enum FrameStep {
    /// A whole valid frame with the expected seq, at `offset`.
    case record(RecordHeader, key: String?, json: [UInt8]?, offset: Int64)
    /// The walk reached the end of the segment cleanly.
    case end
    /// The walk stopped at `offset`. `tornTail` is true when nothing valid follows (only a
    /// live segment can have one): a torn write, safe to cut off, not damage in the middle
    /// (docs/design/journal.md, "Torn tail or damage").
    case fault(FrameFault, offset: Int64, tornTail: Bool)
}

/// How strict a walk is.
enum WalkPolicy {
    /// A segment the writer may be appending to or crashed in: a frame past the end is
    /// incomplete, the seq is checked after the body, and a defect is classified as a torn
    /// tail or damage.
    case live
    /// A finished segment (an archive, a segment erasure rewrites): a frame out of order or
    /// past the end is refused before its body is read, and nothing is a torn tail.
    case closed
}

enum SegmentFrames {
    /// The segment header at offset 0.
    static func header<S: SegmentBytes>(_ source: S) throws(S.Failure) -> Result<SegmentHeader, FrameDefect> {
        try source.withBytes(at: 0, count: SegmentHeader.size) { SegmentHeader.decode($0) }
    }

    /// The frame header at `offset`, its whole frame (padding included) inside the segment.
    @inline(__always)
    static func head<S: SegmentBytes>(_ source: S, at offset: Int64) throws(S.Failure) -> FrameHead {
        let size = source.size
        if offset == size { return .end }
        if offset < 0 || offset > size || size - offset < Int64(RecordHeader.size) {
            return .incomplete("record header incomplete", header: nil)
        }
        let decoded = try source.withBytes(at: offset, count: RecordHeader.size) { RecordHeader.decode($0) }
        let header: RecordHeader
        switch decoded {
        case .success(let h): header = h
        case .failure(let defect): return .invalid(defect.detail)
        }
        // `decode` bounds bodyLength by maxBodyBytes, so these sums cannot overflow.
        let rest = size - offset - Int64(RecordHeader.size)
        if Int64(header.bodyLength) > rest { return .incomplete("record body incomplete", header: header) }
        if Int64(header.frameLength) > size - offset { return .incomplete("record padding incomplete", header: header) }
        return .frame(header)
    }

    /// Checks the body of a frame `head` accepted, per `mode`.
    @inline(__always)
    static func body<S: SegmentBytes>(_ source: S, _ header: RecordHeader, at offset: Int64,
                                      mode: ScanMode) throws(S.Failure) -> FrameProbe {
        if case .headers = mode { return .record(header, key: nil, json: nil) }
        var full = false
        if case .full = mode { full = true }
        let checked = try source.withBytes(at: offset + Int64(RecordHeader.size), count: Int(header.bodyLength)) {
            RecordFrame.checkBody(header, $0, copyJSON: full)
        }
        switch checked {
        case .success(let parts): return .record(header, key: parts.key, json: parts.json)
        case .failure(let defect): return .invalid(defect.detail)
        }
    }

    /// What is at `offset`: a whole checked frame, the end, or why not.
    @inline(__always)
    static func probe<S: SegmentBytes>(_ source: S, at offset: Int64, mode: ScanMode) throws(S.Failure) -> FrameProbe {
        switch try head(source, at: offset) {
        case .end: return .end
        case .incomplete(let detail, _): return .incomplete(detail)
        case .invalid(let detail): return .invalid(detail)
        case .frame(let header): return try body(source, header, at: offset, mode: mode)
        }
    }

    /// Whether any 8-aligned offset in `[from, size)` holds a whole valid record with seq above
    /// `afterSeq`: the test that separates a torn tail from damage in the middle
    /// (docs/design/journal.md, "Torn tail or damage").
    static func hasValidRecord<S: SegmentBytes>(_ source: S, from: Int64, afterSeq: UInt64) throws(S.Failure) -> Bool {
        var offset = Int64(RecordFrame.padded(Int(max(0, from))))
        while offset + Int64(RecordHeader.size) <= source.size {
            let magic = try source.withBytes(at: offset, count: 4) { raw -> Bool in
                raw.count == 4 && raw.loadLE(0, as: UInt32.self) == RecordHeader.magic
            }
            if magic, case .record(let header, _, _) = try probe(source, at: offset, mode: .keys), header.seq > afterSeq {
                return true
            }
            offset += 8
        }
        return false
    }

    /// The highest seq of any valid record at or after `from`, so a quarantined segment's seqs
    /// are never handed out again.
    static func maxValidSeq<S: SegmentBytes>(_ source: S, from: Int64) throws(S.Failure) -> UInt64? {
        var best: UInt64?
        var offset = Int64(RecordFrame.padded(Int(max(0, from))))
        while offset + Int64(RecordHeader.size) <= source.size {
            if case .record(let header, _, _) = try probe(source, at: offset, mode: .keys) {
                best = max(best ?? 0, header.seq)
                offset += Int64(header.frameLength)
            } else {
                offset += 8
            }
        }
        return best
    }
}

/// Walks the frames of one segment in order from `offset`, requiring seqs `expectedSeq,
/// expectedSeq+1, ...`. Stops at the first fault: after a `.fault` or `.end`, `next()`
/// returns the same step again.
struct SegmentFrameWalker<Source: SegmentBytes> {
    let source: Source
    let mode: ScanMode
    let policy: WalkPolicy
    /// Start of the next frame; after a fault, the faulty frame's offset.
    private(set) var offset: Int64
    /// The seq the next record must have; `nil` once a record had seq `UInt64.max`.
    private(set) var expectedSeq: UInt64?
    private var stopped: FrameStep?

    init(_ source: Source, from offset: Int64, expectedSeq: UInt64, mode: ScanMode, policy: WalkPolicy = .live) {
        self.source = source
        self.offset = offset
        self.expectedSeq = expectedSeq
        self.mode = mode
        self.policy = policy
    }

    mutating func next() throws(Source.Failure) -> FrameStep {
        if let stopped { return stopped }
        let step = try step()
        switch step {
        case .record(let header, _, _, _):
            offset += Int64(header.frameLength)
            let (following, overflow) = header.seq.addingReportingOverflow(1)
            expectedSeq = overflow ? nil : following
        case .end, .fault:
            stopped = step
        }
        return step
    }

    private func step() throws(Source.Failure) -> FrameStep {
        let head = try SegmentFrames.head(source, at: offset)
        switch policy {
        case .closed:
            let header: RecordHeader
            switch head {
            case .end: return .end
            case .invalid(let detail): return .fault(.invalid(detail), offset: offset, tornTail: false)
            case .incomplete(let detail, header: nil): return .fault(.incomplete(detail), offset: offset, tornTail: false)
            case .incomplete(_, header: let h?):
                return .fault(.outOfOrderOrCut(seq: h.seq), offset: offset, tornTail: false)
            case .frame(let h): header = h
            }
            guard header.seq == expectedSeq else {
                return .fault(.outOfOrderOrCut(seq: header.seq), offset: offset, tornTail: false)
            }
            return try checked(header)
        case .live:
            switch head {
            case .end: return .end
            case .incomplete(let detail, _): return try defect(.incomplete(detail))
            case .invalid(let detail): return try defect(.invalid(detail))
            case .frame(let header):
                let step = try checked(header)
                if case .record = step, header.seq != expectedSeq {
                    // A valid frame with the wrong seq is never a torn write.
                    return .fault(.outOfOrder(seq: header.seq, expected: expectedSeq ?? 0), offset: offset, tornTail: false)
                }
                return step
            }
        }
    }

    private func checked(_ header: RecordHeader) throws(Source.Failure) -> FrameStep {
        switch try SegmentFrames.body(source, header, at: offset, mode: mode) {
        case .record(let header, let key, let json): return .record(header, key: key, json: json, offset: offset)
        case .incomplete(let detail): return try defect(.incomplete(detail))
        case .invalid(let detail): return try defect(.invalid(detail))
        case .end: return .end
        }
    }

    private func defect(_ fault: FrameFault) throws(Source.Failure) -> FrameStep {
        guard case .live = policy else { return .fault(fault, offset: offset, tornTail: false) }
        let after = expectedSeq.map { $0 &- 1 } ?? .max
        let torn = try !SegmentFrames.hasValidRecord(source, from: offset + 8, afterSeq: after)
        return .fault(fault, offset: offset, tornTail: torn)
    }
}
