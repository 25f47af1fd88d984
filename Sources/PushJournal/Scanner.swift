import PushSystem

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

extension SegmentFile {
    func readHeader() throws(SystemError) -> Result<SegmentHeader, FrameDefect> {
        try withBytes(at: 0, count: SegmentHeader.size) { SegmentHeader.decode($0) }
    }

    func probe(at offset: Int64, mode: ScanMode) throws(SystemError) -> FrameProbe {
        if offset == size { return .end }
        if offset + Int64(RecordHeader.size) > size { return .incomplete("record header incomplete") }
        let decoded = try withBytes(at: offset, count: RecordHeader.size) { RecordHeader.decode($0) }
        let header: RecordHeader
        switch decoded {
        case .success(let h): header = h
        case .failure(let defect): return .invalid(defect.detail)
        }
        let bodyStart = offset + Int64(RecordHeader.size)
        if bodyStart + Int64(header.bodyLength) > size { return .incomplete("record body incomplete") }
        if offset + Int64(header.frameLength) > size { return .incomplete("record padding incomplete") }
        if case .headers = mode { return .record(header, key: nil, json: nil) }
        var full = false
        if case .full = mode { full = true }
        let checked = try withBytes(at: bodyStart, count: Int(header.bodyLength)) { RecordFrame.checkBody(header, $0, copyJSON: full) }
        switch checked {
        case .success(let parts):
            return .record(header, key: parts.key, json: parts.json)
        case .failure(let defect):
            return .invalid(defect.detail)
        }
    }

    /// Whether any 8-aligned offset in `[from, size)` holds a whole valid record with seq above
    /// `afterSeq`: the test that separates a torn tail from damage in the middle
    /// (docs/design/journal.md, "Torn tail or damage").
    func hasValidRecord(from: Int64, afterSeq: UInt64) throws(SystemError) -> Bool {
        var offset = RecordFrame.padded(Int(from)).asInt64
        while offset + Int64(RecordHeader.size) <= size {
            let magic = try withBytes(at: offset, count: 4) { raw -> Bool in
                raw.count == 4 && raw.loadLE(0, as: UInt32.self) == RecordHeader.magic
            }
            if magic, case .record(let header, _, _) = try probe(at: offset, mode: .keys), header.seq > afterSeq {
                return true
            }
            offset += 8
        }
        return false
    }
}

extension SegmentFile {
    /// The highest seq of any valid record at or after `from`, so a quarantined segment's seqs
    /// are never handed out again.
    func maxValidSeq(from: Int64) throws(SystemError) -> UInt64? {
        var best: UInt64?
        var offset = RecordFrame.padded(Int(from)).asInt64
        while offset + Int64(RecordHeader.size) <= size {
            if case .record(let header, _, _) = try probe(at: offset, mode: .keys) {
                best = max(best ?? 0, header.seq)
                offset += Int64(header.frameLength)
            } else {
                offset += 8
            }
        }
        return best
    }
}

extension Int {
    var asInt64: Int64 { Int64(self) }
}

/// The result of scanning one segment from some offset to its end.
struct SegmentScan {
    var records = 0
    var firstSeq: UInt64?
    var lastSeq: UInt64?
    var firstIngestMillis: Int64?
    var lastIngestMillis: Int64?
    /// End of the last whole valid record (or the start offset).
    var validEnd: Int64
    var size: Int64
    /// First defect and its offset; `nil` = clean to end of file.
    var failureOffset: Int64?
    var failureDetail: String?
    /// True when nothing valid follows the defect: a torn tail, safe to cut off.
    var failureIsTornTail = false
}

/// Scans records from `offset`, requiring seqs `expectedSeq, expectedSeq+1, ...`, calling
/// `visit` for each valid record, and classifies how the valid part ends.
func scanSegment(
    _ file: SegmentFile, from offset: Int64, expectedSeq: UInt64, mode: ScanMode,
    progress: (Int64) -> Void = { _ in },
    visit: (RecordHeader, String?, [UInt8]?, Int64) -> Void
) throws(SystemError) -> SegmentScan {
    var scan = SegmentScan(validEnd: offset, size: file.size)
    var at = offset
    var expected = expectedSeq
    var lastProgress = offset
    while true {
        let probe = try file.probe(at: at, mode: mode)
        switch probe {
        case .end:
            progress(at - lastProgress)
            return scan
        case .record(let header, let key, let json):
            if header.seq != expected {
                scan.failureOffset = at
                scan.failureDetail = "record sequence \(header.seq), expected \(expected)"
                scan.failureIsTornTail = false
                progress(at - lastProgress)
                return scan
            }
            visit(header, key, json, at)
            scan.records += 1
            if scan.firstSeq == nil {
                scan.firstSeq = header.seq
                scan.firstIngestMillis = header.ingestMillis
            }
            scan.lastSeq = header.seq
            scan.lastIngestMillis = header.ingestMillis
            expected += 1
            at += Int64(header.frameLength)
            scan.validEnd = at
            if at - lastProgress >= 4 << 20 {
                progress(at - lastProgress)
                lastProgress = at
            }
        case .incomplete(let detail), .invalid(let detail):
            scan.failureOffset = at
            scan.failureDetail = detail
            scan.failureIsTornTail = try !file.hasValidRecord(from: at + 8, afterSeq: expected &- 1)
            progress(file.size - lastProgress)
            return scan
        }
    }
}
