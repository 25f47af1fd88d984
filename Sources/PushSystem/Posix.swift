@preconcurrency import Glibc
internal import CPosix

/// Thin wrappers over the POSIX calls the daemon uses. Each retries `EINTR` and reads errno
/// immediately, throwing `SystemError`; every call goes through `Posix.call` so the fault
/// injector can make any of them fail in tests.
package enum Posix {
    /// Runs `body`, retrying while it fails with `EINTR`. `-1` means failure with errno set.
    @inline(__always)
    /// CPUs this process may run on: its affinity mask (which `CPUAffinity=` narrows), or the
    /// CPUs online when the mask cannot be read. At least 1.
    package static func usableCPUs() -> Int {
        let inMask = Int(cposix_usable_cpus())
        return max(1, inMask > 0 ? inMask : sysconf(Int32(_SC_NPROCESSORS_ONLN)))
    }

    package static func call<R: BinaryInteger>(
        _ name: String, _ subject: @autoclosure () -> String = "",
        file: String = #fileID, line: Int = #line, _ body: () -> R
    ) throws(SystemError) -> R {
        // The test-only fault switch exists in debug builds (which the test suites run) and
        // not in release builds: a shipped daemon has no code path that fails a call on purpose.
        #if DEBUG
        if let injected = FaultInjector.shared.fault(for: name) {
            throw SystemError(call: name, errno: injected, subject: subject(), file: file, line: line)
        }
        #endif
        while true {
            let result = body()
            if result != -1 { return result }
            let code = Glibc.errno
            if code == EINTR { continue }
            throw SystemError(call: name, errno: code, subject: subject(), file: file, line: line)
        }
    }

    /// `openat(2)`; always adds `O_CLOEXEC`.
    package static func openat(_ dirfd: Int32, _ path: String, _ flags: Int32, mode: mode_t = 0o644) throws(SystemError) -> Int32 {
        try call("openat", path) { Glibc.openat(dirfd, path, flags | O_CLOEXEC, mode) }
    }

    /// `open(2)`; always adds `O_CLOEXEC`.
    package static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o644) throws(SystemError) -> Int32 {
        try call("open", path) { Glibc.open(path, flags | O_CLOEXEC, mode) }
    }

    /// `close(2)`. EINTR is not retried: on Linux the fd is gone either way.
    /// A non-blocking, close-on-exec pipe for waking a thread that blocks in poll(2) (a
    /// self-pipe: Swift's Glibc module does not export eventfd). Returns (read, write).
    /// See: man 2 pipe.
    package static func selfPipe() throws(SystemError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [-1, -1]
        do {
            _ = try call("pipe") { Glibc.pipe(&fds) }
            for fd in fds {
                _ = try call("fcntl") { Glibc.fcntl(fd, F_SETFD, FD_CLOEXEC) }
                _ = try call("fcntl") { Glibc.fcntl(fd, F_SETFL, O_NONBLOCK) }
            }
        } catch {
            for fd in fds where fd >= 0 { close(fd) }
            throw error
        }
        return (fds[0], fds[1])
    }

    package static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    /// `read(2)` into a buffer; returns bytes read (0 at end of file).
    package static func read(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, subject: @autoclosure () -> String = "") throws(SystemError) -> Int {
        try call("read", subject()) { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }

    /// `pread(2)`.
    package static func pread(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, offset: Int64, subject: @autoclosure () -> String = "") throws(SystemError) -> Int {
        try call("pread", subject()) { Glibc.pread(fd, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// Writes the whole buffer, looping on short writes. A short write that makes no progress
    /// (disk full) surfaces as the errno of the failing `write(2)`.
    package static func writeAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, subject: @autoclosure () -> String = "") throws(SystemError) {
        var offset = 0
        while offset < buffer.count {
            let n = try call("write", subject()) { Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset) }
            offset += n
        }
    }

    /// Writes all of `bytes`, looping on short writes.
    package static func writeAll(_ fd: Int32, _ bytes: [UInt8], subject: @autoclosure () -> String = "") throws(SystemError) {
        let result: Result<Void, SystemError> = bytes.withUnsafeBytes { buffer in
            Result { () throws(SystemError) in try writeAll(fd, buffer, subject: subject()) }
        }
        try result.get()
    }

    /// `pwrite(2)` of the whole buffer at `offset`.
    package static func pwriteAll(_ fd: Int32, _ buffer: UnsafeRawBufferPointer, offset: Int64, subject: @autoclosure () -> String = "") throws(SystemError) {
        var done = 0
        while done < buffer.count {
            let n = try call("pwrite", subject()) {
                Glibc.pwrite(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
            }
            done += n
        }
    }

    /// `fdatasync(2)`. Callers must treat any failure as fatal for the data written (see
    /// docs/design/journal.md, "fsync failures").
    package static func fdatasync(_ fd: Int32, subject: @autoclosure () -> String = "") throws(SystemError) {
        _ = try call("fdatasync", subject()) { Glibc.fdatasync(fd) }
    }

    /// `fsync(2)`, also used on directory fds so renames and creations survive power loss.
    package static func fsync(_ fd: Int32, subject: @autoclosure () -> String = "") throws(SystemError) {
        _ = try call("fsync", subject()) { Glibc.fsync(fd) }
    }

    /// `renameat(2)`.
    package static func renameat(_ fromDir: Int32, _ from: String, _ toDir: Int32, _ to: String) throws(SystemError) {
        _ = try call("renameat", "\(from) -> \(to)") { Glibc.renameat(fromDir, from, toDir, to) }
    }

    /// `unlinkat(2)`.
    package static func unlinkat(_ dirfd: Int32, _ name: String, flags: Int32 = 0) throws(SystemError) {
        _ = try call("unlinkat", name) { Glibc.unlinkat(dirfd, name, flags) }
    }

    /// `ftruncate(2)`.
    package static func ftruncate(_ fd: Int32, _ length: Int64, subject: @autoclosure () -> String = "") throws(SystemError) {
        _ = try call("ftruncate", subject()) { Glibc.ftruncate(fd, off_t(length)) }
    }

    /// `fstat(2)`.
    package static func fstat(_ fd: Int32, subject: @autoclosure () -> String = "") throws(SystemError) -> stat {
        var st = stat()
        _ = try call("fstat", subject()) { Glibc.fstat(fd, &st) }
        return st
    }

    /// `fstatat(2)` with `AT_SYMLINK_NOFOLLOW`.
    package static func lstatat(_ dirfd: Int32, _ name: String) throws(SystemError) -> stat {
        var st = stat()
        _ = try call("fstatat", name) { Glibc.fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) }
        return st
    }

    /// `mkdir(2)`; an existing directory is not an error.
    package static func mkdirIfMissing(_ path: String, mode: mode_t = 0o750) throws(SystemError) {
        do {
            _ = try call("mkdir", path) { Glibc.mkdir(path, mode) }
        } catch where error.errno == EEXIST {
            return
        }
    }

    /// `mkdir -p`.
    package static func mkdirs(_ path: String, mode: mode_t = 0o750) throws(SystemError) {
        var prefix = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            prefix += "/" + component
            try mkdirIfMissing(prefix, mode: mode)
        }
    }

    /// Opens a directory for use as the `dirfd` of `*at` calls and for `fsync`.
    package static func openDirectory(_ path: String) throws(SystemError) -> Int32 {
        try open(path, O_RDONLY | O_DIRECTORY)
    }

    /// `fsync` on the directory at `path`, so entries created or renamed in it are durable.
    package static func syncDirectory(_ path: String) throws(SystemError) {
        let fd = try openDirectory(path)
        defer { close(fd) }
        try fsync(fd, subject: path)
    }

    /// Reads a whole (small) file. Refuses files over `limit` bytes with `EFBIG`.
    package static func readFile(_ path: String, limit: Int = 64 << 20) throws(SystemError) -> [UInt8] {
        let fd = try open(path, O_RDONLY)
        defer { close(fd) }
        return try readAll(fd, limit: limit, subject: path)
    }

    /// Reads from `fd` to end of file; refuses more than `limit` bytes with `EFBIG`.
    ///
    /// `sizeHint` (from `fstat`) sizes the buffer so a file that did not change is read with
    /// one `read(2)` straight into the result plus one that sees end of file.
    /// For a regular file (`regularFile`), a read that returns less than asked is end of file,
    /// which saves the `read(2)` that would only return 0.
    package static func readAll(_ fd: Int32, limit: Int, sizeHint: Int = 0, regularFile: Bool = false,
                                subject: String = "") throws(SystemError) -> [UInt8] {
        try RealFileSystem().readAll(fd, limit: limit, sizeHint: sizeHint, regularFile: regularFile, subject: subject)
    }

    /// Writes `bytes` to `directory/name` durably: temp file, fsync, rename, directory fsync.
    package static func writeFileAtomically(directory: String, name: String, bytes: [UInt8], mode: mode_t = 0o640) throws(SystemError) {
        let dirfd = try openDirectory(directory)
        defer { close(dirfd) }
        let temp = ".\(name).\(getpid()).tmp"
        let fd = try openat(dirfd, temp, O_WRONLY | O_CREAT | O_TRUNC, mode: mode)
        do throws(SystemError) {
            try writeAll(fd, bytes, subject: temp)
            try fsync(fd, subject: temp)
            close(fd)
        } catch {
            close(fd)
            try? unlinkat(dirfd, temp)
            throw error
        }
        try renameat(dirfd, temp, dirfd, name)
        try fsync(dirfd, subject: directory)
    }

    /// Arms handlers for the crash signals (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGABRT)
    /// that write `mark` at `offset` of `fd` and then let the previous handler run; wraps
    /// `cposix_install_crash_mark` (sigaction(2) from C: the handler must not touch Swift).
    package static func installCrashMark(fd: Int32, offset: Int, mark: UInt8) throws(SystemError) {
        _ = try call("sigaction", "crash signals") { cposix_install_crash_mark(fd, offset, CChar(bitPattern: mark)) }
    }

    /// Where the crash handler writes the crashing thread's tag, past the mark's offset
    /// (`CPOSIX_CRASH_TAG_OFFSET`), and the longest tag it keeps.
    package static let crashTagOffset = 4096
    package static let crashTagMax = 128

    /// Names the calling thread for the crash mark: a crash signal on this thread also writes
    /// `tag` at the mark's offset + ``crashTagOffset`` (wraps `cposix_set_crash_tag`).
    package static func setCrashTag(_ tag: String) {
        let bytes = Array(tag.utf8.prefix(crashTagMax))
        bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { cposix_set_crash_tag($0.baseAddress, $0.count) }
        }
    }

    /// Monotonic clock in nanoseconds.
    package static func monotonicNanos() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Wall clock in milliseconds since the epoch.
    package static func wallClockMillis() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }
}
