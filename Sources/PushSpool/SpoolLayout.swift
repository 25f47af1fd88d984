@preconcurrency import Glibc
import PushSystem

/// Where the spool lives: `root/{tmp,incoming,processing,failed}`.
///
/// `Sendable`: plain paths. Producers write in `tmp/` and rename into `incoming/`; the daemon
/// claims by renaming into `processing/`; refused input lands in `failed/` with a reason file.
package struct SpoolLayout: Sendable, Equatable {
    package let root: String

    package init(root: String) {
        var root = root
        while root.count > 1 && root.hasSuffix("/") { root.removeLast() }
        self.root = root
    }

    /// Writers stage here, then `rename(2)` into `incoming/`.
    package var tmp: String { root + "/tmp" }
    /// The drop point the daemon watches.
    package var incoming: String { root + "/incoming" }
    /// Files claimed by the daemon; re-processed after a restart.
    package var processing: String { root + "/processing" }
    /// Quarantine: `NAME` plus `NAME.reason.json`.
    package var failed: String { root + "/failed" }

    /// The sub-directory names, in creation order.
    package static let directoryNames = ["tmp", "incoming", "processing", "failed"]

    /// Creates the root (`mkdir -p`, mode 0750) and the four directories (mode 0770, so a
    /// producer group can drop; no world access), then fsyncs each parent so the layout
    /// survives a crash. Existing directories are kept as they are; an existing non-directory
    /// is an error.
    package func create() throws(SpoolError) {
        do {
            try Posix.mkdirs(root, mode: 0o750)
        } catch {
            throw SpoolError(error, while: "creating spool root \(root)")
        }
        let rootfd: Int32
        do {
            rootfd = try Posix.openDirectory(root)
        } catch {
            throw SpoolError(error, while: "opening spool root \(root)")
        }
        defer { Posix.close(rootfd) }
        var created = false
        for name in Self.directoryNames {
            let st: stat
            do {
                if try Posix.mkdiratIfMissing(rootfd, name, mode: 0o770) { created = true }
                st = try Posix.lstatat(rootfd, name)
            } catch {
                throw SpoolError(error, while: "creating spool directory \(root)/\(name)")
            }
            if st.st_mode & S_IFMT != S_IFDIR {
                throw SpoolError(.system, "\(root)/\(name) exists but is not a directory; move it away and restart",
                                 system: SystemError(call: "mkdirat", errno: ENOTDIR, subject: "\(root)/\(name)"))
            }
        }
        do {
            if created { try Posix.fsync(rootfd, subject: root) }
            // The root itself may be new: make its entry in the parent durable too.
            let parent = Self.parent(of: root)
            try Posix.syncDirectory(parent)
        } catch {
            throw SpoolError(error, while: "syncing spool root \(root)")
        }
    }

    static func parent(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        if slash == path.startIndex { return "/" }
        return String(path[..<slash])
    }
}
