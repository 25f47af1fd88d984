@preconcurrency import Glibc
import Testing
import PushExport
import PushSystem
import TestSupport
import TestTraits

/// The shared durable consumer the fleet outbox works from, against a real nats-server: each
/// message goes to one worker, comes back after a refusal's delay or an unanswered ack wait
/// (with its delivery count), not past `maxDeliver`, and a second worker with other limits
/// binds to the same consumer; an answer of another ack policy is refused.
@Suite(.serialized, .tags(.nats)) struct SharedPullConsumerTests {
    static func config(ackWait: Duration = .seconds(2), maxDeliver: Int = 3) -> PullConsumerConfig {
        PullConsumerConfig(name: .shared("work-test"), ack: .explicit(wait: ackWait, maxDeliver: maxDeliver, maxPending: 100),
                           filterSubject: "w.event")
    }

    /// Fetches until `count` messages came or `seconds` passed.
    static func fetch(_ consumer: NatsPullConsumer, count: Int, seconds: Double) throws -> [StreamRecord] {
        var out: [StreamRecord] = []
        let end = Posix.monotonicNanos() + UInt64(seconds * 1e9)
        while out.count < count, Posix.monotonicNanos() < end {
            out += try consumer.fetch(batch: count - out.count, timeout: .milliseconds(500))
        }
        return out
    }

    @Test func eachMessageGoesToOneWorkerAndComesBackUnlessAcknowledged() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let publisher = try NatsClient(urls: [server.url], name: "work-publisher")
        defer { publisher.close() }
        try publisher.ensureStream(name: "WORK", subjects: ["w.*"], replicas: 1, duplicateWindow: .seconds(60))
        // Not on the filter subject: never handed out.
        _ = try publisher.publish(subject: "w.other", msgId: "other", body: Array("x".utf8), headers: [])
        for i in 1...6 {
            let headers = i == 6 ? [(ExportMessage.seqHeader, "77")] : []
            _ = try publisher.publish(subject: "w.event", msgId: "m\(i)", body: Array("event \(i)".utf8), headers: headers)
        }

        let clientA = try NatsClient(urls: [server.url], name: "worker-a")
        defer { clientA.close() }
        let clientB = try NatsClient(urls: [server.url], name: "worker-b")
        defer { clientB.close() }
        let a = try NatsPullConsumer(client: clientA, stream: "WORK", config: Self.config())
        // Another worker with other limits binds to the same consumer (and updates it).
        let b = try NatsPullConsumer(client: clientB, stream: "WORK", config: Self.config(ackWait: .seconds(1), maxDeliver: 3))
        let first = try Self.fetch(a, count: 3, seconds: 10)
        let second = try Self.fetch(b, count: 3, seconds: 10)
        #expect(first.count == 3 && second.count == 3)
        #expect(Set(first.map(\.streamSeq)).isDisjoint(with: second.map(\.streamSeq)), "one worker per message")
        #expect(Set((first + second).map(\.streamSeq)) == Set(2...7), "the other subject is filtered out")
        #expect((first + second).allSatisfy { $0.deliveries == 1 })
        #expect((first + second).first { $0.streamSeq == 7 }?.journalSeq == 77)
        #expect((first + second).first { $0.streamSeq == 2 }?.journalSeq == nil)

        for message in first { try a.acknowledge(message.streamSeq) }
        let sorted = second.sorted { $0.streamSeq < $1.streamSeq }
        try b.refuse(sorted[0].streamSeq, delay: .milliseconds(200))
        try b.release(sorted[1].streamSeq)  // as a killed worker would: no answer
        try b.acknowledge(sorted[2].streamSeq)

        // Both come back, to whichever worker asks, the unanswered one after the ack wait.
        let again = try Self.fetch(a, count: 2, seconds: 15)
        #expect(Set(again.map(\.streamSeq)) == Set([sorted[0].streamSeq, sorted[1].streamSeq]))
        #expect(again.allSatisfy { $0.deliveries == 2 })
        // Refused once more each: the third hand-out is the last (maxDeliver 3).
        for message in again { try a.refuse(message.streamSeq, delay: .zero) }
        let third = try Self.fetch(a, count: 2, seconds: 10)
        #expect(third.map(\.deliveries) == [3, 3])
        for message in third { try a.refuse(message.streamSeq, delay: .zero) }
        #expect(try Self.fetch(a, count: 1, seconds: 3).isEmpty, "not handed out past maxDeliver")
        // Acknowledged ones never come back.
        #expect(try Self.fetch(b, count: 1, seconds: 3).isEmpty)

        // A message read back by seq, as the fleet outbox reads the item an event names.
        #expect(try clientA.message("WORK", seq: 2)?.body == Array("event 1".utf8))
        #expect(try clientA.message("WORK", seq: 99) == nil)

        // Each way of answering belongs to one ack policy: on a consumer of another it throws
        // and answers nothing; a shared consumer must answer each message on its own.
        func refused(_ call: () throws(ExportError) -> Void) -> ExportError.Code? {
            do throws(ExportError) { try call() } catch { return error.code }
            return nil
        }
        let reader = try NatsPullConsumer(client: clientA, stream: "WORK",
                                          config: PullConsumerConfig(name: .durable("kinds-reader"), ack: .all(), start: .seq(1)))
        #expect(try reader.fetch(batch: 2, timeout: .seconds(2)).map(\.streamSeq) == [1, 2])
        #expect(refused { () throws(ExportError) in try reader.acknowledge(1) } == .consume)
        #expect(refused { () throws(ExportError) in try reader.refuse(1, delay: .zero) } == .consume)
        #expect(refused { () throws(ExportError) in try reader.extend(1) } == .consume)
        #expect(refused { () throws(ExportError) in try reader.release(1) } == .consume)
        #expect(reader.heldSeqs.isEmpty)
        try reader.acknowledgeFetched()
        #expect(refused { () throws(ExportError) in try a.acknowledgeFetched() } == .consume)
        let sharedWithoutExplicit = PullConsumerConfig(name: .shared("kinds-shared"), ack: .all())
        #expect(refused { () throws(ExportError) in _ = try NatsPullConsumer(client: clientA, stream: "WORK", config: sharedWithoutExplicit) } == .config)
    }
}
