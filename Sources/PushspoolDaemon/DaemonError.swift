import PushJournal
@preconcurrency import Glibc

/// Why the daemon could not start or had to stop.
package struct DaemonError: Error, Sendable, CustomStringConvertible {
    package var stage: String
    package var message: String
    package var errno: Int32
    package var description: String { "\(stage): \(message)" }
}

extension JournalError {
    /// The errno behind the error, for `ERRNO=` and the exit path; EIO when there is none.
    var errno: Int32 {
        switch kind {
        case .io(let error), .noSpace(let error), .syncFailed(let error): error.errno
        case .locked: EWOULDBLOCK
        default: EIO
        }
    }
}
