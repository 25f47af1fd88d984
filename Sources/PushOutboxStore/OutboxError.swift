import PushSystem

/// Why the outbox could not start or persist its state. Never carries a secret: messages name
/// the key file, not its content.
///
/// `Sendable`: a plain value.
package struct OutboxError: Error, Sendable, CustomStringConvertible {
    package enum Code: String, Sendable {
        /// A key file is missing, unreadable, empty, malformed or readable by others.
        case secretFile = "secret_file"
        /// The configuration cannot work (e.g. an http URL without `AllowHTTP=`).
        case configuration
        /// Reading or writing `<state>/outbox/` failed.
        case io
        /// The journal could not be read.
        case journal
    }

    package var code: Code
    package var message: String
    /// The system call that failed, errno kept.
    package var cause: SystemError?

    package init(_ code: Code, _ message: String, cause: SystemError? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    /// Stable text without dynamic data, for metrics labels and journald fields.
    package var shortDescription: String { code.rawValue }

    package var description: String {
        if let cause { return "\(code.rawValue): \(message): \(cause)" }
        return "\(code.rawValue): \(message)"
    }
}
