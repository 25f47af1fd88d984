@preconcurrency import Glibc
import PushOutboxStore
import PushSystem

/// A credential read from a key file. `description` never shows the value, so a secret
/// interpolated into a log line or error by mistake prints as `<redacted>`.
///
/// `Sendable`: a plain value.
package struct Secret: Sendable, Equatable, CustomStringConvertible {
    package let value: String

    package var description: String { "<redacted>" }

    init(value: String) { self.value = value }

    /// Reads `path`: a regular file owned by this process's user, not readable or writable
    /// by group or others (like ssh refuses a loose private key), holding one line of printable
    /// ASCII (a control character would let the key inject HTTP headers). Errors name the
    /// file, never its content.
    package static func load(path: String) throws(OutboxError) -> Secret {
        let fd: Int32
        do { fd = try Posix.open(path, O_RDONLY | O_NOFOLLOW | O_NOCTTY) } catch {
            throw OutboxError(.secretFile, "cannot open key file \(path)", cause: error)
        }
        defer { Posix.close(fd) }
        let info: stat
        do { info = try Posix.fstat(fd, subject: path) } catch {
            throw OutboxError(.secretFile, "cannot stat key file \(path)", cause: error)
        }
        guard info.st_mode & S_IFMT == S_IFREG else { throw OutboxError(.secretFile, "key file \(path) is not a regular file") }
        guard info.st_mode & 0o077 == 0 else {
            throw OutboxError(.secretFile, "key file \(path) has mode \(String(info.st_mode & 0o777, radix: 8)); it must not be accessible to group or others (chmod 600)")
        }
        guard info.st_uid == geteuid() else {
            throw OutboxError(.secretFile, "key file \(path) is owned by uid \(info.st_uid), not by the service (uid \(geteuid()))")
        }
        let bytes: [UInt8]
        do { bytes = try Posix.readAll(fd, limit: 4096, regularFile: true) } catch {
            throw OutboxError(.secretFile, "cannot read key file \(path)", cause: error)
        }
        var text = Substring(String(decoding: bytes, as: UTF8.self))
        while let last = text.last, last == "\n" || last == "\r" || last == " " { text.removeLast() }
        while let first = text.first, first == " " { text.removeFirst() }
        guard !text.isEmpty else { throw OutboxError(.secretFile, "key file \(path) is empty") }
        guard text.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E }) else {
            throw OutboxError(.secretFile, "key file \(path) must hold one line of printable ASCII without spaces")
        }
        return Secret(value: String(text))
    }
}
