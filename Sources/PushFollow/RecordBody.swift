@preconcurrency import Glibc
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
    package var members: JSONObject

    package init(members: JSONObject) { self.members = members }

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
    package var members: JSONObject

    package init(type: EventType, members: JSONObject) {
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

    package init?(_ members: JSONObject) {
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

    /// `record` with a body decoded before (``DecodedRecords``): it must be `record.body`'s.
    package init(_ record: JournalRecord, body: RecordBody) {
        self.record = record
        self.body = body
    }

    package var seq: UInt64 { record.seq }
    package var ingestMillis: Int64 { record.ingestMillis }
    package var key: String { record.key }
}

/// The records the followers of one group decoded, by seq: the first follower to read a
/// record decodes it, the others (the inbox index, the outbox: each on its own runner, at its
/// own position) are handed the same ``FollowedRecord``. One per ``FollowerGroup``, on its
/// ``ProgressBoard``; every runner passes it to its follower's steps
/// (``FollowerContext/records``), and a ``FollowedReader`` made with it decodes through it.
///
/// A window, not a store: it keeps the `capacity` records (and `byteCapacity` body bytes)
/// decoded last, and a follower further behind than that decodes for itself (and does not
/// push the leaders' records out). A hit is checked against the bytes just read: an erasure
/// rewrites a record in place with a tombstone, and what was decoded before must not outlive
/// it. The decode runs under the lock, so that two followers reading one record at once
/// decode it once: the decode count is exactly the records read (``decodes``).
///
/// `Sendable`: the window is behind a lock.
package final class DecodedRecords: Sendable {
    private struct State {
        var bySeq: [UInt64: FollowedRecord] = [:]
        /// Seqs in the order they were kept, the oldest at `head`: the next to go.
        var order: [UInt64] = []
        var head = 0
        var bytes = 0
        var decodes: UInt64 = 0
        var hits: UInt64 = 0

        mutating func evictOldest() {
            let seq = order[head]
            head += 1
            if let gone = bySeq.removeValue(forKey: seq) { bytes -= gone.record.body.count }
            if head > 1024, head * 2 > order.count {
                order.removeFirst(head)
                head = 0
            }
        }
    }

    package let capacity: Int
    package let byteCapacity: Int
    private let state = Locked(State())

    /// - Parameters:
    ///   - capacity: records kept; 0 keeps none (every read decodes: a runner alone).
    ///   - byteCapacity: body bytes kept (the decoded values take a few times that).
    package init(capacity: Int = 2048, byteCapacity: Int = 8 << 20) {
        self.capacity = max(0, capacity)
        self.byteCapacity = max(0, byteCapacity)
    }

    /// Keeps nothing: each read decodes (a runner or a reader without a group).
    package static var unshared: DecodedRecords { DecodedRecords(capacity: 0, byteCapacity: 0) }

    /// Bodies decoded since start.
    package var decodes: UInt64 { state.withLock { $0.decodes } }
    /// Reads handed a body decoded before.
    package var hits: UInt64 { state.withLock { $0.hits } }
    /// Records kept now.
    package var count: Int { state.withLock { $0.bySeq.count } }

    /// `record` decoded: the body decoded before when the window holds this seq with the same
    /// key and bytes, else decoded now (and kept, unless it is older than all the window holds).
    package func decoded(_ record: JournalRecord) -> FollowedRecord {
        state.withLock { state in
            if let kept = state.bySeq[record.seq], kept.record.key == record.key, Self.same(kept.record.body, record.body) {
                state.hits += 1
                return FollowedRecord(record, body: kept.body)
            }
            let followed = FollowedRecord(record)
            state.decodes += 1
            guard capacity > 0, record.body.count <= byteCapacity else { return followed }
            if let replaced = state.bySeq[record.seq] {
                // Rewritten since (a tombstone): the seq keeps its place in the order.
                state.bySeq[record.seq] = followed
                state.bytes += record.body.count - replaced.record.body.count
            } else {
                let full = state.bySeq.count >= capacity || state.bytes + record.body.count > byteCapacity
                // A follower far behind the window decodes for itself: the window is the leaders'.
                if full, state.head < state.order.count, record.seq < state.order[state.head] { return followed }
                state.bySeq[record.seq] = followed
                state.order.append(record.seq)
                state.bytes += record.body.count
            }
            while state.bySeq.count > capacity || state.bytes > byteCapacity, state.head < state.order.count {
                state.evictOldest()
            }
            return followed
        }
    }

    private static func same(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return a.withUnsafeBytes { a in b.withUnsafeBytes { b in a.count == 0 || memcmp(a.baseAddress!, b.baseAddress!, a.count) == 0 } }
    }
}

/// A ``JournalReader`` that hands out ``FollowedRecord``s: the runtime's one place where a
/// follower's records are read and decoded, through the group's ``DecodedRecords``.
///
/// Not `Sendable`: the reader is, like ``JournalReader``, one follower's, on its thread.
package final class FollowedReader {
    package let journal: JournalReader
    package let records: DecodedRecords

    package init(_ journal: JournalReader, records: DecodedRecords = .unshared) {
        self.journal = journal
        self.records = records
    }

    package convenience init(directory: String, fromSeq: UInt64 = 0, records: DecodedRecords = .unshared) throws(JournalError) {
        self.init(try JournalReader(directory: directory, fromSeq: fromSeq), records: records)
    }

    /// ``JournalReader/announcedLastSeq``.
    package var announcedLastSeq: UInt64? {
        get { journal.announcedLastSeq }
        set { journal.announcedLastSeq = newValue }
    }

    package func seek(toSeq seq: UInt64) { journal.seek(toSeq: seq) }

    /// The next committed record, decoded (or handed over decoded); `nil` at the end of what
    /// is committed.
    package func next() throws(JournalError) -> FollowedRecord? {
        try journal.next().map(records.decoded)
    }
}
