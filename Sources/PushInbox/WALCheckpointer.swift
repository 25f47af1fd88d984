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
/// Sleeps in poll(2) on a self-pipe: an idle index does not wake it.
///
/// `Sendable`: the fds are set at init and closed after the thread is joined; the rest is
/// behind locks.
package final class WALCheckpointer: Sendable {
    /// SQLite's own default threshold (`wal_autocheckpoint`), in pages.
    package static let thresholdPages: Int32 = 1000
    private let path: String
    private let wake: (read: Int32, write: Int32)
    private let thread = Locked<pthread_t?>(nil)
    private let stopping = Locked(false)
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

    /// From the WAL hook, after each commit: wakes the thread once the WAL holds
    /// ``thresholdPages`` or more. A full pipe means a wake-up is already pending.
    func committed(walPages: Int32) {
        guard walPages >= Self.thresholdPages else { return }
        var byte: UInt8 = 1
        _ = Glibc.write(wake.write, &byte, 1)
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
                    if connection == nil { connection = try SQLiteDatabase(path: path, mode: .readWrite) }
                    _ = try connection?.pragmaText("PRAGMA wal_checkpoint(PASSIVE)")
                } catch {
                    // Busy or gone: the WAL only grows until the next wake-up tries again.
                    connection = nil
                }
            }
            checkpoints.withLock { $0 += 1 }
        }
    }
}
