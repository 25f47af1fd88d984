import PushOutboxStore
import PushSystem

/// Makes one POST: ``HTTPPoster`` in the daemons, a stand-in in tests.
package protocol DeliveryPoster {
    func post(url: String, headers: [String], body: [UInt8]) -> PostResult
}

extension HTTPPoster: DeliveryPoster {}

/// Why deliveries are parked, with what the vendor said. `Sendable` value.
package struct Parking: Sendable, Equatable {
    /// `http_<status>`, `attempts`, `unconfigured`.
    package var reason: String
    /// The HTTP status; 0 when no answer came or no POST was made.
    package var status: Int
    package var message: String
    /// The response body, redacted and cut; `nil` when no POST was made.
    package var response: String?
    /// The attempts made, this one included; `nil` when no POST was made.
    package var attempts: Int?
}

/// A failed POST worth trying again: when, and what the vendor said. `Sendable` value.
package struct HandBack: Sendable, Equatable {
    /// The attempts made, this one included.
    package var attempts: Int
    /// The backoff, or a `Retry-After` when longer (up to the ceiling).
    package var delayMillis: Int64
    /// The HTTP status; 0 when no answer came.
    package var status: Int
    /// curl's error text, else `HTTP <status>`; redacted.
    package var message: String
    /// curl's error text, redacted; `nil` when a response came.
    package var error: String?
    /// The response body, redacted and cut (empty when none).
    package var response: String
}

/// What became of one work item. `Sendable` value.
package enum DeliveryOutcome: Sendable, Equatable {
    /// Every POST got a 2xx or was parked; the ledger answered the item (`finished()`).
    case finished
    /// A POST failed in a way worth retrying: the whole item was handed back.
    case handedBack
    /// Its subject was erased while a POST was out: dropped unsent.
    case erased
    /// Stopping cut a POST short: no attempt, the item is as it was.
    case aborted
    /// A dead letter could not be written: the ledger let the item go unanswered (it comes
    /// back), and no further POST of it was made.
    case released
}

/// The source's side of a delivery: how it records what the engine decides for the item it
/// handed over. The journal follower writes files in `pending/` and `parked/`; the stream's
/// work consumer answers the message (acknowledge, hand back with a delay) and writes dead
/// letters. One ledger value serves one item.
package protocol DeliveryLedger {
    associatedtype Failure: Error
    /// Right before each POST (the stream extends what it holds).
    mutating func willPost() throws(Failure)
    /// These deliveries got a 2xx. In an item of several POSTs the item is not answered yet.
    mutating func delivered(_ deliveries: [OutboxDelivery]) throws(Failure)
    /// Writes dead letters; returns whether anything of the item is left to answer (false: the
    /// ledger let it go unanswered, so it comes back rather than being lost).
    mutating func park(_ deliveries: [OutboxDelivery], _ parking: Parking) throws(Failure) -> Bool
    /// Every POST of the item is done (2xx or parked): answer it.
    mutating func finished() throws(Failure)
    /// Try the whole item again after `retry.delayMillis`; `failed` are the deliveries of the
    /// POST that failed.
    mutating func handBack(_ failed: [OutboxDelivery], _ retry: HandBack) throws(Failure)
    /// Its subject was erased while a POST was out: drop the whole item unsent.
    mutating func erased() throws(Failure)
    /// Stopping cut a POST short: leave the item as it was (not an attempt).
    mutating func aborted() throws(Failure)
}

/// One item a source offers the engine: a delivery waiting in `pending/`, or the deliveries
/// of one stream message (an event of several POSTs, in their order). `Sendable` value.
package struct DeliveryItem: Sendable, Equatable {
    /// In the order of their POSTs; never empty. The first heads the item.
    package var deliveries: [OutboxDelivery]
    /// How often a work queue has handed the item out, this time included; `nil` for a
    /// source that counts attempts in the delivery itself.
    package var handOuts: UInt64?

    package init(deliveries: [OutboxDelivery], handOuts: UInt64? = nil) {
        self.deliveries = deliveries
        self.handOuts = handOuts
    }

    /// The first delivery: its user, target and age decide for the item.
    package var head: OutboxDelivery { deliveries[0] }
}

/// Where the engine's work comes from and how it is answered: the journal follower's
/// `pending/`, the stream's work consumer. A pass (``DeliveryEngine/pass(_:source:now:shouldStop:)``)
/// takes the source's items in order and tells it, per item, to hold it back, drop it, park it
/// unsent, or hands it to the POSTs with a ``DeliveryLedger`` from ``ledger(for:now:)``.
package protocol DeliverySource {
    associatedtype Ledger: DeliveryLedger
    /// Called before each item: an erasure added meanwhile may take items out of the pass.
    mutating func sweep()
    /// Whether item `index` still waits (false: a sweep took it since the pass began).
    func isWaiting(_ index: Int) -> Bool
    /// Not now: the item waits behind an earlier one of its user or a stop (`delayMillis`: how
    /// long, 0 for "another may take it at once"). Nothing about it changes.
    mutating func holdBack(_ index: Int, delayMillis: Int64) throws(Ledger.Failure)
    /// Its subject was erased: drop it unsent.
    mutating func dropErased(_ index: Int) throws(Ledger.Failure)
    /// Park it unsent (too old, out of attempts); returns what to log.
    mutating func park(_ index: Int, _ parking: Parking, now: Int64) throws(Ledger.Failure) -> OutboxNotice
    /// What answers for the items `indices` (one batch, or one item of several POSTs).
    mutating func ledger(for indices: [Int], now: Int64) -> Ledger
}

/// The one delivery engine of the journal outbox (pushspoold), the fleet outbox (inbox
/// nodes) and the fleet's retry sender. A pass (``pass(_:source:now:shouldStop:)``) walks a
/// ``DeliverySource``'s items in order, keeping each user's order, and decides before any POST
/// (``triage(_:now:handOuts:)``: erased, stale, out of attempts, in backoff or behind a vendor's
/// hold) and how a user's reports share a POST (``mayJoin(_:batchOf:count:now:)``); for each
/// item sent it makes the POSTs and decides what each answer means (``deliver(_:now:into:)``:
/// delivered, parked with a reason, handed back with a backoff — a 429/503 `Retry-After`
/// honoured and held against the vendor — dropped because its subject was erased while the
/// POST was out, or aborted by a stop) and tells the source's ``DeliveryLedger``. The sources
/// own only where their state lives and how they answer, so both outboxes behave alike.
///
/// Mapping stays with ``EventMapper`` (shared too): a source hands the engine mapped
/// deliveries. An item is a list of POSTs made in order: a batch (one POST of several
/// deliveries of one user) or one event's several POSTs (Infobip's seen then MO; a Mindbox
/// open then its click, `transactionId` `<event>.1`). Such an event is answered once, after
/// its last POST: the first failure worth retrying hands the whole item back, and the repeat
/// carries the same ids (as after a crash mid-POST), so a source that can only answer an item
/// whole — a stream message — loses nothing and keeps no state for it on one node. The journal
/// offers each delivery of `pending/` as an item of its own (each file is already durable, and
/// the user's order keeps the event's POSTs in index order).
///
/// Not `Sendable`: owns the poster and the vendor holds; one thread uses it.
package final class DeliveryEngine {
    package let options: OutboxOptions
    package let erased: ErasedSubjects
    private let poster: any DeliveryPoster
    private let redactor: Redactor
    /// A vendor that answered 429 or 503 with `Retry-After` gets nothing before this time
    /// (epoch ms), from any user: the limit is the vendor's, not one user's.
    package private(set) var holds: [String: Int64] = [:]

    package init(options: OutboxOptions, poster: any DeliveryPoster, erased: ErasedSubjects = ErasedSubjects()) {
        self.options = options
        self.poster = poster
        self.erased = erased
        redactor = Redactor(secrets: [options.mindboxSecret?.value, options.infobipAppKey?.value].compactMap { $0 })
    }

    /// With a curl poster that `shouldStop` aborts mid-POST.
    package convenience init(options: OutboxOptions, erased: ErasedSubjects = ErasedSubjects(), shouldStop: @escaping @Sendable () -> Bool) {
        self.init(options: options, poster: HTTPPoster(options: options, shouldStop: shouldStop), erased: erased)
    }

    /// Until when (epoch ms) `target`'s vendor asked to be left alone; `nil` when it did not
    /// or that time passed.
    package func heldUntil(_ target: OutboxTarget, now: Int64) -> Int64? {
        guard let until = holds[target.vendor], until > now else { return nil }
        return until
    }

    /// One pass over `items` (the source's, in its order) at `now()`: each is held back behind
    /// an earlier one of its user that waits or was handed back in this pass (a user's
    /// deliveries go out in order), dropped when erased, parked when stale or out of
    /// attempts, held back in its backoff or behind its vendor's `Retry-After`, else sent —
    /// a single delivery together with its user's following ones the vendor takes in one POST
    /// (``mayJoin(_:batchOf:count:now:)``), an item of several POSTs on its own. After a stop
    /// every item left is held back at once. Returns what to log.
    package func pass<Source: DeliverySource>(_ items: [DeliveryItem], source: inout Source, now: () -> Int64,
                                              shouldStop: () -> Bool) throws(Source.Ledger.Failure) -> [OutboxNotice] {
        var notices: [OutboxNotice] = []
        /// Users held back for the rest of the pass, with the delay their next item waits.
        var held: [String: Int64] = [:]
        var done = Set<Int>()
        for index in items.indices where !done.contains(index) {
            source.sweep()
            guard source.isWaiting(index) else { continue }
            let now = now()
            let head = items[index].head
            if shouldStop() {
                // Not attempted: taken again at once (another node, or this one restarted).
                try source.holdBack(index, delayMillis: 0)
                continue
            }
            if let delay = held[head.orderKey], !erased.covers(head) {
                try source.holdBack(index, delayMillis: delay)
                continue
            }
            switch triage(head, now: now, handOuts: items[index].handOuts) {
            case .send: break
            case .erased:
                try source.dropErased(index)
                continue
            case .park(let parking):
                notices.append(try source.park(index, parking, now: now))
                continue
            case .wait(let until):
                held[head.orderKey] = until - now
                try source.holdBack(index, delayMillis: until - now)
                continue
            }
            var batch = [index]
            if items[index].deliveries.count == 1, head.target.batchable {
                for probe in items.indices[(index + 1)...] where !done.contains(probe) && source.isWaiting(probe) {
                    let next = items[probe]
                    guard next.head.orderKey == head.orderKey else { continue }
                    guard next.deliveries.count == 1, (next.handOuts ?? 0) <= UInt64(options.maxAttempts),
                          mayJoin(next.head, batchOf: head, count: batch.count, now: now) else { break }
                    batch.append(probe)
                }
            }
            done.formUnion(batch)
            let posts = batch.count == 1 ? items[index].deliveries.map { [$0] } : [batch.map { items[$0].head }]
            var ledger = source.ledger(for: batch, now: now)
            let (outcome, notice) = try deliver(posts, now: now, into: &ledger)
            if let notice { notices.append(notice) }
            switch outcome {
            case .finished, .erased, .released: break
            case .aborted: held[head.orderKey] = 0
            case .handedBack:
                if case .failed(_, _, _, _, let delay)? = notice { held[head.orderKey] = delay } else { held[head.orderKey] = 0 }
            }
        }
        return notices
    }

    /// What to do with the head of a source's item before any POST. `Sendable` value.
    package enum Triage: Sendable, Equatable {
        /// Due: send it (``deliver(_:now:into:)``).
        case send
        /// Its subject was erased: drop it unsent.
        case erased
        /// Park it unsent (too old; handed out more often than there are attempts).
        case park(Parking)
        /// Not before this time (epoch ms): its backoff, or its vendor's `Retry-After`.
        case wait(until: Int64)
    }

    /// Decides, in the same order for every source, what happens to `head` now: erased,
    /// stale (`MaxAgeSec=`), out of attempts (`handOuts`: how often a work queue has handed
    /// it out, this time included; `nil` for a source that counts attempts itself), in its
    /// backoff or behind its vendor's hold, else due.
    package func triage(_ head: OutboxDelivery, now: Int64, handOuts: UInt64? = nil) -> Triage {
        if erased.covers(head) { return .erased }
        if isStale(head, now: now) {
            return .park(Parking(reason: "max_age", status: 0, message: "older than [Outbox] MaxAgeSec=; not sent stale"))
        }
        if let handOuts, handOuts > UInt64(options.maxAttempts) {
            // The holder before did not answer on its last attempt (killed mid-POST). Parked,
            // not sent: the vendor saw enough.
            return .park(Parking(reason: "attempts", status: 0,
                                 message: "no answer after \(options.maxAttempts) attempts on the fleet's nodes"))
        }
        let until = max(head.notBeforeMillis, heldUntil(head.target, now: now) ?? 0)
        return until > now ? .wait(until: until) : .send
    }

    /// Whether `delivery` is older than `MaxAgeSec=` (counted from its ingest).
    package func isStale(_ delivery: OutboxDelivery, now: Int64) -> Bool {
        now - delivery.createdMillis > options.maxAge.clampedMilliseconds
    }

    /// Whether `next`, a later delivery of `head`'s user, may share `head`'s POST in a batch
    /// of `count` so far: a batchable target, the same target and device, due, not stale,
    /// within `BatchLimit`.
    package func mayJoin(_ next: OutboxDelivery, batchOf head: OutboxDelivery, count: Int, now: Int64) -> Bool {
        head.target.batchable && count < options.batchLimit && next.orderKey == head.orderKey && next.target == head.target
            && next.device == head.device && next.notBeforeMillis <= now && !isStale(next, now: now)
    }

    /// Makes the POSTs of one item in order (each inner array is one POST) and tells `ledger`
    /// what became of it; returns that and what to log (the last park or the failure).
    package func deliver<Ledger: DeliveryLedger>(_ posts: [[OutboxDelivery]], now: Int64,
                                                 into ledger: inout Ledger) throws(Ledger.Failure) -> (DeliveryOutcome, OutboxNotice?) {
        var notice: OutboxNotice?
        for batch in posts where !batch.isEmpty {
            let head = batch[0]
            guard let request = options.request(for: batch, now: now) else {
                // The vendor is not configured (or was unconfigured since queuing).
                let parking = Parking(reason: "unconfigured", status: 0, message: OutboxOptions.unconfiguredMessage(head))
                notice = Self.notice(head, parking)
                guard try ledger.park(batch, parking) else { return (.released, notice) }
                continue
            }
            try ledger.willPost()
            let response = poster.post(url: request.url, headers: request.headers, body: request.body)
            // Stopping: the vendor's answer is unknown, so this was no attempt.
            if response.aborted {
                try ledger.aborted()
                return (.aborted, notice)
            }
            if response.error == nil, (200..<300).contains(response.status) {
                try ledger.delivered(batch)
                continue
            }
            // Erased while the POST was out (a hung vendor): what failed is not handed back,
            // parked or tried again.
            if batch.contains(where: erased.covers) {
                try ledger.erased()
                return (.erased, notice)
            }
            // Redacted over the whole capture, then cut to the kept KiB (see `Redactor`).
            let snippet = redactor.clean(response.body, limit: HTTPPoster.bodyLimit)
            let errorText = response.error.map { redactor.clean($0) }
            let message = errorText ?? "HTTP \(response.status)"
            let retryable = response.error != nil || response.status == 0 || response.status == 429 || response.status >= 500
            let attempts = head.attempts + 1
            if !retryable || attempts >= options.maxAttempts {
                let parking = Parking(reason: retryable ? "attempts" : "http_\(response.status)", status: response.status,
                                      message: message, response: snippet, attempts: attempts)
                notice = Self.notice(head, parking)
                guard try ledger.park(batch, parking) else { return (.released, notice) }
                continue
            }
            var delay = options.backoffMillis(attempts: attempts)
            if let asked = options.retryAfterMillis(status: response.status, header: response.retryAfter, now: now) {
                // The vendor said when to come back: not sooner than that, not later than the ceiling.
                delay = max(delay, asked)
                holds[head.target.vendor] = now + delay
            }
            try ledger.handBack(batch, HandBack(attempts: attempts, delayMillis: delay, status: response.status, message: message,
                                         error: errorText, response: snippet))
            return (.handedBack, .failed(id: head.id, target: head.target.rawValue, status: response.status, message: message,
                                         retryInMillis: delay))
        }
        try ledger.finished()
        return (.finished, notice)
    }

    /// The notice for a park of a batch headed by `head`.
    package static func notice(_ head: OutboxDelivery, _ parking: Parking) -> OutboxNotice {
        .parked(id: head.id, target: head.target.rawValue, status: parking.status, reason: parking.reason, message: parking.message)
    }
}

extension Parking {
    package init(reason: String, status: Int, message: String) {
        self.init(reason: reason, status: status, message: message, response: nil, attempts: nil)
    }
}
