import PushJournal
import PushPayload
import PushSystem

/// What a journal record's body is, decoded once by ``init(decoding:)`` and handed on typed:
/// the followers switch over it (and over ``EventType``) without a `default:`, so a new kind
/// of record or a new event type is a compile error at every place that must handle it,
/// instead of a string nobody matched.
///
/// The members of a push and of an event stay JSON: each follower reads them with its own
/// tolerance of a hostile or old record (the index bounds numbers, the outbox wants an
/// `eventId`), and those rules stay where they are. What is decided here is the kind, the
/// event type and the erasure's fields.
///
/// `Sendable`: a value.
package enum RecordBody: Sendable, Equatable {
    /// A push (`"kind":"notification"`, or no `kind`: records journaled before kinds existed).
    case notification(NotificationBody)
    /// A Notification Center event of a known type (`"kind":"event"`).
    case event(EventBody)
    /// An erasure request as journaled (`"kind":"erasure"`), its fields checked.
    case erasure(ErasureBody)
    /// What an erasure left in place of a record (`"kind":"erased"`).
    case tombstone(TombstoneBody)
    /// A body nothing applies: not JSON, not an object, a kind or an event type this version
    /// does not know, an event or erasure with a required member missing. Every follower
    /// passes over such a record, as each always has; the reason is for logs and tests.
    case undecodable(UndecodableBody)

    /// The deepest JSON a body may nest: a push's `customPayload` is the producer's.
    package static let maxDepth = 64

    /// The one decoder of journal record bodies (also of the export stream's messages, which
    /// carry the same bodies).
    package init(decoding bytes: [UInt8]) {
        do { self.init(decoded: try JSONParser(maxDepth: Self.maxDepth).parse(bytes)) } catch {
            self = .undecodable(.notJSON(error.code.rawValue))
        }
    }

    /// The body a parsed JSON value is (``init(decoding:)`` after the parse).
    package init(decoded value: JSONValue) {
        guard case .object(let members) = value else {
            self = .undecodable(.notAnObject)
            return
        }
        switch members["kind"] {
        case nil, .string("notification")?:
            self = .notification(NotificationBody(members: members))
        case .string("event")?:
            guard case .string(let typeName)? = members["type"] else {
                self = .undecodable(.eventWithoutType)
                return
            }
            guard let type = EventType(rawValue: typeName) else {
                self = .undecodable(.unknownEventType(typeName))
                return
            }
            self = .event(EventBody(type: type, members: members))
        case .string("erasure")?:
            guard let erasure = ErasureBody(members) else {
                self = .undecodable(.malformedErasure)
                return
            }
            self = .erasure(erasure)
        case .string("erased")?:
            self = .tombstone(TombstoneBody(erasureID: Tombstone.erasureID(members: members) ?? ""))
        case .string(let kind)?:
            self = .undecodable(.unknownKind(kind))
        case let other?:
            self = .undecodable(.unknownKind(other.typeName))
        }
    }
}

/// A push record's members as the normaliser wrote them (``PushNotification/jsonValue()``).
///
/// `Sendable`: a value.
package struct NotificationBody: Sendable, Equatable {
    package var members: [String: JSONValue]

    package init(members: [String: JSONValue]) { self.members = members }

    package subscript(name: String) -> JSONValue? { members[name] }

    /// The members as one JSON object.
    package var json: JSONValue { .object(members) }
}

/// An event record: its type, decided once, and its members as journaled
/// (``PushEvent/recordBody(ingestMillis:sourceFile:envelopeSHA256:envelopeSize:)``).
///
/// `Sendable`: a value.
package struct EventBody: Sendable, Equatable {
    package var type: EventType
    package var members: [String: JSONValue]

    package init(type: EventType, members: [String: JSONValue]) {
        self.type = type
        self.members = members
    }

    package subscript(name: String) -> JSONValue? { members[name] }
}

/// An `erasure` record's fields: `{"kind":"erasure","erasureId":…,"scope":…,"subject":…}`.
/// That the record's key is `erasure:<erasureId>` is the reader's to check: a body alone
/// could be anyone's.
///
/// `Sendable`: a value.
package struct ErasureBody: Sendable, Equatable {
    /// 32 lower-case hex digits.
    package var erasureID: String
    package var scope: ErasureScope
    /// The subject's keyed hash: 64 lower-case hex digits.
    package var subject: String

    package init?(_ members: [String: JSONValue]) {
        guard let id = members["erasureId"]?.stringValue, ErasureRequest.isValidErasureId(id),
              let scope = members["scope"]?.stringValue.flatMap(ErasureScope.init(rawValue:)),
              let subject = members["subject"]?.stringValue, subject.utf8.count == 64,
              subject.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else { return nil }
        erasureID = id
        self.scope = scope
        self.subject = subject
    }
}

/// A tombstone's body: which erasure made it (empty when the frame was too short to say).
///
/// `Sendable`: a value.
package struct TombstoneBody: Sendable, Equatable {
    package var erasureID: String

    package init(erasureID: String) { self.erasureID = erasureID }
}

/// Why a body is ``RecordBody/undecodable(_:)``.
///
/// `Sendable`: a value.
package enum UndecodableBody: Sendable, Equatable, CustomStringConvertible {
    /// The JSON parser's reason code (`invalid_json`, `too_deep`, …).
    case notJSON(String)
    case notAnObject
    /// A `kind` this version does not know (or the JSON type of a `kind` that is no string).
    case unknownKind(String)
    /// `"kind":"event"` without a string `type`.
    case eventWithoutType
    /// An event type this version does not know (one from a newer writer).
    case unknownEventType(String)
    /// `"kind":"erasure"` whose id, scope or subject is missing or malformed.
    case malformedErasure

    package var description: String {
        switch self {
        case .notJSON(let code): "not JSON (\(code))"
        case .notAnObject: "not a JSON object"
        case .unknownKind(let kind): "unknown kind \(kind.prefix(40))"
        case .eventWithoutType: "an event without a type"
        case .unknownEventType(let type): "unknown event type \(type.prefix(40))"
        case .malformedErasure: "an erasure without a valid id, scope or subject"
        }
    }
}

/// A journal record as the follower runtime hands it to a follower: where it is (seq, ingest
/// time, key) and its body decoded once (``RecordBody``).
///
/// `Sendable`: a value.
package struct FollowedRecord: Sendable, Equatable {
    /// The record as read, its body bytes included (the exporter publishes them as they are).
    package var record: JournalRecord
    package var body: RecordBody

    package init(_ record: JournalRecord) {
        self.record = record
        body = RecordBody(decoding: record.body)
    }

    package var seq: UInt64 { record.seq }
    package var ingestMillis: Int64 { record.ingestMillis }
    package var key: String { record.key }
}

/// A ``JournalReader`` that hands out ``FollowedRecord``s: the runtime's one place where a
/// follower's records are read and decoded.
///
/// Not `Sendable`: the reader is, like ``JournalReader``, one follower's, on its thread.
package final class FollowedReader {
    package let journal: JournalReader

    package init(_ journal: JournalReader) { self.journal = journal }

    package convenience init(directory: String, fromSeq: UInt64 = 0) throws(JournalError) {
        self.init(try JournalReader(directory: directory, fromSeq: fromSeq))
    }

    /// ``JournalReader/announcedLastSeq``.
    package var announcedLastSeq: UInt64? {
        get { journal.announcedLastSeq }
        set { journal.announcedLastSeq = newValue }
    }

    package func seek(toSeq seq: UInt64) { journal.seek(toSeq: seq) }

    /// The next committed record, decoded; `nil` at the end of what is committed.
    package func next() throws(JournalError) -> FollowedRecord? {
        try journal.next().map(FollowedRecord.init)
    }
}
