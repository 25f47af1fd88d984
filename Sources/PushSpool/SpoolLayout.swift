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

    /// Modes of new directories: producers (the owning group) stage in `tmp/` and drop into
    /// `incoming/`; only the daemon's user writes `processing/` and `failed/`; no world access.
    package static let directoryModes: [String: mode_t] = ["tmp": 0o770, "incoming": 0o770, "processing": 0o750, "failed": 0o750]

    /// Creates the root (`mkdir -p`, mode 0750) and the four directories (`directoryModes`,
    /// set with `fchmodat` so the umask does not narrow them), then fsyncs each parent so the
    /// layout survives a crash. Existing directories keep their modes (the operator's
    /// choice); an existing non-directory is an error.
    package func create() throws(SpoolError) {
        try create(fileSystem: RealFileSystem())
    }

    /// `create()` on `fileSystem`.
    package func create(fileSystem fs: any FileSystem) throws(SpoolError) {
        do {
            try fs.mkdirs(root, mode: 0o750)
        } catch {
            throw SpoolError(error, while: "creating spool root \(root)")
        }
        let rootfd: Int32
        do {
            rootfd = try fs.openDirectory(root)
        } catch {
            throw SpoolError(error, while: "opening spool root \(root)")
        }
        defer { fs.close(rootfd) }
        var created = false
        for name in Self.directoryNames {
            let st: FileStatus
            do {
                let mode = UInt32(Self.directoryModes[name] ?? 0o750)
                do {
                    try fs.mkdirat(rootfd, name, mode: mode)
                    created = true
                    try fs.chmodat(rootfd, name, mode: mode)
                } catch where error.errno == EEXIST {
                    // Existing directories keep their modes; checked to be directories below.
                }
                st = try fs.statusAt(rootfd, name)
            } catch {
                throw SpoolError(error, while: "creating spool directory \(root)/\(name)")
            }
            if !st.isDirectory {
                throw SpoolError(.system, "\(root)/\(name) exists but is not a directory; move it away and restart",
                                 system: SystemError(call: "mkdirat", errno: ENOTDIR, subject: "\(root)/\(name)"))
            }
        }
        do {
            if created { try fs.fsync(rootfd, subject: root) }
            // The root itself may be new: make its entry in the parent durable too.
            let parent = PathText.parent(of: root)
            try fs.syncDirectory(parent)
        } catch {
            throw SpoolError(error, while: "syncing spool root \(root)")
        }
    }
}
