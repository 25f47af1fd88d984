@preconcurrency import Glibc
import PushSystem

/// The journal's syscalls, named `"<scope>.<call>"` for `FaultInjector` (see
/// `JournalOptions.faultScope`). All go through `Posix.call` for EINTR retry and errno capture.
struct JournalIO: Sendable {
    let scope: String
    let directory: String

    func err(_ error: SystemError) -> JournalError {
        JournalError(error.isNoSpace ? .noSpace(error) : .io(error), directory: directory)
    }

    func openat(_ dirfd: Int32, _ name: String, _ flags: Int32, mode: mode_t = 0o640) throws(JournalError) -> Int32 {
        do { return try Posix.call(scope + ".openat", name) { Glibc.openat(dirfd, name, flags | O_CLOEXEC, mode) } }
        catch { throw err(error) }
    }

    /// Writes all of `buffer` at the fd's position (segments are `O_APPEND`), looping on short writes.
    func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, subject: String) throws(SystemError) {
        var done = 0
        while done < buffer.count {
            let n = try Posix.call(scope + ".write", subject) { Glibc.write(fd, buffer.baseAddress! + done, buffer.count - done) }
            done += n
        }
    }

    func writeAll(_ fd: Int32, _ bytes: [UInt8], subject: String) throws(SystemError) {
        let result: Result<Void, SystemError> = bytes.withUnsafeBytes { raw in
            Result { () throws(SystemError) in try writeAll(fd, raw, subject: subject) }
        }
        try result.get()
    }

    func pwriteAll(_ fd: Int32, _ bytes: [UInt8], offset: Int64, subject: String) throws(SystemError) {
        let result: Result<Void, SystemError> = bytes.withUnsafeBytes { raw in
            Result { () throws(SystemError) in
                var done = 0
                while done < raw.count {
                    done += try Posix.call(scope + ".pwrite", subject) {
                        Glibc.pwrite(fd, raw.baseAddress! + done, raw.count - done, off_t(offset) + off_t(done))
                    }
                }
            }
        }
        try result.get()
    }

    /// `fdatasync(2)`. Any failure is fatal for the data (JOURNAL.md §2.4): mapped to `.syncFailed`.
    func fdatasync(_ fd: Int32, subject: String) throws(JournalError) {
        do { _ = try Posix.call(scope + ".fdatasync", subject) { Glibc.fdatasync(fd) } }
        catch { throw JournalError(.syncFailed(error), directory: directory) }
    }

    /// `fsync(2)` of a file or directory; failure is fatal like `fdatasync`.
    func fsync(_ fd: Int32, subject: String) throws(JournalError) {
        do { _ = try Posix.call(scope + ".fsync", subject) { Glibc.fsync(fd) } }
        catch { throw JournalError(.syncFailed(error), directory: directory) }
    }

    func ftruncate(_ fd: Int32, _ length: Int64, subject: String) throws(JournalError) {
        do { _ = try Posix.call(scope + ".ftruncate", subject) { Glibc.ftruncate(fd, off_t(length)) } }
        catch { throw err(error) }
    }

    func renameat(_ dirfd: Int32, _ from: String, _ toDirfd: Int32, _ to: String) throws(JournalError) {
        do { _ = try Posix.call(scope + ".renameat", "\(from) -> \(to)") { Glibc.renameat(dirfd, from, toDirfd, to) } }
        catch { throw err(error) }
    }

    func unlinkat(_ dirfd: Int32, _ name: String) throws(JournalError) {
        do { _ = try Posix.call(scope + ".unlinkat", name) { Glibc.unlinkat(dirfd, name, 0) } }
        catch { throw err(error) }
    }

    /// Replaces `name` durably: temp file, fsync, rename, directory fsync (JOURNAL.md b.1).
    func writeFileAtomically(dirfd: Int32, name: String, bytes: [UInt8]) throws(JournalError) {
        let temp = name + ".tmp"
        let fd = try openat(dirfd, temp, O_WRONLY | O_CREAT | O_TRUNC)
        do throws(JournalError) {
            do { try writeAll(fd, bytes, subject: temp) } catch { throw err(error) }
            try fsync(fd, subject: temp)
            Posix.close(fd)
        } catch {
            Posix.close(fd)
            try? unlinkat(dirfd, temp)
            throw error
        }
        // Its only caller is the dedup checkpoint: the test stop point "mid checkpoint".
        StopPoints.pass(.checkpoint)
        try renameat(dirfd, temp, dirfd, name)
        try fsync(dirfd, subject: directory)
    }
}

extension Posix {
    /// Names in a directory (without `.` and `..`), via `opendir(3)`/`readdir(3)`.
    static func journalListDirectory(_ path: String) throws(SystemError) -> [String] {
        guard let dir = opendir(path) else { throw SystemError(call: "opendir", errno: errno, subject: path) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    /// `flock(2)` with `LOCK_EX | LOCK_NB`; returns false when another open file holds it.
    static func journalTryLock(_ fd: Int32, subject: String) throws(SystemError) -> Bool {
        // `flock` names both a function and a struct in Glibc; the type annotation picks the function.
        let lock: (Int32, Int32) -> Int32 = flock(_:_:)
        do {
            _ = try call("flock", subject) { lock(fd, LOCK_EX | LOCK_NB) }
            return true
        } catch {
            if error.errno == EWOULDBLOCK { return false }
            throw error
        }
    }
}

/// Buffered positional reads of one segment file. Not `Sendable`: owns an fd.
final class SegmentFile {
    let name: String
    let path: String
    let fd: Int32
    private(set) var size: Int64
    private var buffer: UnsafeMutableRawBufferPointer
    private var bufferStart: Int64 = 0
    private var bufferCount = 0

    init(directory: String, name: String) throws(SystemError) {
        self.name = name
        self.path = directory + "/" + name
        fd = try Posix.open(path, O_RDONLY)
        do { size = Int64(try Posix.fstat(fd, subject: path).st_size) }
        catch { Posix.close(fd); throw error }
        buffer = .allocate(byteCount: 256 << 10, alignment: 8)
    }

    deinit {
        buffer.deallocate()
        Posix.close(fd)
    }

    /// Picks up growth by a concurrent writer.
    func refreshSize() throws(SystemError) {
        let newSize = Int64(try Posix.fstat(fd, subject: path).st_size)
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
            let n = try Posix.pread(fd, UnsafeMutableRawBufferPointer(rebasing: buffer[filled..<want]), offset: offset + Int64(filled), subject: path)
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
