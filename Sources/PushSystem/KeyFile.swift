@preconcurrency import Glibc

/// A credential file: a regular file not readable or writable by group or others (as ssh
/// refuses a loose private key), holding one line of printable ASCII (a control character
/// would let a key inject HTTP headers). One reader for the daemon's start, its reload and
/// `pushspoolctl config check`, so the check cannot pass what the daemon refuses.
package enum KeyFile {
    /// Why a key file is refused. Messages name the file, never its content.
    ///
    /// `Sendable`: a value.
    package struct Problem: Error, Sendable, Equatable, CustomStringConvertible {
        package var path: String
        package var message: String
        /// The failing call's errno, when a call failed.
        package var errno: Int32?
        package var description: String { message }

        package init(path: String, message: String, errno: Int32? = nil) {
            self.path = path
            self.message = message
            self.errno = errno
        }
    }

    /// Reads and checks `path`. With `owner` set, the file must also belong to that uid (the
    /// service's own; `pushspoolctl config check` run by another user passes `nil`).
    package static func read(path: String, owner: uid_t?) throws(Problem) -> String {
        let bytes = try checkedBytes(path: path, owner: owner)
        var text = Substring(String(decoding: bytes, as: UTF8.self))
        while let last = text.last, last == "\n" || last == "\r" || last == " " { text.removeLast() }
        while let first = text.first, first == " " { text.removeFirst() }
        guard !text.isEmpty else { throw Problem(path: path, message: "key file \(path) is empty") }
        guard text.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
            throw Problem(path: path, message: "key file \(path) must hold one line of printable ASCII without spaces")
        }
        return String(text)
    }

    /// The bytes of `path` (at most 4 KiB), once it is known to be a regular file without
    /// group or other permission bits and, with `owner` set, that uid's.
    private static func checkedBytes(path: String, owner: uid_t?) throws(Problem) -> [UInt8] {
        let fd: Int32
        do { fd = try Posix.open(path, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC) } catch {
            throw Problem(path: path, message: "cannot open key file \(path): \(error)", errno: error.errno)
        }
        defer { Posix.close(fd) }
        let info: stat
        do { info = try Posix.fstat(fd, subject: path) } catch {
            throw Problem(path: path, message: "cannot stat key file \(path): \(error)", errno: error.errno)
        }
        guard info.st_mode & S_IFMT == S_IFREG else { throw Problem(path: path, message: "key file \(path) is not a regular file") }
        guard info.st_mode & 0o077 == 0 else {
            throw Problem(path: path, message: "key file \(path) has mode \(String(info.st_mode & 0o777, radix: 8)); "
                          + "it must not be accessible to group or others (chmod 600)")
        }
        if let owner, info.st_uid != owner {
            throw Problem(path: path, message: "key file \(path) is owned by uid \(info.st_uid), not by the service (uid \(owner))")
        }
        let bytes: [UInt8]
        do { bytes = try Posix.readAll(fd, limit: 4096, regularFile: true) } catch {
            throw Problem(path: path, message: "cannot read key file \(path): \(error)", errno: error.errno)
        }
        return bytes
    }
}

extension KeyFile {
    /// Reads and checks a binary secret of exactly `size` bytes (the fleet erasure key,
    /// `[Export] ErasureKeyFile=`): a regular file, no group or other permission bits, and,
    /// with `owner` set, that uid's. The one reader for both daemons' start and
    /// `pushspoolctl config check`.
    package static func readSecret(path: String, size: Int, owner: uid_t?) throws(Problem) -> [UInt8] {
        let bytes = try checkedBytes(path: path, owner: owner)
        guard bytes.count == size else {
            throw Problem(path: path, message: "key file \(path) holds \(bytes.count) bytes, not \(size); "
                          + "make one with `head -c \(size) /dev/urandom > FILE` (raw bytes, no newline)")
        }
        return bytes
    }
}
