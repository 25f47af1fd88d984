@preconcurrency import Glibc
import PushFollow
import PushOutbox
import PushOutboxStore
import PushSystem

/// What the retry sender did since start. `Sendable` value.
package struct FleetRetryCounts: Sendable, Equatable {
    /// Retried dead letters a vendor answered 2xx.
    package var delivered = 0
    /// POSTs of retried dead letters that failed and wait for their backoff.
    package var retried = 0
    package var lastError: String?
    /// When ``lastError`` was set (epoch ms).
    package var lastErrorMillis: Int64 = 0

    package init() {}
}

/// Sends the fleet outbox's dead letters that `pushspoolctl outbox retry` handed back (renamed
/// into `<dir>/retry/`), with fresh attempts, from this node alone, through the outbox's
/// ``PushOutbox/DeliveryEngine``.
///
/// Not republished to the stream: the stream's message was acknowledged when it was parked,
/// so no other node holds it, and the file is in exactly one directory at a time (`retry/` →
/// `pending/` → removed, or `parked/` again), so it is sent again once, by this node. A
/// retried delivery not yet answered 2xx waits in `pending/` with the outbox's backoff (across
/// restarts too), and is parked again after `MaxAttempts=` failures or a 4xx. A crash
/// mid-POST sends it again after the restart, with the same ids.
///
/// A follower of its own, next to ``FleetOutbox``: the outbox's thread spends its idle time in
/// a fetch waiting on the server, and a retry should not wait for that to return. An inotify
/// watch on `retry/` wakes this one; otherwise it sleeps until the next backoff ends.
///
/// `Sendable`: the worker under one lock, counts under another.
package final class FleetRetrySender: Follower, Sendable {
    private let work: Locked<FleetRetryWorker>
    private let snapshot = Locked(FleetRetryCounts())
    private let stopping = StopSignal()
    private let onNotice: @Sendable (OutboxNotice) -> Void
    private let onChange = CallbackSlot<Void>()
    private let wake = CallbackSlot<Void>()
    private let retryWatch: RetryWatch

    init(options: OutboxOptions, store: OutboxStore, erased: ErasedSubjects = ErasedSubjects(),
         onNotice: @escaping @Sendable (OutboxNotice) -> Void) {
        retryWatch = RetryWatch(store: store)
        self.onNotice = onNotice
        let stopping = self.stopping
        work = Locked(FleetRetryWorker(options: options, store: store, shouldStop: { stopping.isSet }, erased: erased))
    }

    /// The counts; cheap, never waits for a POST.
    package var counts: FleetRetryCounts { snapshot.withLock { $0 } }

    /// `change` is called (on this follower's thread) when the counts change.
    package func observe(_ change: @escaping @Sendable () -> Void) { onChange.set(change) }

    // MARK: Follower

    package var name: String { "fleet-outbox-retry" }

    package func durableSeq() -> UInt64? { nil }

    package func attached(wake: @escaping @Sendable () -> Void) { self.wake.set(wake) }

    /// Aborts a POST in flight (within about a second); it stays pending for the next start.
    package func stopRequested() { stopping.set() }

    package func finish() { retryWatch.stop() }

    package func step(_ context: FollowerContext) throws(FollowerError) -> FollowerNext {
        if context.stopRequested() { return .wake(atMost: nil) }
        watchRetries()
        let (next, counts, notices) = work.withLock { worker in
            var notices: [OutboxNotice] = []
            let next = worker.step(now: Posix.wallClockMillis(), notices: &notices, stopRequested: context.stopRequested)
            return (next, worker.counts, notices)
        }
        let changed = snapshot.withLock { kept in
            defer { kept = counts }
            return kept != counts
        }
        if changed { onChange() }
        for notice in notices { onNotice(notice) }
        guard let next else { return .wake(atMost: nil) }
        return .wake(atMost: .milliseconds(max(1, next - Posix.wallClockMillis())))
    }

    /// Starts the inotify watch on `retry/` once a runner steps the sender.
    private func watchRetries() {
        do { _ = try retryWatch.start(creating: true) { wake.current } } catch {
            let failure = "cannot watch \(retryWatch.directory): \(error); retried dead letters wait for the next start of pushspool-inbox"
            work.withLock { $0.fail(failure) }
        }
    }
}

/// The retry sender's state; used only under its lock.
///
/// Not `Sendable`: owns the curl poster.
final class FleetRetryWorker {
    let options: OutboxOptions
    let store: OutboxStore
    /// Makes the POSTs and decides what each answer means (shared with both outboxes).
    let engine: DeliveryEngine
    /// The erasures this node applied: their subjects' dead letters are never sent again.
    let erased: ErasedSubjects
    var counts = FleetRetryCounts()

    init(options: OutboxOptions, store: OutboxStore, shouldStop: @escaping @Sendable () -> Bool, erased: ErasedSubjects = ErasedSubjects()) {
        self.options = options
        self.erased = erased
        self.store = store
        engine = DeliveryEngine(options: options, erased: erased, shouldStop: shouldStop)
    }

    func fail(_ text: String) {
        counts.lastError = text
        counts.lastErrorMillis = Posix.wallClockMillis()
    }

    /// Takes what `retry/` holds into `pending/` with fresh attempts and age, then sends every
    /// pending one that is due. Returns when the next one is due (epoch ms), `nil` for none.
    func step(now: Int64, notices: inout [OutboxNotice], stopRequested: () -> Bool) -> Int64? {
        for name in (try? store.names(store.retryDirectory)) ?? [] {
            // An unreadable one stays in `retry/`; an erased subject's is dropped unsent below.
            if case .failed(let error) = store.takeRetried(name, now: now) { fail(error.description) }
        }
        var next: Int64?
        for delivery in (try? store.list(store.pendingDirectory)) ?? [] {
            if stopRequested() { return nil }
            let due = max(delivery.notBeforeMillis, engine.heldUntil(delivery.target, now: now) ?? 0)
            if due <= now, let notice = send(delivery, now: now) { notices.append(notice) }
            if let pending = store.read(store.pendingDirectory + "/" + delivery.fileName) {
                let due = max(pending.notBeforeMillis, engine.heldUntil(pending.target, now: now) ?? 0)
                next = min(next ?? due, due)
            }
        }
        return next
    }

    /// One POST of a retried dead letter; the file moves according to the answer.
    func send(_ delivery: OutboxDelivery, now: Int64) -> OutboxNotice? {
        // Erased since it was listed (the node's erasure removed the file, or will).
        if erased.covers(delivery) {
            dropErased(delivery.fileName)
            return nil
        }
        var ledger = RetryLedger(worker: self, delivery: delivery, now: now)
        let (outcome, notice) = engine.deliver([[delivery]], now: now, into: &ledger)
        // A dead letter that could not be written stays pending: nothing to tell yet.
        return outcome == .released ? nil : notice
    }

    /// Removes an erased subject's pending file unsent (gone already when the erasure was first).
    func dropErased(_ name: String) {
        do { try store.remove(name, in: store.pendingDirectory) } catch where error.cause?.errno != ENOENT { fail(error.description) } catch {}
    }

    /// Back to `parked/` (written first: a crash leaves it pending, sent again, never lost).
    func park(_ delivery: inout OutboxDelivery, reason: String, message: String, now: Int64) throws(OutboxError) {
        try store.park(&delivery, reason: reason, message: message, now: now)
        fail("\(delivery.id) \(delivery.target.rawValue) parked (\(reason)): \(message)")
    }
}

/// How the retry sender records the engine's decisions for one file of `pending/`: removed
/// when delivered, written back with its backoff, moved to `parked/` again.
struct RetryLedger: DeliveryLedger {
    typealias Failure = Never
    let worker: FleetRetryWorker
    let delivery: OutboxDelivery
    let now: Int64

    func willPost() {}

    func delivered(_ deliveries: [OutboxDelivery]) {
        do throws(OutboxError) {
            try worker.store.remove(delivery.fileName, in: worker.store.pendingDirectory)
            worker.counts.delivered += 1
        } catch {
            worker.fail(error.description)
        }
    }

    func park(_ deliveries: [OutboxDelivery], _ parking: Parking) -> Bool {
        var delivery = delivery
        if let attempts = parking.attempts {
            // A POST was made: it counts, and so does its answer.
            delivery.attempts = attempts
            delivery.lastStatus = parking.status == 0 ? nil : parking.status
        }
        if let response = parking.response, !response.isEmpty { delivery.lastResponse = response }
        do throws(OutboxError) {
            try worker.park(&delivery, reason: parking.reason, message: parking.message, now: now)
            return true
        } catch {
            worker.fail(error.description)
            return false
        }
    }

    func finished() {}

    func handBack(_ failed: [OutboxDelivery], _ retry: HandBack) {
        var delivery = delivery
        delivery.attempts = retry.attempts
        delivery.lastStatus = retry.status == 0 ? nil : retry.status
        if !retry.response.isEmpty { delivery.lastResponse = retry.response }
        delivery.lastError = retry.message
        delivery.notBeforeMillis = now + retry.delayMillis
        do throws(OutboxError) {
            try worker.store.write(delivery, in: worker.store.pendingDirectory)
            worker.counts.retried += 1
            worker.fail("\(delivery.id) \(delivery.target.rawValue): \(retry.message)")
        } catch {
            worker.fail(error.description)
        }
    }

    func erased() { worker.dropErased(delivery.fileName) }

    /// Stopping: stays pending, sent at the next start (same ids).
    func aborted() {}
}
