import PushSystem
import PushPayload
import PushJournal

/// The subject template of `[Export] Subject=`: dot-separated tokens where `{vendor}` and
/// `{platform}` are replaced per record. `Sendable` value; pure.
package struct SubjectTemplate: Sendable, Equatable {
    package let text: String

    /// Checks `text`: 1 to 200 bytes, dot-separated non-empty tokens of printable ASCII without
    /// `*`, `>` or whitespace (a wildcard cannot be published to), placeholders only as
    /// `{vendor}` and `{platform}`. The error message says what is wrong.
    package static func validate(_ text: String) -> String? {
        guard !text.isEmpty, text.utf8.count <= 200 else { return "must be 1 to 200 characters" }
        for token in text.split(separator: ".", omittingEmptySubsequences: false) {
            guard !token.isEmpty else { return "has an empty token (leading, trailing or double '.')" }
            guard token.allSatisfy({ $0.isASCII && $0 != "*" && $0 != ">" && ($0.asciiValue ?? 0) > 0x20 && ($0.asciiValue ?? 0) < 0x7f }) else {
                return "tokens must be printable ASCII without '*', '>' or spaces"
            }
            let stripped = token.replacing("{vendor}", with: "").replacing("{platform}", with: "")
            guard !stripped.contains("{"), !stripped.contains("}") else { return "only {vendor} and {platform} are placeholders" }
        }
        return nil
    }

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
    /// `Nats-Msg-Id`: `<host id>:<journal key>`, the key being `vendor:id` (or
    /// `vendor@N:user:id` for a push to a user, `event:id` for an event) — the same push
    /// exported twice (replay, crash) carries the same id and the server drops the second.
    package var msgId: String
    package var body: [UInt8]

    /// Header carrying the journal seq, so an ack can be matched and consumers can order.
    package static let seqHeader = "Pushspool-Seq"

    package init(record: JournalRecord, hostId: String, template: SubjectTemplate) {
        seq = record.seq
        msgId = hostId + ":" + record.key
        body = record.body
        let vendor = DedupKey.parse(record.key)?.vendor ?? "unknown"
        var platform = "none"
        if template.usesPlatform, let object = try? JSONParser().parse(record.body).objectValue {
            platform = object["platform"]?.stringValue ?? (object["kind"]?.stringValue == "event" ? "event" : "none")
        }
        subject = template.subject(vendor: vendor, platform: platform)
    }
}
