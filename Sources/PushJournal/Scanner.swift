import PushSystem

// Segment-file entry points of the frame walker (FrameWalker.swift).
extension SegmentFile {
    func readHeader() throws(SystemError) -> Result<SegmentHeader, FrameDefect> {
        try SegmentFrames.header(self)
    }

    func probe(at offset: Int64, mode: ScanMode) throws(SystemError) -> FrameProbe {
        try SegmentFrames.probe(self, at: offset, mode: mode)
    }

    /// The highest seq of any valid record at or after `from`, so a quarantined segment's seqs
    /// are never handed out again.
    func maxValidSeq(from: Int64) throws(SystemError) -> UInt64? {
        try SegmentFrames.maxValidSeq(self, from: from)
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
    var walker = SegmentFrameWalker(file, from: offset, expectedSeq: expectedSeq, mode: mode)
    var lastProgress = offset
    while true {
        switch try walker.next() {
        case .end:
            progress(walker.offset - lastProgress)
            return scan
        case .record(let header, let key, let json, let at):
            visit(header, key, json, at)
            scan.records += 1
            if scan.firstSeq == nil {
                scan.firstSeq = header.seq
                scan.firstIngestMillis = header.ingestMillis
            }
            scan.lastSeq = header.seq
            scan.lastIngestMillis = header.ingestMillis
            scan.validEnd = walker.offset
            if walker.offset - lastProgress >= 4 << 20 {
                progress(walker.offset - lastProgress)
                lastProgress = walker.offset
            }
        case .fault(let fault, let at, let tornTail):
            scan.failureOffset = at
            scan.failureDetail = fault.detail
            scan.failureIsTornTail = tornTail
            // A seq out of order stops the scan where it is; other damage counts the whole file read.
            if case .outOfOrder = fault { progress(at - lastProgress) } else { progress(file.size - lastProgress) }
            return scan
        }
    }
}
