@preconcurrency import Glibc
import PushSystem

/// The result of `JournalVerifier.verify`. `Sendable` value.
package struct VerifyReport: Sendable {
    package enum Status: String, Sendable {
        case pass = "PASS"
        case fail = "FAIL"
        /// Only a torn tail: recovery will cut it.
        case tornTail = "TORN"
    }

    package struct Segment: Sendable {
        package var name: String
        package var status: Status
        package var records: Int
        package var bytes: Int64
        package var firstSeq: UInt64?
        package var lastSeq: UInt64?
        /// "corruption detected at <path>:<offset> (of <size> bytes, <pct>%): <detail>" or the torn-tail note.
        package var problem: String?
    }

    package var segments: [Segment] = []
    package var records = 0
    package var bytes: Int64 = 0
    package var firstSeq: UInt64?
    package var lastSeq: UInt64?
    /// Journal-wide findings that are damage (exit 1).
    package var problems: [String] = []
    /// Findings that are not damage (an ignored checkpoint, a gap explained by a quarantined segment).
    package var notes: [String] = []
    package var duplicateKeys = 0
    package var seqGaps = 0
    package var tornBytes: Int64 = 0
    package var committedSeq: UInt64?
    /// The directory does not exist (or is not a directory): there is no journal to verify.
    /// Not corruption; `exitCode` is 1 and `lines` say so.
    package var noJournal = false

    /// 0 = clean, 1 = corruption or no journal, 2 = torn tail only (recoverable).
    package var exitCode: Int32 {
        if noJournal { return 1 }
        if !problems.isEmpty || segments.contains(where: { $0.status == .fail }) { return 1 }
        if segments.contains(where: { $0.status == .tornTail }) { return 2 }
        return 0
    }

    /// Human-readable lines, journald's `--verify` style.
    package var lines: [String] {
        if noJournal { return problems }
        var out = segments.map { segment in
            "\(segment.status.rawValue): \(segment.name) (\(segment.records) records, \(segment.bytes) bytes)"
                + (segment.problem.map { " - \($0)" } ?? "")
        }
        out += problems
        out += notes.map { "note: \($0)" }
        let range = firstSeq.map { "seq \($0)...\(lastSeq ?? $0)" } ?? "no records"
        let verdict = switch exitCode {
        case 0: "clean"
        case 2: "torn tail only (\(tornBytes) bytes; recovery will cut it)"
        default: "CORRUPTION FOUND"
        }
        out.append("\(segments.count) segments, \(records) records, \(bytes) bytes, \(range), "
                   + "\(duplicateKeys) duplicate ids, \(seqGaps) seq gaps: \(verdict)")
        return out
    }
}

/// Whether a writer holds `LOCK` (probed with a non-blocking `flock`, released at once).
func isWriterRunning(_ directory: String, fs: any FileSystem) -> Bool {
    guard let fd = try? fs.open(directory + "/" + JournalFiles.lock, O_RDONLY, mode: 0) else { return false }
    defer { fs.close(fd) }
    return (try? fs.tryLock(fd, subject: JournalFiles.lock)) == false
}

/// `journal verify`: checks every record of every segment, read-only (docs/design/journal.md,
/// "Verify"). Safe alongside a running writer: bytes past its synced end are reported as in flight,
/// not torn.
package enum JournalVerifier {
    /// Verifies the journal in `directory`. `progress` receives (bytes done, bytes total) every
    /// few MiB, for a progress display on large journals.
    package static func verify(directory: String, fileSystem: any FileSystem = RealFileSystem(),
                               progress: ((bytesDone: Int64, bytesTotal: Int64)) -> Void = { _ in }) -> VerifyReport {
        var report = VerifyReport()
        var status = stat()
        // A simulated file system answers only through the seam; the real one says more via stat(2).
        if !(fileSystem is RealFileSystem) {
            if !fileSystem.exists(directory) {
                report.noJournal = true
                report.problems.append("no journal at \(directory): the directory does not exist")
                return report
            }
            status.st_mode = S_IFDIR
        } else if stat(directory, &status) != 0 {
            let error = SystemError(call: "stat", errno: errno, subject: directory)
            report.noJournal = true
            report.problems.append(error.errno == ENOENT ? "no journal at \(directory): the directory does not exist"
                                   : "no journal at \(directory): \(error)")
            return report
        }
        if status.st_mode & S_IFMT != S_IFDIR {
            report.noJournal = true
            report.problems.append("no journal at \(directory): not a directory")
            return report
        }
        // Read before scanning: records synced while we scan can only make the journal longer.
        let mark = readCommittedMark(directory, fs: fileSystem)
        report.committedSeq = mark?.seq
        let writerRunning = isWriterRunning(directory, fs: fileSystem)
        let listed: [(name: String, firstSeq: UInt64)]
        do { listed = try listSegments(directory, fs: fileSystem) } catch {
            report.problems.append("cannot list \(directory): \(error)")
            return report
        }
        let quarantined = quarantinedFirstSeqs(directory, fs: fileSystem)
        // Seqs below RETAINED were retired by retention (deleted or archived), not lost. Read
        // after listing: a segment listed and then retired by the running daemon is skipped.
        var retainedFloor = readRetainedFloor(directory)
        if retainedFloor > 1 {
            report.notes.append("seq 1...\(retainedFloor - 1) retired by retention (deleted or in \(JournalFiles.archive)/)")
        }
        var segments: [(name: String, firstSeq: UInt64)] = []
        for segment in listed {
            if segment.firstSeq < retainedFloor {
                report.notes.append("\(segment.name) is below the retained floor: retirement in progress, recovery removes it")
            } else {
                segments.append(segment)
            }
        }

        var files: [SegmentFile] = []
        for segment in segments {
            do { files.append(try SegmentFile(directory: directory, name: segment.name, fs: fileSystem)) } catch {
                if error.errno == ENOENT, segment.firstSeq < readRetainedFloor(directory) {
                    retainedFloor = readRetainedFloor(directory)
                    report.notes.append("\(segment.name) was retired by retention while verify ran")
                    continue
                }
                report.problems.append("cannot open \(directory)/\(segment.name): \(error)")
                return report
            }
        }
        let total = files.reduce(Int64(0)) { $0 + $1.size }
        var done: Int64 = 0
        // Ids are compared as bytes, as the writer's dedup index does: as `String`s an NFC and an
        // NFD spelling of one id would be equal here and distinct there. First pass: a 64-bit
        // hash of each id in a flat table (~10 bytes an id, no allocation per record); ids whose
        // hash was seen before are suspects, counted exactly by a second pass over those alone.
        // That pass keeps each suspect's latest ingest time: a repeat further apart than the
        // dedup window (`RETAINED`) is a re-delivery after the window, journaled again by design.
        var hashes = KeyFingerprints(minimumCapacity: Int(clamping: total / 256))
        var suspects = Set<UInt64>()
        var scanned: [SegmentFile] = []
        let dedupWindowMillis = readRetainedMark(directory)?.dedupWindowMillis ?? 0
        var journalID: [UInt8]?
        var previousLast: UInt64?
        for (index, file) in files.enumerated() {
            let isLast = index == files.count - 1
            var verdict = VerifyReport.Segment(name: file.name, status: .pass, records: 0, bytes: file.size)
            defer {
                report.segments.append(verdict)
                report.bytes += file.size
            }
            func corruption(_ offset: Int64, _ detail: String) -> String {
                let pct = file.size > 0 ? Double(offset) * 100 / Double(file.size) : 0
                let rounded = (pct * 10).rounded() / 10
                return "corruption detected at \(file.path):\(offset) (of \(file.size) bytes, \(rounded)%): \(detail)"
            }
            let header: SegmentHeader
            do {
                switch try file.readHeader() {
                case .success(let h): header = h
                case .failure(let defect):
                    verdict.status = .fail
                    verdict.problem = corruption(0, defect.detail)
                    done += file.size
                    progress((done, total))
                    continue
                }
            } catch {
                verdict.status = .fail
                verdict.problem = "read error: \(error)"
                continue
            }
            if let journalID, journalID != header.journalID {
                verdict.status = .fail
                verdict.problem = "segment belongs to another journal (journal id differs)"
                continue
            }
            journalID = header.journalID
            if header.firstSeq != JournalFiles.firstSeq(ofSegment: file.name) {
                verdict.status = .fail
                verdict.problem = corruption(16, "header first seq \(header.firstSeq) does not match the file name")
                continue
            }
            // The journal starts at seq 1: a first segment named higher lost the ones before it.
            if let previousLast = previousLast ?? (index == 0 ? retainedFloor - 1 : nil) {
                if header.firstSeq <= previousLast {
                    verdict.status = .fail
                    verdict.problem = corruption(16, "first seq \(header.firstSeq) overlaps the previous segment (last seq \(previousLast))")
                    continue
                }
                if header.firstSeq != previousLast + 1 {
                    let explained = quarantined.contains { $0 > previousLast && $0 < header.firstSeq }
                    let text = "seq gap: \(previousLast + 1)...\(header.firstSeq - 1) missing before \(file.name)"
                    if explained {
                        report.notes.append(text + " (a quarantined segment covers it)")
                    } else {
                        report.seqGaps += 1
                        report.problems.append(text)
                    }
                }
            }
            let scan: SegmentScan
            do {
                let before = done
                scan = try scanSegment(file, from: Int64(SegmentHeader.size), expectedSeq: header.firstSeq, mode: .keys,
                                       progress: { step in done += step; progress((done, total)) }) { _, key, _, _ in
                    let hash = Self.idHash(key!)
                    if hashes.contains(fingerprint: hash) { suspects.insert(hash) } else { hashes.insert(fingerprint: hash) }
                }
                done = before + file.size
                progress((done, total))
                scanned.append(file)
            } catch {
                verdict.status = .fail
                verdict.problem = "read error: \(error)"
                continue
            }
            verdict.records = scan.records
            verdict.firstSeq = scan.firstSeq
            verdict.lastSeq = scan.lastSeq
            report.records += scan.records
            if report.firstSeq == nil { report.firstSeq = scan.firstSeq }
            if let last = scan.lastSeq { report.lastSeq = last }
            previousLast = scan.lastSeq ?? (header.firstSeq - 1)
            if let offset = scan.failureOffset {
                if isLast && scan.failureIsTornTail && writerRunning, let mark,
                   (mark.segmentFirstSeq == header.firstSeq && offset >= mark.endOffset) || header.firstSeq > mark.seq {
                    // Past the synced end of the running writer's segment, or in a segment it cut
                    // after the last sync (none of its records is acknowledged yet): a batch in
                    // flight, or a failed write that the writer is about to cut back.
                    report.notes.append("\(scan.size - offset) bytes after \(file.path):\(offset) are being written by the running writer")
                } else if isLast && scan.failureIsTornTail {
                    verdict.status = .tornTail
                    report.tornBytes = scan.size - offset
                    verdict.problem = "torn tail at \(file.path):\(offset): \(scan.size - offset) bytes (\(scan.failureDetail ?? ""))"
                } else {
                    verdict.status = .fail
                    verdict.problem = corruption(offset, scan.failureDetail ?? "")
                }
            }
        }
        if !suspects.isEmpty {
            let repeats = countDuplicates(scanned, among: suspects, dedupWindowMillis: dedupWindowMillis)
            report.duplicateKeys = repeats.duplicates
            if repeats.afterWindow > 0 {
                report.notes.append("\(repeats.afterWindow) records repeat an id delivered again after the dedup window")
            }
        }
        if report.duplicateKeys > 0 {
            report.problems.append("\(report.duplicateKeys) records repeat an id already journaled")
        }
        // The journal's end is its last record, or one before an empty newest segment: recovery
        // that accepted a loss starts a new segment above the watermark before any record is in it.
        let end = max(report.lastSeq ?? 0, previousLast ?? 0)
        if let committed = report.committedSeq, committed > end {
            report.problems.append("COMMITTED names seq \(committed) but the journal ends at \(end): acknowledged records are missing")
        }
        if let bytes = try? fileSystem.readFile(directory + "/" + JournalFiles.checkpoint, limit: 1 << 30) {
            if let checkpoint = DedupCheckpoint.validated(bytes) {
                if checkpoint.throughSeq > (report.lastSeq ?? 0) {
                    report.notes.append("dedup.ckpt covers seq \(checkpoint.throughSeq), beyond the journal; it will be rebuilt at start")
                }
            } else {
                report.notes.append("dedup.ckpt is damaged; it will be rebuilt at start")
            }
        }
        return report
    }
}

extension JournalVerifier {
    /// FNV-1a over the id's UTF-8 bytes, folded to never be 0 (the table's empty mark). Not
    /// for adversaries: a collision only makes the second pass look at one more id.
    static func idHash(_ key: String) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in key.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return hash == 0 ? 1 : hash
    }

    /// The second pass: among ids whose hash repeats, how many records repeat an id exactly.
    /// Segments that cannot be read again are skipped (the first pass reported them).
    /// Exact repeats among `suspects`: `duplicates` within the dedup window (0 = no window),
    /// `afterWindow` further apart than it.
    static func countDuplicates(_ files: [SegmentFile], among suspects: Set<UInt64>,
                                dedupWindowMillis: Int64) -> (duplicates: Int, afterWindow: Int) {
        var latest: [[UInt8]: Int64] = [:]
        var duplicates = 0
        var afterWindow = 0
        for file in files {
            guard case .success(let header)? = try? file.readHeader() else { continue }
            _ = try? scanSegment(file, from: Int64(SegmentHeader.size), expectedSeq: header.firstSeq, mode: .keys) { record, key, _, _ in
                guard let key, suspects.contains(idHash(key)) else { return }
                guard let earlier = latest.updateValue(record.ingestMillis, forKey: Array(key.utf8)) else { return }
                if dedupWindowMillis > 0 && record.ingestMillis &- earlier > dedupWindowMillis {
                    afterWindow += 1
                } else {
                    duplicates += 1
                }
            }
        }
        return (duplicates, afterWindow)
    }
}

/// Summary counts of a journal (`journal stats`). `Sendable` value.
package struct JournalStats: Sendable {
    package var segments = 0
    package var records = 0
    package var bytes: Int64 = 0
    package var firstSeq: UInt64?
    package var lastSeq: UInt64?
    package var firstIngestMillis: Int64?
    package var lastIngestMillis: Int64?
    /// The `COMMITTED` watermark, if valid.
    package var committedSeq: UInt64?
    /// Bytes after the last whole record of the newest segment (a torn tail, or a write in progress).
    package var trailingBytes: Int64 = 0

    package init() {}
}

/// Reads `JournalStats` from frame headers only (bodies are not checksummed; use verify for that).
package func journalStats(directory: String, fileSystem: any FileSystem = RealFileSystem()) throws(JournalError) -> JournalStats {
    var stats = JournalStats()
    stats.committedSeq = readCommittedMark(directory, fs: fileSystem)?.seq
    for segment in try listSegments(directory, fs: fileSystem) {
        let io = { (error: SystemError) in JournalError(.io(error), directory: directory) }
        let file: SegmentFile
        let decoded: Result<SegmentHeader, FrameDefect>
        do {
            file = try SegmentFile(directory: directory, name: segment.name, fs: fileSystem)
            decoded = try file.readHeader()
        } catch { throw io(error) }
        stats.segments += 1
        stats.bytes += file.size
        guard case .success(let header) = decoded else {
            throw JournalError(.corrupt(segment: segment.name, offset: 0, detail: "bad segment header"), directory: directory)
        }
        do {
            let scan = try scanSegment(file, from: Int64(SegmentHeader.size), expectedSeq: header.firstSeq, mode: .headers) { _, _, _, _ in }
            stats.records += scan.records
            if stats.firstSeq == nil {
                stats.firstSeq = scan.firstSeq
                stats.firstIngestMillis = scan.firstIngestMillis
            }
            if scan.lastSeq != nil {
                stats.lastSeq = scan.lastSeq
                stats.lastIngestMillis = scan.lastIngestMillis
            }
            stats.trailingBytes = scan.size - scan.validEnd
        } catch { throw io(error) }
    }
    return stats
}
