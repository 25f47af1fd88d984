@preconcurrency import Glibc
import PushSystem

/// `<StateDirectory>/export/cursor`: the highest journal seq such that it and every earlier
/// record are acknowledged by JetStream (decimal text). Written atomically (temp file, fsync,
/// rename, directory fsync), so a crash leaves the old or the new value, never a torn one; it
/// may lag what was acknowledged, which only means a few records are published again and the
/// server drops them by `Nats-Msg-Id`.
package enum ExportCursor {
    package static func directory(stateDirectory: String) -> String { stateDirectory + "/export" }

    /// The acknowledged seq recorded in `<stateDirectory>/export/cursor`; 0 when export never
    /// acknowledged anything (no file). For `pushspoolctl` and journal retention.
    package static func read(stateDirectory: String) throws(ExportError) -> UInt64 {
        let path = directory(stateDirectory: stateDirectory) + "/cursor"
        let bytes: [UInt8]
        do { bytes = try Posix.readFile(path, limit: 64) } catch {
            if error.errno == ENOENT { return 0 }
            throw ExportError(.io, "reading \(path)", cause: error)
        }
        let text = String(decoding: bytes, as: UTF8.self).trimmingSpaces
        guard let value = UInt64(text) else { throw ExportError(.io, "\(path) holds '\(text.prefix(40))', not a seq") }
        return value
    }

    package static func write(_ seq: UInt64, stateDirectory: String) throws(ExportError) {
        let dir = directory(stateDirectory: stateDirectory)
        do {
            try Posix.mkdirIfMissing(dir)
            try Posix.writeFileAtomically(directory: dir, name: "cursor", bytes: Array("\(seq)\n".utf8), mode: 0o640)
        } catch {
            throw ExportError(.io, "writing \(dir)/cursor", cause: error)
        }
    }
}
