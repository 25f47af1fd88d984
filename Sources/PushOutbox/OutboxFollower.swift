@preconcurrency import Glibc
import PushFollow
import PushJournal
import PushOutboxStore
import PushSystem
import Synchronization

/// Follows the journal for Notification Center event records and delivers the POSTs they
/// cause (see `EventMapper`) to Mindbox and Infobip.
///
/// Durability: deliveries derived from journal records up to seq N are written to
/// `<state>/outbox/pending/` before `cursor` becomes N, and no POST is made for them before
/// that; a delivered one is removed afterwards. So after a crash (kill -9) every event is
/// either still pending (delivered after restart) or was delivered; only a POST in flight at
/// the crash can be repeated, with the same `transactionId` / MO `messageId`. A crash between
/// writing pending files and advancing the cursor leaves files for records the restarted
/// follower maps again: those records take their existing file, so each event is queued once.
///
/// The cursor file is written (two fsyncs) in a step that queued a delivery, before any POST
/// for it; a step that queued none moves the cursor in memory only, and the file catches up
/// at the next delivery, every ``cursorWriteSpacing`` records, and at stop. Records between
/// the file's seq and the cursor produced nothing, so mapping them again after a crash is
/// harmless; writing the file for each of them cost two fsyncs per ingested record on the
/// disk the journal syncs on (strace of the visible bench).
///
/// Stopping: `stop()` aborts a POST in flight (see `HTTPPoster`) and makes no further one, so
/// it returns within about a second even when a vendor hangs; the aborted POST is not counted
/// as an attempt and goes out first after the restart (with the same ids: the vendor may have
/// taken it, as with a POST in flight at a crash).
///
/// Order: a user's (or, without a user, a device's) deliveries go out in journal order; one in
/// backoff holds back that user's later ones, not other users'. Parked deliveries no longer
/// hold anything back. A 429 or 503 with `Retry-After` holds back every user's deliveries to
/// that vendor until then (at most `retryCeiling`).
///
/// Erasure: a subject in `erased` (the intake adds it when it accepts the request, before the
/// `erasure` record is journaled) loses its deliveries of the records the erasure covers —
/// pending, parked and in `retry/` — before the next POST: the files are removed, and each
/// batch is checked right before its POST and again before a failed one is written back, so
/// a POST that was in flight while the vendor hung is the only one that can reach the vendor.
/// Records the erasure covers that are mapped afterwards (a restart behind the record) queue
/// nothing.
///
/// Runs on a ``FollowerRunner`` (the daemon's follower group): it sleeps until the journal
/// commits past its cursor or the next delivery is due, never on a fixed tick.
///
/// `Sendable`: all work runs under one lock (the runner's steps, `catchUp()`), the status
/// snapshot under another.
package final class OutboxFollower: Follower, Sendable {
    /// How far the cursor may run ahead of its file over records that queued nothing.
    static let cursorWriteSpacing: UInt64 = 4_096
    package let options: OutboxOptions
    private let work: Locked<Worker>
    private let snapshot = Locked(OutboxStatus())
    private let stopping: StopFlag
    private let onNotice: @Sendable (OutboxNotice) -> Void
    /// Wakes the runner when `pushspoolctl outbox retry` moves dead letters into `retry/`.
    private let retryWatch: RetryWatch
    /// Whether `retry/` may hold something the worker has not taken: set by the watch before
    /// it wakes the runner, and on every step while nothing watches; a step lists `retry/`
    /// only then, not at each journal commit.
    private let retryChanged: ChangeFlag
    private let wake = CallbackSlot<Void>()

    /// Creates `<state>/outbox/` and loads pending deliveries; runs nothing until a runner
    /// steps it (or `catchUp()`). `onNotice` is called on the stepping thread (keep it short:
    /// log and return). `listDirectory` lists `retry/` (a test counts it); `nil` when it cannot
    /// be listed. `erased`: the erasures requested, shared with the intake (the daemon fills
    /// it at start with those still pending).
    package init(options: OutboxOptions, erased: ErasedSubjects = ErasedSubjects(),
                 onNotice: @escaping @Sendable (OutboxNotice) -> Void = { _ in },
                 listDirectory: (@Sendable (String) -> [String]?)? = nil) throws(OutboxError) {
        try options.validate()
        self.options = options
        self.onNotice = onNotice
        let stopping = StopFlag()
        self.stopping = stopping
        let store = OutboxStore(stateDirectory: options.stateDirectory)
        try store.create()
        retryWatch = RetryWatch(store: store)
        let retryChanged = ChangeFlag()
        self.retryChanged = retryChanged
        let worker = try Worker(options: options, store: store, shouldStop: { stopping.isSet }, retryChanged: retryChanged,
                                listDirectory: listDirectory ?? { try? store.names($0) }, erased: erased)
        work = Locked(worker)
        let status = work.withLock { $0.status() }
        snapshot.withLock { $0 = status }
    }

    /// The current counts; cheap, never waits for a POST.
    package var status: OutboxStatus { snapshot.withLock { $0 } }

    // MARK: Follower

    package var name: String { "outbox" }

    /// The cursor: every record up to it has its deliveries in `pending/` (or delivered).
    package func durableSeq() -> UInt64? { status.cursor }

    package var statusDetail: String? { status.summary }

    /// Aborts a POST in flight (curl notices within about a second); none starts after it.
    package func stopRequested() { stopping.set() }

    package func attached(wake: @escaping @Sendable () -> Void) {
        self.wake.set(wake)
    }

    package func finish() {
        retryWatch.stop()
        work.withLock { $0.persistCursor() }
    }

    package func step(_ context: FollowerContext) throws(FollowerError) -> FollowerNext {
        watchRetries()
        let result = work.withLock { work in
            work.records = context.records
            return work.step(now: Posix.wallClockMillis(), announcedLastSeq: context.announcedLastSeq)
        }
        publish(result.notices)
        // Deliveries already queued went out in this step; what failed is taking new records.
        if let failure = result.journalFailure { throw FollowerError("outbox_journal", failure) }
        if result.moreJournal { return .again }
        return .commitAfter(status.cursor, atMost: result.sleepMillis.map { .milliseconds($0) })
    }

    /// Synchronously queues every journal record available now and makes one delivery pass
    /// over what is due; for tests and `pushspoolctl`. Returns the status afterwards. `now`:
    /// the wall clock (milliseconds) the pass decides what is due by; a test passes a later
    /// one instead of waiting out a backoff.
    @discardableResult
    package func catchUp(now: @autoclosure () -> Int64 = Posix.wallClockMillis()) -> OutboxStatus {
        // Without a runner nothing watches `retry/`.
        retryChanged.set()
        let notices = work.withLock { worker -> [OutboxNotice] in
            var all: [OutboxNotice] = []
            while true {
                let result = worker.step(now: now())
                all += result.notices
                if !result.moreJournal { break }
            }
            worker.persistCursor()
            return all
        }
        publish(notices)
        return status
    }

    /// Starts the watch on `retry/` once a runner steps the follower: dead letters an operator
    /// sends again are taken at once, not at the next commit. The flag is set before the wake,
    /// so the step it causes lists `retry/`; the first step lists it anyway (the flag starts
    /// set), for what came before the watch.
    private func watchRetries() {
        let watching: Bool
        do {
            watching = try retryWatch.start { [wake, retryChanged] in
                guard let wake = wake.current else { return nil }
                return {
                    retryChanged.set()
                    wake()
                }
            }
        } catch {
            snapshot.withLock { $0.lastError = "cannot watch \(retryWatch.directory): \(error); retried dead letters wait for the next event" }
            watching = false
        }
        // Unwatched, a dead letter sent again is noticed only by looking at each step.
        if !watching { retryChanged.set() }
    }

    private func publish(_ notices: [OutboxNotice]) {
        let status = work.withLock { $0.status() }
        snapshot.withLock { $0 = status }
        for notice in notices { onNotice(notice) }
    }
}

/// Set once when the follower stops; the worker asks it between POSTs, the poster during one.
///
/// `Sendable`: one atomic.
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)
    func set() { flag.store(true, ordering: .releasing) }
    var isSet: Bool { flag.load(ordering: .acquiring) }
}

/// Set when something may have changed, taken by the one who looks.
///
/// `Sendable`: one atomic.
final class ChangeFlag: Sendable {
    private let flag = Atomic<Bool>(true)
    func set() { flag.store(true, ordering: .releasing) }
    /// Whether it was set since the last take; clears it.
    func take() -> Bool { flag.exchange(false, ordering: .acquiringAndReleasing) }
}

/// The follower's state and logic; used only under `OutboxFollower.work`.
final class Worker {
    let options: OutboxOptions
    let store: OutboxStore
    let mapper: EventMapper
    /// Makes the POSTs and decides what each answer means (shared with the fleet outbox).
    let engine: DeliveryEngine
    let shouldStop: @Sendable () -> Bool
    /// Whether to look in `retry/` at the next step (``OutboxFollower``'s watch sets it).
    let retryChanged: ChangeFlag
    let listDirectory: @Sendable (String) -> [String]?
    /// Erasures requested: their subjects' covered deliveries are dropped, never sent.
    let erased: ErasedSubjects
    /// The ``ErasedSubjects/generation`` the files were last swept for.
    var sweptGeneration: UInt64 = 0
    /// Deliveries dropped because their subject was erased, since start.
    var erasedCount = 0
    var reader: FollowedReader?
    /// The follower group's decoded records (``FollowerContext/records``), which `reader`
    /// decodes through.
    var records: DecodedRecords = .unshared
    var lookupReader: JournalReader?
    /// Every record up to it is mapped (its deliveries pending or delivered).
    var cursor: UInt64
    /// The seq in the cursor file: every delivery queued is at or below it.
    var persistedCursor: UInt64
    /// Pending deliveries in journal order.
    var pending: [OutboxDelivery]
    /// Pending files found at start for records past the cursor (a crash came between writing
    /// them and advancing the cursor), by file name. The journal maps those records again;
    /// each takes its file from here rather than being queued a second time.
    var unconfirmed: [String: OutboxDelivery] = [:]
    var parkedCount = 0
    var delivered = 0
    var retried = 0
    var lastError: String?

    struct StepResult {
        var notices: [OutboxNotice] = []
        var moreJournal = false
        /// When the next delivery in backoff is due; `nil` = nothing waits on a clock.
        var sleepMillis: Int64?
        /// Reading the journal or writing `pending/` and the cursor failed: the runner backs
        /// off instead of stepping again at once.
        var journalFailure: String?
    }

    /// The last failure of `enqueueFromJournal`, cleared by its next success.
    var journalFailure: String?
    /// What mapping records said about fields it could not normalise, by record seq, for the
    /// next step's result.
    var mappingNotices: [(seq: UInt64, notice: OutboxNotice)] = []

    init(options: OutboxOptions, store: OutboxStore, shouldStop: @escaping @Sendable () -> Bool = { false },
         retryChanged: ChangeFlag, listDirectory: @escaping @Sendable (String) -> [String]?,
         erased: ErasedSubjects = ErasedSubjects()) throws(OutboxError) {
        self.options = options
        self.erased = erased
        self.store = store
        self.shouldStop = shouldStop
        self.retryChanged = retryChanged
        self.listDirectory = listDirectory
        mapper = try options.eventMapper()
        engine = DeliveryEngine(options: options, erased: erased, shouldStop: shouldStop)
        cursor = try store.cursor()
        persistedCursor = cursor
        // A crash between writing a dead letter and removing its pending file leaves both:
        // the dead letter wins.
        let parked = Set(try store.names(store.parkedDirectory))
        pending = []
        for delivery in try store.list(store.pendingDirectory) {
            if parked.contains(delivery.fileName) {
                try? store.remove(delivery.fileName, in: store.pendingDirectory)
            } else if delivery.seq > cursor {
                unconfirmed[delivery.fileName] = delivery
            } else {
                pending.append(delivery)
            }
        }
        parkedCount = parked.count
    }

    func status() -> OutboxStatus {
        var status = OutboxStatus()
        status.pending = pending.count + unconfirmed.count
        status.parked = parkedCount
        status.delivered = delivered
        status.retried = retried
        status.erased = erasedCount
        status.cursor = cursor
        status.lastError = lastError
        return status
    }

    /// `announcedLastSeq`: the writer's last seq when the runner has it (see
    /// ``JournalReader/announcedLastSeq``).
    func step(now: Int64, announcedLastSeq: UInt64? = nil) -> StepResult {
        var result = StepResult()
        if retryChanged.take() { absorbRetries() }
        result.moreJournal = enqueueFromJournal(limit: 1024, announcedLastSeq: announcedLastSeq)
        result.journalFailure = journalFailure
        result.notices = mappingNotices.map(\.notice) + deliverDue(now: now)
        mappingNotices = []
        parkedCount = (try? store.names(store.parkedDirectory).count) ?? parkedCount
        if let next = (pending.map(\.notBeforeMillis) + engine.holds.values).filter({ $0 > now }).min() {
            result.sleepMillis = max(1, next - now)
        }
        return result
    }

    /// `pushspoolctl outbox retry` renamed dead letters into `retry/`: back to pending with
    /// fresh attempts. What could not be taken is looked at again at the next step.
    func absorbRetries() {
        guard let names = listDirectory(store.retryDirectory) else {
            retryChanged.set()
            return
        }
        guard !names.isEmpty else { return }
        for name in names {
            switch store.takeRetried(name, now: Posix.wallClockMillis(), keep: { !erased.covers($0) }) {
            case .pending(let delivery):
                pending.removeAll { $0.fileName == delivery.fileName }
                pending.append(delivery)
            case .refused(let delivery):
                dropErased([delivery], in: store.retryDirectory)
            case .unreadable:
                retryChanged.set()
            case .failed(let error):
                lastError = error.description
                retryChanged.set()
            }
        }
        pending.sort { ($0.seq, $0.index) < ($1.seq, $1.index) }
    }

    /// Maps journal records after the cursor; returns whether more may be waiting.
    func enqueueFromJournal(limit: Int, announcedLastSeq: UInt64? = nil) -> Bool {
        do throws(OutboxError) {
            if reader == nil {
                do { reader = try FollowedReader(directory: options.journalDirectory, fromSeq: cursor + 1, records: records) } catch {
                    throw OutboxError(.journal, "opening \(options.journalDirectory): \(error)")
                }
            }
            guard let reader else { return false }
            reader.announcedLastSeq = announcedLastSeq
            var last = cursor
            var count = 0
            var queued = false
            // A stop ends the batch early; the cursor still covers exactly what was queued.
            while count < limit, !shouldStop() {
                let record: FollowedRecord?
                do { record = try reader.next() } catch { throw OutboxError(.journal, "reading \(options.journalDirectory): \(error)") }
                guard let record else { break }
                count += 1
                if record.key.hasPrefix(Worker.erasureKeyPrefix) {
                    // The erasure covers the records below this one; later ones are new data.
                    erased.journaled(erasureID: String(record.key.dropFirst(Worker.erasureKeyPrefix.count)), seq: record.seq)
                }
                let mapping = mapper.map(record, lookup: lookup)
                mappingNotices += mapping.notices.map { (record.seq, $0) }
                for delivery in mapping.deliveries {
                    if erased.covers(delivery) {
                        // Erased before it was queued (a restart behind the erasure record).
                        if let earlier = unconfirmed.removeValue(forKey: delivery.fileName) { dropErased([earlier], in: store.pendingDirectory) }
                        continue
                    }
                    if let earlier = unconfirmed.removeValue(forKey: delivery.fileName) {
                        // Queued before a crash, the file is there: take it, do not queue it twice.
                        pending.append(earlier)
                        queued = true
                        continue
                    }
                    try store.write(delivery, in: store.pendingDirectory)
                    pending.append(delivery)
                    queued = true
                }
                last = record.seq
            }
            if last != cursor {
                // Before any POST of what was queued (deliverDue comes after this).
                if queued || last - persistedCursor >= OutboxFollower.cursorWriteSpacing {
                    try store.setCursor(last)
                    persistedCursor = last
                }
                cursor = last
            }
            adoptCoveredUnconfirmed()
            journalFailure = nil
            return count == limit
        } catch {
            lastError = error.description
            journalFailure = error.description
            // Re-read from the cursor next time: records read but not covered by it are
            // mapped again (same file names, so nothing is duplicated).
            reader = nil
            pending.removeAll { $0.seq > cursor }
            // Those records are mapped again, and say it again.
            mappingNotices.removeAll { $0.seq > cursor }
            return false
        }
    }

    /// Writes the cursor file when it is behind the cursor (at stop, after a catch-up).
    func persistCursor() {
        guard persistedCursor != cursor else { return }
        do {
            try store.setCursor(cursor)
            persistedCursor = cursor
        } catch {
            lastError = error.description
        }
    }

    /// Files found at start whose record the cursor now covers but which no mapping claimed (a
    /// vendor unconfigured since the crash, say) are pending like any other: delivered, or
    /// parked with a reason, never left behind unseen.
    func adoptCoveredUnconfirmed() {
        guard !unconfirmed.isEmpty else { return }
        let covered = unconfirmed.values.filter { $0.seq <= cursor }
        guard !covered.isEmpty else { return }
        for delivery in covered { unconfirmed[delivery.fileName] = nil }
        pending += covered
        pending.sort { ($0.seq, $0.index) < ($1.seq, $1.index) }
    }

    /// The record at `seq`, decoded, for the item an event names.
    func lookup(_ seq: UInt64) -> RecordBody? {
        if lookupReader == nil { lookupReader = try? JournalReader(directory: options.journalDirectory) }
        guard let lookupReader else { return nil }
        lookupReader.seek(toSeq: seq)
        guard let record = try? lookupReader.next(), record.seq == seq else { return nil }
        return RecordBody(decoding: record.body)
    }

    /// One pass of the engine over `pending/` in journal order (see ``DeliveryEngine/pass(_:source:now:shouldStop:)``).
    func deliverDue(now: Int64) -> [OutboxNotice] {
        var source = JournalSource(worker: self, items: pending)
        return engine.pass(pending.map { DeliveryItem(deliveries: [$0]) }, source: &source, now: { now }, shouldStop: shouldStop)
    }

    func backoffMillis(attempts: Int) -> Int64 { options.backoffMillis(attempts: attempts) }

    /// The journal key prefix of an `erasure` record (`erasure:<erasureId>`).
    static let erasureKeyPrefix = "erasure:"

    /// When an erasure was added since the last sweep, removes the files of every delivery it
    /// covers — pending (and found at start past the cursor), parked, in `retry/` — and takes
    /// them out of memory. Returns whether anything left `pending`.
    func sweepErased() -> Bool {
        let generation = erased.generation
        guard generation != sweptGeneration else { return false }
        sweptGeneration = generation
        let before = pending.count
        let covered = pending.filter(erased.covers)
        if !covered.isEmpty { dropErased(covered, in: store.pendingDirectory) }
        let unconfirmedCovered = unconfirmed.values.filter(erased.covers)
        if !unconfirmedCovered.isEmpty { dropErased(unconfirmedCovered, in: store.pendingDirectory) }
        for directory in [store.parkedDirectory, store.retryDirectory] {
            let files: [OutboxDelivery]
            do { files = try store.list(directory) } catch {
                lastError = error.description
                sweptGeneration = 0  // listed again at the next POST
                continue
            }
            let gone = files.filter(erased.covers)
            if !gone.isEmpty { dropErased(gone, in: directory) }
        }
        return pending.count != before
    }

    /// Removes erased deliveries' files from `directory` and from memory. A file that cannot be
    /// removed is taken out of memory all the same (it is never sent); the next start drops
    /// it while the erasure is pending, and the eraser's outbox step removes it.
    func dropErased(_ deliveries: [OutboxDelivery], in directory: String) {
        for delivery in deliveries {
            // Gone already: the eraser's outbox step was first.
            do { try store.remove(delivery.fileName, in: directory) } catch where error.cause?.errno != ENOENT { lastError = error.description } catch {}
            unconfirmed[delivery.fileName] = nil
        }
        let names = Set(deliveries.map(\.fileName))
        if directory == store.pendingDirectory {
            pending.removeAll { names.contains($0.fileName) }
        } else if directory == store.parkedDirectory {
            parkedCount = max(0, parkedCount - deliveries.count)
        }
        erasedCount += deliveries.count
    }

    /// Moves `batch` to `parked/` (dead letters) with the reason and the response.
    func park(_ batch: [OutboxDelivery], reason: String, status: Int, message: String, now: Int64,
              response: String? = nil, attempts: Int? = nil) -> OutboxNotice {
        for var delivery in batch {
            delivery.lastStatus = status == 0 ? delivery.lastStatus : status
            if let response { delivery.lastResponse = response.isEmpty ? nil : response }
            if let attempts { delivery.attempts = attempts }
            do { try store.park(&delivery, reason: reason, message: message, now: now) } catch { lastError = error.description }
        }
        let names = Set(batch.map(\.fileName))
        pending.removeAll { names.contains($0.fileName) }
        parkedCount += batch.count
        lastError = "\(batch[0].id) \(batch[0].target.rawValue) parked (\(reason)): \(message)"
        return .parked(id: batch[0].id, target: batch[0].target.rawValue, status: status, reason: reason, message: message)
    }

}

/// The journal outbox as the engine's source: the deliveries `pending/` held when the pass
/// began, one item each (an event's further deliveries are items of their own, after it in
/// journal order, so each POST is durable on its own).
struct JournalSource: DeliverySource {
    let worker: Worker
    let items: [OutboxDelivery]
    /// After a sweep in this pass: the names still pending; `nil` while no sweep took any.
    var alive: Set<String>?

    /// An erasure accepted since the last POST: its subject's files go first.
    mutating func sweep() {
        if worker.sweepErased() { alive = Set(worker.pending.map(\.fileName)) }
    }

    func isWaiting(_ index: Int) -> Bool { alive?.contains(items[index].fileName) ?? true }

    /// Its file stays as it is; the next pass looks again.
    func holdBack(_ index: Int, delayMillis: Int64) {}

    func dropErased(_ index: Int) { worker.dropErased([items[index]], in: worker.store.pendingDirectory) }

    func park(_ index: Int, _ parking: Parking, now: Int64) -> OutboxNotice {
        // A dead letter keeps the status of its last attempt.
        worker.park([items[index]], reason: parking.reason, status: items[index].lastStatus ?? 0, message: parking.message, now: now)
    }

    func ledger(for indices: [Int], now: Int64) -> JournalLedger {
        JournalLedger(worker: worker, batch: indices.map { items[$0] }, now: now)
    }
}

/// How the journal outbox records the engine's decisions for one batch of `pending/`: a
/// delivered one's file is removed, a failed one written back with its backoff, a dead letter
/// moved to `parked/`.
struct JournalLedger: DeliveryLedger {
    typealias Failure = Never
    let worker: Worker
    let batch: [OutboxDelivery]
    let now: Int64

    func willPost() {}

    func delivered(_ deliveries: [OutboxDelivery]) {
        for delivery in deliveries {
            do { try worker.store.remove(delivery.fileName, in: worker.store.pendingDirectory) } catch { worker.lastError = error.description }
        }
        let names = Set(deliveries.map(\.fileName))
        worker.pending.removeAll { names.contains($0.fileName) }
        worker.delivered += deliveries.count
    }

    func park(_ deliveries: [OutboxDelivery], _ parking: Parking) -> Bool {
        // The attempts are counted into the file only when they are the reason.
        _ = worker.park(deliveries, reason: parking.reason, status: parking.status, message: parking.message, now: now,
                        response: parking.response, attempts: parking.reason == "attempts" ? parking.attempts : nil)
        return true
    }

    func finished() {}

    func handBack(_ failed: [OutboxDelivery], _ retry: HandBack) {
        let head = batch[0]
        worker.lastError = "\(head.id) \(head.target.rawValue): \(retry.message)"
        worker.retried += 1
        for var delivery in batch {
            delivery.attempts = retry.attempts
            delivery.notBeforeMillis = now + retry.delayMillis
            delivery.lastStatus = retry.status
            delivery.lastResponse = retry.response.isEmpty ? nil : retry.response
            delivery.lastError = retry.error
            do { try worker.store.write(delivery, in: worker.store.pendingDirectory) } catch { worker.lastError = error.description }
            if let at = worker.pending.firstIndex(where: { $0.fileName == delivery.fileName }) { worker.pending[at] = delivery }
        }
    }

    func erased() { worker.dropErased(batch, in: worker.store.pendingDirectory) }

    func aborted() {}
}
