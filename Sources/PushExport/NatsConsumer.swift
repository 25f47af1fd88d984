@preconcurrency import Glibc
import PushSystem
internal import CNats

/// One message of the export stream as a reader gets it back. `Sendable` value.
package struct StreamRecord: Sendable, Equatable {
    /// The stream's own sequence: the order every reader of the stream agrees on.
    package var streamSeq: UInt64
    /// `Pushspool-Seq`: the seq in the exporting host's journal (`nil` when absent or not a number).
    package var journalSeq: UInt64?
    /// `Pushspool-Ingest-Millis`, else the time the stream stored the message.
    package var ingestMillis: Int64
    package var body: [UInt8]
    /// `Nats-Msg-Id` (empty when absent): `<host id>:<journal key>` from an exporter or a
    /// node publishing a record as an exporter would, `event:<id>` for an inbox node's event.
    package var msgId: String

    package init(streamSeq: UInt64, journalSeq: UInt64?, ingestMillis: Int64, body: [UInt8], msgId: String = "") {
        self.streamSeq = streamSeq
        self.journalSeq = journalSeq
        self.ingestMillis = ingestMillis
        self.body = body
        self.msgId = msgId
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

/// How a ``NatsPullConsumer`` is made on the server. `Sendable` value.
package struct PullConsumerConfig: Sendable, Equatable {
    /// Whose the consumer is, and so how long it lives.
    package enum Name: Sendable, Equatable {
        /// One reader's own (`[A-Za-z0-9_-]`, unique to that reader). One left by an earlier
        /// run is deleted and created anew; it stays on the server when the reader lets go
        /// (``NatsPullConsumer/delete()`` removes it).
        case durable(String)
        /// A one-off reader's: `prefix` and a random suffix. It is deleted when the reader lets
        /// go or cannot bind; should the process die first, the server drops it after
        /// ``PullConsumerConfig/inactiveThreshold``.
        case unique(prefix: String)
    }

    /// How delivered messages are answered.
    package enum Ack: Sendable, Equatable {
        /// Never: the reader only reads, and a fetch holds nothing back.
        case none
        /// AckAll: ``NatsPullConsumer/acknowledgeFetched()`` acknowledges a fetch's last
        /// message and with it every earlier one. Unacknowledged after `wait` = delivered again;
        /// at most `maxPending` out and unacknowledged at once.
        case all(wait: Duration = .seconds(30), maxPending: Int = 10_000)
    }

    package var name: Name
    package var ack: Ack
    /// The first stream seq delivered (at least 1); `nil`: the stream's first message.
    package var startSeq: UInt64?
    /// Unused this long, the consumer is dropped by the server; `nil`: never.
    package var inactiveThreshold: Duration?
    /// Messages one fetch asks for at most.
    package var batch: Int

    package init(name: Name, ack: Ack, startSeq: UInt64? = nil, inactiveThreshold: Duration? = nil, batch: Int) {
        self.name = name
        self.ack = ack
        self.startSeq = startSeq
        self.inactiveThreshold = inactiveThreshold
        self.batch = batch
    }
}

/// A pull consumer on the export stream, read in stream order, a batch a fetch, as
/// ``PullConsumerConfig`` says: a reader's durable consumer whose messages are acknowledged
/// (AckAll) only when the caller says their effect is durable (an inbox node's follower and
/// its rebuild), or a uniquely named one without acks that goes with its reader (the
/// erasure's scan). Wraps js_DeleteConsumer(3), js_AddConsumer(3), js_PullSubscribe(3),
/// natsSubscription_Fetch(3), natsMsg_Ack(3).
///
/// A durable consumer is replaced at creation with one that starts at the caller's `startSeq`:
/// the reader's own store, not the server, knows what was applied (a restored or rebuilt
/// index, an index that lost its newest transactions in a power cut), and a fresh consumer
/// delivers at once what an old one would hold back until its ack wait expired.
///
/// Not `Sendable`: owns the subscription and the held message; one thread uses it.
package final class NatsPullConsumer {
    package let stream: String
    /// The consumer's name on the server (for a unique one, its prefix and suffix).
    package let name: String
    package let config: PullConsumerConfig
    private let client: NatsClient
    private let subscription: OpaquePointer
    /// The last message of the last fetch, held until ``acknowledgeFetched()``.
    private var held: OpaquePointer?

    /// Creates the consumer on `stream` (a durable one after deleting any of its name) and
    /// binds to it.
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
        case .unique(let prefix):
            var random = SystemRandomNumberGenerator()
            name = prefix + String(random.next() as UInt64, radix: 16)
        }
        try Self.create(client: client, stream: stream, name: name, config: config)
        do throws(ExportError) {
            subscription = try JetStreamPull.bind(js: client.js, stream: stream, consumer: name)
        } catch {
            // Nobody would bind to a unique consumer again.
            if config.name.isUnique { _ = Self.deleteConsumer(client: client, stream: stream, name: name) }
            throw error
        }
    }

    private static func create(client: NatsClient, stream: String, name: String, config: PullConsumerConfig) throws(ExportError) {
        let nameC = strdup(name)
        defer { free(nameC) }
        var settings = jsConsumerConfig()
        jsConsumerConfig_Init(&settings)
        settings.Durable = UnsafePointer(nameC)
        if let startSeq = config.startSeq {
            settings.DeliverPolicy = js_DeliverByStartSequence
            settings.OptStartSeq = max(1, startSeq)
        } else {
            settings.DeliverPolicy = js_DeliverAll
        }
        switch config.ack {
        case .none:
            settings.AckPolicy = js_AckNone
        case .all(let wait, let maxPending):
            settings.AckPolicy = js_AckAll
            settings.AckWait = wait.clampedNanoseconds
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

    /// Wraps js_DeleteConsumer(3).
    private static func deleteConsumer(client: NatsClient, stream: String, name: String) -> (natsStatus, jsErrCode) {
        var code = jsErrCode(0)
        let status = js_DeleteConsumer(client.js, stream, name, nil, &code)
        return (status, code)
    }

    deinit {
        if let held { natsMsg_Destroy(held) }
        // Destroy, not unsubscribe: a durable consumer stays on the server.
        natsSubscription_Destroy(subscription)
        if config.name.isUnique { delete() }
    }

    /// Up to ``PullConsumerConfig/batch`` messages in stream order, waiting up to `timeout`
    /// for the first (an empty array when none came). Returns early with what arrived once the
    /// server has no more. The previous batch must have been acknowledged or given up (its
    /// held message is dropped: the server delivers it again after the ack wait, and the
    /// reader skips it).
    package func fetch(timeout: Duration) throws(ExportError) -> [StreamRecord] {
        try fetch(timeout: timeout) { msg in
            FetchedMessage(msg).map {
                StreamRecord(streamSeq: $0.streamSeq, journalSeq: $0.journalSeq, ingestMillis: $0.ingestMillis, body: $0.body, msgId: $0.msgId)
            }
        }
    }

    /// Like ``fetch(timeout:)``, with each message as `read` makes it (`nil`: left out).
    func fetch<Value>(timeout: Duration, _ read: (OpaquePointer) -> Value?) throws(ExportError) -> [Value] {
        if let held { natsMsg_Destroy(held) }
        held = nil
        var messages = try JetStreamPull.fetch(subscription, batch: config.batch, timeout: timeout, consumer: name)
        let values = messages.compactMap(read)
        if case .all = config.ack { held = messages.popLast() }  // kept for the ack
        for msg in messages { natsMsg_Destroy(msg) }
        return values
    }

    /// Acknowledges the last fetched message and with it every earlier one (AckAll). Call it
    /// once their effect is durable. A lost ack costs a redelivery, which the reader skips.
    package func acknowledgeFetched() throws(ExportError) {
        guard let held else { return }
        self.held = nil
        defer { natsMsg_Destroy(held) }
        let status = natsMsg_Ack(held, nil)
        guard status == NATS_OK else {
            throw ExportError(.consume, "acknowledging to consumer \(name): \(natsText(status))", natsStatus: Int32(bitPattern: status.rawValue))
        }
    }

    /// Removes the consumer from the server (a one-off reader such as a rebuild).
    package func delete() {
        _ = Self.deleteConsumer(client: client, stream: stream, name: name)
    }
}

extension PullConsumerConfig.Name {
    var isUnique: Bool {
        if case .unique = self { return true }
        return false
    }
}

/// Binding to and fetching from a consumer that exists, for both pull consumers (a reader's
/// ``NatsPullConsumer`` and the work queue's ``NatsWorkConsumer``), with their failures as
/// ``ExportError/Code/consume`` carrying the `natsStatus`.
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

/// What both consumers (an inbox node's and the fleet outbox's) read from a fetched message:
/// its metadata, the exporter's headers and the body.
struct FetchedMessage {
    var streamSeq: UInt64
    /// How often the server has handed it out, this time included.
    var deliveries: UInt64
    /// `Pushspool-Seq`, when an exporter took it from a journal.
    var journalSeq: UInt64?
    /// `Pushspool-Ingest-Millis`, else the time the stream stored it.
    var ingestMillis: Int64
    var body: [UInt8]
    /// `Nats-Msg-Id`, empty when absent.
    var msgId: String

    /// `nil` when the message has no JetStream metadata (not from a consumer).
    init?(_ msg: OpaquePointer) {
        guard let position = DeliveryPosition(msg) else { return nil }
        streamSeq = position.streamSeq
        deliveries = position.deliveries
        func header(_ key: String) -> String? {
            var value: UnsafePointer<CChar>?
            guard natsMsgHeader_Get(msg, key, &value) == NATS_OK, let value else { return nil }
            return String(cString: value)
        }
        journalSeq = header(ExportMessage.seqHeader).flatMap { UInt64($0) }
        msgId = header("Nats-Msg-Id") ?? ""
        ingestMillis = header(ExportMessage.ingestHeader).flatMap { Int64($0) } ?? position.storedMillis
        let length = Int(max(0, natsMsg_GetDataLength(msg)))
        body = natsMsg_GetData(msg).map { data in
            data.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
        } ?? []
    }
}
