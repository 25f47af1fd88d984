import PushFollow
import PushInbox
import PushJournal
import PushOutbox
import PushOutboxStore
import PushPayload
import PushSystem
import Testing
import TestSupport
@testable import PushInboxServer

/// Every event type is handled by each of the three followers that read events — the inbox
/// index, the outbox's mapper and the live stream's hub — as this table says. Their switches
/// over ``EventType`` have no `default:`, so a new type does not compile until each handles
/// it; this table makes the new type's outcome a decision too: a type without a row fails.
@Suite struct EventTypeCoverageTests {
    /// What the live stream sends for an event on item 1.
    enum StreamOutcome: Equatable {
        case item
        case refresh
        case nothing
    }

    /// The outcome per follower.
    struct Row {
        /// Whether applying the event changes the index (after `before` was applied).
        var index: Bool
        /// The POSTs the event causes on a Mindbox push and on an Infobip push (both vendors on).
        var mapperOnMindbox: [OutboxTarget]
        var mapperOnInfobip: [OutboxTarget]
        var stream: StreamOutcome
        /// Events applied first, so that the event has something to undo.
        var before: [EventType] = []
    }

    static let table: [EventType: Row] = [
        .seen: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [], stream: .item),
        .read: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [], stream: .item),
        .archive: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [], stream: .item),
        .readAll: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [], stream: .refresh),
        .archiveRead: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [], stream: .refresh, before: [.read]),
        .opened: Row(index: false, mapperOnMindbox: [.mindbox], mapperOnInfobip: [.mindbox], stream: .nothing),
        .open: Row(index: true, mapperOnMindbox: [.mindbox], mapperOnInfobip: [.infobipSeen], stream: .item),
        .action: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [.infobipSeen, .infobipMO], stream: .item),
        .actionRevert: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [], stream: .item, before: [.action]),
        .inAppShown: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [], stream: .item),
        .inAppOptOut: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [], stream: .nothing),
        .unread: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [], stream: .item, before: [.read]),
        .unarchive: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [], stream: .item, before: [.archive]),
        .delete: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [], stream: .item),
        .pin: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [], stream: .item),
        .unpin: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [], stream: .item, before: [.pin]),
        .preferences: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [], stream: .refresh),
        .snooze: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [], stream: .item),
        .unsnooze: Row(index: true, mapperOnMindbox: [], mapperOnInfobip: [], stream: .item, before: [.snooze]),
    ]

    static let ingestMillis: Int64 = 1_800_000_000_000

    /// The two pushes events name: seq 1 from Mindbox, seq 2 from Infobip, whose button
    /// `reply` asks for an MO report.
    static let pushes: [UInt64: JSONObject] = [
        1: ["kind": .string("notification"), "vendor": .string("mindbox"), "platform": .string("ios"), "format": .string("mindbox-ios-current"),
            "id": .string("m1"), "user": .string("alice"), "title": .string("Sale"), "category": .string("promo"),
            "buttons": .array([]), "customPayload": .object(["pushName": .string("sale")])],
        2: ["kind": .string("notification"), "vendor": .string("infobip"), "platform": .string("android"), "format": .string("infobip"),
            "id": .string("i1"), "user": .string("alice"), "title": .string("News"), "category": .string("promo"),
            "buttons": .array([.object(["id": .string("reply"), "options": .array([.string("moRequired")])])])],
    ]

    /// An event of `type` on `item` as the daemon journals it, with every member its type needs.
    static func event(_ type: EventType, item: UInt64, seq: UInt64) -> FollowedRecord {
        let members = type.requiredMembers
        var event = PushEvent(type: type, eventId: "ev-\(seq)", user: "alice", item: members.contains("item") ? item : nil,
                              action: members.contains("action") ? "reply" : nil, enabled: members.contains("enabled") ? false : nil)
        if members.contains("muted") { event.muted = ["promo": true] }
        if members.contains("until") { event.until = Timestamp.iso8601(millis: ingestMillis + 86_400_000) }
        let body = event.recordBody(ingestMillis: ingestMillis, sourceFile: nil, envelopeSHA256: "00", envelopeSize: 1)
        return FollowedRecord(JournalRecord(seq: seq, ingestMillis: ingestMillis, key: event.dedupKey, body: body, segment: "", offset: 0))
    }

    static func push(_ seq: UInt64) -> FollowedRecord {
        FollowedRecord(JournalRecord(seq: seq, ingestMillis: ingestMillis, key: "p\(seq)", body: JSONValue.object(pushes[seq]!).serialized(),
                                     segment: "", offset: 0))
    }

    @Test func everyEventTypeHasARow() {
        let missing = EventType.allCases.filter { Self.table[$0] == nil }
        #expect(missing.isEmpty, "event types without an entry: \(missing.map(\.rawValue))")
    }

    @Test(arguments: EventType.allCases)
    func theIndexHandlesIt(_ type: EventType) throws {
        let row = try #require(Self.table[type], "\(type.rawValue) has no entry")
        let temp = TempDir("coverage-\(type.rawValue)")
        let index = try InboxIndex(path: temp.appending("index.sqlite"), announce: false)
        var seq: UInt64 = 2
        try index.apply([Self.push(1), Self.push(2)])
        for earlier in row.before {
            seq += 1
            try index.apply([Self.event(earlier, item: 1, seq: seq)])
        }
        let state = { () throws -> [String] in try index.canonicalDump().filter { !$0.hasPrefix("meta|") } }
        let before = try state()
        try index.apply([Self.event(type, item: 1, seq: seq + 1)])
        #expect((try state() != before) == row.index, "\(type.rawValue): the index \(row.index ? "changed nothing" : "changed")")
    }

    @Test(arguments: EventType.allCases)
    func theMapperHandlesIt(_ type: EventType) throws {
        let row = try #require(Self.table[type], "\(type.rawValue) has no entry")
        let mapper = EventMapper(mindbox: true, infobip: true)
        let lookup: (UInt64) -> RecordBody? = { seq in Self.pushes[seq].map { RecordBody.notification(NotificationBody(members: $0)) } }
        let onMindbox = mapper.map(Self.event(type, item: 1, seq: 10), lookup: lookup).deliveries.map(\.target)
        let onInfobip = mapper.map(Self.event(type, item: 2, seq: 10), lookup: lookup).deliveries.map(\.target)
        #expect(onMindbox == row.mapperOnMindbox, "\(type.rawValue) on a Mindbox push")
        #expect(onInfobip == row.mapperOnInfobip, "\(type.rawValue) on an Infobip push")
    }

    @Test(arguments: EventType.allCases)
    func theStreamHandlesIt(_ type: EventType) throws {
        let row = try #require(Self.table[type], "\(type.rawValue) has no entry")
        let outcome: StreamOutcome = switch EventHub.change(Self.event(type, item: 1, seq: 10)) {
        case nil: .nothing
        case let change?: change.item == 1 ? .item : .refresh
        }
        #expect(outcome == row.stream, "\(type.rawValue)")
    }
}
