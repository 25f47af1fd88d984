@preconcurrency import Glibc
import Dispatch
import PushSystem

/// `RETAINED`: the first seq the journal still holds. Every seq below it was retired by
/// retention on purpose (deleted, or archived under `archive/`), so recovery and `journal
/// verify` read a missing prefix as "retained away", not "lost". Written durably (temp file,
/// fsync, rename, directory fsync) *before* a segment is removed, so a crash between the two
/// leaves a segment below the mark that recovery finishes removing. It also names the dedup
/// window in force, so `journal verify` can tell a re-delivery after the window from a
/// duplicate that should have been refused.
package struct RetainedMark: Sendable, Equatable {
    static let size = 32
    static let magic: UInt32 = 0x5452_4A50  // "PJRT"

    package var firstRetainedSeq: UInt64
    package var updatedMillis: Int64
    /// `[Journal] DedupWindowSec=` in milliseconds; 0 = unlimited.
    package var dedupWindowMillis: Int64 = 0

    func encoded() -> [UInt8] {
        SealedMark.encode(magic: Self.magic, (firstRetainedSeq, UInt64(bitPattern: updatedMillis), UInt64(bitPattern: dedupWindowMillis)))
    }

    static func decode(_ bytes: [UInt8]) -> RetainedMark? {
        guard bytes.count == size, let words = SealedMark.decode(bytes, magic: magic) else { return nil }
        return RetainedMark(firstRetainedSeq: words.0, updatedMillis: Int64(bitPattern: words.1), dedupWindowMillis: Int64(bitPattern: words.2))
    }
}

extension JournalFiles {
    package static let retained = "RETAINED"
}

/// The first seq retention kept (1 when nothing was ever retired). A damaged `RETAINED` reads
/// as 1: every gap then counts as loss again, the safe direction.
package func readRetainedFloor(_ directory: String) -> UInt64 {
    max(1, readRetainedMark(directory)?.firstRetainedSeq ?? 1)
}

func readRetainedMark(_ directory: String) -> RetainedMark? {
    (try? Posix.readFile(directory + "/" + JournalFiles.retained, limit: 4096)).flatMap(RetainedMark.decode)
}

/// What retention may retire. `Sendable` value.
package struct RetentionPolicy: Sendable, Equatable {
    /// Sealed segments last written longer ago than this go; `nil` = no age limit.
    package var maxAge: Duration?
    /// The oldest sealed segments go while the segments together are larger; `nil` = no limit.
    package var maxBytes: Int64?
    /// Compress retired segments into `archive/` instead of deleting them.
    package var archive = false
    /// `[Journal] DedupWindowSec=` in force (`nil` = unlimited): the keys of a retired segment
    /// still inside it are kept in `keys/` so a hit on them can still be confirmed, and the
    /// pass says from which seq on the dedup index must keep its entries.
    package var dedupWindow: Duration?
    /// Prefix of the call names for `FaultInjector` (`"<scope>.unlinkat"`, ...).
    package var faultScope = "retention"

    package init(maxAge: Duration? = nil, maxBytes: Int64? = nil, archive: Bool = false) {
        self.maxAge = maxAge
        self.maxBytes = maxBytes
        self.archive = archive
    }

    /// Whether there is anything to do at all.
    package var isActive: Bool { maxAge != nil || maxBytes != nil || dedupWindow != nil }
}

/// What one retention pass did. `Sendable` value; the daemon logs it.
package struct RetentionResult: Sendable, Equatable {
    /// Segments deleted (without archive) or archived and then deleted, oldest first.
    package var retired: [String] = []
    package var archived: [String] = []
    package var bytesFreed: Int64 = 0
    /// Segments past a limit kept because they hold records a follower (index, outbox, export)
    /// has not made durable yet. (`HELD_FOR_EXPORT` in the journald event, for compatibility.)
    package var heldForExport = 0
    /// The first seq the journal holds after the pass.
    package var firstRetainedSeq: UInt64 = 1
    /// The dedup index may drop entries below this seq (`JournalWriter.pruneDedupIndex`):
    /// their records were all written before the dedup window began.
    package var dedupFloorSeq: UInt64 = 1

    package init() {}
}

/// Journal retention (`[Journal] RetainSec=`, `RetainBytes=`, `Archive=`): retires the oldest
/// sealed segments — never the newest, which the writer appends to — as a prefix, so the
/// journal stays one contiguous run of seqs from `RETAINED` on.
///
/// Crash safety, step by step for each segment: (1) with `Archive=zstd`, the compressed copy
/// is written to `archive/NAME.zst.tmp`, fsynced, renamed to `archive/NAME.zst` and the
/// archive directory fsynced; (2) `RETAINED` is raised past the segment, durably; (3) the
/// segment is unlinked and the directory fsynced. A kill between any two steps leaves either
/// the old state plus a harmless archive (or `.tmp`, removed by the next pass), or a segment
/// below `RETAINED`, which recovery removes (its archive, if wanted, is already durable).
package enum JournalRetention {
    /// One pass. `retentionFloor` is the lowest durable seq of the daemon's followers (`nil` =
    /// no follower): a
    /// segment holding any record above it is kept whatever its age or size. Blocking (reads,
    /// compresses and fsyncs): run it on the retention thread, never on the ingest path.
    package static func runPass(directory: String, policy: RetentionPolicy,
                                retentionFloor: @Sendable () -> UInt64?,
                                nowMillis: Int64 = Posix.wallClockMillis()) throws(JournalError) -> RetentionResult {
        var result = RetentionResult()
        result.firstRetainedSeq = readRetainedFloor(directory)
        guard policy.isActive else { return result }
        let io = JournalIO(fs: RealFileSystem(faultScope: policy.faultScope), directory: directory)
        let dirfd: Int32
        do { dirfd = try Posix.openDirectory(directory) } catch { throw io.err(error) }
        defer { Posix.close(dirfd) }
        if policy.archive { try removeArchiveLeftovers(directory: directory, io: io) }

        let segments = try listSegments(directory, fs: io.fs)
        guard !segments.isEmpty else { return result }
        var sizes: [Int64] = []
        var mtimes: [Int64] = []
        for segment in segments {
            var st = stat()
            guard stat(directory + "/" + segment.name, &st) == 0 else {
                throw io.err(SystemError(call: "stat", errno: errno, subject: segment.name))
            }
            sizes.append(Int64(st.st_size))
            mtimes.append(Int64(st.st_mtim.tv_sec) &* 1000 &+ Int64(st.st_mtim.tv_nsec / 1_000_000))
        }
        var total = sizes.reduce(0, +)
        let windowMillis = policy.dedupWindow?.clampedMilliseconds ?? 0
        // verify reads the window from the mark: record a changed one even when nothing retires.
        let current = readRetainedMark(directory)
        if current?.dedupWindowMillis != windowMillis && (windowMillis > 0 || current != nil) {
            try io.writeFileAtomically(dirfd: dirfd, name: JournalFiles.retained,
                                       bytes: RetainedMark(firstRetainedSeq: result.firstRetainedSeq, updatedMillis: nowMillis,
                                                           dedupWindowMillis: windowMillis).encoded())
        }
        // Read once per pass: the floor only rises, so an older value is the cautious one.
        let exported = retentionFloor()
        let ageCutoff = policy.maxAge.map { nowMillis &- $0.clampedMilliseconds }
        // Never the newest segment: the writer appends to it.
        for index in 0..<(segments.count - 1) {
            let segment = segments[index]
            let lastSeq = segments[index + 1].firstSeq - 1
            let pastAge = ageCutoff.map { mtimes[index] < $0 } ?? false
            let pastBytes = policy.maxBytes.map { total > $0 } ?? false
            guard pastAge || pastBytes else { break }
            if let exported, lastSeq > exported {
                result.heldForExport = segments.count - 1 - index
                break
            }
            if policy.archive {
                try archive(segment.name, directory: directory, dirfd: dirfd, io: io)
                result.archived.append(segment.name)
            }
            // Its records are still inside the dedup window: keep their keys for confirmation.
            if policy.dedupWindow.map({ mtimes[index] >= nowMillis &- $0.clampedMilliseconds }) ?? true {
                try RetiredKeys.write(directory: directory, segment: segment.name, lastWriteMillis: mtimes[index], io: io)
            }
            let floor = segments[index + 1].firstSeq
            try io.writeFileAtomically(dirfd: dirfd, name: JournalFiles.retained,
                                       bytes: RetainedMark(firstRetainedSeq: floor, updatedMillis: nowMillis,
                                                           dedupWindowMillis: windowMillis).encoded())
            try io.unlinkat(dirfd, segment.name)
            try io.fsync(dirfd, subject: directory)
            result.retired.append(segment.name)
            result.bytesFreed += sizes[index]
            result.firstRetainedSeq = floor
            total -= sizes[index]
        }
        if let window = policy.dedupWindow {
            let cutoff = nowMillis &- window.clampedMilliseconds
            var floor: UInt64?
            for kept in RetiredKeys.list(directory: directory) {
                if kept.lastWriteMillis < cutoff {
                    try RetiredKeys.remove(directory: directory, name: kept.name, io: io)
                } else if floor == nil {
                    floor = kept.firstSeq
                }
            }
            if floor == nil {
                // The first live segment written to inside the window (the newest always is).
                let retired = result.retired.count
                for index in retired..<segments.count where index == segments.count - 1 || mtimes[index] >= cutoff {
                    floor = segments[index].firstSeq
                    break
                }
            }
            result.dedupFloorSeq = floor ?? 1
        }
        return result
    }

    /// A `.tmp` in `archive/` is an archive a crash interrupted; the segment it came from is
    /// still in place (it is removed only after the rename), so the copy is simply redone.
    private static func removeArchiveLeftovers(directory: String, io: JournalIO) throws(JournalError) {
        let path = directory + "/" + JournalFiles.archive
        guard let names = try? RealFileSystem().listDirectory(path) else { return }
        let leftovers = names.filter { $0.hasSuffix(".tmp") }
        guard !leftovers.isEmpty else { return }
        let afd: Int32
        do { afd = try Posix.openDirectory(path) } catch { throw io.err(error) }
        defer { Posix.close(afd) }
        for name in leftovers { try io.unlinkat(afd, name) }
        try io.fsync(afd, subject: path)
    }

    /// Writes `archive/NAME.zst` durably: temp name, fsync, rename, directory fsync.
    private static func archive(_ name: String, directory: String, dirfd: Int32, io: JournalIO) throws(JournalError) {
        let path = directory + "/" + JournalFiles.archive
        if access(path, F_OK) != 0 {
            do { try Posix.mkdirIfMissing(path) } catch { throw io.err(error) }
            try io.fsync(dirfd, subject: directory)
        }
        let bytes: [UInt8]
        do { bytes = try Posix.readFile(directory + "/" + name, limit: 1 << 40) } catch { throw io.err(error) }
        let compressed: [UInt8]
        do { compressed = try Zstd.compress(bytes) } catch {
            throw JournalError(.corrupt(segment: name, offset: 0, detail: error.detail), directory: directory)
        }
        let afd: Int32
        do { afd = try Posix.openDirectory(path) } catch { throw io.err(error) }
        defer { Posix.close(afd) }
        let final = JournalFiles.archiveName(segment: name)
        let temp = final + ".tmp"
        let fd = try io.openat(afd, temp, O_WRONLY | O_CREAT | O_TRUNC)
        do throws(JournalError) {
            do { try io.writeAll(fd, compressed, subject: temp) } catch { throw io.err(error) }
            try io.fsync(fd, subject: temp)
            Posix.close(fd)
        } catch {
            Posix.close(fd)
            try? io.unlinkat(afd, temp)
            throw error
        }
        try io.renameat(afd, temp, afd, final)
        try io.fsync(afd, subject: path)
    }
}

/// Recovery's part of retention: segments wholly below `RETAINED` are retirements a crash
/// interrupted after the mark was raised; finish them. Returns the floor and the segments left.
func finishInterruptedRetention(directory: String, dirfd: Int32, io: JournalIO,
                                segments: [(name: String, firstSeq: UInt64)]) throws(JournalError)
    -> (floor: UInt64, segments: [(name: String, firstSeq: UInt64)]) {
    let floor = readRetainedFloor(directory)
    let below = segments.filter { $0.firstSeq < floor }
    // Never the newest segment: a mark past every segment is not something retention writes.
    guard !below.isEmpty, below.count < segments.count else { return (floor, segments) }
    for segment in below { try io.unlinkat(dirfd, segment.name) }
    try io.fsync(dirfd, subject: directory)
    return (floor, segments.filter { $0.firstSeq >= floor })
}

/// `keys/NAME.keys`: the keys of a retired segment whose records are still inside the dedup
/// window, so a fingerprint hit on one of them can be confirmed against the real key after
/// the segment itself is gone. Removed once the window has passed the segment's last write.
///
/// Format (little-endian): magic "PJRK", CRC32C (masked) of the rest, the segment's last
/// write in Unix milliseconds, the record count, then per record its seq, key length (1 byte)
/// and key bytes.
enum RetiredKeys {
    static let directoryName = "keys"
    static let suffix = ".keys"
    static let magic: UInt32 = 0x4B52_4A50  // "PJRK"

    static func write(directory: String, segment: String, lastWriteMillis: Int64, io: JournalIO) throws(JournalError) {
        var body: [UInt8] = []
        body.appendLE(lastWriteMillis)
        var entries: [(UInt64, String)] = []
        do {
            let file = try SegmentFile(directory: directory, name: segment, fs: io.fs)
            guard case .success(let header) = try file.readHeader() else { return }
            _ = try scanSegment(file, from: Int64(SegmentHeader.size), expectedSeq: header.firstSeq, mode: .keys) { h, key, _, _ in
                entries.append((h.seq, key!))
            }
        } catch { throw io.err(error) }
        body.appendLE(UInt64(entries.count))
        for (seq, key) in entries {
            body.appendLE(seq)
            body.append(UInt8(truncatingIfNeeded: key.utf8.count))
            body += Array(key.utf8)
        }
        var out: [UInt8] = []
        out.appendLE(magic)
        out.appendLE(CRC32C.mask(CRC32C.checksum(body)))
        out += body
        let path = directory + "/" + directoryName
        do { try Posix.mkdirIfMissing(path) } catch { throw io.err(error) }
        let kfd: Int32
        do { kfd = try Posix.openDirectory(path) } catch { throw io.err(error) }
        defer { Posix.close(kfd) }
        try io.writeFileAtomically(dirfd: kfd, name: segment + suffix, bytes: out)
    }

    /// Key files oldest first, with the segment's first seq and last write.
    static func list(directory: String) -> [(name: String, firstSeq: UInt64, lastWriteMillis: Int64)] {
        let path = directory + "/" + directoryName
        let names = (try? RealFileSystem().listDirectory(path)) ?? []
        return names.compactMap { name -> (name: String, firstSeq: UInt64, lastWriteMillis: Int64)? in
            guard name.hasSuffix(suffix), let firstSeq = JournalFiles.firstSeq(ofSegment: String(name.dropLast(suffix.count))),
                  let bytes = try? Posix.readFile(path + "/" + name, limit: 1 << 30), bytes.count >= 16
            else { return nil }
            let millis = bytes.withUnsafeBytes { $0.loadLE(8, as: Int64.self) }
            return (name, firstSeq, millis)
        }.sorted { $0.firstSeq < $1.firstSeq }
    }

    static func remove(directory: String, name: String, io: JournalIO) throws(JournalError) {
        let path = directory + "/" + directoryName
        let kfd: Int32
        do { kfd = try Posix.openDirectory(path) } catch { throw io.err(error) }
        defer { Posix.close(kfd) }
        try io.unlinkat(kfd, name)
        try io.fsync(kfd, subject: path)
    }

    /// The key of the record `seq` of retired `segment`, if its key file is there and whole.
    static func lookup(directory: String, segment: String, seq: UInt64, fs: any FileSystem) -> String? {
        guard let bytes = try? fs.readFile(directory + "/" + directoryName + "/" + segment + suffix, limit: 1 << 30),
              bytes.count >= 24 else { return nil }
        return bytes.withUnsafeBytes { raw -> String? in
            guard raw.loadLE(0, as: UInt32.self) == magic,
                  raw.loadLE(4, as: UInt32.self) == CRC32C.mask(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: raw[8...])))
            else { return nil }
            var at = 24
            while at + 9 <= raw.count {
                let entrySeq = raw.loadLE(at, as: UInt64.self)
                let length = Int(raw[at + 8])
                guard at + 9 + length <= raw.count else { return nil }
                if entrySeq == seq {
                    return UTF8Text.string(UnsafeRawBufferPointer(rebasing: raw[(at + 9)..<(at + 9 + length)]))
                }
                at += 9 + length
            }
            return nil
        }
    }
}
