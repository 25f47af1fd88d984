@preconcurrency import Glibc

/// The file-system calls of the journal (and the dedup checkpoint) as a seam, so tests can run
/// the same code over a simulated file system that models what a power cut keeps and loses
/// (`SimulatedFileSystem` in the `SimulatedFS` test-support target) or that fails the N-th call
/// with EIO, ENOSPC, EDQUOT or a short write.
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
    /// `fdatasync(2)`. A failure means written data may be lost (JOURNAL.md §2.4).
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
}
