@preconcurrency import Glibc
import PushSystem

/// `<StateDirectory>/export/cursor`: the highest journal seq such that it and every earlier
/// record are acknowledged by JetStream (a ``CursorFile``). It may lag what was acknowledged,
/// which only means a few records are published again and the server drops them by
/// `Nats-Msg-Id`.
package enum ExportCursor {
    package static func directory(stateDirectory: String) -> String { StateLayout(root: stateDirectory).export }

    /// The acknowledged seq recorded in `<stateDirectory>/export/cursor`; 0 when export never
    /// acknowledged anything (no file). For `pushspoolctl` and journal retention.
    package static func read(stateDirectory: String) throws(ExportError) -> UInt64 {
        do { return try CursorFile.read(directory: directory(stateDirectory: stateDirectory)) } catch {
            throw ExportError(.io, error.message, cause: error.cause)
        }
    }

    package static func write(_ seq: UInt64, stateDirectory: String) throws(ExportError) {
        let dir = directory(stateDirectory: stateDirectory)
        do {
            try Posix.mkdirIfMissing(dir)
        } catch {
            throw ExportError(.io, "creating \(dir)", cause: error)
        }
        do { try CursorFile.write(seq, directory: dir) } catch {
            throw ExportError(.io, error.message, cause: error.cause)
        }
    }
}
