@preconcurrency import Glibc
import PushExport
import PushFollow
import PushJournal
import PushOutbox
import PushOutboxStore
import PushSystem
import Synchronization

/// What the fleet outbox needs: `[Outbox]` (vendors, keys, timeouts, attempts) and `[Export]`
/// (the stream and how to reach it). `Sendable` value.
package struct FleetOutboxOptions: Sendable {
    package var outbox: OutboxOptions
    package var export: ExportOptions
    /// Where dead letters go (`<state>/inbox/outbox`, ``PushSystem/StateLayout/fleetOutbox``).
    package var directory: String
    /// The durable consumer every node shares; one per stream, so the name is fixed.
    package var consumerName = FleetOutboxOptions.defaultConsumerName
    /// Messages per fetch.
    package var fetchBatch = 64
    /// How long one fetch waits on the server when nothing is new (a stop interrupts it).
    package var fetchWait: Duration = .seconds(10)

    package static let defaultConsumerName = "pushspool-outbox"

    package init(outbox: OutboxOptions, export: ExportOptions, directory: String) {
        self.outbox = outbox
        self.export = export
        self.directory = directory
    }

    /// The subject inbox nodes publish events on (`EventPublisher`): the export subject with
    /// `event` for both placeholders. The consumer takes only these.
    package var filterSubject: String {
        (SubjectTemplate(export.subject) ?? SubjectTemplate("pushspool.{vendor}.{platform}")!).subject(vendor: "event", platform: "event")
    }

    /// A message not answered this long goes to another node: one POST (`RequestTimeoutSec=`,
    /// the connect included) plus 5 s for the answer to reach the server. Every POST is
    /// preceded by an in-progress signal for what the node holds, so only a node that stopped
    /// answering (killed, cut off, frozen) lets it pass.
    package var ackWait: Duration { outbox.requestTimeout + .seconds(5) }

    /// `MaxAttempts=` + 1: the server hands a message out at most this often. Each hand-out
    /// leads to at most one POST, and the last one to none (it is parked: the node before it
    /// died or stalled on its last attempt), so a vendor sees one event at most `MaxAttempts=`
    /// times — and every event ends delivered or parked on some node, none forgotten.
    package var maxDeliver: Int { outbox.maxAttempts + 1 }

    /// The consumer's setup; a consumer created now starts `MaxAgeSec=` back: older events
    /// would only be parked as stale.
    package func consumerConfig(nowMillis: Int64) -> PullConsumerConfig {
        PullConsumerConfig(name: .shared(consumerName), ack: .explicit(wait: ackWait, maxDeliver: maxDeliver, maxPending: 4096),
                           start: .time(millis: nowMillis - outbox.maxAge.clampedMilliseconds), filterSubject: filterSubject)
    }
}

/// The fleet outbox's counts since start. `Sendable` value.
package struct FleetOutboxStatus: Sendable, Equatable {
    /// Deliveries a vendor answered 2xx.
    package var delivered = 0
    /// Events acknowledged unsent because their user or device was erased on this node.
    package var erased = 0
    /// Dead letters on this node now (the files in `parked/`).
    package var parked = 0
    /// Deliveries handed back to the stream for a later attempt (5xx, 429, no answer).
    package var retried = 0
    /// Event messages this node took off the consumer that needed no POST (not an event of
    /// an inbox node, an event without a vendor delivery, an item no longer held).
    package var skipped = 0
    /// Messages the consumer handed to this node and not yet answered (being posted, or
    /// waiting for the index), plus retried dead letters not yet sent (`pending/`).
    package var inFlight = 0
    package var connected = false
    package var lastError: String? {
        didSet { lastErrorMillis = Posix.wallClockMillis() }
    }
    /// When ``lastError`` was set (epoch ms), to show the newer of the outbox's and the retry
    /// sender's.
    package var lastErrorMillis: Int64 = 0

    package init() {}

    /// For STATUS=: the counts, the connection and the last error (cut to 200 characters:
    /// a status line is not a log).
    package var summary: String {
        var text = "fleet outbox \(delivered) delivered, \(parked) parked, \(inFlight) in flight, \(retried) retried"
            + " (\(connected ? "connected" : "disconnected"))"
        if let lastError { text += ", last error: " + (lastError.count > 200 ? String(lastError.prefix(199)) + "…" : lastError) }
        return text
    }
}

/// Delivers the Notification Center events published to the stream by `[Inbox] Source=nats`
/// nodes to Mindbox and Infobip, once fleet-wide: every such node with `[Outbox] Enabled=yes`
/// pulls from one shared durable consumer (``FleetOutboxOptions/defaultConsumerName``) that
/// takes only the events' subject, and the server hands each message to one of them.
///
/// For each message, in stream order: a node works an event only once its own index has
/// applied the stream up to it (``init(options:appliedSeq:onNotice:)``), maps it with the
/// journal outbox's ``EventMapper`` — the item it names is resolved as a stream seq, read
/// from the stream itself — and POSTs as the journal outbox does (``OutboxOptions/request(for:now:)``:
/// Mindbox `transactionId` = event id, Infobip reports of one user batched). Then:
/// - 2xx: acknowledged (waiting for the server's confirmation);
/// - another 4xx, an unconfigured vendor, older than `MaxAgeSec=`: parked (a dead letter in
///   ``FleetOutboxOptions/directory`` on this node), then acknowledged;
/// - 5xx, 429, no answer: handed back with the backoff as delay (a 429/503 `Retry-After`
///   honoured up to the 10 min ceiling), to be worked by whichever node fetches it then;
///   after `MaxAttempts=` hand-outs it is parked;
/// - the node dies or stops answering mid-POST: the server hands it to another node once
///   ``FleetOutboxOptions/ackWait`` passed — the vendor may see that event twice (same ids).
/// An event of several deliveries (a Mindbox open and its push click; an Infobip seen and its
/// MO) is one item of the ``PushOutbox/DeliveryEngine``: its POSTs go in order and the message
/// is answered once, after the last; a failure worth retrying hands the whole message back.
///
/// Events an exporter took from a journal (they carry `Pushspool-Seq`) are acknowledged
/// without work: the outbox of the pushspoold that journaled them delivers them, and their
/// `item` is a journal seq, which means nothing here.
///
/// Erasure: once this node applied an erasure record (``erased``, fed by the index's
/// follower), an event of the subject from before the record is acknowledged without a POST —
/// checked right before each POST and again before a failed one is handed back — so a fetch
/// held behind a hung vendor does not go out after the erasure. (Another node learns of it
/// when its own index applies the record.)
///
/// Order: a node sends one user's deliveries of one fetch in stream order, and holds back that
/// user's later ones in the fetch when one is handed back. Across nodes there is no per-user
/// order: two events of one user fetched by two nodes go out concurrently.
///
/// `Sendable`: the connection and consumer live behind one lock (the runner's thread uses
/// them); counts behind another.
package final class FleetOutbox: Follower, Sendable {
    package let options: FleetOutboxOptions
    private let appliedSeq: @Sendable () -> UInt64
    private let onNotice: @Sendable (OutboxNotice) -> Void
    private let interrupt = NatsInterrupt()
    private let stopping = StopSignal()
    private let wake = CallbackSlot<Void>()
    private let snapshot = Locked(FleetOutboxStatus())
    private let work: Locked<FleetWorker>
    private let onChange = CallbackSlot<Void>()
    /// The erasures this node applied: their subjects' earlier events are not sent.
    package let erased: ErasedSubjects

    /// `appliedSeq`: the stream seq this node's index has applied; an event past it waits
    /// (``indexAdvanced()`` wakes the outbox). `onNotice`: parked and failed deliveries,
    /// fields not normalised, on the runner's thread (keep it short).
    package init(options: FleetOutboxOptions, appliedSeq: @escaping @Sendable () -> UInt64, erased: ErasedSubjects = ErasedSubjects(),
                 onNotice: @escaping @Sendable (OutboxNotice) -> Void = { _ in }) throws(OutboxError) {
        try options.outbox.validate()
        self.erased = erased
        self.options = options
        self.appliedSeq = appliedSeq
        self.onNotice = onNotice
        let store = OutboxStore(directory: options.directory)
        do { try Posix.mkdirs(options.directory, mode: 0o750) } catch { throw OutboxError(.io, "creating \(options.directory)", cause: error) }
        try store.create()
        let stopping = self.stopping
        let worker = try FleetWorker(options: options, store: store, shouldStop: { stopping.isSet }, erased: erased)
        // Counts go out as they change (a fetch, each answer), not only after a step: a POST
        // in flight shows while it hangs.
        let snapshot = self.snapshot
        let onChange = self.onChange
        worker.report = { status in Self.store(status, in: snapshot, onChange: onChange) }
        snapshot.withLock { $0 = worker.status }
        work = Locked(worker)
        retrySender = FleetRetrySender(options: options.outbox, store: store, erased: erased, onNotice: onNotice)
        retrySender.observe { onChange() }
    }

    /// `change` is called (on the outbox's threads; keep it short) whenever the counts change.
    package func observe(_ change: @escaping @Sendable () -> Void) { onChange.set(change) }

    /// Sends dead letters `pushspoolctl outbox retry` hands back; a follower of its own (run it
    /// next to this one), so that a retry goes out while this one waits in a fetch.
    package let retrySender: FleetRetrySender

    /// The counts, the retry sender's included; cheap, never waits for a POST.
    package var status: FleetOutboxStatus {
        var status = snapshot.withLock { $0 }
        let retried = retrySender.counts
        status.delivered += retried.delivered
        status.retried += retried.retried
        // Dead letters come and go by both paths and by pushspoolctl: the directories tell
        // (a listing of a few names, at most once a second for STATUS=).
        let store = OutboxStore(directory: options.directory)
        status.parked = (try? store.names(store.parkedDirectory).count) ?? status.parked
        status.inFlight += (try? store.names(store.pendingDirectory).count) ?? 0
        if let error = retried.lastError, retried.lastErrorMillis >= snapshot.withLock({ $0.lastErrorMillis }) {
            status.lastError = error
        }
        return status
    }

    /// Keeps `status` and tells `onChange` when it differs from what was kept: an idle outbox's
    /// fetches, every 10 s, do not wake the status reporter.
    private static func store(_ status: FleetOutboxStatus, in snapshot: Locked<FleetOutboxStatus>,
                              onChange: CallbackSlot<Void>) {
        let changed = snapshot.withLock { kept in
            defer { kept = status }
            return kept != status
        }
        if changed { onChange() }
    }

    /// The index applied more of the stream: an event waiting for it can go.
    package func indexAdvanced() { wake() }

    // MARK: Follower

    package var name: String { "fleet-outbox" }

    /// Holds no journal records: its position is the shared consumer's, on the server.
    package func durableSeq() -> UInt64? { nil }

    package var statusDetail: String? { status.summary }

    package func attached(wake: @escaping @Sendable () -> Void) { self.wake.set(wake) }

    /// Aborts a POST in flight (within about a second) and a fetch waiting on the server.
    package func stopRequested() {
        stopping.set()
        interrupt.interrupt()
    }

    package func finish() {
        work.withLock { $0.close(interrupt) }
        snapshot.withLock { $0.connected = false }
    }

    package func step(_ context: FollowerContext) throws(FollowerError) -> FollowerNext {
        if context.stopRequested() { return .wake(atMost: nil) }
        let interrupt = self.interrupt
        let applied = appliedSeq()
        let result = work.withLock { $0.step(applied: applied, interrupt: interrupt, stopRequested: context.stopRequested) }
        Self.store(result.status, in: snapshot, onChange: onChange)
        for notice in result.notices { onNotice(notice) }
        if let failure = result.failure { throw FollowerError("fleet_outbox_nats", failure) }
        // Waiting for the index: `indexAdvanced()` wakes the runner; the bound only covers a
        // wake lost to a race with the index's commit.
        if result.waitingForIndex { return .wake(atMost: .seconds(1)) }
        return .again
    }
}

/// Set once when the outbox stops; the poster asks it during a POST.
///
/// `Sendable`: one atomic.
final class StopSignal: Sendable {
    private let flag = Atomic<Bool>(false)
    func set() { flag.store(true, ordering: .releasing) }
    var isSet: Bool { flag.load(ordering: .acquiring) }
}

/// The fleet outbox's state and logic; used only under `FleetOutbox.work`.
///
/// Not `Sendable`: owns the NATS client, the consumer's held messages and the curl poster.
final class FleetWorker {
    let options: FleetOutboxOptions
    let store: OutboxStore
    let mapper: EventMapper
    /// Makes the POSTs and decides what each answer means (shared with the journal outbox).
    let engine: DeliveryEngine
    let erased: ErasedSubjects
    /// The connection and the shared consumer.
    let session: NatsWorkSession
    /// Fetched messages not yet worked (an event past the index's applied seq waits here).
    var queue: [StreamRecord] = []
    var status = FleetOutboxStatus()
    /// Told the counts after each change within a step.
    var report: @Sendable (FleetOutboxStatus) -> Void = { _ in }
    /// When every held message was last told "in progress" (monotonic ns).
    var lastExtended: UInt64 = 0
    /// Since when the head of the queue waits for the index (monotonic ns).
    var waitingSince: UInt64?

    struct StepResult {
        var status: FleetOutboxStatus
        var notices: [OutboxNotice] = []
        var waitingForIndex = false
        var failure: String?
    }

    init(options: FleetOutboxOptions, store: OutboxStore, shouldStop: @escaping @Sendable () -> Bool,
         erased: ErasedSubjects = ErasedSubjects()) throws(OutboxError) {
        self.options = options
        self.erased = erased
        self.store = store
        session = NatsWorkSession(options: options.export, clientName: "pushspool-outbox", createsStream: false)
        let outbox = options.outbox
        mapper = try outbox.eventMapper()
        engine = DeliveryEngine(options: outbox, erased: erased, shouldStop: shouldStop)
        status.parked = (try? store.names(store.parkedDirectory).count) ?? 0
    }

    /// Counts what this node holds and tells ``report``.
    func publish() {
        status.inFlight = session.consumer?.heldSeqs.count ?? 0
        report(status)
    }

    func close(_ interrupt: NatsInterrupt) {
        queue = []
        session.close(interrupt)
        status.connected = false
    }

    func step(applied: UInt64, interrupt: NatsInterrupt, stopRequested: @Sendable () -> Bool) -> StepResult {
        var notices: [OutboxNotice] = []
        do throws(ExportError) {
            let consumer = try ensureConsumer(interrupt)
            if queue.isEmpty {
                guard let fetched = try session.fetch(consumer, batch: options.fetchBatch, timeout: options.fetchWait,
                                                      interrupt: interrupt, stopRequested: stopRequested) else {
                    return StepResult(status: status)
                }
                queue = fetched
                lastExtended = Posix.monotonicNanos()
                if !fetched.isEmpty { publish() }
            }
            let waiting = try work(applied: applied, consumer: consumer, notices: &notices, stopRequested: stopRequested)
            if waiting { try waitForIndex(consumer) } else { waitingSince = nil }
            publish()
            return StepResult(status: status, notices: notices, waitingForIndex: waiting)
        } catch {
            let text = "\(error)"
            status.lastError = text
            // Unanswered messages come back after the ack wait, to this node or another.
            close(interrupt)
            publish()
            return StepResult(status: status, notices: notices, failure: stopRequested() ? nil : text)
        }
    }

    private func ensureConsumer(_ interrupt: NatsInterrupt) throws(ExportError) -> NatsPullConsumer {
        if let consumer = session.openConsumer { return consumer }
        // A lost connection's fetched messages come back after the ack wait: forget them.
        close(interrupt)
        let consumer = try session.open(interrupt) { options.consumerConfig(nowMillis: Posix.wallClockMillis()) }
        status.connected = true
        return consumer
    }

    /// A queued message and, once mapped, its delivery.
    struct Entry {
        var message: StreamRecord
        var delivery: OutboxDelivery
        /// The message's further deliveries (a Mindbox push open is an NCPushOpen and the
        /// push's click), sent after `delivery` before the message is answered.
        var rest: [OutboxDelivery] = []
    }

    /// Works the queue in stream order up to the first event the index has not applied yet;
    /// returns whether one waits for the index.
    func work(applied: UInt64, consumer: NatsPullConsumer, notices: inout [OutboxNotice],
              stopRequested: @Sendable () -> Bool) throws(ExportError) -> Bool {
        var entries: [Entry] = []
        var waiting = false
        var taken = 0
        for message in queue {
            if message.journalSeq != nil {
                // Journaled by a pushspoold, whose own outbox delivers it.
                try consumer.acknowledge(message.streamSeq)
                status.skipped += 1
                taken += 1
                continue
            }
            if message.streamSeq > applied {
                waiting = true
                break
            }
            taken += 1
            var lookupFailure: ExportError?
            let record = FollowedRecord(JournalRecord(seq: message.streamSeq, ingestMillis: message.ingestMillis, key: "",
                                                      body: message.body, segment: "", offset: 0))
            let mapping = mapper.map(record) { seq in
                guard let client = session.client else { return nil }
                do throws(ExportError) {
                    guard let stored = try client.message(consumer.stream, seq: seq) else { return nil }
                    return RecordBody(decoding: stored.body)
                } catch {
                    lookupFailure = error
                    return nil
                }
            }
            if let lookupFailure { throw lookupFailure }
            for notice in mapping.notices { notices.append(notice) }
            guard var delivery = mapping.deliveries.first else {
                try consumer.acknowledge(message.streamSeq)
                status.skipped += 1
                continue
            }
            delivery.attempts = Int(clamping: message.deliveries) - 1
            let rest = mapping.deliveries.dropFirst().map { further in
                var further = further
                further.attempts = delivery.attempts
                return further
            }
            entries.append(Entry(message: message, delivery: delivery, rest: rest))
        }
        queue.removeFirst(taken)
        try deliver(entries, consumer: consumer, notices: &notices, stopRequested: stopRequested)
        return waiting
    }

    /// One pass of the engine over `entries` (one fetch, stream order), batching a user's
    /// consecutive Infobip reports, answering each message.
    func deliver(_ entries: [Entry], consumer: any HeldMessages, notices: inout [OutboxNotice],
                 stopRequested: @Sendable () -> Bool) throws(ExportError) {
        var source = StreamSource(worker: self, consumer: consumer, entries: entries)
        let items = entries.map { DeliveryItem(deliveries: [$0.delivery] + $0.rest, handOuts: $0.message.deliveries) }
        notices += try engine.pass(items, source: &source, now: { Posix.wallClockMillis() }, shouldStop: stopRequested)
    }

    /// The queue's head is past what the index applied: keep what is held from going to
    /// another node meanwhile, but not longer than an ack wait — an index that does not move
    /// should not hold the fleet's events — then hand the queue back for any node to take.
    func waitForIndex(_ consumer: NatsPullConsumer) throws(ExportError) {
        let now = Posix.monotonicNanos()
        let since = waitingSince ?? now
        waitingSince = since
        if now &- since >= options.ackWait.clampedUInt64Nanoseconds {
            for message in queue { try consumer.refuse(message.streamSeq, delay: .zero) }
            queue = []
            waitingSince = nil
            status.lastError = "this node's index did not apply the stream for \(options.ackWait): its events were handed to other nodes"
            return
        }
        try extendHeld(consumer)
    }

    /// Tells the server this node still works on everything it holds, at most once a second,
    /// before a POST: messages waiting behind a slow vendor must not be handed to another node.
    func extendHeld(_ consumer: any HeldMessages) throws(ExportError) {
        let now = Posix.monotonicNanos()
        guard now &- lastExtended >= 1_000_000_000 else { return }
        for seq in consumer.heldSeqs { try consumer.extend(seq) }
        lastExtended = now
    }

    /// Parks `batch` before any POST (too old, or handed out too often), every delivery of
    /// each message, then acknowledges it: parked once, on this node.
    func park(_ batch: [Entry], reason: String, status code: Int, message: String, now: Int64,
              consumer: any HeldMessages) throws(ExportError) -> OutboxNotice {
        var ledger = StreamLedger(worker: self, consumer: consumer, entries: batch, now: now)
        let parking = Parking(reason: reason, status: code, message: message)
        if ledger.park(batch.flatMap { [$0.delivery] + $0.rest }, parking) { try ledger.finished() }
        return DeliveryEngine.notice(batch[0].delivery, parking)
    }
}

/// What the fleet outbox asks of the work queue for the messages it holds: answered by the
/// ``PushExport/NatsPullConsumer`` in pushspool-inbox, by a recording stand-in in tests.
protocol HeldMessages: AnyObject {
    /// Done: the server forgets it (waits for the server's confirmation).
    func acknowledge(_ seq: UInt64) throws(ExportError)
    /// Not now: handed out again, to any node, after `delay`.
    func refuse(_ seq: UInt64, delay: Duration) throws(ExportError)
    /// Still working on it: its ack wait starts again.
    func extend(_ seq: UInt64) throws(ExportError)
    /// Let go unanswered: handed out again after the ack wait.
    func release(_ seq: UInt64) throws(ExportError)
    /// Fetched and not yet answered.
    var heldSeqs: [UInt64] { get }
}

extension NatsPullConsumer: HeldMessages {}

/// The fleet outbox as the engine's source: the messages of one fetch, each an item with all
/// its deliveries. Held back = handed back to the stream with the delay, for any node.
struct StreamSource: DeliverySource {
    let worker: FleetWorker
    let consumer: any HeldMessages
    let entries: [FleetWorker.Entry]

    func sweep() {}

    func isWaiting(_ index: Int) -> Bool { true }

    func holdBack(_ index: Int, delayMillis: Int64) throws(ExportError) {
        try consumer.refuse(entries[index].message.streamSeq, delay: .milliseconds(delayMillis))
    }

    /// Erased here since it was fetched (or before): acknowledged, never sent.
    func dropErased(_ index: Int) throws(ExportError) {
        try consumer.acknowledge(entries[index].message.streamSeq)
        worker.status.erased += 1
    }

    func park(_ index: Int, _ parking: Parking, now: Int64) throws(ExportError) -> OutboxNotice {
        try worker.park([entries[index]], reason: parking.reason, status: parking.status, message: parking.message, now: now,
                        consumer: consumer)
    }

    func ledger(for indices: [Int], now: Int64) -> StreamLedger {
        StreamLedger(worker: worker, consumer: consumer, entries: indices.map { entries[$0] }, now: now)
    }
}

/// How the fleet outbox records the engine's decisions for the messages of one item: a
/// message is acknowledged once every POST of it got a 2xx or was parked here, handed back
/// whole with the delay when a POST failed in a way worth retrying, and acknowledged unsent when
/// its subject was erased meanwhile. A dead letter that cannot be written leaves its message
/// unanswered: it comes back after the ack wait rather than being lost.
struct StreamLedger: DeliveryLedger {
    typealias Failure = ExportError
    let worker: FleetWorker
    let consumer: any HeldMessages
    /// The item's messages not yet let go.
    var entries: [FleetWorker.Entry]
    let now: Int64

    func willPost() throws(ExportError) {
        try worker.extendHeld(consumer)
        worker.publish()
    }

    func delivered(_ deliveries: [OutboxDelivery]) { worker.status.delivered += deliveries.count }

    mutating func park(_ deliveries: [OutboxDelivery], _ parking: Parking) -> Bool {
        var wrote = false
        for var delivery in deliveries {
            // A message's deliveries carry its stream seq.
            guard let at = entries.firstIndex(where: { $0.message.streamSeq == delivery.seq }) else { continue }
            delivery.attempts = Int(clamping: entries[at].message.deliveries)
            delivery.parkedReason = parking.reason
            delivery.parkedAtMillis = now
            delivery.lastStatus = parking.status == 0 ? nil : parking.status
            if let response = parking.response, !response.isEmpty { delivery.lastResponse = response }
            delivery.lastError = parking.message
            do {
                try worker.store.write(delivery, in: worker.store.parkedDirectory)
                worker.status.parked += 1
                wrote = true
            } catch {
                // Not acknowledged: it comes back after the ack wait rather than being lost.
                // (Releasing throws only on a consumer that does not answer each message, and
                // the outbox's does.)
                worker.status.lastError = error.description
                try? consumer.release(entries[at].message.streamSeq)
                entries.remove(at: at)
            }
        }
        if wrote, let head = deliveries.first {
            worker.status.lastError = "\(head.id) \(head.target.rawValue) parked (\(parking.reason)): \(parking.message)"
        }
        return !entries.isEmpty
    }

    func finished() throws(ExportError) {
        for entry in entries { try consumer.acknowledge(entry.message.streamSeq) }
    }

    func handBack(_ failed: [OutboxDelivery], _ retry: HandBack) throws(ExportError) {
        guard let head = failed.first else { return }
        for entry in entries { try consumer.refuse(entry.message.streamSeq, delay: .milliseconds(retry.delayMillis)) }
        worker.status.retried += entries.count
        worker.status.lastError = "\(head.id) \(head.target.rawValue): \(retry.message)"
    }

    func erased() throws(ExportError) {
        for entry in entries { try consumer.acknowledge(entry.message.streamSeq) }
        worker.status.erased += entries.count
    }

    /// Stopping: the vendor's answer is unknown; another node sends it now (same ids).
    func aborted() throws(ExportError) {
        for entry in entries { try consumer.refuse(entry.message.streamSeq, delay: .zero) }
    }
}


