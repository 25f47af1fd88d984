@preconcurrency import Glibc
import PushSystem

/// Streams the entries of one directory in bounded batches (`readdir(3)`, which reads
/// `getdents64(2)` in 32 KiB chunks), so a backlog of a million files never puts a million
/// names in memory.
///
/// Not `Sendable`: owns a `DIR*`; use it from one thread (the ingest thread). The directory is
/// opened afresh (`openat(fd, ".")`), so its read position is independent of any other scan.
/// Entries created or removed during a scan may or may not be reported (POSIX leaves it open);
/// callers treat a scan as "at least everything that was there when it started and stayed".
package final class DirectoryScanner {
    /// What the directory entry says the file is (`d_type`). `.unknown` on file systems that
    /// do not fill it in: the caller must `lstat` before trusting a name.
    package enum EntryType: Sendable, Equatable {
        case regular, directory, symlink, fifo, socket, characterDevice, blockDevice, unknown
    }

    /// Which names a scan reports.
    package enum Filter: Sendable {
        /// `incoming/` and `processing/`: skip dotfiles and `*.tmp` (writers still staging).
        case spool
        /// Skip dotfiles only.
        case noDotfiles
        /// Everything except `.` and `..`.
        case all
    }

    package struct Entry: Sendable, Equatable {
        /// The name, or its `%XX`-escaped form when the raw bytes are not valid UTF-8.
        package var name: String
        /// The raw bytes of the name when they are not valid UTF-8 (`name` is then not openable
        /// as is; see `Spool.repairName`), else `nil`.
        package var rawName: [UInt8]?
        package var type: EntryType
    }

    /// The listing; `nil` once exhausted (the handle is then released).
    private var stream: (any DirectoryStream)?
    private let path: String
    private let filter: Filter
    package let batchSize: Int
    /// The largest batch handed out so far (for tests and metrics: proves memory stays bounded).
    package private(set) var largestBatch = 0
    /// Entries skipped by the filter so far.
    package private(set) var skipped = 0

    /// Starts a scan of the directory open at `directoryFD` (not consumed; may be closed after)
    /// on `fileSystem`, which `directoryFD` belongs to.
    package init(directoryFD: Int32, path: String, filter: Filter = .spool, batchSize: Int = 1024,
                 fileSystem: any FileSystem = RealFileSystem()) throws(SpoolError) {
        precondition(batchSize > 0)
        self.path = path
        self.filter = filter
        self.batchSize = batchSize
        do {
            stream = try fileSystem.openDirectoryStream(directoryFD, subject: path)
        } catch {
            throw SpoolError(error, while: "opening \(path) for a scan")
        }
    }

    /// Starts a scan of the directory at `path`.
    package convenience init(path: String, filter: Filter = .spool, batchSize: Int = 1024,
                             fileSystem: any FileSystem = RealFileSystem()) throws(SpoolError) {
        let fd: Int32
        do {
            fd = try fileSystem.openDirectory(path)
        } catch {
            throw SpoolError(error, while: "opening \(path) for a scan")
        }
        defer { fileSystem.close(fd) }
        try self.init(directoryFD: fd, path: path, filter: filter, batchSize: batchSize, fileSystem: fileSystem)
    }

    /// The next at most `batchSize` entries; `nil` once the directory is exhausted (the scanner
    /// then releases the directory).
    package func next() throws(SpoolError) -> [Entry]? {
        guard let stream else { return nil }
        var batch: [Entry] = []
        batch.reserveCapacity(min(batchSize, 256))
        while batch.count < batchSize {
            let entry: RawDirectoryEntry?
            do {
                entry = try stream.next()
            } catch {
                self.stream = nil
                throw SpoolError(error, while: "scanning \(path)")
            }
            guard let entry else {
                self.stream = nil
                break
            }
            let raw = entry.name
            let valid = UTF8Text.string(raw)
            let name = valid ?? SpoolName.escape(raw: raw)
            if !accepts(name) {
                skipped += 1
                continue
            }
            batch.append(Entry(name: name, rawName: valid == nil ? raw : nil, type: Self.type(of: entry.type)))
        }
        largestBatch = max(largestBatch, batch.count)
        if batch.isEmpty && self.stream == nil { return nil }
        return batch
    }

    /// Runs `body` on every batch until the directory is exhausted.
    package func forEachBatch(_ body: ([Entry]) throws(SpoolError) -> Void) throws(SpoolError) {
        while let batch = try next() {
            try body(batch)
        }
    }

    private func accepts(_ name: String) -> Bool {
        switch filter {
        case .spool: return !SpoolName.isIgnored(name)
        case .noDotfiles: return !name.hasPrefix(".")
        case .all: return true
        }
    }

    static func type(of dType: UInt8) -> EntryType {
        switch Int32(dType) {
        case Int32(DT_REG): return .regular
        case Int32(DT_DIR): return .directory
        case Int32(DT_LNK): return .symlink
        case Int32(DT_FIFO): return .fifo
        case Int32(DT_SOCK): return .socket
        case Int32(DT_CHR): return .characterDevice
        case Int32(DT_BLK): return .blockDevice
        default: return .unknown
        }
    }
}
