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

/// A durable pull consumer on the export stream, read in stream order: messages are fetched
/// in batches and acknowledged (AckAll: the last acknowledges every earlier one) only when the
/// caller says their effect is durable. Wraps js_AddConsumer(3), js_PullSubscribe(3),
/// natsSubscription_Fetch(3), natsMsg_Ack(3).
///
/// The consumer is replaced at creation with one that starts at the caller's `startSeq`:
/// the reader's own store, not the server, knows what was applied (a restored or rebuilt
/// index, an index that lost its newest transactions in a power cut), and a fresh consumer
/// delivers at once what an old one would hold back until its ack wait expired.
///
/// Not `Sendable`: owns the subscription and the held message; one thread uses it.
package final class NatsPullConsumer {
    package let stream: String
    package let name: String
    private let client: NatsClient
    private var subscription: OpaquePointer?
    /// The last message of the last fetch, held until ``acknowledgeFetched()``.
    private var held: OpaquePointer?

    /// Deletes consumer `name` of `stream` when it exists and creates it anew, delivering from
    /// stream seq `startSeq` (at least 1). `name`: `[A-Za-z0-9_-]`, unique to its reader.
    package init(client: NatsClient, stream: String, name: String, startSeq: UInt64,
                 ackWait: Duration = .seconds(30), maxAckPending: Int = 10_000) throws(ExportError) {
        self.client = client
        self.stream = stream
        self.name = name
        var code = jsErrCode(0)
        let deleted = js_DeleteConsumer(client.js, stream, name, nil, &code)
        guard deleted == NATS_OK || deleted == NATS_NOT_FOUND else {
            throw ExportError(.consume, "deleting consumer \(name) of \(stream): \(natsText(deleted)) (JetStream error \(code.rawValue))",
                              natsStatus: Int32(bitPattern: deleted.rawValue))
        }
        var config = jsConsumerConfig()
        jsConsumerConfig_Init(&config)
        let nameC = strdup(name), streamC = strdup(stream)
        defer {
            free(nameC)
            free(streamC)
        }
        config.Durable = UnsafePointer(nameC)
        config.DeliverPolicy = js_DeliverByStartSequence
        config.OptStartSeq = max(1, startSeq)
        config.AckPolicy = js_AckAll
        config.AckWait = ackWait.clampedNanoseconds
        config.MaxAckPending = Int64(max(1, maxAckPending))
        var info: UnsafeMutablePointer<jsConsumerInfo>?
        let added = js_AddConsumer(&info, client.js, stream, &config, nil, &code)
        guard added == NATS_OK else {
            throw ExportError(added == NATS_NOT_FOUND ? .noStream : .consume,
                              "creating consumer \(name) of \(stream): \(natsText(added)) (JetStream error \(code.rawValue))",
                              natsStatus: Int32(bitPattern: added.rawValue))
        }
        jsConsumerInfo_Destroy(info)
        var options = jsSubOptions()
        jsSubOptions_Init(&options)
        options.Stream = UnsafePointer(streamC)
        options.Consumer = UnsafePointer(nameC)
        var sub: OpaquePointer?
        let subscribed = js_PullSubscribe(&sub, client.js, nil, name, nil, &options, &code)
        guard subscribed == NATS_OK, let sub else {
            throw ExportError(.consume, "binding to consumer \(name) of \(stream): \(natsText(subscribed)) (JetStream error \(code.rawValue))",
                              natsStatus: Int32(bitPattern: subscribed.rawValue))
        }
        subscription = sub
    }

    deinit {
        if let held { natsMsg_Destroy(held) }
        // Destroy, not unsubscribe: the durable consumer stays on the server.
        if let subscription { natsSubscription_Destroy(subscription) }
    }

    /// Up to `batch` messages in stream order, waiting up to `timeout` for the first (an
    /// empty array when none came). Returns early with what arrived once the server has no
    /// more. The previous batch must have been acknowledged or given up (its held message is
    /// dropped: the server delivers it again after the ack wait, and the reader skips it).
    package func fetch(batch: Int, timeout: Duration) throws(ExportError) -> [StreamRecord] {
        if let held { natsMsg_Destroy(held) }
        held = nil
        var list = natsMsgList()
        var code = jsErrCode(0)
        let status = natsSubscription_Fetch(&list, subscription, Int32(clamping: max(1, batch)), max(1, timeout.clampedMilliseconds), &code)
        if status == NATS_TIMEOUT { return [] }
        guard status == NATS_OK else {
            throw ExportError(.consume, "fetching from consumer \(name): \(natsText(status))", natsStatus: Int32(bitPattern: status.rawValue))
        }
        var records: [StreamRecord] = []
        let count = Int(list.Count)
        records.reserveCapacity(count)
        for i in 0..<count {
            guard let msg = list.Msgs[i], let fetched = FetchedMessage(msg) else { continue }
            records.append(StreamRecord(streamSeq: fetched.streamSeq, journalSeq: fetched.journalSeq,
                                        ingestMillis: fetched.ingestMillis, body: fetched.body, msgId: fetched.msgId))
        }
        if count > 0, let last = list.Msgs[count - 1] {
            held = last
            list.Msgs[count - 1] = nil  // kept for the ack; natsMsgList_Destroy skips it
        }
        natsMsgList_Destroy(&list)
        return records
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
        var code = jsErrCode(0)
        _ = js_DeleteConsumer(client.js, stream, name, nil, &code)
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
        var meta: UnsafeMutablePointer<jsMsgMetaData>?
        guard natsMsg_GetMetaData(&meta, msg) == NATS_OK, let meta else { return nil }
        streamSeq = meta.pointee.Sequence.Stream
        deliveries = meta.pointee.NumDelivered
        let storedMillis = meta.pointee.Timestamp / 1_000_000
        jsMsgMetaData_Destroy(meta)
        func header(_ key: String) -> String? {
            var value: UnsafePointer<CChar>?
            guard natsMsgHeader_Get(msg, key, &value) == NATS_OK, let value else { return nil }
            return String(cString: value)
        }
        journalSeq = header(ExportMessage.seqHeader).flatMap { UInt64($0) }
        msgId = header("Nats-Msg-Id") ?? ""
        ingestMillis = header(ExportMessage.ingestHeader).flatMap { Int64($0) } ?? storedMillis
        let length = Int(max(0, natsMsg_GetDataLength(msg)))
        body = natsMsg_GetData(msg).map { data in
            data.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
        } ?? []
    }
}
