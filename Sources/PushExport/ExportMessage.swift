import PushSystem
import PushPayload
import PushFollow
import PushJournal

/// The subject template of `[Export] Subject=`: dot-separated tokens where `{vendor}` and
/// `{platform}` are replaced per record. `Sendable` value; pure.
package struct SubjectTemplate: Sendable, Equatable {
    package let text: String

    /// `ExportSubjectRule.problem`: `nil` = valid, otherwise what is wrong.
    package static func validate(_ text: String) -> String? { ExportSubjectRule.problem(text) }

    package init?(_ text: String) {
        guard Self.validate(text) == nil else { return nil }
        self.text = text
    }

    package var usesPlatform: Bool { text.contains("{platform}") }

    /// The subject of one record. Values are reduced to `[A-Za-z0-9_-]` (others become `_`), so
    /// a vendor or platform can never add a token or a wildcard.
    package func subject(vendor: String, platform: String) -> String {
        text.replacing("{vendor}", with: Self.token(vendor))
            .replacing("{platform}", with: Self.token(platform))
    }

    /// The stream's subject filter: every placeholder token becomes `*`.
    package var streamSubject: String {
        text.split(separator: ".").map { $0.contains("{") ? "*" : String($0) }.joined(separator: ".")
    }

    static func token(_ value: String) -> String {
        if value.isEmpty { return "none" }
        return String(value.prefix(64).map { c -> Character in
            c.isASCII && (c.isLetter || c.isNumber || c == "_" || c == "-") ? c : "_"
        })
    }
}

/// One journal record as it goes to NATS. `Sendable` value; pure.
package struct ExportMessage: Sendable, Equatable {
    package var seq: UInt64
    package var subject: String
    /// `Nats-Msg-Id`: ``messageId(hostId:key:)`` — the same push exported twice (replay,
    /// crash) carries the same id and the server drops the second.
    package var msgId: String
    package var body: [UInt8]
    /// The record's ingest time (ms since the epoch), for a reader that builds what the
    /// journal's followers build from the record (the inbox index's fallback `ingested_at`).
    package var ingestMillis: Int64

    /// Header carrying the journal seq, so an ack can be matched and consumers can order.
    package static let seqHeader = "Pushspool-Seq"
    /// Header carrying ``ingestMillis`` as decimal digits.
    package static let ingestHeader = "Pushspool-Ingest-Millis"

    package init(record: JournalRecord, hostId: String, template: SubjectTemplate) {
        seq = record.seq
        ingestMillis = record.ingestMillis
        msgId = Self.messageId(hostId: hostId, key: record.key)
        body = record.body
        let vendor = DedupKey.parse(record.key)?.vendor ?? "unknown"
        // Decoded only for a subject that names the platform: otherwise the bytes go as they are.
        let platform = template.usesPlatform ? Self.platform(RecordBody(decoding: record.body)) : "none"
        subject = template.subject(vendor: vendor, platform: platform)
    }

    /// The `{platform}` of a record's subject: a push's platform, `event` for an event (or
    /// the platform an `nc.opened` names), `none` for anything else.
    static func platform(_ body: RecordBody) -> String {
        switch body {
        case .notification(let notification): notification["platform"]?.stringValue ?? "none"
        case .event(let event): event["platform"]?.stringValue ?? "event"
        // An event of a type this version does not know is still an event.
        case .undecodable(.unknownEventType), .undecodable(.eventWithoutType): "event"
        case .erasure, .tombstone, .undecodable: "none"
        }
    }

    /// `<host id>:<journal key>`, the key percent-encoded (``headerSafe(_:)``). The key is
    /// `vendor:id` (or `vendor@N:user:id` for a push to a user, `event:id` for an event).
    /// The daemon and `pushspoolctl export replay` both get ids from here, so a replay
    /// deduplicates against what the daemon sent. The host id is `[A-Za-z0-9._-]`, so the
    /// first `:` ends it.
    package static func messageId(hostId: String, key: String) -> String {
        hostId + ":" + headerSafe(key)
    }

    /// `key` with every byte outside printable ASCII, every `%`, and a space at the end
    /// written as `%XX` (upper-case hex); everything else as it is.
    ///
    /// Why: a header value is a C string to libnats, which turns CR and LF into spaces, and
    /// a NUL ends it, so keys differing only there (`"a\r\nX: 1"` and `"a  X: 1"`,
    /// `"z\0one"` and `"z\0two"`) got one message id and the stream dropped all but the
    /// first as duplicates while the exporter counted them acknowledged. Header readers such
    /// as Go's textproto trim trailing whitespace, so a final space is encoded too. Injective (the `%` of every
    /// escape is the only `%` in the output, so decoding gives back the key's bytes), and a
    /// key that was header-safe already (printable ASCII without `%`) keeps the id it had, so
    /// replaying records exported by earlier versions still deduplicates.
    package static func headerSafe(_ key: String) -> String {
        let bytes = key.utf8
        guard bytes.contains(where: { !isKeptAsIs($0) }) || bytes.last == UInt8(ascii: " ") else { return key }
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 3)
        for (index, byte) in bytes.enumerated() {
            if isKeptAsIs(byte), !(byte == UInt8(ascii: " ") && index == bytes.count - 1) {
                out.append(byte)
            } else {
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Printable ASCII (space through `~`) other than `%`.
    private static func isKeptAsIs(_ byte: UInt8) -> Bool {
        byte >= 0x20 && byte <= 0x7E && byte != UInt8(ascii: "%")
    }
}
