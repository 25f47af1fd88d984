@preconcurrency import Glibc
internal import CPosix

/// A failed system call: which call, on what, with the raw errno kept.
///
/// `Sendable`: a plain value. The `description` is for people; `shortDescription` is stable
/// (no paths, no numbers) for metrics labels and journald fields.
package struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The C call that failed, e.g. `"openat"`.
    package var call: String
    /// The raw errno.
    package var errno: Int32
    /// What the call was working on: a path, a file name, an fd description.
    package var subject: String
    package var file: String
    package var line: Int

    package init(call: String, errno: Int32, subject: String = "", file: String = #fileID, line: Int = #line) {
        self.call = call
        self.errno = errno
        self.subject = subject
        self.file = file
        self.line = line
    }

    /// The symbolic errno name, e.g. `"ENOSPC"`.
    package var errnoName: String { String(cString: cposix_strerrorname(errno)) }

    /// The errno text from `strerrordesc_np` (MT-safe, unlike `strerror`).
    package var errnoDescription: String { String(cString: cposix_strerrordesc(errno)) }

    package var shortDescription: String { "\(call): \(errnoName)" }

    package var description: String {
        let target = subject.isEmpty ? "" : " \(subject)"
        // Calls may carry a fault-injection scope ("journal.fdatasync"); the man page is the call's.
        let page = call.split(separator: ".").last.map(String.init) ?? call
        return "\(call)\(target): \(errnoDescription) (\(errnoName)); see man 2 \(page)"
    }

    package var isNoSpace: Bool { errno == ENOSPC || errno == EDQUOT }

    /// Equal when the same call failed the same way on the same subject; where in our source
    /// it was raised does not matter.
    package static func == (lhs: SystemError, rhs: SystemError) -> Bool {
        lhs.call == rhs.call && lhs.errno == rhs.errno && lhs.subject == rhs.subject
    }
}
