@preconcurrency import Glibc
import PushOutboxStore
import PushSystem

/// Turns one journaled Notification Center event into the POSTs it causes. Pure: the item's
/// notification record comes from `lookup`, so the rules are testable without a journal.
///
/// `Sendable`: a plain value (the transliterator in `mindboxFields` locks internally).
package struct EventMapper: Sendable {
    /// Whether Mindbox / Infobip delivery is configured; an unconfigured vendor's events map
    /// to nothing (they are not queued to wait for a key that may never come).
    package var mindbox: Bool
    package var infobip: Bool
    /// How NCPushOpen's custom fields are made from the push (transliteration, date form).
    package var mindboxFields: MindboxFields

    package init(mindbox: Bool, infobip: Bool, mindboxFields: MindboxFields = MindboxFields(transliterator: nil)) {
        self.mindbox = mindbox
        self.infobip = infobip
        self.mindboxFields = mindboxFields
    }

    /// What one record maps to: its deliveries, and the fields that could not be normalised
    /// (for the journald event; the deliveries go out without them or with them as received).
    ///
    /// `Sendable`: a plain value.
    package struct Mapping: Sendable {
        package var deliveries: [OutboxDelivery] = []
        package var notices: [OutboxNotice] = []
    }

    /// The deliveries for the record at `seq`; empty for records that are not events or need
    /// no delivery. `lookup(seq)` returns a notification record's body JSON.
    package func deliveries(seq: UInt64, ingestMillis: Int64, body: [UInt8],
                            lookup: (UInt64) -> JSONValue?) -> [OutboxDelivery] {
        map(seq: seq, ingestMillis: ingestMillis, body: body, lookup: lookup).deliveries
    }

    /// ``deliveries(seq:ingestMillis:body:lookup:)`` with the notices about its fields.
    package func map(seq: UInt64, ingestMillis: Int64, body: [UInt8], lookup: (UInt64) -> JSONValue?) -> Mapping {
        guard let event = try? JSONParser(maxDepth: 64).parse(body), event["kind"]?.stringValue == "event",
              let type = event["type"]?.stringValue, let eventId = event["eventId"]?.stringValue else { return Mapping() }
        let user = event["user"]?.stringValue
        let device = event["device"]?.stringValue
        let orderKey: String
        if let user { orderKey = "u:" + user } else if let device { orderKey = "d:" + device } else { return Mapping() }
        let atMillis = event["at"]?.stringValue.flatMap(EventMapper.parseISO8601Millis) ?? ingestMillis

        func make(_ target: OutboxTarget, operation: String?, payload: JSONValue, index: Int, platform: String? = nil) -> OutboxDelivery {
            var delivery = OutboxDelivery(seq: seq, index: index, target: target, eventId: eventId, eventType: type, orderKey: orderKey,
                                          createdMillis: ingestMillis, atMillis: atMillis, operation: operation, device: device, payload: payload)
            delivery.platform = platform
            return delivery
        }

        switch type {
        case "nc.opened":
            guard mindbox else { return Mapping() }
            // The guide's NCOpen carries no data: `data: {}`. It names no push: the event's own
            // `platform` (the app's) picks the endpoint; without one only `MindboxEndpointId=` can.
            let platform = event["platform"]?.stringValue.flatMap { $0 == "ios" || $0 == "android" ? $0 : nil }
            return Mapping(deliveries: [make(.mindbox, operation: "mobileapp.NCOpen", payload: .object([:]), index: 0, platform: platform)])
        case "nc.open", "nc.action":
            guard let itemSeq = event["item"]?.numberLexeme.flatMap({ UInt64($0) }), itemSeq < seq,
                  let item = lookup(itemSeq), EventMapper.isNotification(item),
                  EventMapper.belongs(item, user: user, device: device) else { return Mapping() }
            let vendor = item["vendor"]?.stringValue
            if type == "nc.open" {
                if vendor == "mindbox", mindbox {
                    let (fields, problems) = mindboxFields.customFields(item["customPayload"])
                    let body: JSONValue = .object(["customerAction": .object(["customFields": .object(fields)])])
                    let delivery = make(.mindbox, operation: "mobileapp.NCPushOpen", payload: body, index: 0,
                                        platform: EventMapper.platform(item))
                    let notices = problems.map {
                        OutboxNotice.fieldProblem(id: delivery.id, target: delivery.target.rawValue, field: $0.field, reason: $0.reason,
                                                  message: $0.message)
                    }
                    return Mapping(deliveries: [delivery], notices: notices)
                }
                if vendor == "infobip", infobip, let messageId = item["id"]?.stringValue {
                    var seen = make(.infobipSeen, operation: nil, payload: .object(["messageId": .string(messageId)]), index: 0,
                                    platform: EventMapper.platform(item))
                    seen.device = EventMapper.registrationId(device: device, item: item)
                    return Mapping(deliveries: [seen])
                }
                return Mapping()
            }
            guard vendor == "infobip", infobip, let action = event["action"]?.stringValue,
                  let messageId = item["id"]?.stringValue else { return Mapping() }
            let registrationId = EventMapper.registrationId(device: device, item: item)
            return Mapping(deliveries: infobipActionReports(item: item, messageId: messageId, action: action, eventId: eventId) {
                var delivery = make($0, operation: nil, payload: $1, index: $2, platform: $3)
                delivery.device = registrationId
                return delivery
            })
        default:
            return Mapping()
        }
    }

    /// What the Infobip SDKs report when a category action of `item` is tapped: the message
    /// seen at once (iOS `NotificationsInteractionService.handleAnyMessage` → `setSeen`,
    /// Android `MobileInteractiveImpl.triggerSdkActionsFor` → `markAsSeen`), then, for an action
    /// with `moRequired`, an MO in the SDK's shape (iOS `MM_MOMessage` built in
    /// `handleAnyMessage`, Android `MobileInteractiveImpl.messageFor` → `MoMessageMapper.body`):
    /// `text` "<category> <action id>" (iOS writes `n/a` for a missing category, Android sends
    /// no MO without one: pushspool follows Android, as an action outside a category cannot be
    /// told from a Mindbox-style button), the push's own `customPayload`, its `bulkId`, and
    /// `initialMessageId`. The MO's `messageId` is the event id, so a repeated POST is the same
    /// MO; the SDK makes a new UUID per MO.
    func infobipActionReports(item: JSONValue, messageId: String, action: String, eventId: String,
                              make: (OutboxTarget, JSONValue, Int, String?) -> OutboxDelivery) -> [OutboxDelivery] {
        let platform = EventMapper.platform(item)
        var deliveries = [make(.infobipSeen, .object(["messageId": .string(messageId)]), 0, platform)]
        guard EventMapper.requiresMO(item, action: action), let category = item["category"]?.stringValue, !category.isEmpty else {
            return deliveries
        }
        var message: [String: JSONValue] = [
            "messageId": .string(eventId), "initialMessageId": .string(messageId), "text": .string(category + " " + action),
        ]
        if case .object(let custom)? = item["customPayload"] { message["customPayload"] = .object(custom) }
        if let bulkId = item["bulkId"]?.stringValue, !bulkId.isEmpty { message["bulkId"] = .string(bulkId) }
        deliveries.append(make(.infobipMO, .object(message), 1, platform))
        return deliveries
    }

    /// The Infobip push registration id an event's reports name (`pushregistrationid`, the MO's
    /// `from`): the device the event came from (its envelope's `device`, which an app using
    /// Infobip sets to its installation's push registration id), else the device the push was
    /// for. `nil` when neither names one; the MO is then parked (Infobip needs `from`).
    static func registrationId(device: String?, item: JSONValue) -> String? {
        if let device, !device.isEmpty { return device }
        if let pushDevice = item["device"]?.stringValue, !pushDevice.isEmpty { return pushDevice }
        return nil
    }

    /// The push's platform as detected at ingest (`ios`/`android`), which picks the Mindbox
    /// endpoint and Infobip's `platformType`; records without `platform` fall back to their
    /// format name.
    static func platform(_ item: JSONValue) -> String? {
        if let platform = item["platform"]?.stringValue, platform == "ios" || platform == "android" { return platform }
        guard let format = item["format"]?.stringValue else { return nil }
        if format.hasPrefix("mindbox-ios") { return "ios" }
        if format.hasPrefix("mindbox-android") || format == "infobip-android" { return "android" }
        if format == "infobip-ios" { return "ios" }
        return nil
    }

    static func isNotification(_ record: JSONValue) -> Bool {
        guard case .object = record else { return false }
        let kind = record["kind"]?.stringValue
        return kind == nil || kind == "notification"
    }

    /// User isolation: an event may only use an item of its own inbox, so one user cannot make
    /// the outbox report another user's push (or leak its name) by guessing a seq.
    static func belongs(_ item: JSONValue, user: String?, device: String?) -> Bool {
        let itemUser = item["user"]?.stringValue
        if let user { return itemUser == user }
        guard itemUser == nil, let device else { return false }
        return item["device"]?.stringValue == device
    }

    /// Whether the item's resolved category action (or button) `action` has `moRequired`.
    static func requiresMO(_ item: JSONValue, action: String) -> Bool {
        for list in [item["actions"]?.arrayValue ?? [], item["buttons"]?.arrayValue ?? []] {
            for entry in list where entry["id"]?.stringValue == action {
                if entry["options"]?.arrayValue?.contains(.string("moRequired")) == true { return true }
            }
        }
        return false
    }

    /// `2026-11-30T12:00:00Z` or with `.sss` fractions → epoch ms; `nil` for anything else.
    /// Every field is range-checked before it meets `Int32`.
    package static func parseISO8601Millis(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 40, bytes.last == UInt8(ascii: "Z") else { return nil }
        func number(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[from..<from + count] {
                guard byte >= 48 && byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        guard let year = number(0, 4), bytes[4] == 45, let month = number(5, 2), bytes[7] == 45, let day = number(8, 2),
              bytes[10] == 84, let hour = number(11, 2), bytes[13] == 58, let minute = number(14, 2), bytes[16] == 58,
              let second = number(17, 2), (1970...9999).contains(year), (1...12).contains(month), (1...31).contains(day),
              hour < 24, minute < 60, second <= 60 else { return nil }
        var millis = 0
        var index = 19
        if bytes[index] == 46 {
            index += 1
            var digits = 0
            while index < bytes.count - 1 {
                let byte = bytes[index]
                guard byte >= 48 && byte <= 57 else { return nil }
                if digits < 3 { millis = millis * 10 + Int(byte - 48) }
                digits += 1
                index += 1
            }
            guard digits > 0 else { return nil }
            for _ in digits..<max(digits, 3) { millis *= 10 }
        }
        guard index == bytes.count - 1 else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        return Int64(timegm(&parts)) * 1000 + Int64(millis)
    }
}
