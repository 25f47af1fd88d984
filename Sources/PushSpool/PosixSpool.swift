@preconcurrency import Glibc
import PushSystem

/// System calls the spool needs beyond `PushSystem.Posix`, routed through `Posix.call` so
/// tests can inject errno.
extension Posix {
    private typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32

    /// glibc's `renameat2` wrapper is declared only under `_GNU_SOURCE`, which Swift's Glibc
    /// module does not set, so it is looked up once at run time (glibc ≥ 2.28 has it).
    private static let renameat2Function: RenameAt2? = {
        guard let symbol = dlsym(nil, "renameat2") else { return nil }
        return unsafeBitCast(symbol, to: RenameAt2.self)
    }()

    private static let renameNoReplace: UInt32 = 1  // RENAME_NOREPLACE from <linux/fs.h>

    /// Renames without ever replacing an existing target: `renameat2(2)` with
    /// `RENAME_NOREPLACE`, or, where the file system lacks it (`EINVAL`), `linkat(2)` +
    /// `unlinkat(2)`, which also fails with `EEXIST` instead of replacing.
    ///
    /// Throws `EEXIST` when `to` exists. Never follows a symbolic link: the entry itself moves.
    package static func renameNoReplace(_ fromDir: Int32, _ from: String, _ toDir: Int32, _ to: String) throws(SystemError) {
        if let renameat2Function {
            do {
                _ = try call("renameat2", "\(from) -> \(to)") { renameat2Function(fromDir, from, toDir, to, renameNoReplace) }
                return
            } catch where error.errno == EINVAL || error.errno == ENOSYS {
                // The file system does not support the flag; fall through to link + unlink.
            }
        }
        try renameNoReplaceByLink(fromDir, from, toDir, to)
    }

    /// The fallback of `renameNoReplace`: `linkat(2)` (fails with `EEXIST`, links a symlink
    /// itself, not its target) then `unlinkat(2)` of the old name. Not for directories.
    static func renameNoReplaceByLink(_ fromDir: Int32, _ from: String, _ toDir: Int32, _ to: String) throws(SystemError) {
        _ = try call("linkat", "\(from) -> \(to)") { Glibc.linkat(fromDir, from, toDir, to, 0) }
        try unlinkat(fromDir, from)
    }

    /// `renameNoReplace` from a name given as raw bytes (a directory entry whose name is not
    /// valid UTF-8 and so cannot round-trip through `String`).
    package static func renameNoReplace(_ fromDir: Int32, _ from: [UInt8], _ toDir: Int32, _ to: String) throws(SystemError) {
        let cName = from.map { CChar(bitPattern: $0) } + [0]
        let subject = SpoolName.escape(raw: from)
        let result: Result<Void, SystemError> = cName.withUnsafeBufferPointer { buffer in
            let pointer = buffer.baseAddress!
            if let renameat2Function {
                do throws(SystemError) {
                    _ = try call("renameat2", "\(subject) -> \(to)") { renameat2Function(fromDir, pointer, toDir, to, renameNoReplace) }
                    return .success(())
                } catch where error.errno == EINVAL || error.errno == ENOSYS {
                } catch {
                    return .failure(error)
                }
            }
            return Result { () throws(SystemError) in
                _ = try call("linkat", "\(subject) -> \(to)") { Glibc.linkat(fromDir, pointer, toDir, to, 0) }
                _ = try call("unlinkat", subject) { Glibc.unlinkat(fromDir, pointer, 0) }
            }
        }
        try result.get()
    }

    /// `mkdirat(2)`; an existing entry is not an error (the caller checks it is a directory).
    package static func mkdiratIfMissing(_ dirfd: Int32, _ name: String, mode: mode_t) throws(SystemError) -> Bool {
        do {
            _ = try call("mkdirat", name) { Glibc.mkdirat(dirfd, name, mode) }
            return true
        } catch where error.errno == EEXIST {
            return false
        }
    }

    /// `poll(2)` on one or more fds; returns how many are ready (0 on timeout).
    package static func poll(_ fds: inout [pollfd], timeoutMillis: Int32) throws(SystemError) -> Int {
        let count = nfds_t(fds.count)
        return Int(try fds.withUnsafeMutableBufferPointer { buffer throws(SystemError) in
            try call("poll") { Glibc.poll(buffer.baseAddress, count, timeoutMillis) }
        })
    }

    /// `read(2)` that reports `EAGAIN` as `nil` instead of an error (non-blocking fds).
    package static func readNonBlocking(_ fd: Int32, _ buffer: UnsafeMutableRawBufferPointer, subject: @autoclosure () -> String = "") throws(SystemError) -> Int? {
        do {
            return try read(fd, buffer, subject: subject())
        } catch where error.errno == EAGAIN || error.errno == EWOULDBLOCK {
            return nil
        }
    }

    /// `dup(2)` with close-on-exec.
    package static func dupCloexec(_ fd: Int32) throws(SystemError) -> Int32 {
        try call("fcntl") { Glibc.fcntl(fd, F_DUPFD_CLOEXEC, 0) }
    }
}
