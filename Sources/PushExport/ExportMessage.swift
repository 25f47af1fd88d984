import PushSystem
import PushPayload
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
