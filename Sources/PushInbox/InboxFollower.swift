@preconcurrency import Glibc
import PushFollow
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
    /// A damaged or outdated index was replaced and the fresh one has not caught up yet.
    package var rebuilding = false
    /// Damaged indexes moved aside since start.
    package var corruptIndexes = 0
}

/// What ``InboxFollower`` tells its owner as it happens (for journald). `Sendable` value.
package enum InboxNotice: Sendable, Equatable {
    /// The index could not be read (`SQLITE_CORRUPT`/`SQLITE_NOTADB`): it was moved to
    /// `movedTo` and a fresh one is being rebuilt from the journal. `reason` is the
    /// error's `shortDescription`.
    case indexCorrupt(movedTo: String, reason: String)
    /// The index was sound but built by rules this build does not apply (another schema
    /// version, another `[Inbox] ListModals=`): replaced with a fresh one that is being
    /// rebuilt from the journal. `reason`: `schema-mismatch`, `listing-mismatch` or
    /// `feeds-mismatch`.
    case indexOutdated(reason: String)
}

/// Follows the journal into the inbox index on a ``FollowerRunner``: the daemon's ingest path
/// never waits on SQLite (the journal is only read), and the index lags the journal by what
/// one batch takes to apply. At start it catches up from the index's applied seq; a crash
/// loses nothing (see ``InboxIndex``). When the index file is replaced it reopens it
/// (``InboxIndexHandle``). The index is derived data: a damaged one (on open or on any
/// statement) is moved aside and rebuilt from the journal on this thread, never a reason to
/// stop ingest.
///
/// `Sendable`: the connection and the journal reader live behind one lock, the status
/// snapshot behind another.
package final class InboxFollower: Follower, Sendable {
    package let indexPath: String
    package let journalDirectory: String
    private let batchSize: Int
    private let journalLastSeq: (@Sendable () -> UInt64?)?
    private let notify: @Sendable (InboxNotice) -> Void

    /// What applies records; only touched inside `worker.withLock`.
    private struct Worker: ~Copyable {
        var handle: InboxIndexHandle
        /// Kept between polls; `readerNextSeq` is where it stands.
        var reader: FollowedReader?
        var readerNextSeq: UInt64 = 0
    }

    private struct Control {
        var status: InboxFollowerStatus
    }

    private let worker: Locked<Worker>
    private let control: Locked<Control>

    /// Opens (creating when missing) `<stateDirectory>/inbox/index.sqlite`, moving a damaged
    /// one aside (reported through `notify`); applies nothing until `start()` or `catchUp()`.
    /// Replaces an index of another schema or listing rule with a fresh one (reported too).
    /// Throws for what a rebuild cannot cure (permissions, a full disk).
    /// - Parameters:
    ///   - stateDirectory: holds `journal/` and `inbox/`.
    ///   - batchSize: records per transaction.
    ///   - journalLastSeq: the writer's last committed seq (the daemon passes
    ///     `{ writer.stats.lastSeq }`), for `lag`; without it `status` reads the newest
    ///     segment's frame headers.
    ///   - listModals: `[Inbox] ListModals=` (``InboxIndex/listModals``); an index built with
    ///     the other value is replaced and rebuilt, as is one of another schema version.
    ///   - feeds: `[Feed NAME]` (``InboxIndex/feeds``); an index built with other
    ///     definitions is replaced and rebuilt likewise, so no item keeps a stale membership.
    ///   - retention: `[Inbox] RetentionSec=` (``InboxIndex/retentionMillis``), likewise.
    ///   - notify: called (on the calling or the follower's thread) when a damaged index was
    ///     moved aside or an outdated one replaced.
    package init(stateDirectory: String, batchSize: Int = 2000, listModals: Bool = false, feeds: [InboxFeed] = [],
                 retention: Duration? = nil, journalLastSeq: (@Sendable () -> UInt64?)? = nil,
                 notify: @escaping @Sendable (InboxNotice) -> Void = { _ in }) throws(InboxError) {
        indexPath = InboxIndex.path(stateDirectory: stateDirectory)
        journalDirectory = StateLayout(root: stateDirectory).journal
        self.batchSize = max(1, batchSize)
        self.journalLastSeq = journalLastSeq
        self.notify = notify
        let handle = InboxIndexHandle(path: indexPath, readOnly: false, listModals: listModals, feeds: feeds, retention: retention)
        var notice: InboxNotice?
        let applied: UInt64
        do {
            applied = try handle.current().appliedSeq()
        } catch where error.isCorrupt {
            notice = try Self.moveAside(handle, error)
            applied = try handle.current().appliedSeq()
        } catch where error.isStale {
            notice = try Self.startOver(handle, error)
            applied = try handle.current().appliedSeq()
        }
        worker = Locked(Worker(handle: handle))
        var status = InboxFollowerStatus(appliedSeq: applied, journalLastSeq: applied, running: false)
        if let notice {
            status.rebuilding = true
            if case .indexCorrupt = notice { status.corruptIndexes = 1 }
        }
        control = Locked(Control(status: status))
        if let notice { notify(notice) }
    }

    /// Moves the damaged file open in `handle` aside; the next `current()` creates a fresh one.
    private static func moveAside(_ handle: InboxIndexHandle, _ error: InboxError) throws(InboxError) -> InboxNotice {
        handle.close()
        let moved = try InboxIndex.moveAside(path: handle.path)
        return .indexCorrupt(movedTo: moved, reason: error.shortDescription)
    }

    /// Replaces the outdated file open in `handle` with a fresh, empty one (this schema and
    /// listing rule): an upgrade or a changed `ListModals=` rebuilds the index by itself
    /// instead of stopping pushspoold until someone runs `nc reindex`.
    private static func startOver(_ handle: InboxIndexHandle, _ error: InboxError) throws(InboxError) -> InboxNotice {
        handle.close()
        try InboxIndex.replaceWithEmpty(path: handle.path, listModals: handle.listModals, feeds: handle.feeds, retention: handle.retention)
        return .indexOutdated(reason: error.shortDescription)
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
        try runBatches(shouldStop: { false }).applied
    }

    /// Applies the journal past the index, then what fell due by now (expiries, snoozes'
    /// ends: InboxTimed.swift); returns how many records applied and how long the follower
    /// may sleep before something else falls due (`nil`: nothing pending).
    /// `records`: the follower group's decoded records, which the reader decodes through.
    private func runBatches(shouldStop: @escaping @Sendable () -> Bool, announcedLastSeq: UInt64? = nil,
                            records: DecodedRecords = .unshared) throws(InboxError) -> (applied: Int, dueIn: Duration?) {
        var notice: InboxNotice?
        let outcome: Result<(Int, UInt64, Duration?), InboxError> = worker.withLock { worker in
            do throws(InboxError) {
                let generation = worker.handle.generation
                let index = try worker.handle.current()
                if worker.handle.generation != generation { worker.reader = nil }
                // A replaced file (nc reindex, a fresh one) has its own seq: follow it.
                let next = try index.appliedSeq() + 1
                if worker.reader == nil || worker.readerNextSeq != next {
                    if worker.reader == nil {
                        do throws(JournalError) { worker.reader = try FollowedReader(directory: journalDirectory, fromSeq: next, records: records) } catch {
                            throw InboxError(.journal(error), path: indexPath)
                        }
                    }
                    worker.reader!.seek(toSeq: next)
                    worker.readerNextSeq = next
                }
                worker.reader!.announcedLastSeq = announcedLastSeq
                let applied: Int
                do throws(InboxError) {
                    applied = try index.catchUp(reader: worker.reader!, batchSize: batchSize, shouldStop: shouldStop)
                } catch {
                    worker.reader = nil  // reopen from the applied seq next time
                    throw error
                }
                let seq = try index.appliedSeq()
                worker.readerNextSeq = seq + 1
                let now = Posix.wallClockMillis()
                try index.applyDue(now: now)
                return .success((applied, seq, try index.dueSleep(now: now)))
            } catch where error.isCorrupt || error.isStale {
                // Derived data: start over from the journal rather than stop (or loop on it).
                worker.reader = nil
                do throws(InboxError) {
                    notice = error.isCorrupt ? try Self.moveAside(worker.handle, error) : try Self.startOver(worker.handle, error)
                    return .success((0, try worker.handle.current().appliedSeq(), .zero))
                } catch {
                    return .failure(error)
                }
            } catch {
                return .failure(error)
            }
        }
        if let notice {
            control.withLock { control in
                control.status.rebuilding = true
                if case .indexCorrupt = notice { control.status.corruptIndexes += 1 }
            }
            notify(notice)
        }
        switch outcome {
        case .success(let (applied, seq, dueIn)):
            control.withLock { control in
                control.status.appliedSeq = seq
                if seq > control.status.journalLastSeq { control.status.journalLastSeq = seq }
                control.status.lastError = nil
                // Nothing left to apply: a rebuild has caught up.
                if applied == 0, notice == nil { control.status.rebuilding = false }
            }
            return (applied, dueIn)
        case .failure(let error):
            control.withLock { $0.status.lastError = error.shortDescription }
            throw error
        }
    }

    // MARK: Follower

    package var name: String { "inbox" }

    /// The index's applied seq, stored in the same transaction as the records' effects.
    package func durableSeq() -> UInt64? { appliedSeq }

    package var statusDetail: String? {
        let status = status
        return status.rebuilding ? "inbox index rebuilding (seq \(status.appliedSeq) of \(status.journalLastSeq))" : nil
    }

    package func attached(wake: @escaping @Sendable () -> Void) {
        control.withLock { $0.status.running = true }
    }

    package func finish() {
        control.withLock { $0.status.running = false }
    }

    /// Applies what the journal holds past the index, in batches of `batchSize` (each its own
    /// transaction, stopping between them when asked), and what fell due; then sleeps until
    /// the next commit or the next due time, whichever comes first (with nothing due, only
    /// a commit wakes it).
    package func step(_ context: FollowerContext) throws(FollowerError) -> FollowerNext {
        let applied: Int
        let dueIn: Duration?
        do throws(InboxError) {
            (applied, dueIn) = try runBatches(shouldStop: context.stopRequested, announcedLastSeq: context.announcedLastSeq,
                                           records: context.records)
        } catch {
            // Kept in the runner's status and retried after a backoff (the journal or the disk
            // may come back); never fatal to the daemon.
            throw FollowerError(error.shortDescription, "\(error)")
        }
        return applied > 0 ? .again : .commitAfter(appliedSeq, atMost: dueIn)
    }
}
