@preconcurrency import Glibc
import PushSystem
internal import CNats

/// One message of the export stream as a ``NatsPullConsumer`` fetch hands it out. `Sendable` value.
package struct StreamRecord: Sendable, Equatable {
    /// The stream's own sequence: the order every reader of the stream agrees on.
    package var streamSeq: UInt64
    /// How often the server has handed this message out, this time included (1 = first).
    package var deliveries: UInt64
    /// `Pushspool-Seq`: the seq in the exporting host's journal, set on records an exporter
    /// took from a journal; `nil` on an event an inbox node published itself (or when not a
    /// number).
    package var journalSeq: UInt64?
    /// `Pushspool-Ingest-Millis`, else the time the stream stored the message.
    package var ingestMillis: Int64
    package var body: [UInt8]
    /// `Nats-Msg-Id` (empty when absent): `<host id>:<journal key>` from an exporter or a
    /// node publishing a record as an exporter would, `event:<id>` for an inbox node's event.
    package var msgId: String

    package init(streamSeq: UInt64, deliveries: UInt64, journalSeq: UInt64?, ingestMillis: Int64, body: [UInt8], msgId: String = "") {
        self.streamSeq = streamSeq
        self.deliveries = deliveries
        self.journalSeq = journalSeq
        self.ingestMillis = ingestMillis
        self.body = body
        self.msgId = msgId
    }

    /// A fetched message's metadata (`position`), the exporter's headers and the body.
    init(_ msg: OpaquePointer, at position: DeliveryPosition) {
        func header(_ key: String) -> String? {
            var value: UnsafePointer<CChar>?
            guard natsMsgHeader_Get(msg, key, &value) == NATS_OK, let value else { return nil }
            return String(cString: value)
        }
        let length = Int(max(0, natsMsg_GetDataLength(msg)))
        let body = natsMsg_GetData(msg).map { data in
            data.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
        } ?? []
        self.init(streamSeq: position.streamSeq, deliveries: position.deliveries,
                  journalSeq: header(ExportMessage.seqHeader).flatMap { UInt64($0) },
                  ingestMillis: header(ExportMessage.ingestHeader).flatMap { Int64($0) } ?? position.storedMillis,
                  body: body, msgId: header("Nats-Msg-Id") ?? "")
    }

    /// The journal key of an exported record (`Nats-Msg-Id` after its host id and `:`), as
    /// the exporter wrote it (header-safe; an `erasure:` key needs no escape); `nil` for an
    /// event an inbox node published (`event:<id>`) or a message without an id.
    package var exportedKey: String? {
        guard !msgId.hasPrefix("event:"), let colon = msgId.firstIndex(of: ":") else { return nil }
        return String(msgId[msgId.index(after: colon)...])
    }
}

/// Closes a ``NatsClient``'s connection from another thread, so that a fetch blocked in it
/// returns at once (a follower's stop). The owner calls ``disarm()`` before it destroys the
/// connection; after that ``interrupt()`` does nothing.
///
/// `Sendable`: the pointer (kept as its bit pattern) is only used under the lock.
package final class NatsInterrupt: Sendable {
    private let target = Locked<Int?>(nil)

    package init() {}

    func arm(_ connection: OpaquePointer?) { target.withLock { $0 = connection.map { Int(bitPattern: $0) } } }

    package func disarm() { target.withLock { $0 = nil } }

    /// Wraps natsConnection_Close(3), which libnats allows from any thread.
    package func interrupt() {
        target.withLock { bits in
            guard let bits, let connection = OpaquePointer(bitPattern: bits) else { return }
            natsConnection_Close(connection)
        }
    }
}

extension NatsClient {
    /// Lets `interrupt` close this connection from another thread until it is disarmed.
    package func arm(_ interrupt: NatsInterrupt) { interrupt.arm(connection) }
}

/// How a ``NatsPullConsumer`` is made on the server and how its messages are answered.
/// `Sendable` value.
package struct PullConsumerConfig: Sendable, Equatable {
    /// Whose the consumer is, and so how it is made and how long it lives.
    package enum Name: Sendable, Equatable {
        /// One reader's own (`[A-Za-z0-9_-]`, unique to that reader). One left by an earlier
        /// run is deleted and created anew; it stays on the server when the reader lets go
        /// (``NatsPullConsumer/delete()`` removes it).
        case durable(String)
        /// A one-off reader's: `prefix` and a random suffix. It is deleted when the reader lets
        /// go or cannot bind; should the process die first, the server drops it after
        /// ``PullConsumerConfig/inactiveThreshold``.
        case unique(prefix: String)
        /// A work queue's (`[A-Za-z0-9_-]`), the same for every worker: the server hands each
        /// message to one of them. Never deleted and recreated, since its delivery state is
        /// the queue: created when missing; when it exists, its ack wait, deliveries and
        /// pending limit are set to this worker's (every worker should be configured alike).
        /// Needs ``Ack/explicit(wait:maxDeliver:maxPending:)``: each worker answers only what
        /// it was handed.
        case shared(String)
    }

    /// How delivered messages are answered.
    package enum Ack: Sendable, Equatable {
        /// Never: the reader only reads, and a fetch holds nothing back.
        case none
        /// AckAll: ``NatsPullConsumer/acknowledgeFetched()`` acknowledges a fetch's last
        /// message and with it every earlier one. Unacknowledged after `wait` = delivered again;
        /// at most `maxPending` out and unacknowledged at once.
        case all(wait: Duration = .seconds(30), maxPending: Int = 10_000)
        /// AckExplicit: each message on its own, when its work is done
        /// (``NatsPullConsumer/acknowledge(_:)``, ``NatsPullConsumer/refuse(_:delay:)``,
        /// ``NatsPullConsumer/extend(_:)``, ``NatsPullConsumer/release(_:)``). Unanswered after
        /// `wait` (no ack, nak or in-progress) = handed out again, to any worker; handed out
        /// at most `maxDeliver` times; at most `maxPending` out and unacknowledged at once,
        /// across every worker.
        case explicit(wait: Duration, maxDeliver: Int, maxPending: Int)
    }

    /// Where a consumer created now starts.
    package enum Start: Sendable, Equatable {
        /// The stream's first message.
        case first
        /// This stream seq (at least 1).
        case seq(UInt64)
        /// The first message stored at or after this time (epoch ms): messages stored before
        /// are not read.
        case time(millis: Int64)
    }

    package var name: Name
    package var ack: Ack
    package var start: Start
    /// Only messages on this subject (wildcards allowed); empty = every message of the stream.
    package var filterSubject: String
    /// Unused this long, the consumer is dropped by the server; `nil`: never.
    package var inactiveThreshold: Duration?

    package init(name: Name, ack: Ack, start: Start = .first, filterSubject: String = "", inactiveThreshold: Duration? = nil) {
        self.name = name
        self.ack = ack
        self.start = start
        self.filterSubject = filterSubject
        self.inactiveThreshold = inactiveThreshold
    }
}

/// A pull consumer on the export stream, read in stream order, a batch a fetch, as
/// ``PullConsumerConfig`` says:
/// - a reader's durable consumer whose messages are acknowledged (AckAll) only when the
///   caller says their effect is durable (an inbox node's follower and its rebuild);
/// - a uniquely named one without acks that goes with its reader (the erasure's scan);
/// - one shared by several workers, a work queue over the stream (the fleet outbox's, the
///   fleet erasure's): the server hands each message to one of them, and again — to any —
///   when it is not acknowledged within the ack wait or is refused with a delay. Each message
///   is acknowledged on its own (AckExplicit), when its work is done.
///
/// Wraps js_GetConsumerInfo(3), js_DeleteConsumer(3), js_AddConsumer(3),
/// js_UpdateConsumer(3), js_PullSubscribe(3), natsSubscription_Fetch(3), natsMsg_Ack(3),
/// natsMsg_AckSync(3), natsMsg_NakWithDelay(3), natsMsg_InProgress(3).
///
/// A durable consumer is replaced at creation with one that starts at the caller's `start`:
/// the reader's own store, not the server, knows what was applied (a restored or rebuilt
/// index, an index that lost its newest transactions in a power cut), and a fresh consumer
/// delivers at once what an old one would hold back until its ack wait expired. A shared one
/// is never replaced: its `start` counts only when it is first made.
///
/// Each way of answering belongs to one ``PullConsumerConfig/Ack``: called on a consumer
/// whose messages are answered otherwise, it throws ``ExportError/Code/consume`` (a caller's
/// mistake; no input leads there).
///
/// Not `Sendable`: owns the subscription and the held messages; one thread uses it.
package final class NatsPullConsumer {
    package let stream: String
    /// The consumer's name on the server (for a unique one, its prefix and suffix).
    package let name: String
    package let config: PullConsumerConfig
    private let client: NatsClient
    private let subscription: OpaquePointer
    /// AckAll: the last message of the last fetch, held until ``acknowledgeFetched()``.
    private var last: OpaquePointer?
    /// AckExplicit: fetched messages not yet acknowledged, refused or released, by stream seq.
    private var held: [UInt64: OpaquePointer] = [:]

    /// Makes the consumer on `stream` as its ``PullConsumerConfig/Name`` says (a durable one
    /// after deleting any of its name, a shared one only when missing) and binds to it.
    package init(client: NatsClient, stream: String, config: PullConsumerConfig) throws(ExportError) {
        self.client = client
        self.stream = stream
        self.config = config
        switch config.name {
        case .durable(let name):
            self.name = name
            let (deleted, code) = Self.deleteConsumer(client: client, stream: stream, name: name)
            guard deleted == NATS_OK || deleted == NATS_NOT_FOUND else {
                throw ExportError(.consume, "deleting consumer \(name) of \(stream): \(natsText(deleted)) (JetStream error \(code.rawValue))",
                                  natsStatus: Int32(bitPattern: deleted.rawValue))
            }
            try Self.create(client: client, stream: stream, name: name, config: config)
        case .unique(let prefix):
            var random = SystemRandomNumberGenerator()
            name = prefix + String(random.next() as UInt64, radix: 16)
            try Self.create(client: client, stream: stream, name: name, config: config)
        case .shared(let name):
            self.name = name
            guard case .explicit(let wait, let maxDeliver, let maxPending) = config.ack else {
                throw ExportError(.config, "consumer \(name) of \(stream) is shared by workers: its ack policy must be AckExplicit, not \(config.ack.policyName)")
            }
            try Self.ensure(client: client, stream: stream, name: name, config: config,
                            limits: (wait: wait, maxDeliver: maxDeliver, maxPending: maxPending))
        }
        do throws(ExportError) {
            subscription = try JetStreamPull.bind(js: client.js, stream: stream, consumer: name)
        } catch {
            // Nobody would bind to a unique consumer again.
            if config.name.isUnique { _ = Self.deleteConsumer(client: client, stream: stream, name: name) }
            throw error
        }
    }

    /// Adds the consumer as `config` says. Wraps js_AddConsumer(3).
    private static func create(client: NatsClient, stream: String, name: String, config: PullConsumerConfig) throws(ExportError) {
        let nameC = strdup(name), filterC = strdup(config.filterSubject)
        defer {
            free(nameC)
            free(filterC)
        }
        var settings = jsConsumerConfig()
        jsConsumerConfig_Init(&settings)
        settings.Durable = UnsafePointer(nameC)
        // Left unset when empty, so that the consumer takes every subject of the stream.
        if !config.filterSubject.isEmpty { settings.FilterSubject = UnsafePointer(filterC) }
        switch config.start {
        case .first:
            settings.DeliverPolicy = js_DeliverAll
        case .seq(let seq):
            settings.DeliverPolicy = js_DeliverByStartSequence
            settings.OptStartSeq = max(1, seq)
        case .time(let millis):
            if millis > 0 {
                settings.DeliverPolicy = js_DeliverByStartTime
                // Nanoseconds since the epoch; past 2262 cannot be asked for.
                let (nanos, overflow) = millis.multipliedReportingOverflow(by: 1_000_000)
                settings.OptStartTime = overflow ? Int64.max : nanos
            } else {
                // A start at or before 1970 is the whole stream (the server refuses a zero start time).
                settings.DeliverPolicy = js_DeliverAll
            }
        }
        switch config.ack {
        case .none:
            settings.AckPolicy = js_AckNone
        case .all(let wait, let maxPending):
            settings.AckPolicy = js_AckAll
            settings.AckWait = wait.clampedNanoseconds
            settings.MaxAckPending = Int64(max(1, maxPending))
        case .explicit(let wait, let maxDeliver, let maxPending):
            settings.AckPolicy = js_AckExplicit
            settings.AckWait = wait.clampedNanoseconds
            settings.MaxDeliver = Int64(max(1, maxDeliver))
            settings.MaxAckPending = Int64(max(1, maxPending))
        }
        if let inactive = config.inactiveThreshold { settings.InactiveThreshold = inactive.clampedNanoseconds }
        var info: UnsafeMutablePointer<jsConsumerInfo>?
        var code = jsErrCode(0)
        let added = js_AddConsumer(&info, client.js, stream, &settings, nil, &code)
        guard added == NATS_OK else {
            throw ExportError(added == NATS_NOT_FOUND ? .noStream : .consume,
                              "creating consumer \(name) of \(stream): \(natsText(added)) (JetStream error \(code.rawValue))",
                              natsStatus: Int32(bitPattern: added.rawValue))
        }
        jsConsumerInfo_Destroy(info)
    }

    /// A shared consumer: creates it, or brings an existing one's limits to `limits` (two
    /// workers that start at once: the second's create fails, and it updates what the first
    /// made). Wraps js_GetConsumerInfo(3), js_UpdateConsumer(3).
    private static func ensure(client: NatsClient, stream: String, name: String, config: PullConsumerConfig,
                               limits: (wait: Duration, maxDeliver: Int, maxPending: Int)) throws(ExportError) {
        var failure: ExportError?
        for _ in 0..<3 {
            var info: UnsafeMutablePointer<jsConsumerInfo>?
            var code = jsErrCode(0)
            let lookup = js_GetConsumerInfo(&info, client.js, stream, name, nil, &code)
            if lookup == NATS_OK, let info, let existing = info.pointee.Config {
                defer { jsConsumerInfo_Destroy(info) }
                if existing.pointee.AckWait == limits.wait.clampedNanoseconds, existing.pointee.MaxDeliver == Int64(limits.maxDeliver),
                   existing.pointee.MaxAckPending == Int64(limits.maxPending) { return }
                existing.pointee.AckWait = limits.wait.clampedNanoseconds
                existing.pointee.MaxDeliver = Int64(max(1, limits.maxDeliver))
                existing.pointee.MaxAckPending = Int64(max(1, limits.maxPending))
                var updated: UnsafeMutablePointer<jsConsumerInfo>?
                let status = js_UpdateConsumer(&updated, client.js, stream, existing, nil, &code)
                guard status == NATS_OK else {
                    throw ExportError(.consume, "updating consumer \(name) of \(stream): \(natsText(status)) (JetStream error \(code.rawValue))",
                                      natsStatus: Int32(bitPattern: status.rawValue))
                }
                jsConsumerInfo_Destroy(updated)
                return
            }
            guard lookup == NATS_NOT_FOUND else {
                throw ExportError(.consume, "looking up consumer \(name) of \(stream): \(natsText(lookup)) (JetStream error \(code.rawValue))",
                                  natsStatus: Int32(bitPattern: lookup.rawValue))
            }
            do throws(ExportError) {
                try create(client: client, stream: stream, name: name, config: config)
                return
            } catch where error.code == .noStream {
                throw error
            } catch {
                // Another worker may have created it between the lookup and the create: look again.
                failure = error
            }
        }
        throw failure ?? ExportError(.consume, "consumer \(name) of \(stream) could neither be created nor found")
    }

    /// Wraps js_DeleteConsumer(3).
    private static func deleteConsumer(client: NatsClient, stream: String, name: String) -> (natsStatus, jsErrCode) {
        var code = jsErrCode(0)
        let status = js_DeleteConsumer(client.js, stream, name, nil, &code)
        return (status, code)
    }

    deinit {
        if let last { natsMsg_Destroy(last) }
        for message in held.values { natsMsg_Destroy(message) }
        // Destroy, not unsubscribe: a durable or shared consumer stays on the server.
        natsSubscription_Destroy(subscription)
        if config.name.isUnique { delete() }
    }

    /// Up to `batch` messages in stream order, waiting up to `timeout` for the first (an empty
    /// array when none came). Returns early with what arrived once the server has no more.
    ///
    /// AckAll: the previous batch must have been acknowledged or given up (its held message is
    /// dropped: the server delivers it again after the ack wait, and the reader skips it).
    /// AckExplicit: each is held until ``acknowledge(_:)``, ``refuse(_:delay:)`` or
    /// ``release(_:)``.
    package func fetch(batch: Int, timeout: Duration) throws(ExportError) -> [StreamRecord] {
        try fetch(batch: batch, timeout: timeout) { msg, position in StreamRecord(msg, at: position) }
    }

    /// Like ``fetch(batch:timeout:)``, with each message as `read` makes it from the message
    /// and its metadata (`nil`: left out). A message without JetStream metadata (not from a
    /// consumer) is left out unread.
    func fetch<Value>(batch: Int, timeout: Duration, _ read: (OpaquePointer, DeliveryPosition) -> Value?) throws(ExportError) -> [Value] {
        if let last { natsMsg_Destroy(last) }
        last = nil
        let messages = try JetStreamPull.fetch(subscription, batch: batch, timeout: timeout, consumer: name)
        var values: [Value] = []
        values.reserveCapacity(messages.count)
        for (index, msg) in messages.enumerated() {
            let position = DeliveryPosition(msg)
            let value = position.flatMap { read(msg, $0) }
            if let value { values.append(value) }
            switch config.ack {
            case .none:
                natsMsg_Destroy(msg)
            case .all:
                // The last is kept for the ack, which covers every earlier one.
                if index == messages.count - 1 { last = msg } else { natsMsg_Destroy(msg) }
            case .explicit:
                // One the caller does not get, it cannot answer: the server hands it out again.
                guard let position, value != nil else {
                    natsMsg_Destroy(msg)
                    continue
                }
                if let earlier = held.updateValue(msg, forKey: position.streamSeq) { natsMsg_Destroy(earlier) }
            }
        }
        return values
    }

    /// AckAll: acknowledges the last fetched message and with it every earlier one. Call it
    /// once their effect is durable. A lost ack costs a redelivery, which the reader skips.
    package func acknowledgeFetched() throws(ExportError) {
        guard case .all = config.ack else { throw answeredOtherwise("acknowledgeFetched", needs: "AckAll") }
        guard let last else { return }
        self.last = nil
        defer { natsMsg_Destroy(last) }
        let status = natsMsg_Ack(last, nil)
        guard status == NATS_OK else {
            throw ExportError(.consume, "acknowledging to consumer \(name): \(natsText(status))", natsStatus: Int32(bitPattern: status.rawValue))
        }
    }

    /// AckExplicit: the work on `seq` is done: the server forgets it. Waits for the server's
    /// confirmation: an ack lost on the way would hand the message to another worker after the
    /// ack wait, and its work would be done twice; a throw says that may happen.
    package func acknowledge(_ seq: UInt64) throws(ExportError) {
        try requireExplicit("acknowledge")
        guard let msg = held.removeValue(forKey: seq) else { return }
        defer { natsMsg_Destroy(msg) }
        var code = jsErrCode(0)
        let status = natsMsg_AckSync(msg, nil, &code)
        guard status == NATS_OK else {
            throw ExportError(.consume, "acknowledging seq \(seq) to consumer \(name): \(natsText(status))",
                              natsStatus: Int32(bitPattern: status.rawValue))
        }
    }

    /// AckExplicit: not now: the server hands `seq` out again (to any worker) after `delay`.
    package func refuse(_ seq: UInt64, delay: Duration) throws(ExportError) {
        try requireExplicit("refuse")
        guard let msg = held.removeValue(forKey: seq) else { return }
        defer { natsMsg_Destroy(msg) }
        let status = delay <= .zero ? natsMsg_Nak(msg, nil) : natsMsg_NakWithDelay(msg, max(1, delay.clampedMilliseconds), nil)
        guard status == NATS_OK else {
            throw ExportError(.consume, "refusing seq \(seq) to consumer \(name): \(natsText(status))",
                              natsStatus: Int32(bitPattern: status.rawValue))
        }
    }

    /// AckExplicit: still working on `seq`: its ack wait starts again now.
    package func extend(_ seq: UInt64) throws(ExportError) {
        try requireExplicit("extend")
        guard let msg = held[seq] else { return }
        let status = natsMsg_InProgress(msg, nil)
        guard status == NATS_OK else {
            throw ExportError(.consume, "extending seq \(seq) at consumer \(name): \(natsText(status))",
                              natsStatus: Int32(bitPattern: status.rawValue))
        }
    }

    /// AckExplicit: forgets `seq` without answering: the server hands it out again after the
    /// ack wait.
    package func release(_ seq: UInt64) throws(ExportError) {
        try requireExplicit("release")
        if let msg = held.removeValue(forKey: seq) { natsMsg_Destroy(msg) }
    }

    /// Stream seqs fetched and not yet answered (AckExplicit; the other kinds hold none by seq).
    package var heldSeqs: [UInt64] { held.keys.sorted() }

    /// Removes the consumer from the server (a one-off reader such as a rebuild).
    package func delete() {
        _ = Self.deleteConsumer(client: client, stream: stream, name: name)
    }

    private func requireExplicit(_ call: String) throws(ExportError) {
        guard case .explicit = config.ack else { throw answeredOtherwise(call, needs: "AckExplicit") }
    }

    private func answeredOtherwise(_ call: String, needs policy: String) -> ExportError {
        ExportError(.consume, "\(call) on consumer \(name) of \(stream): its ack policy is \(config.ack.policyName), not \(policy)")
    }
}

extension PullConsumerConfig.Name {
    var isUnique: Bool {
        if case .unique = self { return true }
        return false
    }
}

extension PullConsumerConfig.Ack {
    /// JetStream's name for the policy, for messages.
    var policyName: String {
        switch self {
        case .none: "AckNone"
        case .all: "AckAll"
        case .explicit: "AckExplicit"
        }
    }
}

/// Binding to and fetching from a consumer that exists (a ``NatsPullConsumer``'s), with the
/// failures as ``ExportError/Code/consume`` carrying the `natsStatus`.
enum JetStreamPull {
    /// A pull subscription bound to `consumer` of `stream`; the caller destroys it
    /// (natsSubscription_Destroy(3), which leaves the consumer on the server). Wraps
    /// js_PullSubscribe(3).
    static func bind(js: OpaquePointer?, stream: String, consumer: String) throws(ExportError) -> OpaquePointer {
        let nameC = strdup(consumer), streamC = strdup(stream)
        defer {
            free(nameC)
            free(streamC)
        }
        var options = jsSubOptions()
        jsSubOptions_Init(&options)
        options.Stream = UnsafePointer(streamC)
        options.Consumer = UnsafePointer(nameC)
        var sub: OpaquePointer?
        var code = jsErrCode(0)
        let status = js_PullSubscribe(&sub, js, nil, consumer, nil, &options, &code)
        guard status == NATS_OK, let sub else {
            throw ExportError(.consume, "binding to consumer \(consumer) of \(stream): \(natsText(status)) (JetStream error \(code.rawValue))",
                              natsStatus: Int32(bitPattern: status.rawValue))
        }
        return sub
    }

    /// Up to `batch` messages, waiting up to `timeout` for the first (empty when none came);
    /// each is the caller's to destroy (natsMsg_Destroy(3)). Wraps natsSubscription_Fetch(3).
    static func fetch(_ subscription: OpaquePointer, batch: Int, timeout: Duration, consumer: String) throws(ExportError) -> [OpaquePointer] {
        var list = natsMsgList()
        var code = jsErrCode(0)
        let status = natsSubscription_Fetch(&list, subscription, Int32(clamping: max(1, batch)), max(1, timeout.clampedMilliseconds), &code)
        if status == NATS_TIMEOUT { return [] }
        guard status == NATS_OK else {
            throw ExportError(.consume, "fetching from consumer \(consumer): \(natsText(status))", natsStatus: Int32(bitPattern: status.rawValue))
        }
        var messages: [OpaquePointer] = []
        messages.reserveCapacity(Int(list.Count))
        for i in 0..<Int(list.Count) {
            guard let msg = list.Msgs[i] else { continue }
            messages.append(msg)
            list.Msgs[i] = nil  // the caller's now; natsMsgList_Destroy skips it
        }
        natsMsgList_Destroy(&list)
        return messages
    }
}

/// Where a delivered message stands in its stream and consumer, from its JetStream metadata
/// (natsMsg_GetMetaData(3)).
struct DeliveryPosition {
    var streamSeq: UInt64
    /// How often the server has handed it out, this time included.
    var deliveries: UInt64
    /// Messages the consumer still holds after this one.
    var pending: UInt64
    /// When the stream stored it.
    var storedMillis: Int64

    /// `nil` when the message has no JetStream metadata (not from a consumer).
    init?(_ msg: OpaquePointer) {
        var meta: UnsafeMutablePointer<jsMsgMetaData>?
        guard natsMsg_GetMetaData(&meta, msg) == NATS_OK, let meta else { return nil }
        defer { jsMsgMetaData_Destroy(meta) }
        streamSeq = meta.pointee.Sequence.Stream
        deliveries = meta.pointee.NumDelivered
        pending = meta.pointee.NumPending
        storedMillis = meta.pointee.Timestamp / 1_000_000
    }
}
