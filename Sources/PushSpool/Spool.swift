@preconcurrency import Glibc
import PushSystem
import Synchronization

/// A file read whole from `processing/`.
package struct SpoolFile: Sendable {
    package var name: String
    package var bytes: [UInt8]
    package var size: Int64
    /// Last modification, nanoseconds since the epoch.
    package var modifiedNanos: Int64
    package var inode: UInt64
    package var device: UInt64
}

/// What `Spool.read` found.
package enum SpoolReadResult: Sendable {
    /// A regular file within the size limit, read whole.
    case contents(SpoolFile)
    /// Not to be processed; the caller quarantines it with this code (a `ReasonCode` raw
    /// value of the read stage) and message.
    case refused(code: String, message: String)
}

/// What became of a claim.
package enum ClaimOutcome: Sendable, Equatable {
    /// Now at `processing/NAME`.
    case claimed
    /// Not in `incoming/` any more (another claimer won, or the producer removed it).
    case vanished
    /// `processing/NAME` exists (a file of the same name is still in flight); left in
    /// `incoming/` untouched, to be taken by a later event or rescan.
    case busy
    /// A dotfile or `*.tmp`: never taken.
    case ignored
}

/// Where a file the daemon processes sits: `incoming/` under the pickup protocol (read,
/// journal and unlink in place, no claim rename: docs/design/spool-protocol.md), or
/// `processing/` for files an older version claimed there and left behind.
package enum SpoolLocation: String, Sendable, Equatable {
    case incoming
    case processing
}

/// Metadata of an entry in `incoming/`, for the stable-age rule.
package struct EntryStatus: Sendable, Equatable {
    package var size: Int64
    package var modifiedNanos: Int64
    package var isRegular: Bool
}

/// The daemon's handle on the spool: owns one fd per directory and does every move through
/// `*at` calls on them, so a path component replaced behind its back is never followed.
///
/// `Sendable`: the fds sit behind a lock and every operation is a single `*at` system call
/// sequence on them, so the ingest thread, the journal's completion thread and media threads
/// may share one `Spool`. Its operations block on the file system: keep them off the
/// cooperative pool. Two `Spool`s (daemon and `pushspoolctl`) on one root are safe too: every
/// move is a `rename(2)` that never replaces an existing entry.
package final class Spool: Sendable {
    package let layout: SpoolLayout
    private let maxFileBytesLimit: Atomic<Int>
    /// `[Spool] MaxFileSize`; a reload changes it for files read from then on.
    package var maxFileBytes: Int {
        get { maxFileBytesLimit.load(ordering: .relaxed) }
        set { maxFileBytesLimit.store(max(1, newValue), ordering: .relaxed) }
    }
    /// The open directories; swapped whole by `reopenIfReplaced`. Every operation takes a
    /// reference first, so a swap never closes an fd another thread is using.
    private let current: Locked<Directories>
    /// Every file operation goes through it: `RealFileSystem` in production, a simulated one
    /// in the crash-point enumeration of the intake path.
    package let fileSystem: any FileSystem

    /// One fd per spool directory, closed when the last operation using them lets go.
    private final class Directories: Sendable {
        let tmp: Int32
        let incoming: Int32
        let processing: Int32
        let failed: Int32
        let fileSystem: any FileSystem

        init(_ layout: SpoolLayout, _ fileSystem: any FileSystem) throws(SpoolError) {
            self.fileSystem = fileSystem
            var fds: [Int32] = []
            for path in [layout.tmp, layout.incoming, layout.processing, layout.failed] {
                do {
                    fds.append(try fileSystem.openDirectory(path))
                } catch {
                    for fd in fds { fileSystem.close(fd) }
                    throw SpoolError(error, while: "opening spool directory \(path)")
                }
            }
            tmp = fds[0]
            incoming = fds[1]
            processing = fds[2]
            failed = fds[3]
        }

        deinit {
            for fd in [tmp, incoming, processing, failed] { fileSystem.close(fd) }
        }

        func fd(_ location: SpoolLocation) -> Int32 {
            switch location {
            case .incoming: incoming
            case .processing: processing
            }
        }
    }

    private var directories: Directories { current.withLock { $0 } }

    /// Opens the four directories on `fileSystem`. Call `layout.create(fileSystem:)` first.
    package init(layout: SpoolLayout, maxFileBytes: Int, fileSystem: any FileSystem = RealFileSystem()) throws(SpoolError) {
        precondition(maxFileBytes > 0)
        self.layout = layout
        self.maxFileBytesLimit = Atomic(maxFileBytes)
        self.fileSystem = fileSystem
        current = Locked(try Directories(layout, fileSystem))
    }

    /// When `layoutIsIntact()` is false, recreates the layout and reopens the directories;
    /// returns `true` then, and the caller must also make a new `IncomingWatcher` (its watch is
    /// on the old directory) and rescan. Call it with the periodic rescan: a removed
    /// `incoming/` is otherwise never noticed, because the fd held here keeps inotify's
    /// `IN_DELETE_SELF` from firing.
    package func reopenIfReplaced() throws(SpoolError) -> Bool {
        if layoutIsIntact() { return false }
        try layout.create(fileSystem: fileSystem)
        let fresh = try Directories(layout, fileSystem)
        current.withLock { $0 = fresh }
        return true
    }

    /// Whether each spool path still names the directory this `Spool` holds open. `false`
    /// when someone removed, moved or replaced one (the held fd also keeps inotify's
    /// `IN_DELETE_SELF` from firing): the caller should recreate the layout, reopen the
    /// spool and its watcher, and rescan. Cheap: four `lstat`s and four `fstat`s.
    package func layoutIsIntact() -> Bool {
        let d = directories
        let pairs = [(layout.tmp, d.tmp), (layout.incoming, d.incoming), (layout.processing, d.processing), (layout.failed, d.failed)]
        for (path, fd) in pairs {
            guard let byPath = try? fileSystem.linkStatus(path), let byFD = try? fileSystem.status(fd, subject: path) else { return false }
            if byPath.inode != byFD.inode || byPath.device != byFD.device || byFD.linkCount == 0 { return false }
        }
        return true
    }

    // MARK: Claim

    /// Renames `incoming/NAME` → `processing/NAME`. `false` when it was not claimed: it
    /// vanished (another claimer won), a file of that name is still in `processing/`, or the
    /// name is one the daemon ignores. Refuses nothing by content; `read` does that.
    package func claim(_ name: String) throws(SpoolError) -> Bool {
        try claimOutcome(name) == .claimed
    }

    /// `claim` with the reason it did not happen. Never replaces a file in `processing/`.
    package func claimOutcome(_ name: String) throws(SpoolError) -> ClaimOutcome {
        let d = directories
        try SpoolName.validate(name)
        if SpoolName.isIgnored(name) { return .ignored }
        do {
            try fileSystem.renameNoReplace(d.incoming, name, d.processing, name)
            return .claimed
        } catch where error.errno == ENOENT {
            return .vanished
        } catch where error.errno == EEXIST {
            return .busy
        } catch {
            throw SpoolError(error, while: "claiming incoming/\(name)")
        }
    }

    /// `lstat` of `incoming/NAME` (never follows a link); `nil` when it is gone.
    package func status(incoming name: String) throws(SpoolError) -> EntryStatus? {
        let d = directories
        try SpoolName.validate(name)
        do {
            let st = try fileSystem.statusAt(d.incoming, name)
            return EntryStatus(size: st.size, modifiedNanos: st.modifiedNanos, isRegular: st.isRegular)
        } catch where error.errno == ENOENT {
            return nil
        } catch {
            throw SpoolError(error, while: "inspecting incoming/\(name)")
        }
    }

    // MARK: Read

    /// Reads `processing/NAME` whole, or says why it must not be processed.
    ///
    /// Opens with `O_NOFOLLOW|O_NONBLOCK|O_NOCTTY` relative to the directory fd and decides by
    /// `fstat` of what it opened: a symlink fails the open (`ELOOP`), a socket too (`ENXIO`), a
    /// FIFO opens without blocking and a directory opens, and both are refused unread. No `lstat`
    /// before the open (one path lookup less per file): what it guarded against, the side
    /// effects of opening a device node, needs a device node in the spool, which only root can
    /// make (`CAP_MKNOD`; one in `/dev` cannot be hard-linked across file systems), and the
    /// shipped units' `PrivateDevices=yes` denies opening any but the harmless pseudo-devices
    /// (docs/design/spool-protocol.md). Reads at most `maxFileBytes + 1` bytes, so a file that
    /// grows is refused too.
    /// Throws `.notFound` when the file is gone and `.system` for resource errors (`EMFILE`,
    /// `ENOMEM`) that say nothing about the file: retry those later, do not quarantine.
    package func read(processing name: String) throws(SpoolError) -> SpoolReadResult {
        try read(name, in: .processing)
    }

    /// `read(processing:)` for a file in `location`: the same checks and refusals.
    package func read(_ name: String, in location: SpoolLocation) throws(SpoolError) -> SpoolReadResult {
        let d = directories
        let dirfd = d.fd(location)
        let directoryName = location.rawValue
        try SpoolName.validate(name)
        let fd: Int32
        do {
            fd = try Self.openForReading(fileSystem, dirfd, name)
        } catch {
            switch error.errno {
            case ENOENT:
                throw SpoolError(.notFound, "\(directoryName)/\(name) vanished before it was read", system: error)
            case ELOOP:
                return .refused(code: ReasonCode.symlink.rawValue, message: "\(name) is a symbolic link; symlinks are never followed, drop the file itself")
            case ENXIO, ENODEV, ENOTDIR, EISDIR:
                return .refused(code: ReasonCode.notRegularFile.rawValue, message: "\(name) is not a regular file; drop plain files only")
            case EACCES, EPERM, EIO:
                return .refused(code: ReasonCode.unreadable.rawValue, message: "\(name) cannot be opened (\(error.errnoName)); fix its permissions and retry it")
            default:
                throw SpoolError(error, while: "opening \(directoryName)/\(name)")
            }
        }
        defer { fileSystem.close(fd) }
        let st: FileStatus
        do {
            st = try fileSystem.status(fd, subject: name)
        } catch {
            throw SpoolError(error, while: "inspecting \(directoryName)/\(name)")
        }
        if let refusal = refusal(for: st, name: name) { return refusal }

        let bytes: [UInt8]
        do {
            bytes = try fileSystem.readAll(fd, limit: maxFileBytes, sizeHint: Int(clamping: st.size), regularFile: true, subject: name)
        } catch where error.errno == EFBIG {
            return .refused(code: ReasonCode.fileTooLarge.rawValue, message: "\(name) grew past the limit of \(maxFileBytes) bytes while being read; split the payload or raise [Spool] MaxFileSize=")
        } catch where error.errno == EIO || error.errno == EISDIR || error.errno == EINVAL {
            return .refused(code: ReasonCode.unreadable.rawValue, message: "\(name) cannot be read (\(error.errnoName)); check the device and retry it")
        } catch {
            throw SpoolError(error, while: "reading \(directoryName)/\(name)")
        }
        return .contents(SpoolFile(name: name, bytes: bytes, size: Int64(bytes.count), modifiedNanos: st.modifiedNanos,
                                   inode: st.inode, device: st.device))
    }

    /// `O_NOATIME` from <bits/fcntl-linux.h> (Glibc does not export it to Swift).
    private static let noAtimeFlag: Int32 = 0o1000000
    /// Cleared at the first `EPERM`: `O_NOATIME` needs the file's owner (or CAP_FOWNER), and a
    /// spool whose producers run as other users would otherwise pay a failed `open` per file.
    private static let noAtimeAllowed = Atomic<Bool>(true)

    /// Opens a claimed file for reading without following links, blocking on a FIFO or making
    /// a terminal ours. Asks for `O_NOATIME` while the kernel grants it: the file is unlinked
    /// moments later, and under relatime its first read would otherwise dirty the inode (one
    /// more metadata update per file in the file system's journal).
    static func openForReading(_ fileSystem: any FileSystem, _ dirfd: Int32, _ name: String) throws(SystemError) -> Int32 {
        let flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY
        if noAtimeAllowed.load(ordering: .relaxed) {
            do {
                return try fileSystem.openat(dirfd, name, flags | noAtimeFlag, mode: 0)
            } catch where error.errno == EPERM {
                noAtimeAllowed.store(false, ordering: .relaxed)
            }
        }
        return try fileSystem.openat(dirfd, name, flags, mode: 0)
    }

    private func refusal(for st: FileStatus, name: String) -> SpoolReadResult? {
        let type = mode_t(truncatingIfNeeded: st.type)
        if type == S_IFLNK {
            return .refused(code: ReasonCode.symlink.rawValue, message: "\(name) is a symbolic link; symlinks are never followed, drop the file itself")
        }
        if type != S_IFREG {
            return .refused(code: ReasonCode.notRegularFile.rawValue, message: "\(name) is a \(Self.typeName(type)), not a regular file; drop plain files only")
        }
        if st.size > maxFileBytes {
            return .refused(code: ReasonCode.fileTooLarge.rawValue, message: "\(name) is \(st.size) bytes, over the limit of \(maxFileBytes); split the payload or raise [Spool] MaxFileSize=")
        }
        return nil
    }

    static func typeName(_ type: mode_t) -> String {
        switch type {
        case S_IFIFO: return "FIFO"
        case S_IFCHR: return "character device"
        case S_IFBLK: return "block device"
        case S_IFSOCK: return "socket"
        case S_IFDIR: return "directory"
        case S_IFLNK: return "symbolic link"
        default: return "special file"
        }
    }

    static func nanos(_ ts: timespec) -> Int64 {
        Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }

    // MARK: Quarantine, complete, rollback

    /// Moves `processing/NAME` to `failed/`, reason first: writes `failed/T.reason.json`
    /// durably (staged in `tmp/`, fsynced, renamed, directory fsynced), then renames the entry
    /// itself to `failed/T` (a symlink, FIFO or device moves as the entry; nothing is followed
    /// or opened), then fsyncs both directories. `T` is `NAME`, or `NAME~N` when that name
    /// or its reason file is taken, or — once `sequentialNames` such names are all taken —
    /// `NAME~<time>-<random>`, so a full set of `~N` names never wedges the file. No existing
    /// file is ever replaced. Fills in `size` when the caller did not. Returns `T`.
    ///
    /// Throws an error with `isRetryable == true` when the cause is the file system, not the
    /// file (`failed/` not writable, disk full, quota, I/O error, a layout directory replaced):
    /// nothing was moved and no reason file is left behind, so the caller keeps the file in
    /// `processing/` and calls `quarantine` again later, as the journal retries a full disk.
    @discardableResult
    package func quarantine(processing name: String, reason: QuarantineReason) throws(SpoolError) -> String {
        try quarantine(name, in: .processing, reason: reason)
    }

    /// `quarantine(processing:reason:)` for a file in `location`.
    @discardableResult
    package func quarantine(_ name: String, in location: SpoolLocation, reason: QuarantineReason) throws(SpoolError) -> String {
        let d = directories
        let source = d.fd(location)
        let directoryName = location.rawValue
        try SpoolName.validate(name)
        var reason = reason
        reason.file = name
        if reason.size == nil, let st = try? fileSystem.statusAt(source, name), st.isRegular {
            reason.size = st.size
        }
        let reserve = SpoolName.reasonSuffix.utf8.count
        // A dotfile in failed/ would be hidden from `failed list` (dotfiles there are staging).
        let base = name.hasPrefix(".") ? "_" + name : name
        for target in Self.candidateNames(base, reserve: reserve) {
            // A payload named like a reason file would be mistaken for one by `failed list`.
            if target.hasSuffix(SpoolName.reasonSuffix) { continue }
            do throws(SystemError) {
                // Two statements: `||` takes an untyped-throwing autoclosure.
                if try exists(d.failed, target) { continue }
                if try exists(d.failed, target + SpoolName.reasonSuffix) { continue }
            } catch {
                throw SpoolError(error, while: "looking for a free name in failed/", retryable: true)
            }
            var written = reason
            if target != name { written.detail = (reason.detail ?? [:]).merging(["failedName": target]) { $1 } }
            do {
                guard try Self.stage(written.encoded(), tmpFD: d.tmp, into: d.failed, as: target + SpoolName.reasonSuffix,
                                     fileSystem: fileSystem) else { continue }
            } catch {
                throw SpoolError(error, while: "writing failed/\(target)\(SpoolName.reasonSuffix)", retryable: Self.isRetryableQuarantine(error.errno))
            }
            do {
                try fileSystem.fsync(d.failed, subject: layout.failed)
            } catch {
                // The payload has not moved: take the reason back so a retry starts clean.
                try? fileSystem.unlinkat(d.failed, target + SpoolName.reasonSuffix, flags: 0)
                throw SpoolError(error, while: "syncing failed/ after writing \(target)\(SpoolName.reasonSuffix)", retryable: Self.isRetryableQuarantine(error.errno))
            }
            do {
                try fileSystem.renameNoReplace(source, name, d.failed, target)
            } catch {
                try? fileSystem.unlinkat(d.failed, target + SpoolName.reasonSuffix, flags: 0)
                if error.errno == EEXIST { continue }
                if error.errno == ENOENT, (try? fileSystem.statusAt(source, name)) == nil {
                    throw SpoolError(.notFound, "\(directoryName)/\(name) vanished before it could be quarantined", system: error)
                }
                throw SpoolError(error, while: "moving \(directoryName)/\(name) to failed/\(target)", retryable: Self.isRetryableQuarantine(error.errno))
            }
            do {
                try fileSystem.fsync(d.failed, subject: layout.failed)
                try fileSystem.fsync(source, subject: location == .incoming ? layout.incoming : layout.processing)
            } catch {
                // The move is done (a retry would find nothing in processing/); only its
                // durability is in doubt, so this is not retryable.
                throw SpoolError(error, while: "syncing failed/ after quarantining \(name) as failed/\(target)")
            }
            return target
        }
        throw SpoolError(.nameTaken, "no free name for \(name) in failed/; purge old entries with `pushspoolctl failed purge`")
    }

    /// `NAME`, `NAME~1` … `NAME~999` are tried in order (each costs two `fstatat`s); past
    /// them the name gets a time-and-random suffix, which is free at the first try in practice.
    static let sequentialNames = 1000
    /// Random-suffix names tried before giving up (only a hostile directory gets this far).
    static let randomNames = 16

    /// The names a file takes where `name` may be taken, in order: `NAME`, `NAME~1` …
    /// `NAME~999`, then `randomNames` time-and-random ones. Every move that must not replace
    /// an existing file (quarantine, retry, rollback, name repair) walks this one sequence.
    static func candidateNames(_ name: String, reserve: Int = 0) -> some Sequence<String> {
        (0..<(sequentialNames + randomNames)).lazy.map { attempt in
            attempt < sequentialNames ? SpoolName.candidate(name, attempt: attempt, reserve: reserve)
                                      : randomCandidate(name, reserve: reserve)
        }
    }

    /// `NAME~<unix-ms>-<8 random hex digits>`, truncated to fit with `reserve` bytes to spare.
    static func randomCandidate(_ name: String, reserve: Int) -> String {
        var random = SystemRandomNumberGenerator()
        let hex = String(UInt32.random(in: .min ... .max, using: &random), radix: 16)
        let suffix = "~\(Posix.wallClockMillis())-" + String(repeating: "0", count: 8 - hex.count) + hex
        return SpoolName.truncate(name, toBytes: SpoolName.maxLength - reserve - suffix.utf8.count) + suffix
    }

    /// Whether a quarantine that failed with `errno` may succeed later without anything
    /// changing about the file: the directory is not writable or immutable (EACCES, EPERM,
    /// EROFS), space or inodes ran out (ENOSPC, EDQUOT), the device erred (EIO), resources
    /// ran short (EMFILE, ENFILE, ENOMEM), or a spool directory was removed or replaced
    /// (ENOENT, ENOTDIR: `reopenIfReplaced` recreates it).
    static func isRetryableQuarantine(_ errno: Int32) -> Bool {
        [EACCES, EPERM, EROFS, ENOSPC, EDQUOT, EIO, EMFILE, ENFILE, ENOMEM, ENOENT, ENOTDIR].contains(errno)
    }

    /// Removes `processing/NAME` once its record is durable. Does not fsync the directory: a
    /// removal lost in a crash only means the file is processed again, which the journal's id
    /// index makes harmless. `false` when it was already gone.
    @discardableResult
    package func complete(processing name: String) throws(SpoolError) -> Bool {
        try complete(name, in: .processing)
    }

    /// `complete(processing:)` for a file in `location`. Under the pickup protocol a file is
    /// removed from `incoming/` itself: a removal lost in a crash leaves it to be read again
    /// and dropped as a duplicate, as a lost removal from `processing/` always was.
    @discardableResult
    package func complete(_ name: String, in location: SpoolLocation) throws(SpoolError) -> Bool {
        let d = directories
        try SpoolName.validate(name)
        do {
            try fileSystem.unlinkat(d.fd(location), name, flags: 0)
            return true
        } catch where error.errno == ENOENT {
            return false
        } catch {
            throw SpoolError(error, while: "removing \(location.rawValue)/\(name)")
        }
    }

    /// `complete(_:in:)` for a file read in place: removes `location/NAME` only while it is still
    /// the file that was read (`inode`, `device`). A producer that renamed a new file over the
    /// name meanwhile keeps it: it is left for the feed's next rescan. `false` when the entry is
    /// gone or is another file now. (One `fstatat` more than a plain unlink; between it and the
    /// unlink a replacement can still be lost, which is why producers must use unique names.)
    @discardableResult
    package func complete(_ name: String, in location: SpoolLocation, inode: UInt64, device: UInt64) throws(SpoolError) -> Bool {
        let d = directories
        try SpoolName.validate(name)
        do {
            let st = try fileSystem.statusAt(d.fd(location), name)
            if st.inode != inode || st.device != device { return false }
        } catch where error.errno == ENOENT {
            return false
        } catch {
            throw SpoolError(error, while: "inspecting \(location.rawValue)/\(name)")
        }
        return try complete(name, in: location)
    }

    /// Puts `processing/NAME` back into `incoming/` (shutdown with a file in flight), as
    /// `NAME` or `NAME~N` if a new file of that name arrived meanwhile; fsyncs `incoming/`.
    /// Returns the name in `incoming/`.
    @discardableResult
    package func rollback(processing name: String) throws(SpoolError) -> String {
        let d = directories
        try SpoolName.validate(name)
        for target in Self.candidateNames(name) {
            do {
                try fileSystem.renameNoReplace(d.processing, name, d.incoming, target)
            } catch where error.errno == EEXIST {
                continue
            } catch where error.errno == ENOENT {
                throw SpoolError(.notFound, "processing/\(name) vanished before it could be rolled back", system: error)
            } catch {
                throw SpoolError(error, while: "moving processing/\(name) back to incoming/")
            }
            do {
                try fileSystem.fsync(d.incoming, subject: layout.incoming)
            } catch {
                throw SpoolError(error, while: "syncing incoming/")
            }
            return target
        }
        throw SpoolError(.nameTaken, "no free name for \(name) in incoming/")
    }

    /// fsyncs `processing/`, making earlier `complete` calls durable in one go.
    package func syncProcessing() throws(SpoolError) {
        let d = directories
        do {
            try fileSystem.fsync(d.processing, subject: layout.processing)
        } catch {
            throw SpoolError(error, while: "syncing processing/")
        }
    }

    /// Removes regular files in `tmp/` last modified more than `olderThanNanos` ago (Maildir's
    /// rule: 36 hours), left by writers that crashed mid-drop. A writer still staging touches
    /// its file far more often than that. Returns how many were removed.
    @discardableResult
    package func cleanTmp(olderThanNanos: Int64 = 36 * 3600 * 1_000_000_000) throws(SpoolError) -> Int {
        let d = directories
        let cutoff = Posix.wallClockMillis() * 1_000_000 - olderThanNanos
        let scanner = try DirectoryScanner(directoryFD: d.tmp, path: layout.tmp, filter: .all, fileSystem: fileSystem)
        var removed = 0
        while let batch = try scanner.next() {
            for entry in batch {
                guard let st = try? fileSystem.statusAt(d.tmp, entry.name), st.isRegular, st.modifiedNanos < cutoff else { continue }
                do {
                    try fileSystem.unlinkat(d.tmp, entry.name, flags: 0)
                    removed += 1
                } catch where error.errno == ENOENT {
                } catch {
                    throw SpoolError(error, while: "removing stale tmp/\(entry.name)")
                }
            }
        }
        return removed
    }

    // MARK: Scans

    /// A streaming scan of `incoming/` (dotfiles and `*.tmp` skipped). Entries whose names are
    /// not valid UTF-8 are renamed to their `%XX`-escaped form before they are handed out, so
    /// every name the scan yields can be claimed.
    package func scanIncoming(batchSize: Int = 1024) throws(SpoolError) -> SpoolScan {
        let d = directories
        return try SpoolScan(directoryFD: d.incoming, path: layout.incoming, filter: .spool, batchSize: batchSize, fileSystem: fileSystem)
    }

    /// A streaming scan of `processing/` for start-up recovery: every entry, whatever its
    /// name, since anything there was claimed by a daemon and must be finished. Non-UTF-8
    /// names are repaired as in `scanIncoming`.
    package func scanProcessing(batchSize: Int = 1024) throws(SpoolError) -> SpoolScan {
        let d = directories
        return try SpoolScan(directoryFD: d.processing, path: layout.processing, filter: .all, batchSize: batchSize, fileSystem: fileSystem)
    }

    /// The names in `processing/`, all at once. It holds at most the in-flight files plus what
    /// a crash left, so it is small; use `scanProcessing` when in doubt.
    package func processingNames() throws(SpoolError) -> [String] {
        let scan = try scanProcessing()
        var names: [String] = []
        while let batch = try scan.next() { names += batch.map(\.name) }
        return names
    }

    /// Renames an `incoming/` entry whose name is not valid UTF-8 to its escaped form (or a
    /// `~N` variant). Returns the new name, `nil` if the entry vanished.
    package func repairIncomingName(raw: [UInt8]) throws(SpoolError) -> String? {
        let d = directories
        return try Self.repairName(directoryFD: d.incoming, path: layout.incoming, raw: raw, fileSystem: fileSystem)
    }

    static func repairName(directoryFD: Int32, path: String, raw: [UInt8], fileSystem: any FileSystem) throws(SpoolError) -> String? {
        let escaped = SpoolName.escape(raw: raw)
        for target in candidateNames(escaped) {
            do {
                try fileSystem.renameNoReplace(directoryFD, raw: raw, directoryFD, target, subject: escaped)
                return target
            } catch where error.errno == EEXIST {
                continue
            } catch where error.errno == ENOENT {
                return nil
            } catch {
                throw SpoolError(error, while: "renaming an entry with a non-UTF-8 name in \(path) to \(target)")
            }
        }
        throw SpoolError(.nameTaken, "no free name for \(escaped) in \(path)")
    }

    // MARK: Helpers

    /// Whether `dirfd/name` exists (never follows a link). Throws for errors other than
    /// ENOENT: an unreadable directory must not look like one full of taken names.
    private func exists(_ dirfd: Int32, _ name: String) throws(SystemError) -> Bool {
        do {
            _ = try fileSystem.statusAt(dirfd, name)
            return true
        } catch where error.errno == ENOENT {
            return false
        }
    }

    /// Writes `bytes` to a fresh staging file in `tmp/`, fsyncs, renames to `dirfd/name`
    /// without replacing. `false` (and nothing left behind) when `name` is taken.
    ///
    /// The staging name carries a random part and is created with `O_EXCL|O_NOFOLLOW`; if a
    /// producer (or anything else sharing `tmp/`) already holds it, another name is drawn
    /// instead of failing. `stagingName` is for tests that play that producer.
    static func stage(_ bytes: [UInt8], tmpFD: Int32, into dirfd: Int32, as name: String,
                      fileSystem fs: any FileSystem = RealFileSystem(),
                      stagingName: () -> String = Spool.stagingName) throws(SystemError) -> Bool {
        var attempt = 0
        var temp = stagingName()
        var fd: Int32 = -1
        while true {
            do {
                fd = try fs.openat(tmpFD, temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o640)
                break
            } catch where error.errno == EEXIST && attempt < 16 {
                attempt += 1
                temp = stagingName()
            }
        }
        do throws(SystemError) {
            try fs.writeAll(fd, bytes, subject: temp)
            try fs.fsync(fd, subject: temp)
            fs.close(fd)
        } catch {
            fs.close(fd)
            try? fs.unlinkat(tmpFD, temp, flags: 0)
            throw error
        }
        do {
            try fs.renameNoReplace(tmpFD, temp, dirfd, name)
            return true
        } catch {
            try? fs.unlinkat(tmpFD, temp, flags: 0)
            if error.errno == EEXIST { return false }
            throw error
        }
    }

    /// A unique staging name with 64 random bits, so no one can pre-create it: a dotfile-free
    /// `*.tmp` name that the daemon never claims and `cleanTmp` removes if left behind.
    static func stagingName() -> String {
        var random = SystemRandomNumberGenerator()
        let hex = String(UInt64.random(in: .min ... .max, using: &random), radix: 16)
        return UniqueName.next(suffix: "." + String(repeating: "0", count: 16 - hex.count) + hex + ".tmp")
    }
}

/// A streaming scan of a spool directory that repairs non-UTF-8 names as it goes, so every
/// name it hands out can be claimed or read.
///
/// Not `Sendable`: wraps a `DirectoryScanner` and a directory fd of its own.
package final class SpoolScan {
    package let scanner: DirectoryScanner
    private let directoryFD: Int32
    private let path: String
    private let fileSystem: any FileSystem

    init(directoryFD: Int32, path: String, filter: DirectoryScanner.Filter, batchSize: Int, fileSystem: any FileSystem) throws(SpoolError) {
        scanner = try DirectoryScanner(directoryFD: directoryFD, path: path, filter: filter, batchSize: batchSize, fileSystem: fileSystem)
        do {
            // Its own fd: the Spool may reopen its directories while a scan is running.
            self.directoryFD = try fileSystem.duplicate(directoryFD)
        } catch {
            throw SpoolError(error, while: "opening \(path) for a scan")
        }
        self.path = path
        self.fileSystem = fileSystem
    }

    deinit { fileSystem.close(directoryFD) }

    /// The next batch of entries; `nil` at the end. Every `name` is usable as is.
    package func next() throws(SpoolError) -> [DirectoryScanner.Entry]? {
        guard var batch = try scanner.next() else { return nil }
        var index = 0
        while index < batch.count {
            if let raw = batch[index].rawName {
                if let repaired = try Spool.repairName(directoryFD: directoryFD, path: path, raw: raw, fileSystem: fileSystem) {
                    batch[index] = DirectoryScanner.Entry(name: repaired, rawName: nil, type: batch[index].type)
                } else {
                    batch.remove(at: index)
                    continue
                }
            }
            index += 1
        }
        return batch
    }
}
