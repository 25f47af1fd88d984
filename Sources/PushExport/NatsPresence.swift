@preconcurrency import Glibc
import PushSystem
internal import CNats

/// What answers another process's ``NatsClient/claimName(subject:answer:wait:)`` on the same
/// subject: the claimant's nonce (its own requests are not answered) and the text it answers.
/// `Sendable`: immutable; libnats' delivery thread reads it.
final class PresenceAnswer: Sendable {
    let nonce: [UInt8]
    let answer: [UInt8]

    init(nonce: [UInt8], answer: [UInt8]) {
        self.nonce = nonce
        self.answer = answer
    }
}

extension NatsClient {
    /// What ``claimName(subject:answer:wait:)`` found. `Sendable` value.
    package enum NameClaim: Sendable, Equatable {
        /// Nobody else answered: this connection now answers on the subject.
        case claimed
        /// Another live process answered on the subject, saying `answer`.
        case taken(answer: String)
    }

    /// Claims a name on core NATS (not JetStream) for as long as this connection lives: first
    /// subscribes to `subject` and answers every request there with `answer` (a request
    /// carrying this claim's own nonce excepted), then asks on `subject` itself and waits up
    /// to `wait` for another process's answer. Subscribing before asking means that of two
    /// processes claiming at once at least one hears the other. A process that dies drops its
    /// subscription with its connection, so a restart after a crash claims at once. No
    /// permission to publish or subscribe on `subject` looks like nobody answering.
    /// Wraps natsConnection_Subscribe(3), natsConnection_Flush(3), natsConnection_Request(3).
    package func claimName(subject: String, answer: String, wait: Duration) throws(ExportError) -> NameClaim {
        guard let connection else { throw ExportError(.connect, "not connected") }
        var random = SystemRandomNumberGenerator()
        let nonceText = String(random.next() as UInt64, radix: 16) + String(random.next() as UInt64, radix: 16)
        let nonce = Array(nonceText.utf8)
        // Retained until libnats says the subscription delivers no more (its on-complete
        // callback, after the connection closed), then released there.
        let box = Unmanaged.passRetained(PresenceAnswer(nonce: nonce, answer: Array(answer.utf8))).toOpaque()
        let handler: natsMsgHandler = { nc, _, msg, closure in
            defer { natsMsg_Destroy(msg) }
            guard let closure, let reply = natsMsg_GetReply(msg) else { return }
            let presence = Unmanaged<PresenceAnswer>.fromOpaque(closure).takeUnretainedValue()
            let length = Int(natsMsg_GetDataLength(msg))
            if let data = natsMsg_GetData(msg), length == presence.nonce.count,
               presence.nonce.withUnsafeBytes({ $0.baseAddress.map { memcmp($0, data, length) == 0 } ?? false }) {
                return
            }
            _ = presence.answer.withUnsafeBytes {
                natsConnection_Publish(nc, reply, $0.baseAddress, Int32(clamping: $0.count))
            }
        }
        var subscription: OpaquePointer?
        var status = natsConnection_Subscribe(&subscription, connection, subject, handler, box)
        guard status == NATS_OK, let subscription else {
            Unmanaged<PresenceAnswer>.fromOpaque(box).release()
            throw ExportError(.consume, "subscribing to \(subject): \(natsText(status))", natsStatus: Int32(bitPattern: status.rawValue))
        }
        ownedSubscriptions.append(subscription)
        let complete: natsOnCompleteCB = { closure in
            if let closure { Unmanaged<PresenceAnswer>.fromOpaque(closure).release() }
        }
        // Should this fail, the answer stays allocated: one small object per connection.
        _ = natsSubscription_SetOnCompleteCB(subscription, complete, box)
        status = natsConnection_FlushTimeout(connection, max(wait.clampedMilliseconds, 1))
        guard status == NATS_OK else {
            throw ExportError(.connect, "subscribing to \(subject): \(natsText(status))", natsStatus: Int32(bitPattern: status.rawValue))
        }
        var reply: OpaquePointer?
        status = nonce.withUnsafeBytes {
            natsConnection_Request(&reply, connection, subject, $0.baseAddress, Int32(clamping: $0.count), max(wait.clampedMilliseconds, 1))
        }
        defer { natsMsg_Destroy(reply) }
        switch status {
        case NATS_OK:
            guard let reply else { return .claimed }
            let length = Int(natsMsg_GetDataLength(reply))
            let text = natsMsg_GetData(reply).map { data in
                String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
            } ?? ""
            return .taken(answer: text)
        case NATS_TIMEOUT, NATS_NO_RESPONDERS:
            return .claimed
        default:
            throw ExportError(.connect, "asking on \(subject): \(natsText(status))", natsStatus: Int32(bitPattern: status.rawValue))
        }
    }
}
