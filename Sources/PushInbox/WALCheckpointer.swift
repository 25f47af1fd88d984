@preconcurrency import Glibc
import PushSystem

/// Runs an SQLite writer's WAL checkpoints on a thread of its own, through a connection of
/// its own, in `PASSIVE` mode: it neither waits for nor blocks the writer and the readers.
///
/// Why: SQLite's automatic checkpoint runs inside the commit that takes the WAL past 1,000
/// pages, on the committing thread, and copying those pages into the database file and
/// syncing it held the inbox follower — and every push queued behind it on its way to the
/// apps' streams — for tens of milliseconds when the disk was busy. Measured with
/// `pushspool-bench visible` on one machine within the hour: drop-to-visible p99 11.9–16.8 ms
/// with the automatic checkpoint, 2.3–10.7 ms without it. The sync still happens, off the
/// path; with `synchronous=NORMAL` the checkpoint is what makes commits durable, as before.
///
/// One checkpoint per ``thresholdPages`` pages committed since the last one (``WakeRule``),
/// not one after every commit that finds the WAL past the threshold: under a steady stream of
/// commits the WAL is never wholly copied while commits keep landing during each checkpoint,
/// so it stayed past the threshold and every commit woke the thread again, for a chain of
/// small checkpoints that each synced the WAL and the database file. Measured with
/// `pushspool-bench ingest --rates 1000` (in-process daemon, inbox follower on): 129 WAL and 70
/// database fdatasyncs for 5,000 records; they made the journal's own fdatasyncs slow (22–28
/// of them over 2.5 ms against 1–2 with the inbox off) and held pushspoold's drop-to-durable
/// p99 at 2.8–4.1 ms against about 1 ms without the index. Since a WAL that is never wholly
/// copied is never restarted either, a checkpoint that leaves the WAL at ``restartPages`` or
/// more is followed at once by a `RESTART` one, which waits (within the busy timeout) for a
/// pause between commits and lets the next commit start the WAL from its beginning.
///
/// Sleeps in poll(2) on a self-pipe: an idle index does not wake it.
///
/// `Sendable`: the fds are set at init and closed after the thread is joined; the rest is
/// behind locks.
package final class WALCheckpointer: Sendable {
    /// SQLite's own default threshold (`wal_autocheckpoint`), in pages.
    package static let thresholdPages: Int32 = 1000
    /// A WAL this long after a checkpoint is restarted (``WALCheckpointer``).
    package static let restartPages: Int32 = 4 * thresholdPages
    /// A WAL this long at a commit is checkpointed by the writer itself, inside that commit,
    /// as SQLite's automatic checkpoint does: commits that follow each other too closely for
    /// the `RESTART` one to find a pause still leave a bounded WAL.
    package static let writerPages: Int32 = 2 * restartPages
    /// The longest a `RESTART` checkpoint waits for the writer and the readers; the writer
    /// waits for it as long while it is pending, so it is kept short.
    static let restartWait: Duration = .milliseconds(20)

    /// When a commit wakes the thread: once ``thresholdPages`` pages have been committed since
    /// the frames the last checkpoint copied (or since the WAL restarted). Pure, for tests.
    package struct WakeRule: Sendable, Equatable {
        /// The WAL frames copied by the last checkpoint, or asked of the one under way.
        package private(set) var covered: Int32 = 0

        package init() {}

        /// After a commit that leaves `walPages` frames in the WAL: whether to wake the thread.
        /// A WAL shorter than what was covered has restarted; it counts from its beginning.
        package mutating func commit(walPages: Int32) -> Bool {
            if walPages < covered { covered = 0 }
            guard walPages - covered >= WALCheckpointer.thresholdPages else { return false }
            // The frames up to here are the checkpoint's now: the commits that land while it
            // runs do not ask for another.
            covered = walPages
            return true
        }

        /// A checkpoint copied the first `checkpointed` frames.
        package mutating func checkpointed(_ checkpointed: Int32) {
            covered = checkpointed
        }
    }
    private let path: String
    private let wake: (read: Int32, write: Int32)
    private let thread = Locked<pthread_t?>(nil)
    private let stopping = Locked(false)
    private let rule = Locked(WakeRule())
    /// Held while a checkpoint runs: a test holds it to keep one from running.
    package let gate = Locked<Void>(())
    /// Checkpoints run (tests).
    package let checkpoints = Locked(0)

    init(path: String) throws(SystemError) {
        self.path = path
        wake = try Posix.selfPipe()
        do {
            let handle = try PosixThread.spawn(name: "wal-ckpt") { [self] in run() }
            thread.withLock { $0 = handle }
        } catch {
            Posix.close(wake.read)
            Posix.close(wake.write)
            throw error
        }
    }

    /// From the WAL hook, after each commit: wakes the thread as ``WakeRule`` says (a full
    /// pipe means a wake-up is already pending). Returns whether the committing connection
    /// should checkpoint the WAL itself (``writerPages``).
    func committed(walPages: Int32) -> Bool {
        if rule.withLock({ $0.commit(walPages: walPages) }) {
            var byte: UInt8 = 1
            _ = Glibc.write(wake.write, &byte, 1)
        }
        return walPages >= Self.writerPages
    }

    /// Ends the thread (a checkpoint under way finishes first) and closes its connection.
    func stop() {
        stopping.withLock { $0 = true }
        var byte: UInt8 = 0
        _ = Glibc.write(wake.write, &byte, 1)
        if let handle = thread.withLock({ held -> pthread_t? in
            defer { held = nil }
            return held
        }) {
            pthread_join(handle, nil)
        }
        Posix.close(wake.read)
        Posix.close(wake.write)
    }

    private func run() {
        var connection: SQLiteDatabase?
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            var descriptor = pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, -1) < 0, errno == EINTR { continue }
            while buffer.withUnsafeMutableBytes({ Glibc.read(wake.read, $0.baseAddress, $0.count) }) > 0 {}
            if stopping.withLock({ $0 }) { break }
            gate.withLock { _ in
                do {
                    // Opened without create: a file deleted meanwhile (a replaced index) is
                    // not brought back empty.
                    if connection == nil {
                        let opened = try SQLiteDatabase(path: path, mode: .readWrite, busyTimeout: Self.restartWait)
                        // A connection that has read nothing has not opened the WAL yet, and
                        // sqlite3_wal_checkpoint_v2 on it copies nothing and says so.
                        _ = try opened.pragmaText("PRAGMA schema_version")
                        connection = opened
                    }
                    guard let open = connection else { return }
                    var frames = try open.checkpoint(.passive)
                    if frames.log >= Self.restartPages {
                        // Busy (a reader on an old snapshot, or the writer busy past
                        // `restartWait`): the next checkpoint tries again.
                        if let restarted = try? open.checkpoint(.restart) { frames = restarted }
                    }
                    rule.withLock { $0.checkpointed(frames.checkpointed) }
                } catch {
                    // Busy or gone: the WAL only grows until the next wake-up tries again.
                    connection = nil
                }
            }
            checkpoints.withLock { $0 += 1 }
        }
    }
}
