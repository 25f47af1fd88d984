@preconcurrency import Glibc
import PushSystem
internal import CNats

/// A core NATS subscriber that timestamps every message published on a subject, for the fleet
/// bench's split of drop-to-visible into its halves: a JetStream publish reaches core
/// subscribers of its subject as the server takes it in, before it is stored, replicated and
/// acknowledged, so the tap's clock says when host a's exporter sent the record.
///
/// Bench code: the shipped binaries never subscribe to their own export subjects.
/// `Sendable`: the callback box is immutable; libnats owns the connection and calls
/// `onMessage` on its delivery thread.
final class NatsTap: Sendable {
    private final class Box: Sendable {
        let onMessage: @Sendable (_ data: UnsafeRawBufferPointer, _ atMonotonicNanos: UInt64) -> Void
        init(_ onMessage: @escaping @Sendable (UnsafeRawBufferPointer, UInt64) -> Void) { self.onMessage = onMessage }
    }

    private nonisolated(unsafe) let connection: OpaquePointer
    private nonisolated(unsafe) let subscription: OpaquePointer

    init(url: String, subject: String, onMessage: @escaping @Sendable (UnsafeRawBufferPointer, UInt64) -> Void) throws(LiveStack.Failure) {
        var connection: OpaquePointer?
        var status = natsConnection_ConnectTo(&connection, url)
        guard status == NATS_OK, let connection else {
            throw LiveStack.Failure(description: "tap: cannot connect to \(url): \(String(cString: natsStatus_GetText(status)))")
        }
        let box = Unmanaged.passRetained(Box(onMessage))
        let handler: natsMsgHandler = { _, _, msg, closure in
            let at = Posix.monotonicNanos()
            defer { natsMsg_Destroy(msg) }
            guard let closure else { return }
            let length = Int(natsMsg_GetDataLength(msg))
            let data = natsMsg_GetData(msg).map { UnsafeRawBufferPointer(start: $0, count: length) } ?? UnsafeRawBufferPointer(start: nil, count: 0)
            Unmanaged<Box>.fromOpaque(closure).takeUnretainedValue().onMessage(data, at)
        }
        var subscription: OpaquePointer?
        status = natsConnection_Subscribe(&subscription, connection, subject, handler, box.toOpaque())
        guard status == NATS_OK, let subscription else {
            natsConnection_Destroy(connection)
            box.release()
            throw LiveStack.Failure(description: "tap: cannot subscribe to \(subject): \(String(cString: natsStatus_GetText(status)))")
        }
        // Lose nothing to the slow-consumer limit while a burst is counted.
        _ = natsSubscription_SetPendingLimits(subscription, -1, -1)
        status = natsConnection_Flush(connection)
        guard status == NATS_OK else {
            natsSubscription_Destroy(subscription)
            natsConnection_Destroy(connection)
            box.release()
            throw LiveStack.Failure(description: "tap: the subscription to \(subject) was not confirmed: \(String(cString: natsStatus_GetText(status)))")
        }
        self.connection = connection
        self.subscription = subscription
    }

    /// Ends the subscription and the connection. The callback box is kept to the process's
    /// end (one small object a tap): libnats may still be inside a callback as the connection
    /// closes.
    func stop() {
        natsSubscription_Unsubscribe(subscription)
        natsConnection_Close(connection)
        natsSubscription_Destroy(subscription)
        natsConnection_Destroy(connection)
    }
}
