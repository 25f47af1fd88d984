@preconcurrency import Glibc
import PushSystem

/// The state recovery hands to the writer.
struct RecoveredJournal {
    var journalID: [UInt8]
    var lastSeq: UInt64
    var nextSeq: UInt64
    /// The segment to keep appending to, and its valid end; `nil` = cut a new segment first.
    var active: (firstSeq: UInt64, end: Int64)?
    var segmentCount: Int
    /// First seqs of the retained segments, oldest first, for the checkpoint's segment list.
    var segmentFirstSeqs: [UInt64]
    var keys: KeyFingerprints
    var report: RecoveryReport
}

/// Start-up recovery (docs/design/journal.md, "Recovery"): check segment headers, scan from the
/// checkpoint (or the start), cut a torn tail, refuse or quarantine mid-file damage, rebuild the
/// dedup keys. Idempotent: a second run over its own result changes nothing.
struct Recovery {
    let directory: String
    let dirfd: Int32
    let io: JournalIO
    let options: JournalOptions

    private enum Action {
        case truncate(segment: String, at: Int64, size: Int64, detail: String)
        case quarantine(segment: String)
    }

    private struct Pass {
        var journalID: [UInt8]?
        var keys = KeyFingerprints()
        var lastSeq: UInt64 = 0
        var maxSeq: UInt64 = 0
        var retained: [(firstSeq: UInt64, end: Int64)] = []
        var actions: [Action] = []
        var records = 0
        var checkpointUsed = false
        /// Seq ranges missing between segments (only under `.quarantineSegment`).
        var missing: [ClosedRange<UInt64>] = []
    }

    func sysErr(_ e: SystemError) -> JournalError { io.err(e) }

    func sys<T>(_ body: () throws(SystemError) -> T) throws(JournalError) -> T {
        do { return try body() } catch { throw io.err(error) }
    }

    func run() throws(JournalError) -> RecoveredJournal {
        let started = Posix.monotonicNanos()
        let names: [String]
        do { names = try io.fs.listDirectory(directory) } catch { throw sysErr(error) }
        var removedTemp = false
        for name in names where name.hasSuffix(".tmp") {
            try io.unlinkat(dirfd, name)
            removedTemp = true
        }
        if removedTemp { try io.fsync(dirfd, subject: directory) }
        let listed = names.compactMap { name in JournalFiles.firstSeq(ofSegment: name).map { (name: name, firstSeq: $0) } }
            .sorted { $0.firstSeq < $1.firstSeq }
        // Seqs below RETAINED were retired on purpose (Retention.swift), not lost.
        let (retainedFloor, segments) = try finishInterruptedRetention(directory: directory, dirfd: dirfd, io: io, segments: listed)

        var checkpoint: (checkpoint: DedupCheckpoint, table: KeyFingerprints)?
        if let bytes = try? io.fs.readFile(directory + "/" + JournalFiles.checkpoint, limit: 1 << 30) {
            checkpoint = DedupCheckpoint.decodeWithTable(bytes)
        }
        let pass: Pass
        if let checkpoint, let used = try scan(segments, checkpoint: checkpoint, retainedFloor: retainedFloor) {
            pass = used
        } else {
            pass = try scan(segments, checkpoint: nil, retainedFloor: retainedFloor)!
        }

        // Every seq up to COMMITTED was acknowledged to a producer. If the journal holds none of
        // them past `maxSeq`, they were lost (a truncated or deleted segment, a damaged last
        // record, a device that ignored a flush): that is corruption, not a torn tail. Decided
        // before anything on disk changes, so a refusal leaves the evidence as it was.
        let committed = readCommittedMark(directory, fs: io.fs)
        var lost: ClosedRange<UInt64>?
        if let committed, committed.seq > pass.maxSeq {
            let range = (pass.maxSeq + 1)...committed.seq
            lost = range
            if case .refuse = options.corruptionPolicy {
                let place = lossPlace(pass, committed: committed)
                throw JournalError(.corrupt(segment: place.segment, offset: place.offset,
                                            detail: "acknowledged records seq \(range.lowerBound)...\(range.upperBound) are missing "
                                                + "(COMMITTED names seq \(committed.seq), the journal ends at seq \(pass.lastSeq)): "
                                                + "their segment was truncated, damaged or removed"),
                                   directory: directory)
            }
        }

        StopPoints.pass(.recovery)
        var report = RecoveryReport()
        report.records = pass.records
        report.checkpointUsed = pass.checkpointUsed
        report.missingSeqRanges = pass.missing.map { "seq \($0.lowerBound)...\($0.upperBound)" }
        for action in pass.actions {
            switch action {
            case .truncate(let segment, let at, let size, let detail):
                try cutTornTail(segment: segment, at: at, size: size)
                report.tornSegment = segment
                report.tornBytesTruncated = size - at
                report.tornDetail = detail
            case .quarantine(let segment):
                try quarantine(segment)
                report.quarantined.append(segment)
            }
        }
        // Accepted under the quarantine policy, and marked so the next start and `verify` see
        // the gap explained instead of refusing again.
        for range in pass.missing { try markLost(range, detail: "missing between segments") }
        if let lost {
            // Under the quarantine policy the loss is accepted but recorded: a marker in
            // quarantine/ named like the first lost seq's segment explains the gap to later
            // starts and to `verify`, and the seqs are never handed out again.
            try markLost(lost, detail: "COMMITTED named seq \(lost.upperBound)")
            report.lostAcknowledgedRecords = lost.upperBound - lost.lowerBound + 1
            report.lostSeqRange = lost
        }

        // Seqs are never reused: not those of quarantined records, nor acknowledged ones that are gone.
        let nextSeq = max(pass.maxSeq, committed?.seq ?? 0) + 1
        var active: (firstSeq: UInt64, end: Int64)?
        if nextSeq == pass.lastSeq + 1, pass.actions.allSatisfy({ if case .quarantine = $0 { false } else { true } }) {
            active = pass.retained.last
        }
        report.segments = pass.retained.count
        report.lastSeq = pass.lastSeq
        report.dedupKeys = pass.keys.count
        report.durationNanos = Posix.monotonicNanos() - started
        var id = pass.journalID ?? []
        if id.isEmpty {
            var generator = SystemRandomNumberGenerator()
            id = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
        }
        return RecoveredJournal(journalID: id, lastSeq: pass.lastSeq, nextSeq: nextSeq, active: active,
                                segmentCount: pass.retained.count, segmentFirstSeqs: pass.retained.map(\.firstSeq),
                                keys: pass.keys, report: report)
    }

    /// Where the first lost record should have been, for the refusal: the cut point of a torn
    /// (really: damaged) tail, else the end of the newest segment, else the segment `COMMITTED` names.
    private func lossPlace(_ pass: Pass, committed: CommittedMark) -> (segment: String, offset: Int64) {
        for action in pass.actions {
            if case .truncate(let segment, let at, _, _) = action { return (segment, at) }
        }
        if let last = pass.retained.last { return (JournalFiles.segmentName(firstSeq: last.firstSeq), max(last.end, 0)) }
        return (JournalFiles.segmentName(firstSeq: committed.segmentFirstSeq), 0)
    }

    /// Writes `quarantine/<segment name of the first lost seq>.lost-<millis>`, a short text
    /// saying which acknowledged records are gone, and syncs it.
    private func markLost(_ lost: ClosedRange<UInt64>, detail: String) throws(JournalError) {
        try ensureQuarantineDirectory()
        let name = "\(JournalFiles.quarantine)/\(JournalFiles.segmentName(firstSeq: lost.lowerBound)).lost-\(Posix.wallClockMillis())"
        let text = "acknowledged records seq \(lost.lowerBound)...\(lost.upperBound) were missing at recovery "
            + "(\(detail)); they were accepted as lost under the quarantine policy\n"
        let fd = try io.openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC)
        defer { io.close(fd) }
        try sys { () throws(SystemError) in try io.writeAll(fd, Array(text.utf8), subject: name) }
        try io.fsync(fd, subject: name)
        let qfd = try io.openat(dirfd, JournalFiles.quarantine, O_RDONLY | O_DIRECTORY)
        defer { io.close(qfd) }
        try io.fsync(qfd, subject: JournalFiles.quarantine)
    }

    /// One read-only pass. Returns `nil` when the checkpoint turns out not to fit the segments
    /// (the caller then rescans everything).
    private func scan(_ segments: [(name: String, firstSeq: UInt64)], checkpoint loaded: (checkpoint: DedupCheckpoint, table: KeyFingerprints)?,
                      retainedFloor: UInt64 = 1) throws(JournalError) -> Pass? {
        var pass = Pass()
        // The journal starts at the retained floor: seqs below it were retired, not lost.
        pass.lastSeq = retainedFloor - 1
        pass.maxSeq = retainedFloor - 1
        var startIndex = 0
        let checkpoint = loaded?.checkpoint
        if let checkpoint, let table = loaded?.table {
            guard let index = segments.firstIndex(where: { $0.firstSeq == checkpoint.segmentFirstSeq }),
                  checkpoint.throughSeq + 1 >= checkpoint.segmentFirstSeq
            else { return nil }
            let file = try sys { () throws(SystemError) in try SegmentFile(directory: directory, name: segments[index].name, fs: io.fs) }
            guard case .success(let header) = try sys({ () throws(SystemError) in try file.readHeader() }),
                  header.journalID == checkpoint.journalID,
                  checkpoint.offset >= Int64(SegmentHeader.size), checkpoint.offset <= file.size,
                  // The segments it trusts without reading must all still be there: a deleted
                  // one would otherwise go unnoticed.
                  segments[...index].map(\.firstSeq) == checkpoint.segments.filter({ $0 >= retainedFloor })
            else { return nil }
            switch try sys({ () throws(SystemError) in try file.probe(at: checkpoint.offset, mode: .keys) }) {
            case .end: break
            case .record(let h, _, _) where h.seq == checkpoint.throughSeq + 1: break
            default: return nil
            }
            startIndex = index
            pass.journalID = checkpoint.journalID
            pass.keys = table
            pass.lastSeq = checkpoint.throughSeq
            pass.maxSeq = checkpoint.throughSeq
            pass.checkpointUsed = true
            // Segments before the checkpoint are trusted, as sealed segments are
            // (docs/design/journal.md, "Recovery", step 3).
            for earlier in segments[..<index] { pass.retained.append((earlier.firstSeq, -1)) }
        }

        for index in startIndex..<segments.count {
            let segment = segments[index]
            let isLast = index == segments.count - 1
            do {
                let file = try sys { () throws(SystemError) in try SegmentFile(directory: directory, name: segment.name, fs: io.fs) }
                let header: SegmentHeader
                switch try sys({ () throws(SystemError) in try file.readHeader() }) {
                case .success(let h): header = h
                case .failure(let defect):
                    pass.maxSeq = max(pass.maxSeq, try sys { () throws(SystemError) in try file.maxValidSeq(from: 64) } ?? 0)
                    try damaged(segment.name, offset: 0, detail: defect.detail, into: &pass)
                    continue
                }
                if let id = pass.journalID, id != header.journalID {
                    throw JournalError(.foreignSegment(segment: segment.name), directory: directory)
                }
                pass.journalID = header.journalID
                if header.firstSeq != segment.firstSeq {
                    try damaged(segment.name, offset: 16, detail: "header first seq \(header.firstSeq) does not match the file name", into: &pass)
                    continue
                }
                let resuming = index == startIndex && checkpoint != nil
                if !resuming && header.firstSeq <= pass.maxSeq {
                    try damaged(segment.name, offset: 16, detail: "first seq \(header.firstSeq) overlaps the previous segment", into: &pass)
                    continue
                }
                // Also for the first segment: the journal starts at seq 1, so a first segment
                // named higher means the ones before it are gone (unless quarantined).
                if !resuming && header.firstSeq > pass.lastSeq + 1 {
                    let explained = pass.actions.contains { if case .quarantine = $0 { true } else { false } }
                        || quarantinedFirstSeqs(directory, fs: io.fs).contains { $0 > pass.lastSeq && $0 < header.firstSeq }
                    if !explained {
                        let missing = (pass.lastSeq + 1)...(header.firstSeq - 1)
                        if case .refuse = options.corruptionPolicy {
                            throw JournalError(.corrupt(segment: segment.name, offset: 16,
                                                        detail: "records seq \(missing.lowerBound)...\(missing.upperBound) are missing: "
                                                            + "a segment before this one is gone"),
                                               directory: directory)
                        }
                        pass.missing.append(missing)
                    }
                }
                // The checkpoint's own segment is still read from its start: it is usually the
                // active one, and damage there must stop start-up, not hide behind the checkpoint.
                let from = Int64(SegmentHeader.size)
                let expected = header.firstSeq
                var keys: [KeyFingerprints.Entry] = []
                let scan = try sys { () throws(SystemError) in
                    try scanSegment(file, from: from, expectedSeq: expected, mode: .keys) { header, key, _, at in
                        keys.append(KeyFingerprints.Entry(fingerprint: options.fingerprint(key!), seq: header.seq, offset: at))
                    }
                }
                pass.records += scan.records
                if let offset = scan.failureOffset {
                    if isLast && scan.failureIsTornTail {
                        pass.actions.append(.truncate(segment: segment.name, at: offset, size: scan.size, detail: scan.failureDetail ?? ""))
                    } else {
                        let beyond = try sys { () throws(SystemError) in try file.maxValidSeq(from: offset + 8) }
                        pass.maxSeq = max(pass.maxSeq, scan.lastSeq ?? 0, beyond ?? 0)
                        try damaged(segment.name, offset: offset, detail: scan.failureDetail ?? "", into: &pass)
                        continue
                    }
                }
                for entry in keys { pass.keys.insert(fingerprint: entry.fingerprint, seq: entry.seq, offset: entry.offset) }
                pass.lastSeq = scan.lastSeq ?? (header.firstSeq - 1)
                pass.maxSeq = max(pass.maxSeq, pass.lastSeq)
                pass.retained.append((header.firstSeq, scan.validEnd))
            }
        }
        if let checkpoint {
            // The checkpoint's keys must be exactly those of the retained journal: not if the
            // journal lost records it covers, nor if a segment it covers goes to quarantine.
            if pass.lastSeq < checkpoint.throughSeq { return nil }
            if pass.actions.contains(where: { if case .quarantine = $0 { true } else { false } }) { return nil }
        }
        return pass
    }

    private func damaged(_ segment: String, offset: Int64, detail: String, into pass: inout Pass) throws(JournalError) {
        switch options.corruptionPolicy {
        case .refuse:
            throw JournalError(.corrupt(segment: segment, offset: offset, detail: detail), directory: directory)
        case .quarantineSegment:
            pass.actions.append(.quarantine(segment: segment))
        }
    }

    private func ensureQuarantineDirectory() throws(JournalError) {
        do { try io.fs.mkdirIfMissing(directory + "/" + JournalFiles.quarantine) } catch { throw sysErr(error) }
    }

    /// Keeps the cut bytes for forensics (etcd's `.broken`), then truncates and syncs.
    private func cutTornTail(segment: String, at offset: Int64, size: Int64) throws(JournalError) {
        try ensureQuarantineDirectory()
        let tail = try sys { () throws(SystemError) in
            try SegmentFile(directory: directory, name: segment, fs: io.fs).readAll(from: offset, to: size)
        }
        let name = "\(JournalFiles.quarantine)/\(segment).torn-\(offset)-\(Posix.wallClockMillis())"
        let tailfd = try io.openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC)
        defer { io.close(tailfd) }
        try sys { () throws(SystemError) in try io.writeAll(tailfd, tail, subject: name) }
        StopPoints.pass(.recovery)
        let fd = try io.openat(dirfd, segment, O_WRONLY)
        defer { io.close(fd) }
        try io.ftruncate(fd, offset, subject: segment)
        try io.fdatasync(fd, subject: segment)
    }

    private func quarantine(_ segment: String) throws(JournalError) {
        try ensureQuarantineDirectory()
        let target = "\(JournalFiles.quarantine)/\(segment).\(Posix.wallClockMillis())"
        try io.renameat(dirfd, segment, dirfd, target)
        try io.fsync(dirfd, subject: directory)
        let qfd = try io.openat(dirfd, JournalFiles.quarantine, O_RDONLY | O_DIRECTORY)
        defer { io.close(qfd) }
        try io.fsync(qfd, subject: JournalFiles.quarantine)
    }
}
