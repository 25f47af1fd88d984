@preconcurrency import Glibc

/// The file-system calls of the journal (and the dedup checkpoint) as a seam, so tests can run
/// the same code over a simulated file system that models what a power cut keeps and loses
/// (`SimulatedFileSystem` in the `SimulatedFS` test-support target) or that fails the N-th call
/// with EIO, ENOSPC, EDQUOT or a short write.
///
/// The spool (`Spool`, `FailedQueue`, `DirectoryScanner`, `SpoolLayout.create`) goes through it
/// too, with every move and removal an `*at` call on its open directory handles; only the
/// inotify watcher and the producer-side dropper call the system directly.
///
/// Handles are `Int32` "fds": real descriptors for `RealFileSystem`, table indexes for a
/// simulated one; a caller never mixes handles of two file systems. Every call either
/// succeeds or throws a `SystemError` carrying the errno, like the `Posix` wrappers it
/// mirrors. `mode` is a `mode_t`.
///
/// `Sendable`: implementations are stateless (real) or lock internally (simulated).
package protocol FileSystem: Sendable {
    /// `open(2)` (adds `O_CLOEXEC`).
    func open(_ path: String, _ flags: Int32, mode: UInt32) throws(SystemError) -> Int32
    /// `openat(2)` (adds `O_CLOEXEC`).
    func openat(_ dirfd: Int32, _ name: String, _ flags: Int32, mode: UInt32) throws(SystemError) -> Int32
    /// `close(2)`; never fails (on Linux the fd is gone either way).
    func close(_ fd: Int32)
    /// One `write(2)`; may write fewer bytes than asked.
    func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, subject: String) throws(SystemError) -> Int
    /// One `pwrite(2)`; may write fewer bytes than asked.
    func pwrite(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, offset: Int64, subject: String) throws(SystemError) -> Int
    /// One `read(2)`; 0 at end of file.
    func read(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, subject: String) throws(SystemError) -> Int
    /// One `pread(2)`; 0 at end of file.
    func pread(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, offset: Int64, subject: String) throws(SystemError) -> Int
    /// `fdatasync(2)`. A failure means written data may be lost (docs/design/journal.md, "fsync
    /// failures").
    func fdatasync(_ fd: Int32, subject: String) throws(SystemError)
    /// `fsync(2)` of a file or a directory (a directory's fsync makes its entries durable).
    func fsync(_ fd: Int32, subject: String) throws(SystemError)
    /// `ftruncate(2)`.
    func ftruncate(_ fd: Int32, _ length: Int64, subject: String) throws(SystemError)
    /// The size from `fstat(2)`.
    func fileSize(_ fd: Int32, subject: String) throws(SystemError) -> Int64
    /// `renameat(2)`.
    func renameat(_ fromDir: Int32, _ from: String, _ toDir: Int32, _ to: String) throws(SystemError)
    /// `unlinkat(2)`.
    func unlinkat(_ dirfd: Int32, _ name: String, flags: Int32) throws(SystemError)
    /// `mkdir(2)`; an existing entry throws EEXIST.
    func mkdir(_ path: String, mode: UInt32) throws(SystemError)
    /// Names in a directory without `.` and `..` (`opendir(3)`/`readdir(3)`).
    func listDirectory(_ path: String) throws(SystemError) -> [String]
    /// `flock(2)` with `LOCK_EX | LOCK_NB`; false when another open file holds the lock.
    func tryLock(_ fd: Int32, subject: String) throws(SystemError) -> Bool
    /// Whether `path` names something (`access(2)` with `F_OK`).
    func exists(_ path: String) -> Bool

    // The spool's calls: everything relative to a directory handle, never following a link.

    /// `fstatat(2)` with `AT_SYMLINK_NOFOLLOW` of `name` in the directory `dirfd`.
    func statusAt(_ dirfd: Int32, _ name: String) throws(SystemError) -> FileStatus
    /// `fstat(2)`.
    func status(_ fd: Int32, subject: String) throws(SystemError) -> FileStatus
    /// `lstat(2)` of a path.
    func linkStatus(_ path: String) throws(SystemError) -> FileStatus
    /// `renameat2(2)` with `RENAME_NOREPLACE` (or `linkat` + `unlinkat` where the file system
    /// lacks the flag): throws `EEXIST` instead of replacing `to`; moves a symlink itself.
    func renameNoReplace(_ fromDir: Int32, _ from: String, _ toDir: Int32, _ to: String) throws(SystemError)
    /// `renameNoReplace` from a name given as raw bytes (an entry whose name is not valid
    /// UTF-8); `subject` names it in errors.
    func renameNoReplace(_ fromDir: Int32, raw from: [UInt8], _ toDir: Int32, _ to: String, subject: String) throws(SystemError)
    /// `mkdirat(2)`; an existing entry throws EEXIST.
    func mkdirat(_ dirfd: Int32, _ name: String, mode: UInt32) throws(SystemError)
    /// `fchmodat(2)` (the umask does not apply).
    func chmodat(_ dirfd: Int32, _ name: String, mode: UInt32) throws(SystemError)
    /// `fcntl(F_DUPFD_CLOEXEC)`: a second handle on the same open file.
    func duplicate(_ fd: Int32) throws(SystemError) -> Int32
    /// A streaming listing of the directory open at `dirfd` (`openat(dirfd, ".")` +
    /// `fdopendir(3)`), with a read position of its own; `dirfd` is not consumed.
    func openDirectoryStream(_ dirfd: Int32, subject: String) throws(SystemError) -> any DirectoryStream
}

/// What `stat(2)` says about a file, as far as the seam's users need it.
package struct FileStatus: Sendable, Equatable {
    /// The `S_IFMT` bits of `st_mode`.
    package var type: UInt32
    package var size: Int64
    /// Last modification, nanoseconds since the epoch.
    package var modifiedNanos: Int64
    package var inode: UInt64
    package var device: UInt64
    package var linkCount: UInt64

    package init(type: UInt32, size: Int64, modifiedNanos: Int64, inode: UInt64, device: UInt64, linkCount: UInt64) {
        self.type = type
        self.size = size
        self.modifiedNanos = modifiedNanos
        self.inode = inode
        self.device = device
        self.linkCount = linkCount
    }

    package init(_ st: stat) {
        self.init(type: UInt32(st.st_mode) & UInt32(S_IFMT), size: Int64(st.st_size),
                  modifiedNanos: Int64(st.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_mtim.tv_nsec),
                  inode: UInt64(st.st_ino), device: UInt64(st.st_dev), linkCount: UInt64(st.st_nlink))
    }

    package var isRegular: Bool { type == UInt32(S_IFREG) }
    package var isDirectory: Bool { type == UInt32(S_IFDIR) }
}

/// One entry of a directory listing: the raw name bytes (not necessarily UTF-8) and `d_type`.
package struct RawDirectoryEntry: Sendable, Equatable {
    package var name: [UInt8]
    /// `DT_REG`, `DT_DIR`, … or `DT_UNKNOWN`.
    package var type: UInt8

    package init(name: [UInt8], type: UInt8) {
        self.name = name
        self.type = type
    }
}

/// A directory being read entry by entry (`.` and `..` are skipped). Not `Sendable`: one
/// reader at a time; the handle is released at the end of the listing or when dropped.
package protocol DirectoryStream: AnyObject {
    /// The next entry; `nil` at the end.
    func next() throws(SystemError) -> RawDirectoryEntry?
}

extension FileSystem {
    /// Writes all of `buffer` at the fd's position, looping on short writes.
    package func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, subject: String) throws(SystemError) {
        var done = 0
        while done < buffer.count {
            done += try write(fd, UnsafeRawBufferPointer(rebasing: buffer[done...]), subject: subject)
        }
    }

    package func writeAll(_ fd: Int32, _ bytes: [UInt8], subject: String) throws(SystemError) {
        let result: Result<Void, SystemError> = bytes.withUnsafeBytes { raw in
            Result { () throws(SystemError) in try writeAll(fd, raw, subject: subject) }
        }
        try result.get()
    }

    /// Writes all of `bytes` at `offset`, looping on short writes.
    package func pwriteAll(_ fd: Int32, _ bytes: [UInt8], offset: Int64, subject: String) throws(SystemError) {
        let result: Result<Void, SystemError> = bytes.withUnsafeBytes { raw in
            Result { () throws(SystemError) in
                var done = 0
                while done < raw.count {
                    done += try pwrite(fd, UnsafeRawBufferPointer(rebasing: raw[done...]), offset: offset + Int64(done), subject: subject)
                }
            }
        }
        try result.get()
    }

    /// Reads a whole (small) file; refuses more than `limit` bytes with `EFBIG`.
    package func readFile(_ path: String, limit: Int) throws(SystemError) -> [UInt8] {
        let fd = try open(path, O_RDONLY, mode: 0)
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let result: Result<Int, SystemError> = chunk.withUnsafeMutableBytes { raw in
                Result { () throws(SystemError) in try read(fd, raw, subject: path) }
            }
            let n = try result.get()
            if n == 0 { return bytes }
            bytes += chunk[0..<n]
            if bytes.count > limit { throw SystemError(call: "read", errno: EFBIG, subject: path) }
        }
    }

    /// `mkdir`; an existing directory is not an error.
    package func mkdirIfMissing(_ path: String, mode: UInt32 = 0o750) throws(SystemError) {
        do { try mkdir(path, mode: mode) } catch where error.errno == EEXIST { return }
    }

    /// `mkdir -p`.
    package func mkdirs(_ path: String, mode: UInt32 = 0o750) throws(SystemError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            try mkdirIfMissing(prefix, mode: mode)
        }
    }

    /// Opens a directory for use as the `dirfd` of `*at` calls and for `fsync`.
    package func openDirectory(_ path: String) throws(SystemError) -> Int32 {
        try open(path, O_RDONLY | O_DIRECTORY, mode: 0)
    }

    /// Reads from `fd` to end of file; refuses more than `limit` bytes with `EFBIG`. As
    /// `Posix.readAll`: `sizeHint` (from `fstat`) sizes the buffer so an unchanged file takes
    /// one `read` plus the one that sees end of file, and for a regular file a short read is
    /// end of file.
    package func readAll(_ fd: Int32, limit: Int, sizeHint: Int = 0, regularFile: Bool = false, subject: String) throws(SystemError) -> [UInt8] {
        var capacity = min(max(sizeHint + 1, 4096), limit + 1)
        var bytes = [UInt8]()
        while true {
            let start = bytes.count
            bytes.reserveCapacity(capacity)
            let spare = capacity - start
            // One memset, not an element-by-element append (that dominates a debug build's tests).
            bytes += [UInt8](repeating: 0, count: spare)
            let result: Result<Int, SystemError> = bytes.withUnsafeMutableBytes { buffer in
                Result { () throws(SystemError) in try read(fd, UnsafeMutableRawBufferPointer(rebasing: buffer[start...]), subject: subject) }
            }
            let n = (try? result.get()) ?? 0
            bytes.removeLast(spare - n)
            _ = try result.get()
            if n == 0 { return bytes }
            if bytes.count > limit { throw SystemError(call: "read", errno: EFBIG, subject: subject) }
            if regularFile && n < spare { return bytes }
            if bytes.count == capacity { capacity = min(capacity * 2, limit + 1) }
        }
    }

    package func renameNoReplace(_ fromDir: Int32, _ from: String, _ toDir: Int32, _ to: String) throws(SystemError) {
        try renameNoReplace(fromDir, raw: Array(from.utf8), toDir, to, subject: from)
    }

    /// `fsync` of the directory at `path`, so entries created or renamed in it are durable.
    package func syncDirectory(_ path: String) throws(SystemError) {
        let fd = try openDirectory(path)
        defer { close(fd) }
        try fsync(fd, subject: path)
    }
}

/// The real file system: each call is the plain system call through `Posix.call` (EINTR
/// retry, errno captured at once). `faultScope` prefixes the call names a test build's
/// `FaultInjector` sees (`"journal.fdatasync"`); empty means the bare names.
package struct RealFileSystem: FileSystem {
    package let faultScope: String

    package init(faultScope: String = "") {
        self.faultScope = faultScope
    }

    @inline(__always)
    private func name(_ call: String) -> String { faultScope.isEmpty ? call : faultScope + "." + call }

    package func open(_ path: String, _ flags: Int32, mode: UInt32) throws(SystemError) -> Int32 {
        try Posix.call(name("open"), path) { Glibc.open(path, flags | O_CLOEXEC, mode_t(mode)) }
    }

    package func openat(_ dirfd: Int32, _ name: String, _ flags: Int32, mode: UInt32) throws(SystemError) -> Int32 {
        try Posix.call(self.name("openat"), name) { Glibc.openat(dirfd, name, flags | O_CLOEXEC, mode_t(mode)) }
    }

    package func close(_ fd: Int32) {
        Posix.close(fd)
    }

    package func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, subject: String) throws(SystemError) -> Int {
        try Posix.call(name("write"), subject) { Glibc.write(fd, buffer.baseAddress, buffer.count) }
    }

    package func pwrite(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, offset: Int64, subject: String) throws(SystemError) -> Int {
        try Posix.call(name("pwrite"), subject) { Glibc.pwrite(fd, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    package func read(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, subject: String) throws(SystemError) -> Int {
        try Posix.call(name("read"), subject) { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }

    package func pread(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, offset: Int64, subject: String) throws(SystemError) -> Int {
        try Posix.call(name("pread"), subject) { Glibc.pread(fd, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    package func fdatasync(_ fd: Int32, subject: String) throws(SystemError) {
        _ = try Posix.call(name("fdatasync"), subject) { Glibc.fdatasync(fd) }
    }

    package func fsync(_ fd: Int32, subject: String) throws(SystemError) {
        _ = try Posix.call(name("fsync"), subject) { Glibc.fsync(fd) }
    }

    package func ftruncate(_ fd: Int32, _ length: Int64, subject: String) throws(SystemError) {
        _ = try Posix.call(name("ftruncate"), subject) { Glibc.ftruncate(fd, off_t(length)) }
    }

    package func fileSize(_ fd: Int32, subject: String) throws(SystemError) -> Int64 {
        var st = stat()
        _ = try Posix.call(name("fstat"), subject) { Glibc.fstat(fd, &st) }
        return Int64(st.st_size)
    }

    package func renameat(_ fromDir: Int32, _ from: String, _ toDir: Int32, _ to: String) throws(SystemError) {
        _ = try Posix.call(name("renameat"), "\(from) -> \(to)") { Glibc.renameat(fromDir, from, toDir, to) }
    }

    package func unlinkat(_ dirfd: Int32, _ name: String, flags: Int32) throws(SystemError) {
        _ = try Posix.call(self.name("unlinkat"), name) { Glibc.unlinkat(dirfd, name, flags) }
    }

    package func mkdir(_ path: String, mode: UInt32) throws(SystemError) {
        _ = try Posix.call(name("mkdir"), path) { Glibc.mkdir(path, mode_t(mode)) }
    }

    package func listDirectory(_ path: String) throws(SystemError) -> [String] {
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

    package func tryLock(_ fd: Int32, subject: String) throws(SystemError) -> Bool {
        // `flock` names both a function and a struct in Glibc; the type annotation picks the function.
        let lock: (Int32, Int32) -> Int32 = flock(_:_:)
        do {
            _ = try Posix.call(name("flock"), subject) { lock(fd, LOCK_EX | LOCK_NB) }
            return true
        } catch {
            if error.errno == EWOULDBLOCK { return false }
            throw error
        }
    }

    package func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    package func statusAt(_ dirfd: Int32, _ name: String) throws(SystemError) -> FileStatus {
        var st = stat()
        _ = try Posix.call(self.name("fstatat"), name) { Glibc.fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) }
        return FileStatus(st)
    }

    package func status(_ fd: Int32, subject: String) throws(SystemError) -> FileStatus {
        var st = stat()
        _ = try Posix.call(name("fstat"), subject) { Glibc.fstat(fd, &st) }
        return FileStatus(st)
    }

    package func linkStatus(_ path: String) throws(SystemError) -> FileStatus {
        var st = stat()
        _ = try Posix.call(name("lstat"), path) { Glibc.lstat(path, &st) }
        return FileStatus(st)
    }

    private typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32

    /// glibc's `renameat2` wrapper is declared only under `_GNU_SOURCE`, which Swift's Glibc
    /// module does not set, so it is looked up once at run time (glibc ≥ 2.28 has it).
    private static let renameat2Function: RenameAt2? = {
        guard let symbol = dlsym(nil, "renameat2") else { return nil }
        return unsafeBitCast(symbol, to: RenameAt2.self)
    }()

    private static let renameNoReplaceFlag: UInt32 = 1  // RENAME_NOREPLACE from <linux/fs.h>

    package func renameNoReplace(_ fromDir: Int32, raw from: [UInt8], _ toDir: Int32, _ to: String, subject: String) throws(SystemError) {
        let cName = from.map { CChar(bitPattern: $0) } + [0]
        let result: Result<Void, SystemError> = cName.withUnsafeBufferPointer { buffer in
            let pointer = buffer.baseAddress!
            if let function = Self.renameat2Function {
                do throws(SystemError) {
                    _ = try Posix.call(name("renameat2"), "\(subject) -> \(to)") { function(fromDir, pointer, toDir, to, Self.renameNoReplaceFlag) }
                    return .success(())
                } catch where error.errno == EINVAL || error.errno == ENOSYS {
                    // The file system does not support the flag; fall through to link + unlink.
                } catch {
                    return .failure(error)
                }
            }
            return Result { () throws(SystemError) in try renameNoReplaceByLink(fromDir, pointer, toDir, to, subject: subject) }
        }
        try result.get()
    }

    /// The fallback of `renameNoReplace`: `linkat(2)` (fails with `EEXIST`, links a symlink
    /// itself, not its target) then `unlinkat(2)` of the old name. Not for directories.
    package func renameNoReplaceByLink(_ fromDir: Int32, _ from: UnsafePointer<CChar>, _ toDir: Int32, _ to: String, subject: String) throws(SystemError) {
        _ = try Posix.call(name("linkat"), "\(subject) -> \(to)") { Glibc.linkat(fromDir, from, toDir, to, 0) }
        _ = try Posix.call(name("unlinkat"), subject) { Glibc.unlinkat(fromDir, from, 0) }
    }

    package func mkdirat(_ dirfd: Int32, _ name: String, mode: UInt32) throws(SystemError) {
        _ = try Posix.call(self.name("mkdirat"), name) { Glibc.mkdirat(dirfd, name, mode_t(mode)) }
    }

    package func chmodat(_ dirfd: Int32, _ name: String, mode: UInt32) throws(SystemError) {
        _ = try Posix.call(self.name("fchmodat"), name) { Glibc.fchmodat(dirfd, name, mode_t(mode), 0) }
    }

    package func duplicate(_ fd: Int32) throws(SystemError) -> Int32 {
        try Posix.call(name("fcntl")) { Glibc.fcntl(fd, F_DUPFD_CLOEXEC, 0) }
    }

    package func openDirectoryStream(_ dirfd: Int32, subject: String) throws(SystemError) -> any DirectoryStream {
        let fd = try openat(dirfd, ".", O_RDONLY | O_DIRECTORY, mode: 0)
        guard let dir = fdopendir(fd) else {
            let error = SystemError(call: "fdopendir", errno: Glibc.errno, subject: subject)
            Posix.close(fd)
            throw error
        }
        return RealDirectoryStream(dir, subject: subject)
    }
}

/// `readdir(3)` over a `DIR*` (which reads `getdents64(2)` in 32 KiB chunks).
final class RealDirectoryStream: DirectoryStream {
    private var dir: OpaquePointer?
    private let subject: String

    init(_ dir: OpaquePointer, subject: String) {
        self.dir = dir
        self.subject = subject
    }

    deinit {
        if let dir { closedir(dir) }
    }

    func next() throws(SystemError) -> RawDirectoryEntry? {
        while let dir {
            Glibc.errno = 0
            guard let entry = readdir(dir) else {
                let code = Glibc.errno
                closedir(dir)
                self.dir = nil
                if code != 0 { throw SystemError(call: "readdir", errno: code, subject: subject) }
                return nil
            }
            let raw: [UInt8] = withUnsafePointer(to: &entry.pointee.d_name) { tuple in
                tuple.withMemoryRebound(to: UInt8.self, capacity: 256) { base in
                    Array(UnsafeBufferPointer(start: base, count: strlen(UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self))))
                }
            }
            if raw == [0x2E] || raw == [0x2E, 0x2E] { continue }
            return RawDirectoryEntry(name: raw, type: entry.pointee.d_type)
        }
        return nil
    }
}
