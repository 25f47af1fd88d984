import PushSystem

/// An exporter failure. `Sendable` value; `description` says what happened, `shortDescription`
/// is stable (no data) for STATUS= and metrics.
package struct ExportError: Error, Sendable, CustomStringConvertible {
    package enum Code: String, Sendable {
        /// The NATS connection could not be made or was lost.
        case connect
        /// A JetStream API call (stream lookup or creation) failed.
        case stream
        /// The stream does not exist.
        case noStream
        /// A consumer could not be created, or a fetch from it failed.
        case consume
        /// A publish was refused or not acknowledged in time.
        case publish
        /// Reading or writing the cursor or status file failed.
        case io
        /// Reading the journal failed.
        case journal
        /// A configuration value cannot be used (bad file, bad host id).
        case config
    }

    package var code: Code
    package var message: String
    /// libnats' `natsStatus` (0 = none) and its text.
    package var natsStatus: Int32
    /// The raw errno for `.io`.
    package var cause: SystemError?
    package var file: String
    package var line: Int

    package init(_ code: Code, _ message: String, natsStatus: Int32 = 0, cause: SystemError? = nil,
                 file: String = #fileID, line: Int = #line) {
        self.code = code
        self.message = message
        self.natsStatus = natsStatus
        self.cause = cause
        self.file = file
        self.line = line
    }

    package var shortDescription: String { "export-\(code.rawValue)" }

    package var description: String {
        var text = "export: \(message)"
        if let cause { text += " (\(cause))" }
        return text
    }
}
