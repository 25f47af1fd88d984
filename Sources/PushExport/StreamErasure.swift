@preconcurrency import Glibc
import PushJournal
import PushSystem
internal import CNats

/// What a scan-and-erase of the export stream did. `Sendable` value.
package struct StreamErasureReport: Sendable, Equatable {
    /// Messages read (the stream's live messages between its first and last seq).
    package var scanned = 0
    /// Messages the predicate chose and the server erased (one already gone is not counted).
    package var erased = 0

    package init() {}
}

extension NatsClient {
    /// Reads every message of `stream` up to its last seq at the start, through an ephemeral
    /// pull consumer (no acks, batches of `batch`), and erases each one `matches` chooses with
    /// js_EraseMsg(3): `$JS.API.STREAM.MSG.DELETE.<stream>` with `"no_erase": false`, so the
    /// server overwrites the message's bytes in its store instead of only marking them deleted.
    ///
    /// Subjects carry no user (`pushspool.{vendor}.{platform}`), so a purge by subject cannot
    /// select one person's messages; reading each body is the only way. A consumer delivers the
    /// bodies a batch per round trip (reading them one js_GetMsg(3) at a time cost a round trip
    /// each: minutes for a million messages); an erasure is still one round trip per erased
    /// message.
    ///
    /// Idempotent: a seq already deleted (by an earlier, interrupted run, or by the stream's
    /// limits in between) is never delivered, and one deleted between delivery and erasure is
    /// ignored. Messages stored after the scan started are not read: they came after the
    /// erasure was requested.
    package func eraseMessages(stream: String, batch: Int = 1024,
                               where matches: (StoredMessage) -> Bool) throws(ExportError) -> StreamErasureReport {
        guard let js else { throw ExportError(.connect, "not connected") }
        let (first, last, messages) = try streamBounds(stream)
        var report = StreamErasureReport()
        guard messages > 0, last >= first, last > 0 else { return report }
        // Uniquely named, so that two erasures at once each read the whole stream; deleted when
        // the scan ends, or by the server a minute after a crash.
        let scan = try NatsPullConsumer(client: self, stream: stream,
                                        config: PullConsumerConfig(name: .unique(prefix: "pushspool-erase-scan-"), ack: .none,
                                                                   inactiveThreshold: .seconds(60)))
        var code = jsErrCode(0)
        var reached = false
        while !reached {
            // The server answers a fetch at once while it has messages; a timeout therefore
            // means none is left below `last` (the rest were deleted meanwhile).
            let batchMessages = try scan.fetch(batch: batch, timeout: .seconds(5)) { msg, position in
                (seq: position.streamSeq, pending: position.pending, stored: NatsClient.stored(msg))
            }
            if batchMessages.isEmpty { break }
            for (seq, pending, stored) in batchMessages {
                if seq > last {
                    reached = true
                    break
                }
                report.scanned += 1
                if seq == last || pending == 0 { reached = true }
                guard matches(stored) else { continue }
                let erased = js_EraseMsg(js, stream, seq, nil, &code)
                if erased == NATS_NOT_FOUND { continue }
                guard erased == NATS_OK else {
                    throw ExportError(.stream, "erasing \(stream) seq \(seq): \(natsText(erased)) (JetStream error \(code.rawValue))",
                                      natsStatus: Int32(bitPattern: erased.rawValue))
                }
                report.erased += 1
            }
        }
        return report
    }
}

/// Which messages of the export stream belong to one user or device. Pure; `Sendable` value.
///
/// A message is the subject's when its body — the journal record the exporter publishes, or
/// the event record an inbox node on `[Inbox] Source=nats` publishes — is a JSON object whose
/// `user` (for a device: `device`) is the id; or, for a user, when its `Nats-Msg-Id`
/// (`<host id>:<key>`) carries a push key `vendor@N:<user>:id`, so that a body that does not
/// parse still goes when its id names the user. The body is read as the journal's erasure
/// reads a record (``PushJournal/ErasureScope/subject(inBody:)``).
package struct StreamSubjectMatcher: Sendable, Equatable {
    package typealias Scope = ErasureScope

    package var scope: Scope
    package var id: String

    package init(scope: Scope, id: String) {
        self.scope = scope
        self.id = id
    }

    package func matches(_ message: NatsClient.StoredMessage) -> Bool {
        matches(msgId: message.msgId, body: message.body)
    }

    package func matches(msgId: String, body: [UInt8]) -> Bool {
        if scope.subject(inBody: body) == id { return true }
        guard scope == .user, let colon = msgId.utf8.firstIndex(of: UInt8(ascii: ":")) else { return false }
        let key = msgId.utf8[msgId.utf8.index(after: colon)...]
        guard let at = key.firstIndex(of: UInt8(ascii: "@")), at > key.startIndex,
              key[key.startIndex..<at].allSatisfy({ $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z") }) else { return false }
        // The user as the exporter wrote it into the header (percent-encoded where needed);
        // the `:` after it keeps headerSafe's trailing-space rule from applying.
        let encoded = Array(ExportMessage.headerSafe(id + ":").utf8.dropLast())
        let expected = Array("@\(id.utf8.count):".utf8) + encoded + [UInt8(ascii: ":")]
        return key[at...].starts(with: expected)
    }
}
