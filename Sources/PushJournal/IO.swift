@preconcurrency import Glibc
import PushSystem

/// The journal's file-system calls, through `JournalOptions.fileSystem` (the real one by
/// default, whose call names `"<scope>.<call>"` a test build's `FaultInjector` sees; see
/// `JournalOptions.faultScope`). Maps `SystemError` to `JournalError`.
struct JournalIO: Sendable {
    let fs: any FileSystem
    /// For creating the journal directory and syncing its parent: on the real file system
    /// these calls carry the bare names (`"fsync"`), as they always have, so the scoped
    /// `"<scope>.fsync"` counts of `PUSHSPOOL_FAULT_INJECT=...:after=N` rules stay the same.
    let setupFS: any FileSystem
    let directory: String

    init(fs: any FileSystem, setupFS: (any FileSystem)? = nil, directory: String) {
        self.fs = fs
        self.setupFS = setupFS ?? fs
        self.directory = directory
    }

    init(options: JournalOptions, directory: String) {
        self.init(fs: options.fileSystem ?? RealFileSystem(faultScope: options.faultScope),
                  setupFS: options.fileSystem ?? RealFileSystem(), directory: directory)
    }

    func err(_ error: SystemError) -> JournalError {
        JournalError(error.isNoSpace ? .noSpace(error) : .io(error), directory: directory)
    }

    func openat(_ dirfd: Int32, _ name: String, _ flags: Int32, mode: mode_t = 0o640) throws(JournalError) -> Int32 {
        do { return try fs.openat(dirfd, name, flags, mode: mode) }
        catch { throw err(error) }
    }

    func close(_ fd: Int32) {
        fs.close(fd)
    }

    /// Writes all of `buffer` at the fd's position (segments are `O_APPEND`), looping on short writes.
    func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, subject: String) throws(SystemError) {
        try fs.writeAll(fd, buffer, subject: subject)
    }

    func writeAll(_ fd: Int32, _ bytes: [UInt8], subject: String) throws(SystemError) {
        try fs.writeAll(fd, bytes, subject: subject)
    }

    func pwriteAll(_ fd: Int32, _ bytes: [UInt8], offset: Int64, subject: String) throws(SystemError) {
        try fs.pwriteAll(fd, bytes, offset: offset, subject: subject)
    }

    /// `fdatasync(2)`. Any failure is fatal for the data (docs/design/journal.md, "fsync
    /// failures"): mapped to `.syncFailed`.
    func fdatasync(_ fd: Int32, subject: String) throws(JournalError) {
        do { try fs.fdatasync(fd, subject: subject) }
        catch { throw JournalError(.syncFailed(error), directory: directory) }
    }

    /// `fsync(2)` of a file or directory; failure is fatal like `fdatasync`.
    func fsync(_ fd: Int32, subject: String) throws(JournalError) {
        do { try fs.fsync(fd, subject: subject) }
        catch { throw JournalError(.syncFailed(error), directory: directory) }
    }

    func ftruncate(_ fd: Int32, _ length: Int64, subject: String) throws(JournalError) {
        do { try fs.ftruncate(fd, length, subject: subject) }
        catch { throw err(error) }
    }

    func renameat(_ dirfd: Int32, _ from: String, _ toDirfd: Int32, _ to: String) throws(JournalError) {
        do { try fs.renameat(dirfd, from, toDirfd, to) }
        catch { throw err(error) }
    }

    func unlinkat(_ dirfd: Int32, _ name: String) throws(JournalError) {
        do { try fs.unlinkat(dirfd, name, flags: 0) }
        catch { throw err(error) }
    }

    /// Replaces `name` durably: temp file, fsync, rename, directory fsync (docs/design/journal.md,
    /// "Files and atomic replacement").
    func writeFileAtomically(dirfd: Int32, name: String, bytes: [UInt8]) throws(JournalError) {
        try writeFileAtomically(dirfd: dirfd, name: name) { write throws(JournalError) in try write(bytes) }
    }

    /// `name` written through `name.tmp`, fsync, rename and a directory fsync, its contents
    /// handed over in pieces by `produce` (so a big file is never whole in memory).
    func writeFileAtomically(dirfd: Int32, name: String,
                             produce: (_ write: ([UInt8]) throws(JournalError) -> Void) throws(JournalError) -> Void) throws(JournalError) {
        let temp = name + ".tmp"
        let fd = try openat(dirfd, temp, O_WRONLY | O_CREAT | O_TRUNC)
        do throws(JournalError) {
            try produce { bytes throws(JournalError) in
                do throws(SystemError) { try writeAll(fd, bytes, subject: temp) } catch { throw err(error) }
            }
            try fsync(fd, subject: temp)
            close(fd)
        } catch {
            close(fd)
            try? unlinkat(dirfd, temp)
            throw error
        }
        // Its only caller is the dedup checkpoint: the test stop point "mid checkpoint".
        StopPoints.pass(.checkpoint)
        try renameat(dirfd, temp, dirfd, name)
        try fsync(dirfd, subject: directory)
    }
}

/// Buffered positional reads of one segment file. Not `Sendable`: owns an fd.
final class SegmentFile {
    let name: String
    let path: String
    let fd: Int32
    let fs: any FileSystem
    private(set) var size: Int64
    private var buffer: UnsafeMutableRawBufferPointer
    private var bufferStart: Int64 = 0
    private var bufferCount = 0

    init(directory: String, name: String, fs: any FileSystem) throws(SystemError) {
        self.name = name
        self.path = directory + "/" + name
        self.fs = fs
        fd = try fs.open(path, O_RDONLY, mode: 0)
        do { size = try fs.fileSize(fd, subject: path) }
        catch { fs.close(fd); throw error }
        buffer = .allocate(byteCount: 256 << 10, alignment: 8)
    }

    deinit {
        buffer.deallocate()
        fs.close(fd)
    }

    /// Picks up growth by a concurrent writer.
    func refreshSize() throws(SystemError) {
        let newSize = try fs.fileSize(fd, subject: path)
        if newSize < size { bufferCount = 0 }  // truncated by recovery: drop stale bytes
        size = newSize
    }

    /// Calls `body` with exactly `count` bytes at `offset`, or with fewer if the file ends first.
    func withBytes<R>(at offset: Int64, count: Int, _ body: (UnsafeRawBufferPointer) -> R) throws(SystemError) -> R {
        let available = Int(max(0, min(Int64(count), size - offset)))
        if offset >= bufferStart && offset + Int64(available) <= bufferStart + Int64(bufferCount) {
            let start = Int(offset - bufferStart)
            return body(UnsafeRawBufferPointer(rebasing: buffer[start..<(start + available)]))
        }
        if available > buffer.count {
            buffer.deallocate()
            buffer = .allocate(byteCount: RecordFrame.padded(available), alignment: 8)
        }
        var filled = 0
        let want = Int(min(Int64(buffer.count), size - offset))
        while filled < want {
            let n = try fs.pread(fd, UnsafeMutableRawBufferPointer(rebasing: buffer[filled..<want]), offset: offset + Int64(filled), subject: path)
            if n == 0 { break }
            filled += n
        }
        bufferStart = offset
        bufferCount = filled
        return body(UnsafeRawBufferPointer(rebasing: buffer[0..<min(available, filled)]))
    }

    func readAll(from offset: Int64, to end: Int64) throws(SystemError) -> [UInt8] {
        var out: [UInt8] = []
        var at = offset
        while at < end {
            let chunk = Int(min(end - at, 1 << 20))
            let piece = try withBytes(at: at, count: chunk) { Array($0) }
            if piece.isEmpty { break }
            out += piece
            at += Int64(piece.count)
        }
        return out
    }
}
