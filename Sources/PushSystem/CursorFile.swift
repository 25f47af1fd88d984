@preconcurrency import Glibc

/// A follower's durable cursor kept in a file: the highest journal seq whose effect is durable
/// in the follower's own store, as decimal text. The one rule for every file cursor (the
/// outbox's, the exporter's): it is written only after what it covers is durable, and
/// atomically (temp file, fsync, rename, directory fsync), so a crash leaves the old value or
/// the new one, never a torn one. An old value only means some records are applied again,
/// which each follower makes harmless. (The inbox index keeps its cursor in SQLite, in the
/// transaction that applies the records.)
package enum CursorFile {
    /// Why a cursor could not be read or written.
    ///
    /// `Sendable`: a value.
    package struct Problem: Error, Sendable, CustomStringConvertible {
        package var message: String
        /// The failed call, when one failed.
        package var cause: SystemError?
        package var description: String { cause.map { "\(message): \($0)" } ?? message }
    }

    /// The seq in `directory/name`; 0 when there is no file yet.
    package static func read(directory: String, name: String = "cursor") throws(Problem) -> UInt64 {
        let path = directory + "/" + name
        let bytes: [UInt8]
        do { bytes = try Posix.readFile(path, limit: 64) } catch {
            if error.errno == ENOENT { return 0 }
            throw Problem(message: "reading \(path)", cause: error)
        }
        let text = String(decoding: bytes, as: UTF8.self).trimmingSpaces
        guard let value = UInt64(text) else { throw Problem(message: "\(path) holds '\(text.prefix(40))', not a seq") }
        return value
    }

    /// Replaces `directory/name` with `seq`, durably.
    package static func write(_ seq: UInt64, directory: String, name: String = "cursor") throws(Problem) {
        do {
            try Posix.writeFileAtomically(directory: directory, name: name, bytes: Array("\(seq)\n".utf8), mode: 0o640)
        } catch {
            throw Problem(message: "writing \(directory)/\(name)", cause: error)
        }
    }
}
