import PushSystem

/// The Notification Center events an app (through `pushspoolctl nc …`) reports about a user's
/// inbox. Raw values are the `type` members of event envelopes and event records; stable.
package enum EventType: String, Sendable, CaseIterable {
    /// An item was listed to the user (seen is not read).
    case seen = "nc.seen"
    /// An item was opened/read.
    case read = "nc.read"
    /// An item is hidden from the inbox.
    case archive = "nc.archive"
    /// Every item of the user/device is read.
    case readAll = "nc.read-all"
    /// Every read item of the user/device is archived.
    case archiveRead = "nc.archive-read"
    /// The Notification Center screen was opened (Mindbox `mobileapp.NCOpen`).
    case opened = "nc.opened"
    /// The user opened a push from the NC (read, Mindbox `mobileapp.NCPushOpen`, Infobip seen).
    case open = "nc.open"
    /// A button or category action; `text` for a text-input action. The item keeps the
    /// action chosen (and the text) until another action or its revert.
    case action = "nc.action"
    /// Undoes `action` on the item when it is the one the item keeps (a different or no
    /// action: nothing changes). Nothing goes to a vendor: the action's report stands.
    case actionRevert = "nc.action-revert"
    /// The in-app message of an item was presented.
    case inAppShown = "nc.inapp-shown"
    /// Per-user opt-out of in-app presentation (`enabled: false` opts out).
    case inAppOptOut = "nc.inapp-optout"
    /// A read item is unread again (seen stays as it was).
    case unread = "nc.unread"
    /// An archived item is back in the inbox.
    case unarchive = "nc.unarchive"
    /// The item leaves the user's inbox for good (the journal keeps the push); final.
    case delete = "nc.delete"
    /// The item is kept first in lists.
    case pin = "nc.pin"
    /// The item is listed by arrival again.
    case unpin = "nc.unpin"
    /// Per-user category preferences: `muted` maps categories to whether they are muted (a
    /// muted category is neither listed, counted nor presented in-app; its pushes come back
    /// when it is unmuted). Categories not named keep their setting.
    case preferences = "nc.preferences"
    /// The item is hidden until `until` (ISO-8601) and then comes back unread.
    case snooze = "nc.snooze"
    /// A snooze ends now: the item is back, unread.
    case unsnooze = "nc.unsnooze"

    /// The members this type requires besides `type` and `eventId`.
    package var requiredMembers: Set<String> {
        switch self {
        case .seen, .read, .archive, .open, .inAppShown, .unread, .unarchive, .delete, .pin, .unpin, .unsnooze: ["item"]
        case .snooze: ["item", "until"]
        case .readAll, .archiveRead, .opened: []
        case .action, .actionRevert: ["item", "action"]
        case .inAppOptOut: ["enabled"]
        case .preferences: ["muted"]
        }
    }

    /// Every member this type may carry (required ones, `text` for actions, `feed` for the
    /// bulk changes, `platform` for `nc.opened`, `at` for all).
    package var allowedMembers: Set<String> {
        var members = requiredMembers.union(["type", "eventId", "at"])
        if self == .action { members.insert("text") }
        if self == .readAll || self == .archiveRead { members.insert("feed") }
        if self == .opened { members.insert("platform") }
        return members
    }
}

/// The platform an `nc.opened` event names (`event.platform`). Raw values are stable.
package enum EventPlatform: String, Sendable, CaseIterable {
    case ios
    case android
}

/// Feed names (`[Feed NAME]`, `?feed=`, an event's `feed`): they appear in URLs, INI section
/// names and journald fields, so a small alphabet that needs no escaping anywhere.
package enum FeedName {
    package static let maxBytes = 64

    /// Why `name` is not a feed name, or `nil` when it is one.
    package static func problem(_ name: String) -> String? {
        guard !name.isEmpty, name.utf8.count <= maxBytes,
              name.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a) || $0 == 0x5f || $0 == 0x2d })
        else {
            return "a feed name is 1 to \(maxBytes) characters of A-Z a-z 0-9 _ -, got '\(name.utf8.count > 80 ? String(name.prefix(80)) + "…" : name)'"
        }
        return nil
    }
}

/// One Notification Center event from an event envelope
/// (`{"pushspool":1, "user", "device", "event":{…}}`), checked and typed.
///
/// The members a type does not carry are `nil`; ``EventParser`` guarantees that the required
/// ones (``EventType/requiredMembers``) are present and that at least one of `user` and
/// `device` is.
package struct PushEvent: Sendable, Equatable {
    package var type: EventType
    /// 1…``maxEventIdBytes`` characters of `[A-Za-z0-9._:-]`; stable across replays.
    package var eventId: String
    /// Whose inbox (envelope `user`); `nil` when the envelope names only a device.
    package var user: String?
    /// Envelope `device`: a shared-device inbox, or the device the event came from.
    package var device: String?
    /// The inbox item: a notification record's journal sequence number.
    package var item: UInt64?
    /// `nc.action`: the button or category action id.
    package var action: String?
    /// `nc.action`: what the user typed into a text-input action.
    package var text: String?
    /// `nc.inapp-optout`: `false` opts the user out of in-app presentation.
    package var enabled: Bool?
    /// `nc.read-all`, `nc.archive-read`: only the items of this feed (``FeedName``).
    package var feed: String?
    /// `nc.preferences`: category → muted, 1…``maxPreferences`` of them.
    package var muted: [String: Bool]?
    /// When it happened (ISO-8601), as the producer said; `nil` means at ingest.
    package var at: String?
    /// `nc.opened`: the platform of the app whose Notification Center was opened. The event
    /// names no push, so only this can pick the Mindbox endpoint when the configuration has
    /// one per platform (`MindboxEndpointIOS=` / `MindboxEndpointAndroid=`).
    package var platform: EventPlatform?
    /// `nc.snooze`: when the item comes back (ISO-8601). Writers check it is ahead of now and
    /// within ``maxSnoozeMillis`` (``snoozeProblem(until:now:)``); the index bounds it again.
    package var until: String?

    /// The longest snooze a writer accepts: 366 days.
    package static let maxSnoozeMillis: Int64 = 366 * 86_400_000

    /// Why `until` is not a snooze's end seen from `now` (epoch ms), or `nil` when it is one:
    /// an ISO-8601 date-time after `now` and at most ``maxSnoozeMillis`` ahead.
    package static func snoozeProblem(until: String, now: Int64) -> String? {
        guard let millis = ISO8601Check.millis(until) else {
            return "until must be an ISO-8601 date-time like 2026-11-30T12:00:00.000Z"
        }
        if millis <= now { return "until (\(until)) is not in the future; to bring an item back now, unsnooze it" }
        let (ahead, overflow) = millis.subtractingReportingOverflow(now)
        if overflow || ahead > maxSnoozeMillis { return "until (\(until)) is more than 366 days ahead" }
        return nil
    }

    package static let maxEventIdBytes = 128
    /// The largest `text` of a text-input action, in UTF-8 bytes.
    package static let maxTextBytes = 4096
    /// The largest `user`, `device` or `action`, in UTF-8 bytes (what a dedup key can hold).
    package static let maxNameBytes = 255
    /// The most categories one `nc.preferences` event names.
    package static let maxPreferences = 64

    package init(type: EventType, eventId: String, user: String? = nil, device: String? = nil, item: UInt64? = nil,
                 action: String? = nil, text: String? = nil, enabled: Bool? = nil, feed: String? = nil, at: String? = nil) {
        self.type = type
        self.eventId = eventId
        self.user = user
        self.device = device
        self.item = item
        self.action = action
        self.text = text
        self.enabled = enabled
        self.feed = feed
        self.at = at
    }

    /// The journal key: `event:<eventId>`, so a replayed event is journaled once.
    package var dedupKey: String { DedupKey.event(eventId) }

    /// The record body members: `kind` ("event"), `type`, `eventId`, and those of `user`,
    /// `device`, `item` (a JSON number), `action`, `text`, `enabled`, `at` that are present.
    /// The daemon adds `ingestedAt`, `sourceFile`, `sha256` and `size`.
    package func jsonValue() -> JSONValue {
        var o: JSONObject = [
            "kind": .string("event"),
            "type": .string(type.rawValue),
            "eventId": .string(eventId),
        ]
        if let user { o["user"] = .string(user) }
        if let device { o["device"] = .string(device) }
        if let item { o["item"] = .integer(item) }
        if let action { o["action"] = .string(action) }
        if let text { o["text"] = .string(text) }
        if let enabled { o["enabled"] = .bool(enabled) }
        if let feed { o["feed"] = .string(feed) }
        if let muted { o["muted"] = .object(JSONObject(muted.mapValues { JSONValue.bool($0) })) }
        if let at { o["at"] = .string(at) }
        if let until { o["until"] = .string(until) }
        if let platform { o["platform"] = .string(platform.rawValue) }
        return .object(o)
    }

    /// The record body the journal holds for this event, and the body an inbox node publishes
    /// to the export stream for it: ``jsonValue()`` plus `ingestedAt` (`ingestMillis` as
    /// ISO-8601), `sha256` and `size` of the envelope it came in, and `sourceFile` when it came
    /// through the spool (an event published straight to the stream had no file). One builder,
    /// so a record read back from the stream is applied exactly as the journal's would be.
    package func recordBody(ingestMillis: Int64, sourceFile: String?, envelopeSHA256: String, envelopeSize: Int) -> [UInt8] {
        var record = jsonValue().objectValue ?? [:]
        record["ingestedAt"] = .string(Timestamp.iso8601(millis: ingestMillis))
        if let sourceFile { record["sourceFile"] = .string(sourceFile) }
        record["sha256"] = .string(envelopeSHA256)
        record["size"] = .number(String(envelopeSize))
        return JSONValue.object(record).serialized()
    }

    /// The spool envelope that carries this event (what `pushspoolctl nc …` writes).
    package func envelope() -> JSONValue {
        var event = jsonValue().objectValue ?? [:]
        event["kind"] = nil
        event["user"] = nil
        event["device"] = nil
        var top: JSONObject = ["pushspool": .number("1"), "event": .object(event)]
        if let user { top["user"] = .string(user) }
        if let device { top["device"] = .string(device) }
        return .object(top)
    }

    /// Whether `id` is a valid event id: 1…128 characters of `[A-Za-z0-9._:-]`.
    package static func isValidEventId(_ id: String) -> Bool {
        let bytes = id.utf8
        guard !bytes.isEmpty, bytes.count <= maxEventIdBytes else { return false }
        return bytes.allSatisfy { b in
            (b >= UInt8(ascii: "a") && b <= UInt8(ascii: "z")) || (b >= UInt8(ascii: "A") && b <= UInt8(ascii: "Z"))
                || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9"))
                || b == UInt8(ascii: ".") || b == UInt8(ascii: "_") || b == UInt8(ascii: ":") || b == UInt8(ascii: "-")
        }
    }
}

/// Checks an event envelope's members strictly: an event changes a user's inbox and may be
/// sent on to a vendor, so a member that is misspelt, mistyped or out of range refuses the
/// whole event (`invalid_event`) instead of being ignored as a push's would be.
enum EventParser {
    /// Envelope members an event envelope may have.
    static let envelopeMembers: Set<String> = ["pushspool", "user", "device", "event"]

    /// `top` is an object with `"pushspool": 1` (checked by the caller) and an `event` member.
    static func parse(_ top: JSONObject) throws(PayloadRefusal) -> PushEvent {
        for key in top.keys.sorted() where !envelopeMembers.contains(key) {
            throw PayloadRefusal(.invalidEnvelope, "an event envelope has only \"pushspool\", \"user\", \"device\" and \"event\"; found \"\(key)\"", path: key)
        }
        let user = try envelopeName(top, "user")
        let device = try envelopeName(top, "device")
        guard case .object(let event)? = top["event"] else {
            throw invalid("envelope member \"event\" must be an object, found \(top["event"]?.typeName ?? "nothing")", "event")
        }
        guard case .string(let typeName)? = event["type"] else {
            throw invalid("event.type must be a string naming the event, found \(event["type"]?.typeName ?? "nothing")", "event.type")
        }
        guard let type = EventType(rawValue: typeName) else {
            throw invalid("unknown event type \"\(typeName)\"; known: \(EventType.allCases.map(\.rawValue).joined(separator: ", "))", "event.type")
        }
        guard case .string(let eventId)? = event["eventId"] else {
            throw invalid("event.eventId must be a string, found \(event["eventId"]?.typeName ?? "nothing")", "event.eventId")
        }
        guard PushEvent.isValidEventId(eventId) else {
            throw invalid("event.eventId must be 1-\(PushEvent.maxEventIdBytes) characters of A-Z a-z 0-9 . _ : -", "event.eventId")
        }
        for key in event.keys.sorted() where !type.allowedMembers.contains(key) {
            throw invalid("\(type.rawValue) has no member \"\(key)\"; it takes \(type.allowedMembers.sorted().joined(separator: ", "))", "event.\(key)")
        }
        for key in type.requiredMembers.sorted() where event[key] == nil || event[key] == .null {
            throw invalid("\(type.rawValue) needs event.\(key)", "event.\(key)")
        }
        if user == nil, device == nil {
            throw invalid("an event names whose inbox it is: the envelope needs a non-empty \"user\" or \"device\"", "user")
        }
        var parsed = PushEvent(type: type, eventId: eventId, user: user, device: device)
        parsed.item = try item(event["item"])
        parsed.action = try action(event["action"])
        parsed.text = try text(event["text"])
        switch event["enabled"] {
        case nil, .null?: break
        case .bool(let b)?: parsed.enabled = b
        case let other?: throw invalid("event.enabled must be true or false, found \(other.typeName)", "event.enabled")
        }
        switch event["muted"] {
        case nil, .null?: break
        case .object(let members)?:
            guard (1...PushEvent.maxPreferences).contains(members.count) else {
                throw invalid("event.muted names 1 to \(PushEvent.maxPreferences) categories, found \(members.count)", "event.muted")
            }
            var muted: [String: Bool] = [:]
            for (category, value) in members.sorted(by: { $0.key < $1.key }) {
                guard !category.isEmpty, category.utf8.count <= PushEvent.maxNameBytes else {
                    throw invalid("event.muted: a category is 1-\(PushEvent.maxNameBytes) bytes", "event.muted")
                }
                try ControlCharacters.check(category, "event.muted category", path: "event.muted")
                guard case .bool(let flag) = value else {
                    throw invalid("event.muted.\(category.prefix(40)) must be true (muted) or false, found \(value.typeName)", "event.muted")
                }
                muted[category] = flag
            }
            parsed.muted = muted
        case let other?: throw invalid("event.muted must be an object of category: true|false, found \(other.typeName)", "event.muted")
        }
        switch event["feed"] {
        case nil, .null?: break
        case .string(let feed)?:
            if let problem = FeedName.problem(feed) { throw invalid("event.feed: \(problem)", "event.feed") }
            parsed.feed = feed
        case let other?: throw invalid("event.feed must be a string naming a feed, found \(other.typeName)", "event.feed")
        }
        switch event["at"] {
        case nil, .null?: break
        case .string(let at)? where ISO8601Check.isValid(at): parsed.at = at
        case .string?: throw invalid("event.at must be an ISO-8601 date-time like 2026-11-30T12:00:00.000Z", "event.at")
        case let other?: throw invalid("event.at must be a string, found \(other.typeName)", "event.at")
        }
        switch event["platform"] {
        case nil, .null?: break
        case .string(let name)?:
            guard let platform = EventPlatform(rawValue: name) else {
                throw invalid("event.platform must be \"ios\" or \"android\", found \"\(name.prefix(40))\"", "event.platform")
            }
            parsed.platform = platform
        case let other?: throw invalid("event.platform must be a string, \"ios\" or \"android\", found \(other.typeName)", "event.platform")
        }
        switch event["until"] {
        case nil, .null?: break
        case .string(let until)? where ISO8601Check.millis(until) != nil: parsed.until = until
        case .string?: throw invalid("event.until must be an ISO-8601 date-time like 2026-11-30T12:00:00.000Z", "event.until")
        case let other?: throw invalid("event.until must be a string, found \(other.typeName)", "event.until")
        }
        return parsed
    }

    static func invalid(_ message: String, _ path: String) -> PayloadRefusal {
        PayloadRefusal(.invalidEvent, message, path: path)
    }

    /// `user`/`device`: a string (empty = absent, as for a push's `user`) of at most
    /// ``PushEvent/maxNameBytes`` bytes.
    static func envelopeName(_ top: JSONObject, _ key: String) throws(PayloadRefusal) -> String? {
        switch top[key] {
        case nil, .null?: return nil
        case .string(let s)?:
            if s.utf8.count > PushEvent.maxNameBytes {
                throw PayloadRefusal(.invalidEnvelope, "envelope member \"\(key)\" is \(s.utf8.count) bytes, over \(PushEvent.maxNameBytes)", path: key)
            }
            try ControlCharacters.check(s, "envelope member \"\(key)\"", path: key)
            return s.isEmpty ? nil : s
        case let other?:
            throw PayloadRefusal(.invalidEnvelope, "envelope member \"\(key)\" must be a string, found \(other.typeName)", path: key)
        }
    }

    /// A journal sequence number: a JSON integer written in plain decimal, 1…UInt64.max.
    /// No exponent, fraction, sign or string form: `UInt64(_:)` of the lexeme decides, which
    /// returns `nil` (never traps) for anything out of range.
    static func item(_ value: JSONValue?) throws(PayloadRefusal) -> UInt64? {
        switch value {
        case nil, .null?: return nil
        case .number(let lexeme)?:
            guard let first = lexeme.utf8.first, first != UInt8(ascii: "0"), let n = UInt64(lexeme), n > 0 else {
                throw invalid("event.item must be a positive integer up to \(UInt64.max) written without exponent or fraction, found \(lexeme.utf8.count > 40 ? String(lexeme.prefix(40)) + "…" : lexeme)", "event.item")
            }
            return n
        case let other?:
            throw invalid("event.item must be a number (the item's journal seq), found \(other.typeName)", "event.item")
        }
    }

    static func action(_ value: JSONValue?) throws(PayloadRefusal) -> String? {
        switch value {
        case nil, .null?: return nil
        case .string(let s)?:
            guard !s.isEmpty, s.utf8.count <= PushEvent.maxNameBytes else {
                throw invalid("event.action must be 1-\(PushEvent.maxNameBytes) bytes", "event.action")
            }
            return s
        case let other?: throw invalid("event.action must be a string, found \(other.typeName)", "event.action")
        }
    }

    static func text(_ value: JSONValue?) throws(PayloadRefusal) -> String? {
        switch value {
        case nil, .null?: return nil
        case .string(let s)?:
            guard s.utf8.count <= PushEvent.maxTextBytes else {
                throw invalid("event.text is \(s.utf8.count) bytes, over \(PushEvent.maxTextBytes)", "event.text")
            }
            return s
        case let other?: throw invalid("event.text must be a string, found \(other.typeName)", "event.text")
        }
    }
}

/// The ISO-8601 date-times pushspool accepts from producers: `YYYY-MM-DDTHH:MM:SS`, an
/// optional fraction of 1-9 digits, then `Z` or `±HH:MM`. Calendar-checked (no 2026-02-30).
package enum ISO8601Check {
    /// Epoch milliseconds of a valid date-time (``isValid(_:)``), `nil` for anything else.
    /// Years 0000-9999 only, so it never overflows.
    package static func millis(_ text: String) -> Int64? {
        guard isValid(text) else { return nil }
        let b = Array(text.utf8)
        func number(_ from: Int, _ count: Int) -> Int64 {
            var value: Int64 = 0
            for i in from..<(from + count) { value = value * 10 + Int64(b[i] - 0x30) }
            return value
        }
        var (year, month, day) = (number(0, 4), number(5, 2), number(8, 2))
        // Days from 1970-01-01 (H. Hinnant's days_from_civil).
        year -= month <= 2 ? 1 : 0
        let era = (year >= 0 ? year : year - 399) / 400
        let yearOfEra = year - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        var millis = ((days * 24 + number(11, 2)) * 60 + number(14, 2)) * 60_000 + number(17, 2) * 1000
        var i = 19
        if i < b.count, b[i] == 0x2e {
            i += 1
            var digits = 0
            var fraction: Int64 = 0
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
                if digits < 3 { fraction = fraction * 10 + Int64(b[i] - 0x30) }
                digits += 1
                i += 1
            }
            for _ in digits..<max(digits, 3) { fraction *= 10 }
            millis += fraction
        }
        if i < b.count, b[i] == 0x2b || b[i] == 0x2d {
            let offset = (number(i + 1, 2) * 60 + number(i + 4, 2)) * 60_000
            millis += b[i] == 0x2b ? -offset : offset
        }
        return millis
    }

    package static func isValid(_ text: String) -> Bool {
        let b = Array(text.utf8)
        func digits(_ at: Int, _ count: Int) -> Int? {
            guard at + count <= b.count else { return nil }
            var value = 0
            for i in at..<(at + count) {
                guard b[i] >= UInt8(ascii: "0"), b[i] <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int(b[i] - UInt8(ascii: "0"))
            }
            return value
        }
        func byte(_ at: Int, _ c: Unicode.Scalar) -> Bool { at < b.count && b[at] == UInt8(ascii: c) }
        guard let year = digits(0, 4), byte(4, "-"), let month = digits(5, 2), byte(7, "-"), let day = digits(8, 2),
              byte(10, "T"), let hour = digits(11, 2), byte(13, ":"), let minute = digits(14, 2), byte(16, ":"),
              let second = digits(17, 2) else { return false }
        let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        let monthDays = [31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        guard (1...12).contains(month), day >= 1, day <= monthDays[month - 1], hour < 24, minute < 60, second <= 60 else { return false }
        var i = 19
        if byte(i, ".") {
            i += 1
            let start = i
            while i < b.count, b[i] >= UInt8(ascii: "0"), b[i] <= UInt8(ascii: "9") { i += 1 }
            guard (1...9).contains(i - start) else { return false }
        }
        if byte(i, "Z") { return i + 1 == b.count }
        guard byte(i, "+") || byte(i, "-"), let offsetHours = digits(i + 1, 2), byte(i + 3, ":"), let offsetMinutes = digits(i + 4, 2) else { return false }
        return offsetHours < 24 && offsetMinutes < 60 && i + 6 == b.count
    }
}
