@preconcurrency import Glibc
import PushSystem

/// Lists the segments of a journal directory, oldest first.
func listSegments(_ directory: String, fs: any FileSystem) throws(JournalError) -> [(name: String, firstSeq: UInt64)] {
    let names: [String]
    do { names = try fs.listDirectory(directory) } catch { throw JournalError(.io(error), directory: directory) }
    return names.compactMap { name in JournalFiles.firstSeq(ofSegment: name).map { (name: name, firstSeq: $0) } }
        .sorted { $0.firstSeq < $1.firstSeq }
}

/// First seqs of the segments in `quarantine/` (names start with the segment's name).
func quarantinedFirstSeqs(_ directory: String, fs: any FileSystem) -> [UInt64] {
    ((try? fs.listDirectory(directory + "/" + JournalFiles.quarantine)) ?? [])
        .compactMap { name in name.count >= 24 ? JournalFiles.firstSeq(ofSegment: String(name.prefix(24))) : nil }
}

func readCommittedMark(_ directory: String, fs: any FileSystem) -> CommittedMark? {
    (try? fs.readFile(directory + "/" + JournalFiles.committed, limit: 4096)).flatMap(CommittedMark.decode)
}

/// Reads records in seq order, read-only, alongside a running writer (docs/design/journal.md, "Readers").
///
/// By default only records at or below the `COMMITTED` watermark are returned, so a reader
/// never acts on a record a power cut could still take away; without a valid `COMMITTED` it
/// stops at the first incomplete record. An incomplete or invalid record at the end of the
/// newest segment means "not written yet", not corruption: `next()` returns `nil` and a later
/// call continues from there. Damage in an older segment throws `.corrupt`.
///
/// Not `Sendable`: owns an open segment file. Blocking: use from a dedicated thread.
package final class JournalReader {
    package let directory: String
    package let committedOnly: Bool
    package let fileSystem: any FileSystem
    private var fromSeq: UInt64
    private var current: SegmentFile?
    private var currentFirstSeq: UInt64 = 0
    private var offset: Int64 = 0
    private var committedBound: UInt64 = 0
    /// The error that ended a `records(fromSeq:)` iteration, if any.
    package private(set) var lastError: JournalError?
    /// The last seq the writer of this process announced durable, when the caller has it
    /// (a follower's ``FollowerContext``, from the writer's ``CommitFeed``): `next()` past it
    /// returns `nil` without touching a file. A caught-up follower woken by every commit
    /// otherwise probed the segment twice, re-read its size and listed the journal
    /// directory at each step, for nothing: at 1,000 records a second that listing was a
    /// fifth of the exporter's CPU. Records up to it are durable, so the `COMMITTED` mark is
    /// not read for them either. `nil` = read the files to know (other processes, the CLI).
    package var announcedLastSeq: UInt64?

    /// Opens a reader positioned at `fromSeq` (0 or 1 = from the beginning).
    package init(directory: String, fromSeq: UInt64 = 0, committedOnly: Bool = true,
                 fileSystem: any FileSystem = RealFileSystem()) throws(JournalError) {
        self.directory = directory
        self.fileSystem = fileSystem
        self.fromSeq = fromSeq
        self.committedOnly = committedOnly
        guard fileSystem.exists(directory) else {
            throw JournalError(.io(SystemError(call: "stat", errno: ENOENT, subject: directory)), directory: directory)
        }
    }

    /// The seq of the newest whole record, reading only the newest segment's frame headers
    /// (for `journal tail`: start at `lastSeq - n + 1`). `nil` for an empty journal.
    package static func lastSeq(directory: String, fileSystem: any FileSystem = RealFileSystem()) throws(JournalError) -> UInt64? {
        for segment in try listSegments(directory, fs: fileSystem).reversed() {
            let file: SegmentFile
            let decoded: Result<SegmentHeader, FrameDefect>
            do {
                file = try SegmentFile(directory: directory, name: segment.name, fs: fileSystem)
                decoded = try file.readHeader()
            } catch { throw JournalError(.io(error), directory: directory) }
            guard case .success(let header) = decoded else {
                throw JournalError(.corrupt(segment: segment.name, offset: 0, detail: "bad segment header"), directory: directory)
            }
            let scan: SegmentScan
            do {
                scan = try scanSegment(file, from: Int64(SegmentHeader.size), expectedSeq: header.firstSeq, mode: .headers) { _, _, _, _ in }
            } catch { throw JournalError(.io(error), directory: directory) }
            if let last = scan.lastSeq { return last }
        }
        return nil
    }

    /// Moves to the first record with seq ≥ `seq`.
    package func seek(toSeq seq: UInt64) {
        fromSeq = seq
        current = nil
    }

    /// The next record, or `nil` if none is available (yet).
    package func next() throws(JournalError) -> JournalRecord? {
        if let announcedLastSeq, fromSeq > announcedLastSeq { return nil }
        while true {
            if current == nil {
                let segments = try listSegments(directory, fs: fileSystem)
                guard let pick = segments.last(where: { $0.firstSeq <= max(fromSeq, 1) }) ?? segments.first else { return nil }
                try open(pick.name, firstSeq: pick.firstSeq)
            }
            guard let file = current else { return nil }
            var probe: FrameProbe
            do {
                // The size is re-read (an fstat) only when the known part is used up, not per record.
                probe = try file.probe(at: offset, mode: .full)
                if case .record = probe {} else {
                    try file.refreshSize()
                    probe = try file.probe(at: offset, mode: .full)
                }
            } catch {
                throw JournalError(.io(error), directory: directory)
            }
            switch probe {
            case .record(let header, let key, let json):
                if committedOnly, header.seq > committedBound, let announcedLastSeq, header.seq <= announcedLastSeq {
                    // Announced by the writer after its sync (and after it wrote the mark):
                    // no need to read the mark file to know.
                    committedBound = announcedLastSeq
                }
                if committedOnly, header.seq > committedBound {
                    // Re-read the watermark only when a record passes the cached one.
                    guard let mark = readCommittedMark(directory, fs: fileSystem) else {
                        committedBound = .max  // no valid COMMITTED: fall back to whole records only
                        continue
                    }
                    committedBound = mark.seq
                    if header.seq > mark.seq { return nil }
                }
                let at = offset
                offset += Int64(header.frameLength)
                if header.seq < fromSeq { continue }
                fromSeq = header.seq + 1
                return JournalRecord(seq: header.seq, ingestMillis: header.ingestMillis, key: key!, body: json!,
                                     segment: file.name, offset: at)
            case .end, .incomplete, .invalid:
                let newer = try listSegments(directory, fs: fileSystem).first { $0.firstSeq > currentFirstSeq }
                guard let newer else { return nil }
                switch probe {
                case .incomplete(let detail), .invalid(let detail):
                    // The writer finishes a segment before it cuts the next one; bad bytes here are damage.
                    throw JournalError(.corrupt(segment: file.name, offset: offset, detail: detail), directory: directory)
                default:
                    try open(newer.name, firstSeq: newer.firstSeq)
                }
            }
        }
    }

    /// Like `next()`, but waits up to `timeout` (`nil` = forever) for a record, polling every
    /// `pollInterval` (journald's advice for file systems where inotify is unreliable).
    package func next(waitingUpTo timeout: Duration?, pollInterval: Duration = .milliseconds(200)) throws(JournalError) -> JournalRecord? {
        let deadline = timeout.map { Posix.monotonicNanos() &+ $0.clampedUInt64Nanoseconds }
        while true {
            if let record = try next() { return record }
            let now = Posix.monotonicNanos()
            if let deadline, now >= deadline { return nil }
            var sleep = pollInterval.clampedUInt64Nanoseconds
            if let deadline { sleep = min(sleep, deadline - now) }
            usleep(UInt32(max(1, sleep / 1000)))
        }
    }

    /// Iterates records from `seq` to what is available now; an error ends the iteration and is
    /// left in `lastError`.
    package func records(fromSeq seq: UInt64) -> JournalRecords {
        seek(toSeq: seq)
        lastError = nil
        return JournalRecords(reader: self)
    }

    package struct JournalRecords: Sequence, IteratorProtocol {
        let reader: JournalReader
        package mutating func next() -> JournalRecord? {
            do { return try reader.next() } catch {
                reader.lastError = error
                return nil
            }
        }
    }

    private func open(_ name: String, firstSeq: UInt64) throws(JournalError) {
        let file: SegmentFile
        let header: Result<SegmentHeader, FrameDefect>
        do {
            file = try SegmentFile(directory: directory, name: name, fs: fileSystem)
            header = try file.readHeader()
        } catch {
            throw JournalError(.io(error), directory: directory)
        }
        if case .failure(let defect) = header {
            throw JournalError(.corrupt(segment: name, offset: 0, detail: defect.detail), directory: directory)
        }
        current = file
        currentFirstSeq = firstSeq
        offset = Int64(SegmentHeader.size)
    }

}
