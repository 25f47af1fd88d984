@preconcurrency import Glibc
import PushSystem
internal import CNats

/// One message of a ``NatsWorkConsumer`` fetch. `Sendable` value.
package struct WorkMessage: Sendable, Equatable {
    package var streamSeq: UInt64
    /// How often the server has handed this message out, this time included (1 = first).
    package var deliveries: UInt64
    /// `Pushspool-Seq`: set on records an exporter took from a journal; `nil` on an event an
    /// inbox node published itself.
    package var journalSeq: UInt64?
    /// `Pushspool-Ingest-Millis`, else the time the stream stored the message.
    package var ingestMillis: Int64
    package var body: [UInt8]
    /// `Nats-Msg-Id`, empty when absent.
    package var msgId: String

    package init(streamSeq: UInt64, deliveries: UInt64, journalSeq: UInt64?, ingestMillis: Int64, body: [UInt8], msgId: String = "") {
        self.streamSeq = streamSeq
        self.deliveries = deliveries
        self.journalSeq = journalSeq
        self.ingestMillis = ingestMillis
        self.body = body
        self.msgId = msgId
    }
}

/// How a ``NatsWorkConsumer`` is set up on the server. `Sendable` value.
package struct WorkConsumerConfig: Sendable, Equatable {
    /// The durable name every worker binds to (`[A-Za-z0-9_-]`).
    package var name: String
    /// Only messages on this subject (wildcards allowed); empty = every message of the stream.
    package var filterSubject: String
    /// Unacknowledged this long (no ack, nak or in-progress) = handed to another worker.
    package var ackWait: Duration
    /// Handed out at most this often.
    package var maxDeliver: Int
    /// Messages out and unacknowledged at once, across every worker.
    package var maxAckPending: Int
    /// Where a consumer created now starts (epoch ms): messages stored before are not worked.
    package var startMillis: Int64

    package init(name: String, filterSubject: String, ackWait: Duration, maxDeliver: Int, maxAckPending: Int, startMillis: Int64) {
        self.name = name
        self.filterSubject = filterSubject
        self.ackWait = ackWait
        self.maxDeliver = maxDeliver
        self.maxAckPending = maxAckPending
        self.startMillis = startMillis
    }
}

/// A durable pull consumer shared by several workers (a work queue over the stream): the
/// server hands each message to one of them, and again — to any — when it is not
/// acknowledged within the ack wait or is refused with a delay. Each message is
/// acknowledged on its own (AckExplicit), when its work is done. Wraps js_AddConsumer(3),
/// js_UpdateConsumer(3), js_PullSubscribe(3), natsSubscription_Fetch(3), natsMsg_AckSync(3),
/// natsMsg_NakWithDelay(3), natsMsg_InProgress(3).
///
/// Unlike ``NatsPullConsumer`` it is never deleted and recreated: its delivery state is the
/// queue. It is created when missing (starting at `startMillis`); when it exists its ack
/// wait, deliveries and pending limit are set to this worker's (every worker should be
/// configured alike).
///
/// Not `Sendable`: owns the subscription and the fetched messages; one thread uses it.
package final class NatsWorkConsumer {
    package let stream: String
    package let config: WorkConsumerConfig
    private let client: NatsClient
    private let subscription: OpaquePointer
    /// Fetched messages not yet acknowledged, refused or released, by stream seq.
    private var held: [UInt64: OpaquePointer] = [:]

    package init(client: NatsClient, stream: String, config: WorkConsumerConfig) throws(ExportError) {
        self.client = client
        self.stream = stream
        self.config = config
        let nameC = strdup(config.name), filterC = strdup(config.filterSubject)
        defer {
            free(nameC)
            free(filterC)
        }
        try Self.ensure(client: client, stream: stream, config: config, nameC: nameC, filterC: filterC)
        subscription = try JetStreamPull.bind(js: client.js, stream: stream, consumer: config.name)
    }

    /// Creates the consumer, or brings an existing one's limits to `config` (two workers that
    /// start at once: the second's create fails, and it updates what the first made).
    private static func ensure(client: NatsClient, stream: String, config: WorkConsumerConfig,
                               nameC: UnsafeMutablePointer<CChar>?, filterC: UnsafeMutablePointer<CChar>?) throws(ExportError) {
        var failure: ExportError?
        for _ in 0..<3 {
            var info: UnsafeMutablePointer<jsConsumerInfo>?
            var code = jsErrCode(0)
            let lookup = js_GetConsumerInfo(&info, client.js, stream, config.name, nil, &code)
            if lookup == NATS_OK, let info, let existing = info.pointee.Config {
                defer { jsConsumerInfo_Destroy(info) }
                if existing.pointee.AckWait == config.ackWait.clampedNanoseconds, existing.pointee.MaxDeliver == Int64(config.maxDeliver),
                   existing.pointee.MaxAckPending == Int64(config.maxAckPending) { return }
                existing.pointee.AckWait = config.ackWait.clampedNanoseconds
                existing.pointee.MaxDeliver = Int64(max(1, config.maxDeliver))
                existing.pointee.MaxAckPending = Int64(max(1, config.maxAckPending))
                var updated: UnsafeMutablePointer<jsConsumerInfo>?
                let status = js_UpdateConsumer(&updated, client.js, stream, existing, nil, &code)
                guard status == NATS_OK else {
                    throw ExportError(.consume, "updating consumer \(config.name) of \(stream): \(natsText(status)) (JetStream error \(code.rawValue))",
                                      natsStatus: Int32(bitPattern: status.rawValue))
                }
                jsConsumerInfo_Destroy(updated)
                return
            }
            guard lookup == NATS_NOT_FOUND else {
                throw ExportError(.consume, "looking up consumer \(config.name) of \(stream): \(natsText(lookup)) (JetStream error \(code.rawValue))",
                                  natsStatus: Int32(bitPattern: lookup.rawValue))
            }
            var settings = jsConsumerConfig()
            jsConsumerConfig_Init(&settings)
            settings.Durable = UnsafePointer(nameC)
            // Left unset when empty, so that the consumer takes every subject of the stream.
            if !config.filterSubject.isEmpty { settings.FilterSubject = UnsafePointer(filterC) }
            if config.startMillis > 0 {
                settings.DeliverPolicy = js_DeliverByStartTime
                // Nanoseconds since the epoch; past 2262 cannot be asked for.
                let (nanos, overflow) = config.startMillis.multipliedReportingOverflow(by: 1_000_000)
                settings.OptStartTime = overflow ? Int64.max : nanos
            } else {
                // A start at or before 1970 is the whole stream (the server refuses a zero start time).
                settings.DeliverPolicy = js_DeliverAll
            }
            settings.AckPolicy = js_AckExplicit
            settings.AckWait = config.ackWait.clampedNanoseconds
            settings.MaxDeliver = Int64(max(1, config.maxDeliver))
            settings.MaxAckPending = Int64(max(1, config.maxAckPending))
            var created: UnsafeMutablePointer<jsConsumerInfo>?
            let added = js_AddConsumer(&created, client.js, stream, &settings, nil, &code)
            if added == NATS_OK {
                jsConsumerInfo_Destroy(created)
                return
            }
            if added == NATS_NOT_FOUND {
                throw ExportError(.noStream, "creating consumer \(config.name): stream \(stream) not found", natsStatus: Int32(bitPattern: added.rawValue))
            }
            failure = ExportError(.consume, "creating consumer \(config.name) of \(stream): \(natsText(added)) (JetStream error \(code.rawValue))",
                                  natsStatus: Int32(bitPattern: added.rawValue))
            // Another worker may have created it between the lookup and the create: look again.
        }
        throw failure ?? ExportError(.consume, "consumer \(config.name) of \(stream) could neither be created nor found")
    }

    deinit {
        for message in held.values { natsMsg_Destroy(message) }
        // Destroy, not unsubscribe: the durable consumer stays on the server for every worker.
        natsSubscription_Destroy(subscription)
    }

    /// Up to `batch` messages, waiting up to `timeout` for the first (empty when none came).
    /// Each is held until ``acknowledge(_:)``, ``refuse(_:delay:)`` or ``release(_:)``.
    package func fetch(batch: Int, timeout: Duration) throws(ExportError) -> [WorkMessage] {
        var out: [WorkMessage] = []
        for msg in try JetStreamPull.fetch(subscription, batch: batch, timeout: timeout, consumer: config.name) {
            guard let fetched = FetchedMessage(msg) else {
                natsMsg_Destroy(msg)
                continue
            }
            out.append(WorkMessage(streamSeq: fetched.streamSeq, deliveries: fetched.deliveries, journalSeq: fetched.journalSeq,
                                   ingestMillis: fetched.ingestMillis, body: fetched.body, msgId: fetched.msgId))
            if let earlier = held.updateValue(msg, forKey: fetched.streamSeq) { natsMsg_Destroy(earlier) }
        }
        return out
    }

    /// The work on `seq` is done: the server forgets it. Waits for the server's confirmation:
    /// an ack lost on the way would hand the message to another worker after the ack wait,
    /// and its work would be done twice; a throw says that may happen.
    package func acknowledge(_ seq: UInt64) throws(ExportError) {
        guard let msg = held.removeValue(forKey: seq) else { return }
        defer { natsMsg_Destroy(msg) }
        var code = jsErrCode(0)
        let status = natsMsg_AckSync(msg, nil, &code)
        guard status == NATS_OK else {
            throw ExportError(.consume, "acknowledging seq \(seq) to consumer \(config.name): \(natsText(status))",
                              natsStatus: Int32(bitPattern: status.rawValue))
        }
    }

    /// Not now: the server hands `seq` out again (to any worker) after `delay`.
    package func refuse(_ seq: UInt64, delay: Duration) throws(ExportError) {
        guard let msg = held.removeValue(forKey: seq) else { return }
        defer { natsMsg_Destroy(msg) }
        let status = delay <= .zero ? natsMsg_Nak(msg, nil) : natsMsg_NakWithDelay(msg, max(1, delay.clampedMilliseconds), nil)
        guard status == NATS_OK else {
            throw ExportError(.consume, "refusing seq \(seq) to consumer \(config.name): \(natsText(status))",
                              natsStatus: Int32(bitPattern: status.rawValue))
        }
    }

    /// Still working on `seq`: its ack wait starts again now.
    package func extend(_ seq: UInt64) throws(ExportError) {
        guard let msg = held[seq] else { return }
        let status = natsMsg_InProgress(msg, nil)
        guard status == NATS_OK else {
            throw ExportError(.consume, "extending seq \(seq) at consumer \(config.name): \(natsText(status))",
                              natsStatus: Int32(bitPattern: status.rawValue))
        }
    }

    /// Forgets `seq` without answering: the server hands it out again after the ack wait.
    package func release(_ seq: UInt64) {
        if let msg = held.removeValue(forKey: seq) { natsMsg_Destroy(msg) }
    }

    /// Stream seqs fetched and not yet answered.
    package var heldSeqs: [UInt64] { held.keys.sorted() }
}

extension NatsClient {
    /// The message at `seq` of `stream`; `nil` when the stream does not hold it (never did,
    /// deleted, or past its retention). Wraps js_GetMsg(3).
    package func message(_ stream: String, seq: UInt64) throws(ExportError) -> StoredMessage? {
        var msg: OpaquePointer?
        var code = jsErrCode(0)
        let status = js_GetMsg(&msg, js, stream, seq, nil, &code)
        if status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let msg else {
            throw ExportError(.stream, "reading \(stream) seq \(seq): \(natsText(status)) (JetStream error \(code.rawValue))",
                              natsStatus: Int32(bitPattern: status.rawValue))
        }
        defer { natsMsg_Destroy(msg) }
        return Self.stored(msg)
    }
}
