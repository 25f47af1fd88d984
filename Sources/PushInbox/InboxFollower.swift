@preconcurrency import Glibc
import PushJournal
import PushSystem

/// What ``InboxFollower`` reports for STATUS= and metrics. `Sendable` value.
package struct InboxFollowerStatus: Sendable, Equatable {
    package var appliedSeq: UInt64
    /// The journal's last committed seq as last observed.
    package var journalLastSeq: UInt64
    /// `journalLastSeq - appliedSeq` (0 when the index is ahead of what was observed).
    package var lag: UInt64 { journalLastSeq > appliedSeq ? journalLastSeq - appliedSeq : 0 }
    package var running: Bool
    /// The last failure, cleared by the next successful batch (`shortDescription` form).
    package var lastError: String?
}

/// Follows the journal into the inbox index on its own thread: the daemon's ingest path
/// never waits on SQLite (the journal is only read), and the index lags the journal by what
/// one batch takes to apply. At start it catches up from the index's applied seq; a crash
/// loses nothing (see ``InboxIndex``). When the index file is replaced it reopens it.
///
/// `Sendable`: the connection and the journal reader live behind one lock, the status
/// snapshot behind another.
package final class InboxFollower: Sendable {
    package let indexPath: String
    package let journalDirectory: String
    private let batchSize: Int
    private let pollInterval: Duration
    private let journalLastSeq: (@Sendable () -> UInt64?)?

    /// What applies records; only touched inside `worker.withLock`.
    private struct Worker: ~Copyable {
        var index: InboxIndex?
        /// Kept between polls; `readerNextSeq` is where it stands.
        var reader: JournalReader?
        var readerNextSeq: UInt64 = 0
    }

    private struct Control {
        var status: InboxFollowerStatus
        var stopRequested = false
        var thread: pthread_t?
    }

    private let worker: Locked<Worker>
    private let control: Locked<Control>

    /// Opens (creating when missing) `<stateDirectory>/inbox/index.sqlite`; applies nothing
    /// until `start()` or `catchUp()`.
    /// - Parameters:
    ///   - stateDirectory: holds `journal/` and `inbox/`.
    ///   - batchSize: records per transaction.
    ///   - pollInterval: how often an idle follower looks for new records.
    ///   - journalLastSeq: the writer's last committed seq (the daemon passes
    ///     `{ writer.stats.lastSeq }`), for `lag`; without it `status` reads the newest
    ///     segment's frame headers.
    package init(stateDirectory: String, batchSize: Int = 2000, pollInterval: Duration = .milliseconds(100),
                 journalLastSeq: (@Sendable () -> UInt64?)? = nil) throws(InboxError) {
        indexPath = InboxIndex.path(stateDirectory: stateDirectory)
        journalDirectory = stateDirectory + "/journal"
        self.batchSize = max(1, batchSize)
        self.pollInterval = pollInterval
        self.journalLastSeq = journalLastSeq
        let index = try InboxIndex(path: indexPath)
        let applied = try index.appliedSeq()
        worker = Locked(Worker(index: index))
        control = Locked(Control(status: InboxFollowerStatus(appliedSeq: applied, journalLastSeq: applied, running: false)))
    }

    /// The seq of the last journal record in the index.
    package var appliedSeq: UInt64 { control.withLock { $0.status.appliedSeq } }

    /// Journal last seq minus applied seq.
    package var lag: UInt64 { status.lag }

    /// A snapshot for STATUS= and metrics; refreshes the journal's last seq.
    package var status: InboxFollowerStatus {
        let last = journalLastSeq?() ?? ((try? JournalReader.lastSeq(directory: journalDirectory)) ?? nil)
        return control.withLock { control in
            if let last { control.status.journalLastSeq = last }
            return control.status
        }
    }

    /// Applies everything committed in the journal now, on the caller's thread; returns how
    /// many records were applied. Safe while the follower thread runs (they take turns).
    @discardableResult
    package func catchUp() throws(InboxError) -> Int {
        try runBatches(shouldStop: { false })
    }

    private func runBatches(shouldStop: @escaping @Sendable () -> Bool) throws(InboxError) -> Int {
        let outcome: Result<(Int, UInt64), InboxError> = worker.withLock { worker in
            do throws(InboxError) {
                let index = try Self.currentIndex(&worker, path: indexPath)
                // A rebuild may have copied other content in: follow the index's own seq.
                let next = try index.appliedSeq() + 1
                if worker.reader == nil || worker.readerNextSeq != next {
                    if worker.reader == nil {
                        do throws(JournalError) { worker.reader = try JournalReader(directory: journalDirectory, fromSeq: next) } catch {
                            throw InboxError(.journal(error), path: indexPath)
                        }
                    }
                    worker.reader!.seek(toSeq: next)
                    worker.readerNextSeq = next
                }
                let applied: Int
                do throws(InboxError) {
                    applied = try index.catchUp(reader: worker.reader!, batchSize: batchSize, shouldStop: shouldStop)
                } catch {
                    worker.reader = nil  // reopen from the applied seq next time
                    throw error
                }
                let seq = try index.appliedSeq()
                worker.readerNextSeq = seq + 1
                return .success((applied, seq))
            } catch {
                return .failure(error)
            }
        }
        switch outcome {
        case .success(let (applied, seq)):
            control.withLock { control in
                control.status.appliedSeq = seq
                if seq > control.status.journalLastSeq { control.status.journalLastSeq = seq }
                control.status.lastError = nil
            }
            return applied
        case .failure(let error):
            control.withLock { $0.status.lastError = error.shortDescription }
            throw error
        }
    }

    /// The open index, reopened when the file at `path` is no longer the one open (replaced).
    private static func currentIndex(_ worker: inout Worker, path: String) throws(InboxError) -> InboxIndex {
        var st = stat()
        if let index = worker.index, let identity = index.fileIdentity, stat(path, &st) == 0,
           identity.dev == UInt64(st.st_dev), identity.ino == UInt64(st.st_ino) {
            return index
        }
        worker.index = nil
        worker.reader = nil
        let fresh = try InboxIndex(path: path)
        worker.index = fresh
        return fresh
    }

    /// Starts the follower thread (a dedicated pthread, off the cooperative pool) and returns
    /// at once. A second call while running does nothing.
    package func start() {
        let starting = control.withLock { control -> Bool in
            guard control.thread == nil else { return false }
            control.stopRequested = false
            control.status.running = true
            return true
        }
        guard starting else { return }
        let thread: pthread_t
        do {
            // Nice 10: under a burst the index lags a little instead of taking a core from ingest.
            thread = try PosixThread.spawn(niceness: 10) { [self] in loop() }
        } catch {
            control.withLock { control in
                control.status.running = false
                control.status.lastError = "\(error)"
            }
            return
        }
        control.withLock { $0.thread = thread }
    }

    /// Asks the thread to stop after its current batch and joins it.
    package func stop() {
        let thread = control.withLock { control -> pthread_t? in
            control.stopRequested = true
            defer { control.thread = nil }
            return control.thread
        }
        if let thread { pthread_join(thread, nil) }
        control.withLock { $0.status.running = false }
    }

    private var stopRequested: Bool { control.withLock { $0.stopRequested } }

    private func loop() {
        while !stopRequested {
            let applied: Int
            do {
                applied = try runBatches(shouldStop: { self.stopRequested })
            } catch {
                // Kept in status.lastError and retried after a pause (the journal or the disk
                // may come back); never fatal to the daemon.
                sleepUnlessStopped(.seconds(1))
                continue
            }
            if applied == 0 { sleepUntilNewRecords() }
        }
    }

    /// Idle: waits up to `pollInterval`, but returns within 5 ms of the writer committing a
    /// record past the index (the in-memory last seq, when the daemon passes it), so an app's
    /// SSE stream sees a push well inside 100 ms without polling the journal files faster.
    private func sleepUntilNewRecords() {
        guard let journalLastSeq else { return sleepUnlessStopped(pollInterval) }
        let applied = appliedSeq
        let deadline = Posix.monotonicNanos() &+ pollInterval.clampedUInt64Nanoseconds
        while !stopRequested, Posix.monotonicNanos() < deadline {
            if let last = journalLastSeq(), last > applied { return }
            usleep(5_000)
        }
    }

    private func sleepUnlessStopped(_ duration: Duration) {
        let deadline = Posix.monotonicNanos() &+ duration.clampedUInt64Nanoseconds
        while !stopRequested {
            let now = Posix.monotonicNanos()
            if now >= deadline { return }
            usleep(UInt32(clamping: min(deadline - now, 20_000_000) / 1000))
        }
    }
}
