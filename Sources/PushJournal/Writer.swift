@preconcurrency import Glibc
import Dispatch
import PushSystem

/// The journal's single writer: group commit on a dedicated thread (docs/design/journal.md,
/// "Durability").
///
/// `submit` queues a record; the writer thread takes everything queued (bounded by
/// `maxBatchRecords`/`maxBatchBytes`, after waiting at most `maxBatchDelay` for company),
/// writes it with one `write`, `fdatasync`s, and only then runs the completions with
/// `.committed`. Records queued during a sync form the next batch.
///
/// Failure semantics:
/// - ENOSPC/EDQUOT on write: nothing of the batch is acknowledged; the file is truncated back
///   to the last committed end; the records stay queued, `stats.paused` turns true, and the
///   writer retries every `noSpaceRetryInterval` until the write succeeds (then
///   `JournalEvent.resumed`). Nothing is lost. If `close` comes while paused and the retry still
///   fails, the queued records complete with `.failed(.noSpace)`.
/// - Any `fdatasync`/`fsync` error, or any other write error: fail-stop. The batch and every
///   queued and later record complete with `.failed` (`.syncFailed`/`.io`); the daemon must exit
///   non-zero and let recovery work from what is on disk (PostgreSQL's fsync lesson).
///
/// Completions and `JournalOptions.eventHandler` run on the writer thread (`.checkpointFailed`
/// on the checkpoint thread): they must not block and must not call `close` (which waits for
/// those threads).
///
/// `Sendable`: shared state is behind a lock; the file descriptors are confined to the
/// writer thread (and to `close` after that thread has ended).
package final class JournalWriter: Sendable {
    package let directory: String
    /// Announces every durable batch to in-process followers (they sleep on it, not on a timer).
    package let commits: CommitFeed
    private let options: JournalOptions
    private let shared: Locked<Shared>
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let core: Core
    /// Wakes the checkpoint thread early: a count trigger, or `close`.
    private let checkpointWake = DispatchSemaphore(value: 0)
    /// Held for a whole checkpoint and a whole prune: a prune rebuilds the table, which would
    /// change the key count under a checkpoint being written from it.
    private let checkpointGate = Locked(())
    private let checkpointFinished = DispatchSemaphore(value: 0)
    /// The writer's and the checkpointer's threads, joined by `close`.
    private let threads = Locked<(writer: pthread_t, checkpointer: pthread_t)?>(nil)

    private struct Pending {
        var key: String
        /// Computed once, outside the lock, for the dedup index. Pending and committed keys are
        /// both compared by this fingerprint of the key's UTF-8 bytes, never as `String`s:
        /// `String` equality is canonical equivalence, so an NFC and an NFD spelling of one id
        /// would be equal while pending and distinct once committed.
        var fingerprint: UInt64
        var body: [UInt8]
        var ingestMillis: Int64
        var completion: @Sendable (AppendResult) -> Void
        var enqueuedNanos: UInt64
        var frameBytes: Int { RecordFrame.padded(RecordHeader.size + key.utf8.count + body.count) }
    }

    private enum Phase {
        case running
        case closing
        case failed(JournalError)
        case closed
    }

    private struct Shared: ~Copyable {
        var queue: [Pending] = []
        /// Keys queued or being written, by fingerprint (a list: two colliding keys may both be pending).
        var pendingKeys: [UInt64: [String]] = [:]
        var committedKeys: KeyFingerprints
        /// Where the synced prefix ends, updated with `committedKeys` under the same lock so a
        /// checkpoint snapshot always pairs keys with the exact prefix they cover.
        var position: CheckpointPosition
        var sinceCheckpoint = 0
        /// `throughSeq` of the last checkpoint written (or found trustworthy at open).
        var checkpointedSeq: UInt64?
        var checkpointStop = false
        var stats = JournalWriterStats()
        var phase = Phase.running
        var joined = false
        /// Records taken off the queue by the batch being written.
        var inFlight = 0
        /// Frame bytes of `queue`, kept so the writer's wake-ups stay O(1) under the lock.
        var queuedBytes = 0
        /// Callers of `sealActiveSegment` waiting for the writer thread to cut a segment.
        var sealWaiters: [@Sendable (Result<UInt64, JournalError>) -> Void] = []
        /// What the writer thread sleeps for, set under this lock together with the look that
        /// sent it to sleep: a submission rings `wake` only when it is what the writer waits
        /// for. Rung for every record, the writer gathering a batch was woken once a record
        /// under a burst, to go back to sleep (a futex wake and two task switches each).
        var writerSleep: WriterSleep?
    }

    /// Why the writer thread is asleep on `wake`.
    private enum WriterSleep {
        /// Nothing queued: any record wakes it.
        case idle
        /// Waiting for company until the batch's delay ends: only a full batch wakes it earlier.
        case gathering
        /// Waiting out a full disk's retry interval: a record changes nothing.
        case paused
    }

    /// The end of the synced prefix, as a checkpoint records it.
    private struct CheckpointPosition {
        var throughSeq: UInt64
        var segmentFirstSeq: UInt64
        var offset: Int64
        var segments: [UInt64]
    }

    /// Writer-thread state. `@unchecked Sendable`: touched only by the writer thread, and by
    /// `close` after `finished` has been signalled; the checkpoint thread reads only its `let`s.
    private final class Core: @unchecked Sendable {
        let io: JournalIO
        let dirfd: Int32
        let lockfd: Int32
        let committedfd: Int32
        let journalID: [UInt8]
        var activefd: Int32 = -1
        var activeFirstSeq: UInt64 = 0
        var activeEnd: Int64 = 0
        var nextSeq: UInt64
        /// First seqs of every segment in the journal, oldest first.
        var segmentFirstSeqs: [UInt64] = []
        var pausedSince: UInt64?
        /// `committedKeys.freedBytes` when the freed pages were last given back.
        var freedBytesReleased = 0
        var lastBatchCount = 0
        /// How long the last batch's fdatasync took.
        var lastSyncNanos: UInt64 = 0

        init(io: JournalIO, dirfd: Int32, lockfd: Int32, committedfd: Int32, journalID: [UInt8], nextSeq: UInt64) {
            self.io = io
            self.dirfd = dirfd
            self.lockfd = lockfd
            self.committedfd = committedfd
            self.journalID = journalID
            self.nextSeq = nextSeq
        }
    }

    private init(directory: String, options: JournalOptions, core: Core, keys: KeyFingerprints, segments: Int, lastSeq: UInt64) {
        self.directory = directory
        self.options = options
        self.core = core
        commits = CommitFeed(lastSeq: lastSeq, speaksForTheJournal: true)
        var stats = JournalWriterStats()
        stats.segments = segments
        stats.lastSeq = lastSeq
        let position = CheckpointPosition(throughSeq: core.nextSeq - 1, segmentFirstSeq: core.activeFirstSeq,
                                          offset: core.activeEnd, segments: core.segmentFirstSeqs)
        shared = Locked(Shared(committedKeys: keys, position: position, stats: stats))
    }

    /// Opens (creating if needed) the journal in `directory`: takes `LOCK`, runs recovery,
    /// rebuilds the dedup keys, and starts the writer thread.
    ///
    /// Throws `.locked` if another writer holds the journal, `.corrupt` for mid-file damage
    /// under `.refuse`, `.foreignSegment`, or I/O errors. Blocking (recovery reads the newest
    /// segments and syncs): call it from a `BlockingQueue`, not the cooperative pool. The same
    /// holds for `close`.
    package static func open(directory: String, options: JournalOptions) throws(JournalError) -> (JournalWriter, RecoveryReport) {
        let io = JournalIO(options: options, directory: directory)
        do {
            var isNew = false
            if !io.setupFS.exists(directory) {
                isNew = true
                try io.setupFS.mkdirs(directory)
            }
            // A new journal directory's own entry must survive power loss too.
            if isNew { try io.setupFS.syncDirectory(PathText.parent(of: directory)) }
        } catch {
            throw io.err(error)
        }
        let dirfd: Int32
        do { dirfd = try io.setupFS.openDirectory(directory) } catch { throw io.err(error) }
        var lockfd: Int32 = -1
        var committedfd: Int32 = -1
        var core: Core?
        do throws(JournalError) {
            lockfd = try io.openat(dirfd, JournalFiles.lock, O_RDWR | O_CREAT)
            // A short wait covers a previous writer that is just exiting, and a child process
            // briefly holding an inherited descriptor between fork and exec.
            let lockDeadline = Posix.monotonicNanos() &+ options.lockWait.clampedUInt64Nanoseconds
            while true {
                let locked: Bool
                do { locked = try io.fs.tryLock(lockfd, subject: JournalFiles.lock) } catch { throw io.err(error) }
                if locked { break }
                guard Posix.monotonicNanos() < lockDeadline else { throw JournalError(.locked, directory: directory) }
                usleep(5_000)
            }

            let recovered = try Recovery(directory: directory, dirfd: dirfd, io: io, options: options).run()
            committedfd = try io.openat(dirfd, JournalFiles.committed, O_RDWR | O_CREAT)
            let made = Core(io: io, dirfd: dirfd, lockfd: lockfd, committedfd: committedfd,
                            journalID: recovered.journalID, nextSeq: recovered.nextSeq)
            core = made
            var segments = recovered.segmentCount
            made.segmentFirstSeqs = recovered.segmentFirstSeqs
            if let active = recovered.active {
                made.activefd = try io.openat(dirfd, JournalFiles.segmentName(firstSeq: active.firstSeq), O_WRONLY | O_APPEND)
                made.activeFirstSeq = active.firstSeq
                made.activeEnd = active.end
            } else {
                try cutSegment(made)
                segments += 1
            }
            writeCommittedMark(made, seq: recovered.lastSeq)
            let writer = JournalWriter(directory: directory, options: options, core: made, keys: recovered.keys,
                                       segments: segments, lastSeq: recovered.lastSeq)
            try writer.startThreads()
            return (writer, recovered.report)
        } catch {
            if let core, core.activefd >= 0 { io.close(core.activefd) }
            if committedfd >= 0 { io.close(committedfd) }
            if lockfd >= 0 { io.close(lockfd) }
            io.close(dirfd)
            throw error
        }
    }

    /// Queues a record for `key` (the payload's dedup id, 1–255 bytes of UTF-8).
    ///
    /// `completion` runs on the writer thread after the covering `fdatasync` with
    /// `.committed(seq:)`; at once on the caller's thread with `.duplicate` when `key` is already
    /// committed or pending, or with `.failed` when the writer is closed or has failed.
    /// `.duplicate` for a *pending* key means another submission of it is in flight: that one's
    /// completion decides whether the id becomes durable, so its input must be kept until then.
    package func submit(key: String, body: [UInt8], ingestMillis: Int64, completion: @escaping @Sendable (AppendResult) -> Void) {
        let keyLength = key.utf8.count
        guard keyLength >= 1, keyLength <= 255 else {
            completion(.failed(JournalError(.invalidKey, directory: directory)))
            return
        }
        // Readers refuse bodies over the format's bound, so a larger option must not let one in.
        let limit = min(options.maxRecordBytes, RecordHeader.maxBodyBytes)
        guard keyLength + body.count <= limit else {
            completion(.failed(JournalError(.recordTooLarge(bytes: keyLength + body.count, limit: limit), directory: directory)))
            return
        }
        let fingerprint = options.fingerprint(key)
        // The key as a tombstone stores it, when erasures ran: its slot points at the tombstone.
        let erasedKey = options.erasureSecret?.tombstoneKey(for: key)
        let erasedFingerprint = erasedKey.map { options.fingerprint($0) }
        let pending = Pending(key: key, fingerprint: fingerprint, body: body, ingestMillis: ingestMillis,
                              completion: completion, enqueuedNanos: Posix.monotonicNanos())
        // A fingerprint hit is only a candidate: the stored key is read back and compared (off
        // the lock), and the submission is queued unless one matches. Candidates already read
        // are not read again when the lock is retaken and the index has grown meanwhile.
        var refuted: [UInt64] = []
        while true {
            let step: SubmitStep = shared.withLock { state in
                switch state.phase {
                case .running: break
                case .failed(let error): return .done(.failed(error))
                case .closing, .closed: return .done(.failed(JournalError(.closed, directory: directory)))
                }
                if let pending = state.pendingKeys[fingerprint], pending.contains(where: { $0.utf8.elementsEqual(key.utf8) }) {
                    state.stats.duplicates += 1
                    return .done(.duplicate)
                }
                var candidates = state.committedKeys.locations(fingerprint: fingerprint)
                if let erasedFingerprint { candidates += state.committedKeys.locations(fingerprint: erasedFingerprint) }
                candidates.removeAll { refuted.contains($0.seq) }
                if !candidates.isEmpty { return .confirm(candidates, state.position.segments) }
                state.pendingKeys[fingerprint, default: []].append(key)
                state.queue.append(pending)
                state.queuedBytes += pending.frameBytes
                let wakesWriter: Bool
                switch state.writerSleep {
                case .idle?: wakesWriter = true
                case .gathering?: wakesWriter = state.queue.count >= options.maxBatchRecords || state.queuedBytes >= options.maxBatchBytes
                case .paused?, nil: wakesWriter = false
                }
                if wakesWriter { state.writerSleep = nil }
                return .queued(wakesWriter: wakesWriter)
            }
            switch step {
            case .done(let result):
                completion(result)
                return
            case .queued(let wakesWriter):
                if wakesWriter { wake.signal() }
                return
            case .confirm(let candidates, let segments):
                for candidate in candidates {
                    switch storedKeyMatches(key, erasedKey: erasedKey, seq: candidate.seq, offset: candidate.offset, segments: segments) {
                    case .success(true):
                        shared.withLock { $0.stats.duplicates += 1 }
                        completion(.duplicate)
                        return
                    case .success(false):
                        refuted.append(candidate.seq)
                    case .failure(let error):
                        completion(.failed(core.io.err(error)))
                        return
                    }
                }
            }
        }
    }

    private enum SubmitStep {
        case done(AppendResult)
        case queued(wakesWriter: Bool)
        case confirm([(seq: UInt64, offset: Int64)], [UInt64])
    }

    /// Whether the record at `seq` (frame at `offset`) has exactly `key` (UTF-8 bytes, as the
    /// index compares): read from its segment, or from retention's key file once the segment
    /// was retired. A record found nowhere is past the dedup window: not a duplicate. A slot
    /// without a location (seq 0) cannot be checked and counts as a duplicate, as before. A
    /// segment that exists but cannot be read is neither: the submission fails with the error
    /// (the payload stays in the spool) rather than being journaled twice or dropped.
    /// A tombstone matches through `erasedKey` (the fingerprint table may still point at it
    /// under the original key's fingerprint, or hold the tombstone key's own after a rebuild).
    private func storedKeyMatches(_ key: String, erasedKey: String?, seq: UInt64, offset: Int64, segments: [UInt64]) -> Result<Bool, SystemError> {
        if seq == 0 { return .success(true) }
        guard let firstSeq = segments.last(where: { $0 <= seq }) else {
            // Below every segment this writer knows: retired before it opened (its list holds
            // only the live segments then), so the key can only be in the retired key files.
            guard let retired = RetiredKeys.list(directory: directory).last(where: { $0.firstSeq <= seq }),
                  let stored = RetiredKeys.lookup(directory: directory, segment: String(retired.name.dropLast(RetiredKeys.suffix.count)),
                                                  seq: seq, fs: core.io.fs)
            else { return .success(false) }
            return .success(stored.utf8.elementsEqual(key.utf8) || erasedKey.map { stored.utf8.elementsEqual($0.utf8) } == true)
        }
        let name = JournalFiles.segmentName(firstSeq: firstSeq)
        let fs = core.io.fs
        // One small pread of the frame header and key, not a buffered segment reader (which
        // reads 256 KiB): a duplicate costs an open, a pread and a close. The key is not covered
        // by a CRC without the body; a damaged key only fails to match, and the payload is
        // journaled again — the safe direction.
        let fd: Int32
        do { fd = try fs.open(directory + "/" + name, O_RDONLY | O_CLOEXEC, mode: 0) } catch {
            guard error.errno == ENOENT else { return .failure(error) }
            guard let stored = RetiredKeys.lookup(directory: directory, segment: name, seq: seq, fs: fs) else { return .success(false) }
            return .success(stored.utf8.elementsEqual(key.utf8) || erasedKey.map { stored.utf8.elementsEqual($0.utf8) } == true)
        }
        defer { fs.close(fd) }
        var bytes = [UInt8](repeating: 0, count: RecordHeader.size + 255)
        var got = 0
        var readError: SystemError?
        bytes.withUnsafeMutableBytes { buffer in
            do throws(SystemError) { got = try fs.pread(fd, buffer, offset: offset, subject: name) } catch { readError = error }
        }
        if let readError { return .failure(readError) }
        guard got >= RecordHeader.size else { return .success(false) }
        return .success(bytes.withUnsafeBytes { raw -> Bool in
            guard case .success(let header) = RecordHeader.decode(UnsafeRawBufferPointer(rebasing: raw[0..<got])),
                  header.seq == seq, RecordHeader.size + Int(header.keyLength) <= got
            else { return false }
            let stored = raw[RecordHeader.size..<(RecordHeader.size + Int(header.keyLength))]
            return stored.elementsEqual(key.utf8) || erasedKey.map { stored.elementsEqual($0.utf8) } == true
        })
    }

    /// Drops the dedup entries of records below `seq` (`[Journal] DedupWindowSec=`): a key
    /// delivered again after that is journaled again. Rebuilds the index under the lock,
    /// O(keys); the retention thread calls it once per pass. Returns the entries dropped.
    @discardableResult
    package func pruneDedupIndex(belowSeq seq: UInt64) -> Int {
        let dropped = checkpointGate.withLock { (_: inout Void) -> Int in
            shared.withLock { state -> Int in
                let before = state.committedKeys.count
                state.committedKeys = state.committedKeys.keeping(fromSeq: seq)
                return before - state.committedKeys.count
            }
        }
        MemoryPolicy.releaseFreePages()
        return dropped
    }

    /// Seals the active segment (docs/design/erasure.md, "Journal"): the writer thread cuts a
    /// new segment after the batch it is writing, if the active one holds records. Returns the
    /// first seq of the active segment afterwards: every record below it is in a sealed
    /// segment, which the writer never touches again. Blocks until the writer has done it.
    package func sealActiveSegment() throws(JournalError) -> UInt64 {
        let done = DispatchSemaphore(value: 0)
        let outcome = Locked<Result<UInt64, JournalError>?>(nil)
        let failure: JournalError? = shared.withLock { state in
            switch state.phase {
            case .running: break
            case .failed(let error): return error
            case .closing, .closed: return JournalError(.closed, directory: directory)
            }
            state.sealWaiters.append { result in
                outcome.withLock { $0 = result }
                done.signal()
            }
            return nil
        }
        if let failure { throw failure }
        wake.signal()
        done.wait()
        guard let result = outcome.withLock({ $0 }) else { throw JournalError(.closed, directory: directory) }
        return try result.get()
    }

    /// Points the dedup index's slots of erased records at their tombstone keys (by seq) and
    /// writes `dedup.ckpt` from it at once: the checkpoint on disk held fingerprints of the
    /// original keys, which named the user. Called by the eraser after it rewrote the segments.
    package func replaceErasedFingerprints(_ tombstones: [UInt64: String]) throws(JournalError) {
        guard !tombstones.isEmpty else { return }
        var fingerprints: [UInt64: UInt64] = [:]
        for (seq, key) in tombstones { fingerprints[seq] = options.fingerprint(key) }
        checkpointGate.withLock { (_: inout Void) -> Void in
            shared.withLock { state in state.committedKeys = state.committedKeys.replacing(fingerprints) }
        }
        MemoryPolicy.releaseFreePages()
        if let error = writeCheckpoint() { throw error }
    }

    /// Entries in the dedup index (committed keys).
    package var dedupIndexCount: Int { shared.withLock { $0.committedKeys.count } }

    /// Whether `key` is committed or pending.
    package func contains(key: String) -> Bool {
        let fingerprint = options.fingerprint(key)
        return shared.withLock { $0.committedKeys.contains(fingerprint: fingerprint) || $0.pendingKeys[fingerprint] != nil }
    }

    package var stats: JournalWriterStats {
        shared.withLock { state in
            var stats = state.stats
            stats.queued = state.queue.count + state.inFlight
            return stats
        }
    }

    /// Drains the queue, syncs, writes the dedup checkpoint and `COMMITTED`, and releases `LOCK`.
    /// Throws the failure that stopped the writer, if any. Later calls do nothing.
    package func close() throws(JournalError) {
        let mustJoin: Bool = shared.withLock { state in
            if state.joined { return false }
            state.joined = true
            if case .running = state.phase { state.phase = .closing }
            return true
        }
        guard mustJoin else { return }
        wake.signal()
        finished.wait()
        shared.withLock { $0.checkpointStop = true }
        checkpointWake.signal()
        checkpointFinished.wait()
        if let (writerThread, checkpointThread) = threads.withLock({ $0 }) {
            pthread_join(writerThread, nil)
            pthread_join(checkpointThread, nil)
        }
        let failure: JournalError? = shared.withLock { state in
            if case .failed(let error) = state.phase { return error }
            return nil
        }
        if failure == nil {
            writeCheckpoint()
            Self.writeCommittedMark(core, seq: core.nextSeq - 1)
        }
        if core.activefd >= 0 { core.io.close(core.activefd) }
        core.io.close(core.committedfd)
        core.io.close(core.lockfd)
        core.io.close(core.dirfd)
        shared.withLock { state in
            if case .closing = state.phase { state.phase = .closed }
        }
        if let failure { throw failure }
    }

    // MARK: - Writer thread

    private func startThreads() throws(JournalError) {
        do throws(SystemError) {
            let writerThread = try PosixThread.spawn(name: "journal") { self.run() }
            let checkpointThread: pthread_t
            do throws(SystemError) {
                checkpointThread = try PosixThread.spawn(name: "journal-ckpt") { self.runCheckpoints() }
            } catch {
                shared.withLock { state in
                    state.joined = true
                    state.phase = .closing
                }
                wake.signal()
                pthread_join(writerThread, nil)
                throw error
            }
            threads.withLock { $0 = (writerThread, checkpointThread) }
        } catch {
            throw JournalError(.io(error), directory: directory)
        }
    }

    /// What the writer thread does after a look at the queue; pure, so the rules read in one place.
    private enum WriterStep {
        case exit
        /// Sleep on `wake` for `sleep`'s reason, until a monotonic instant or without limit.
        case sleep(WriterSleep, until: UInt64?)
        case write

        var sleep: WriterSleep? {
            if case .sleep(let sleep, _) = self { return sleep }
            return nil
        }

        static func decide(count: Int, bytes: Int, closing: Bool, paused: Bool, oldest: UInt64, now: UInt64, retryAt: UInt64?,
                           delay: UInt64, maxRecords: Int, maxBytes: Int) -> WriterStep {
            if count == 0 { return closing ? .exit : .sleep(.idle, until: nil) }
            if paused, !closing, let retryAt, now < retryAt { return .sleep(.paused, until: retryAt) }
            if delay > 0, !closing, !paused, count < maxRecords, bytes < maxBytes, now < oldest &+ delay {
                return .sleep(.gathering, until: oldest &+ delay)
            }
            return .write
        }
    }

    private enum BatchOutcome {
        case committed(bytes: Int)
        case noSpace(JournalError)
        case fatal(JournalError)
    }

    private func run() {
        defer {
            // A seal asked for while the writer stopped is answered, not left waiting.
            let waiters: [@Sendable (Result<UInt64, JournalError>) -> Void] = shared.withLock { state in
                defer { state.sealWaiters.removeAll() }
                return state.sealWaiters
            }
            for waiter in waiters { waiter(.failure(JournalError(.closed, directory: directory))) }
            finished.signal()
        }
        while true {
            let now = Posix.monotonicNanos()
            let sealers: [@Sendable (Result<UInt64, JournalError>) -> Void] = shared.withLock { state in
                defer { state.sealWaiters.removeAll() }
                return state.sealWaiters
            }
            if !sealers.isEmpty { sealForErasure(sealers) }
            // Like PostgreSQL's commit_siblings: wait for company only when the last batch had
            // some, so a lone sequential producer never pays the delay. And never longer than
            // the last sync took: past that, a second sync costs the waiting record less than
            // the wait, and at a steady 1,000 files/s the full delay was what pushed p99 over 5 ms.
            let delay = core.lastBatchCount > 1 ? min(options.maxBatchDelay.clampedUInt64Nanoseconds, core.lastSyncNanos) : 0
            let retryAt = core.pausedSince.map { $0 &+ options.noSpaceRetryInterval.clampedUInt64Nanoseconds }
            // The decision to sleep and what for are taken under the lock submissions take, so
            // a record queued after this look sees the sleep it must end (or need not).
            let next: WriterStep = shared.withLock { state in
                var closing = false
                if case .closing = state.phase { closing = true }
                let step = WriterStep.decide(count: state.queue.count, bytes: state.queuedBytes, closing: closing, paused: state.stats.paused,
                                             oldest: state.queue.first?.enqueuedNanos ?? now, now: now, retryAt: retryAt, delay: delay,
                                             maxRecords: options.maxBatchRecords, maxBytes: options.maxBatchBytes)
                state.writerSleep = step.sleep
                return step
            }
            switch next {
            case .exit:
                return
            case .sleep(_, let until):
                if let until {
                    _ = wake.wait(timeout: .now() + .nanoseconds(Int(clamping: until &- now)))
                } else {
                    wake.wait()
                }
                continue
            case .write:
                break
            }

            let batch: [Pending] = shared.withLock { state in
                var taken = 0
                var bytes = 0
                for item in state.queue {
                    if taken > 0 && (taken >= options.maxBatchRecords || bytes + item.frameBytes > options.maxBatchBytes) { break }
                    taken += 1
                    bytes += item.frameBytes
                }
                let batch = Array(state.queue.prefix(taken))
                state.queue.removeFirst(taken)
                state.queuedBytes -= bytes
                state.inFlight = taken
                return batch
            }
            let firstSeq = core.nextSeq
            switch writeBatch(batch) {
            case .committed(let bytes):
                // Frames lie back to back from where this batch began (after any segment cut).
                var frameOffset = core.activeEnd - Int64(bytes)
                let (wasPaused, freedBytes) = shared.withLock { state -> (Bool, Int) in
                    state.inFlight = 0
                    for (index, item) in batch.enumerated() {
                        if var keys = state.pendingKeys.removeValue(forKey: item.fingerprint) {
                            keys.removeAll { $0.utf8.elementsEqual(item.key.utf8) }
                            if !keys.isEmpty { state.pendingKeys[item.fingerprint] = keys }
                        }
                        state.committedKeys.insert(fingerprint: item.fingerprint, seq: firstSeq + UInt64(index), offset: frameOffset)
                        frameOffset += Int64(item.frameBytes)
                    }
                    state.position = CheckpointPosition(throughSeq: core.nextSeq - 1, segmentFirstSeq: core.activeFirstSeq,
                                                        offset: core.activeEnd, segments: core.segmentFirstSeqs)
                    state.sinceCheckpoint += batch.count
                    state.stats.records += UInt64(batch.count)
                    state.stats.bytes += UInt64(bytes)
                    state.stats.batches += 1
                    state.stats.largestBatch = max(state.stats.largestBatch, batch.count)
                    state.stats.lastSeq = core.nextSeq - 1
                    let was = state.stats.paused
                    state.stats.paused = false
                    return (was, state.committedKeys.freedBytes)
                }
                if freedBytes - core.freedBytesReleased >= 1 << 20 {
                    core.freedBytesReleased = freedBytes
                    MemoryPolicy.releaseFreePages()
                }
                core.pausedSince = nil
                core.lastBatchCount = batch.count
                if wasPaused { options.eventHandler?(.resumed) }
                Self.writeCommittedMark(core, seq: core.nextSeq - 1)
                commits.announce(core.nextSeq - 1)
                for (index, item) in batch.enumerated() { item.completion(.committed(seq: firstSeq + UInt64(index))) }
                let due = shared.withLock { options.checkpointEvery > 0 && $0.sinceCheckpoint >= options.checkpointEvery }
                // The checkpoint thread writes it, so the O(keys) snapshot and its fsyncs stay off the ingest path.
                if due { checkpointWake.signal() }
            case .noSpace(let error):
                let (closing, first): (Bool, Bool) = shared.withLock { state in
                    state.queue.insert(contentsOf: batch, at: 0)
                    state.queuedBytes += batch.reduce(0) { $0 + $1.frameBytes }
                    state.inFlight = 0
                    let first = !state.stats.paused
                    state.stats.paused = true
                    if case .closing = state.phase { return (true, first) }
                    return (false, first)
                }
                if first, !closing, case .noSpace(let e) = error.kind { options.eventHandler?(.pausedNoSpace(e)) }
                if core.pausedSince == nil || closing { core.pausedSince = Posix.monotonicNanos() }
                if closing {
                    // Closing while the disk is still full: nothing more can be done; say so to every caller.
                    let drained: [Pending] = shared.withLock { state in
                        let all = state.queue
                        state.queue.removeAll()
                        state.queuedBytes = 0
                        state.pendingKeys.removeAll()
                        return all
                    }
                    for item in drained { item.completion(.failed(error)) }
                    return
                }
            case .fatal(let error):
                let drained: [Pending] = shared.withLock { state in
                    state.phase = .failed(error)
                    state.inFlight = 0
                    state.stats.failed = true
                    let all = state.queue
                    state.queue.removeAll()
                    state.queuedBytes = 0
                    state.pendingKeys.removeAll()
                    return all
                }
                for item in batch + drained { item.completion(.failed(error)) }
                return
            }
        }
    }


    /// Seals the active segment for an erasure (the writer thread only): a segment holding
    /// records is closed and a new one cut, so that every record written so far lies in a
    /// sealed segment the eraser may rewrite. An empty active segment is left as it is.
    private func sealForErasure(_ waiters: [@Sendable (Result<UInt64, JournalError>) -> Void]) {
        var result: Result<UInt64, JournalError> = .success(core.activeFirstSeq)
        if core.activefd < 0 || core.activeEnd > Int64(SegmentHeader.size) {
            do throws(JournalError) {
                try Self.cutSegment(core)
                shared.withLock { $0.stats.segments += 1 }
                result = .success(core.activeFirstSeq)
            } catch {
                result = .failure(error)
            }
        }
        for waiter in waiters { waiter(result) }
    }

    /// Writes and syncs one batch. On ENOSPC the segment is cut back to its last committed end.
    private func writeBatch(_ batch: [Pending]) -> BatchOutcome {
        let io = core.io
        if core.activefd < 0 || core.activeEnd >= options.segmentBytes {
            do {
                try Self.cutSegment(core)
                shared.withLock { $0.stats.segments += 1 }
            } catch {
                if case .noSpace = error.kind { return .noSpace(error) }
                return .fatal(error)
            }
        }
        var buffer: [UInt8] = []
        buffer.reserveCapacity(batch.reduce(0) { $0 + $1.frameBytes })
        var seq = core.nextSeq
        for item in batch {
            RecordFrame.encode(seq: seq, ingestMillis: item.ingestMillis, key: Array(item.key.utf8), body: item.body, into: &buffer)
            seq += 1
        }
        let name = JournalFiles.segmentName(firstSeq: core.activeFirstSeq)
        StopPoints.pass(.beforeWrite)
        do {
            try io.writeAll(core.activefd, buffer, subject: name)
        } catch {
            // Whatever part landed must go: it was never acknowledged and would sit before the retry.
            do {
                let size = (try? io.fs.fileSize(core.activefd, subject: name)) ?? -1
                if size != core.activeEnd {
                    try io.ftruncate(core.activefd, core.activeEnd, subject: name)
                    try io.fdatasync(core.activefd, subject: name)
                }
            } catch let cleanup {
                return .fatal(cleanup)
            }
            if error.isNoSpace { return .noSpace(JournalError(.noSpace(error), directory: directory)) }
            return .fatal(JournalError(.io(error), directory: directory))
        }
        StopPoints.pass(.afterWrite)
        let started = Posix.monotonicNanos()
        do {
            try io.fdatasync(core.activefd, subject: name)
        } catch {
            return .fatal(error)
        }
        let took = Posix.monotonicNanos() - started
        core.lastSyncNanos = took
        shared.withLock { $0.stats.recordSync(nanos: took) }
        options.syncObserver?(took)
        if took > options.slowSyncNanos { options.eventHandler?(.slowSync(nanos: took)) }
        core.activeEnd += Int64(buffer.count)
        core.nextSeq = seq
        return .committed(bytes: buffer.count)
    }

    /// Starts a new segment named by the next seq, the etcd way: temp file, header, fdatasync,
    /// rename, directory fsync, so the new name survives power loss before any record goes in.
    private static func cutSegment(_ core: Core) throws(JournalError) {
        let io = core.io
        let name = JournalFiles.segmentName(firstSeq: core.nextSeq)
        let temp = name + ".tmp"
        let fd = try io.openat(core.dirfd, temp, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND)
        do throws(JournalError) {
            let header = SegmentHeader(firstSeq: core.nextSeq, createdMillis: Posix.wallClockMillis(), journalID: core.journalID)
            do { try io.writeAll(fd, header.encoded(), subject: temp) } catch { throw io.err(error) }
            try io.fdatasync(fd, subject: temp)
            StopPoints.pass(.rollTemp)
            try io.renameat(core.dirfd, temp, core.dirfd, name)
            StopPoints.pass(.rollRenamed)
            try io.fsync(core.dirfd, subject: io.directory)
        } catch {
            io.close(fd)
            try? io.unlinkat(core.dirfd, temp)
            throw error
        }
        if core.activefd >= 0 { io.close(core.activefd) }
        core.activefd = fd
        core.activeFirstSeq = core.nextSeq
        core.activeEnd = Int64(SegmentHeader.size)
        core.segmentFirstSeqs.append(core.nextSeq)
    }

    /// Best effort and without fsync by design: `COMMITTED` only ever proves loss
    /// (docs/design/journal.md, "The COMMITTED watermark").
    private static func writeCommittedMark(_ core: Core, seq: UInt64) {
        let mark = CommittedMark(seq: seq, segmentFirstSeq: core.activeFirstSeq, endOffset: core.activeEnd)
        try? core.io.pwriteAll(core.committedfd, mark.encoded(), offset: 0, subject: JournalFiles.committed)
    }

    // MARK: - Checkpoint thread

    /// Writes `dedup.ckpt` every `checkpointInterval` (when records were committed since the
    /// last one) and whenever the writer signals that `checkpointEvery` records came in. Runs
    /// on its own thread so neither the key snapshot nor the file's fsyncs delay a batch.
    private func runCheckpoints() {
        defer { checkpointFinished.signal() }
        let interval = options.checkpointInterval?.clampedUInt64Nanoseconds ?? 0
        while true {
            if interval > 0 {
                _ = checkpointWake.wait(timeout: .now() + .nanoseconds(Int(clamping: interval)))
            } else {
                checkpointWake.wait()
            }
            let (stop, fresh) = shared.withLock { state -> (Bool, Bool) in
                if case .failed = state.phase { return (true, false) }
                return (state.checkpointStop, state.position.throughSeq != state.checkpointedSeq)
            }
            if stop { return }
            if fresh { writeCheckpoint() }
        }
    }

    /// Snapshot of the committed keys; covers exactly the synced records up to the last
    /// committed batch. Called by the checkpoint thread, and by `close` after it has ended.
    /// Never two at once (`dedup.ckpt.tmp` is one name): only that thread calls it while it runs.
    @discardableResult
    private func writeCheckpoint() -> JournalError? {
        // The keys are read one shard at a time under the lock (`DedupCheckpoint.stream`);
        // a prune waits for the whole checkpoint (`checkpointGate`), so the count holds.
        let failure = checkpointGate.withLock { (_: inout Void) -> JournalError? in
            let (count, generation, position) = shared.withLock { state -> (Int, Int, CheckpointPosition) in
                state.sinceCheckpoint = 0
                return (state.committedKeys.count, state.committedKeys.generation, state.position)
            }
            do throws(JournalError) {
                try core.io.writeFileAtomically(dirfd: core.dirfd, name: JournalFiles.checkpoint) { write throws(JournalError) in
                    try DedupCheckpoint.stream(journalID: core.journalID, throughSeq: position.throughSeq,
                                               segmentFirstSeq: position.segmentFirstSeq, offset: position.offset,
                                               keyCount: count, generation: generation, segments: position.segments,
                                               shard: { index in shared.withLock { $0.committedKeys.snapshot(shard: index) } },
                                               emit: write)
                }
                shared.withLock {
                    $0.stats.checkpoints += 1
                    $0.checkpointedSeq = position.throughSeq
                }
                return nil
            } catch {
                shared.withLock { $0.stats.checkpointFailures += 1 }
                options.eventHandler?(.checkpointFailed(error))
                return error
            }
        }
        // The chunks, and the shards the writer copied away from a snapshot, are free now.
        MemoryPolicy.releaseFreePages()
        return failure
    }
}
