@preconcurrency import Glibc
import PushSystem

/// System calls the spool needs beyond `PushSystem.Posix`, routed through `Posix.call` so
/// tests can inject errno.
extension Posix {
    /// Renames without ever replacing an existing target: `renameat2(2)` with
    /// `RENAME_NOREPLACE`, or, where the file system lacks it (`EINVAL`), `linkat(2)` +
    /// `unlinkat(2)`, which also fails with `EEXIST` instead of replacing. The one
    /// implementation is `RealFileSystem.renameNoReplace`; this is the path-free shorthand for
    /// callers outside the `FileSystem` seam (`pushspoolctl failed retry`, the dropper).
    ///
    /// Throws `EEXIST` when `to` exists. Never follows a symbolic link: the entry itself moves.
    package static func renameNoReplace(_ fromDir: Int32, _ from: String, _ toDir: Int32, _ to: String) throws(SystemError) {
        try RealFileSystem().renameNoReplace(fromDir, from, toDir, to)
    }

    /// The fallback of `renameNoReplace`: `linkat(2)` then `unlinkat(2)`. Not for directories.
    static func renameNoReplaceByLink(_ fromDir: Int32, _ from: String, _ toDir: Int32, _ to: String) throws(SystemError) {
        try RealFileSystem().renameNoReplaceByLink(fromDir, from, toDir, to, subject: from)
    }

    /// `renameNoReplace` from a name given as raw bytes (a directory entry whose name is not
    /// valid UTF-8 and so cannot round-trip through `String`).
    package static func renameNoReplace(_ fromDir: Int32, _ from: [UInt8], _ toDir: Int32, _ to: String) throws(SystemError) {
        try RealFileSystem().renameNoReplace(fromDir, raw: from, toDir, to, subject: SpoolName.escape(raw: from))
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
