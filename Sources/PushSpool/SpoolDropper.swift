@preconcurrency import Glibc
import PushSystem

/// Atomic drops into `incoming/`, the way a producer should write: stage in `tmp/`, fsync,
/// `rename(2)` into `incoming/`, fsync `incoming/`. The daemon never sees a partial file.
///
/// `Sendable`: case-less namespace.
package enum SpoolDropper {
    /// Drops `bytes` as `incoming/<name>` (default: a Maildir-style unique
    /// `<unix-ms>.<pid>_<counter>.<hostname>.json`). Never replaces an existing file: a taken
    /// `name` throws `.nameTaken`. Returns the name in `incoming/`.
    @discardableResult
    package static func drop(bytes: [UInt8], layout: SpoolLayout, name: String? = nil) throws(SpoolError) -> String {
        let target = name ?? UniqueName.next(suffix: ".json")
        try SpoolName.validateForIncoming(target)
        let tmpFD: Int32
        let incomingFD: Int32
        do {
            tmpFD = try Posix.openDirectory(layout.tmp)
        } catch {
            throw SpoolError(error, while: "opening \(layout.tmp)")
        }
        defer { Posix.close(tmpFD) }
        do {
            incomingFD = try Posix.openDirectory(layout.incoming)
        } catch {
            throw SpoolError(error, while: "opening \(layout.incoming)")
        }
        defer { Posix.close(incomingFD) }
        let staged: Bool
        do {
            staged = try Spool.stage(bytes, tmpFD: tmpFD, into: incomingFD, as: target)
        } catch {
            throw SpoolError(error, while: "dropping \(target) into \(layout.incoming)")
        }
        guard staged else {
            throw SpoolError(.nameTaken, "incoming/\(target) already exists; choose another name or leave it out for a unique one")
        }
        do {
            try Posix.fsync(incomingFD, subject: layout.incoming)
        } catch {
            throw SpoolError(error, while: "syncing \(layout.incoming) after dropping \(target)")
        }
        return target
    }
}
