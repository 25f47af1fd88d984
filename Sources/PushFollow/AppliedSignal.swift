@preconcurrency import Glibc
import PushSystem

/// The cross-process applied-seq signal, beside the in-process commit feed: a follower whose
/// state lives in a file another process reads (the inbox index, read by pushspool-inbox)
/// rewrites a small mark file after each commit, and the reader blocks on inotify for it
/// instead of polling. The mark's content (the applied seq, 20 digits) is for people; readers
/// ask the follower's own state, which the commit made visible before the mark was written.
package enum AppliedSignal {
    /// Writes `seq` as 20 digits and a newline at offset 0 of `path` (a fixed length, rewritten
    /// in place; no fsync: it is a wake-up, not state). Opened each time, once per commit: a
    /// removed mark comes back instead of an open fd writing to a deleted file nobody
    /// watches. Failures are ignored: readers then wake on their own deadline.
    package static func announce(path: String, seq: UInt64) {
        guard let fd = try? Posix.open(path, O_WRONLY | O_CREAT, mode: 0o644) else { return }
        defer { Posix.close(fd) }
        let digits = String(seq)
        let text = Array((String(repeating: "0", count: max(0, 20 - digits.count)) + digits + "\n").utf8)
        _ = text.withUnsafeBytes { try? Posix.pwriteAll(fd, $0, offset: 0, subject: path) }
    }

    /// What a reader watches in the mark's directory: entries created, renamed or removed (a
    /// replaced state file, a new mark). Not writes: a directory watch with `IN_MODIFY` wakes
    /// for every write to a SQLite WAL beside the mark, three or more per commit.
    package static let directoryMask = UInt32(IN_CREATE) | UInt32(IN_MOVED_TO) | UInt32(IN_MOVED_FROM) | UInt32(IN_DELETE)
        | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF) | UInt32(IN_ONLYDIR)
    /// The mark itself, rewritten in place after each commit: one event when the writer closes it.
    package static let markMask = UInt32(IN_CLOSE_WRITE)

    /// Whether an inotify event can mean the follower applied more: the mark rewritten (its
    /// own watch, `markWatch`), the mark (`markName`) or the state file (`stateName`) created,
    /// replaced or removed, or a watch in trouble.
    package static func matters(_ event: Inotify.Event, markName: String, stateName: String, markWatch: Int32?) -> Bool {
        if event.overflow || event.watchLost || event.mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF) != 0 { return true }
        if let markWatch, event.watch == markWatch { return true }
        guard let name = event.nameText else { return false }
        let entryChanged = event.mask & (UInt32(IN_CREATE) | UInt32(IN_MOVED_TO) | UInt32(IN_DELETE) | UInt32(IN_MOVED_FROM)) != 0
        return entryChanged && (name == markName || name == stateName)
    }
}
