@preconcurrency import Glibc
import PushSystem

/// A spool operation that failed: either a system call (errno kept in `system`) or a domain
/// rule (a bad name, a name already taken, a missing entry).
///
/// `Sendable`: a plain value. `description` says what happened and what to do;
/// `shortDescription` is stable (no names, no numbers) for metrics and journald fields.
package struct SpoolError: Error, Sendable, CustomStringConvertible {
    package enum Code: String, Sendable {
        /// A system call failed; see `system`.
        case system
        /// A file name a caller gave is not a valid spool name.
        case invalidName = "invalid_name"
        /// The name is already taken in the target directory (never overwritten).
        case nameTaken = "name_taken"
        /// The named entry does not exist.
        case notFound = "not_found"
        /// A reason file could not be written or read as JSON.
        case reasonFile = "reason_file"
    }

    package var code: Code
    /// What happened and what to do, for people.
    package var message: String
    /// The failed system call, when `code == .system` (or the cause of another code).
    package var system: SystemError?

    /// The operation failed because of the file system, not the file, and may succeed if
    /// called again later (e.g. `Spool.quarantine` with `failed/` full or not writable):
    /// keep the file where it is and retry, as the journal retries a full disk. The errno is
    /// in `errno`. Set only where the operation guarantees a retry is safe.
    package var isRetryable: Bool

    package init(_ code: Code, _ message: String, system: SystemError? = nil) {
        self.code = code
        self.message = message
        self.system = system
        self.isRetryable = false
    }

    /// Wraps a failed system call with what the spool was doing and what the operator can do.
    package init(_ error: SystemError, while doing: String, retryable: Bool = false) {
        self.code = .system
        self.system = error
        self.isRetryable = retryable
        self.message = "\(doing): \(error)" + SpoolError.advice(for: error.errno) + (retryable ? " (retried later)" : "")
    }

    /// The raw errno of the underlying system call, if any.
    package var errno: Int32? { system?.errno }

    package var shortDescription: String {
        if let system, code == .system { return "spool: \(system.shortDescription)" }
        return "spool: \(code.rawValue)"
    }

    package var description: String { message }

    private static func advice(for errno: Int32) -> String {
        switch errno {
        case ENOSPC, EDQUOT: return " — free space on the spool file system"
        case EACCES, EPERM: return " — check ownership and modes of the spool directories (pushspoold must own them)"
        case EROFS: return " — the spool file system is read-only; remount it read-write or fix ReadWritePaths="
        case EMFILE, ENFILE: return " — too many open files; raise LimitNOFILE="
        case ENOENT: return " — the spool layout is incomplete; restart pushspoold or run `pushspoolctl` as the spool owner to recreate it"
        case EXDEV: return " — all spool directories must be on one file system"
        case EIO: return " — I/O error on the spool device; check the kernel log"
        default: return ""
        }
    }
}
