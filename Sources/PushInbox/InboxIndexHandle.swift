@preconcurrency import Glibc
import PushSystem

/// The inbox index at a path, as every reader and writer of it holds it: the daemon's
/// follower, `pushspoolctl nc`, each pushspool-inbox worker thread and its event hub.
///
/// The file is derived data and gets replaced (`nc reindex` renames a rebuilt file over it;
/// a damaged one is moved aside; an operator deletes it). An open SQLite connection keeps
/// the old inode, so ``current()`` compares the path's device and inode (one `stat(2)`)
/// with the open file's on every use and reopens when they differ: every holder notices a
/// replacement the same way, on its next request.
///
/// Not `Sendable`: owns a connection; one thread at a time (owners that share it lock).
package final class InboxIndexHandle {
    package let path: String
    package let readOnly: Bool
    /// A writer's `[Inbox] ListModals=` (``InboxIndex/listModals``).
    package let listModals: Bool
    /// A writer's `[Feed NAME]` definitions (``InboxIndex/feeds``).
    package let feeds: [InboxFeed]
    /// A writer's `[Inbox] RetentionSec=` (``InboxIndex/retentionMillis``).
    package let retention: Duration?
    private var index: InboxIndex?
    /// How many times a connection was opened: changes with each replacement noticed.
    package private(set) var generation: UInt64 = 0

    package init(path: String, readOnly: Bool, listModals: Bool = false, feeds: [InboxFeed] = [], retention: Duration? = nil) {
        self.path = path
        self.readOnly = readOnly
        self.listModals = listModals
        self.feeds = feeds
        self.retention = retention
    }

    /// The open index, reopened first when the file at `path` is not the one open (replaced,
    /// deleted or not opened yet). A read-write handle creates a missing file; a read-only
    /// one throws `.missing`.
    package func current() throws(InboxError) -> InboxIndex {
        if let index, let identity = index.fileIdentity, let now = Self.identity(path),
           identity.dev == now.dev, identity.ino == now.ino {
            return index
        }
        index = nil
        let fresh = try InboxIndex(path: path, readOnly: readOnly, listModals: listModals, feeds: feeds, retention: retention)
        index = fresh
        generation &+= 1
        return fresh
    }

    /// Drops the connection (after an error); the next ``current()`` opens the file again.
    package func close() { index = nil }

    static func identity(_ path: String) -> (dev: UInt64, ino: UInt64)? {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        return (UInt64(st.st_dev), UInt64(st.st_ino))
    }
}
