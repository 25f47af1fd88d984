@preconcurrency import Glibc
import PushFollow
import PushJournal
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
    /// What the Mindbox reports are made of: operation names, customer identifier, fields.
    package var mindboxReports: MindboxReports
    /// How NCPushOpen's custom fields are made from the push (transliteration, date form).
    package var mindboxFields: MindboxFields {
        get { mindboxReports.fields }
        set { mindboxReports.fields = newValue }
    }

    package init(mindbox: Bool, infobip: Bool, mindboxFields: MindboxFields = MindboxFields(transliterator: nil)) {
        self.init(mindbox: mindbox, infobip: infobip, mindboxReports: MindboxReports(fields: mindboxFields))
    }

    package init(mindbox: Bool, infobip: Bool, mindboxReports: MindboxReports) {
        self.mindbox = mindbox
        self.infobip = infobip
        self.mindboxReports = mindboxReports
    }

    /// The Mindbox side of `[Outbox]`: docs/vendor-rules.md, "Mindbox", states the rules.
    ///
    /// `Sendable`: a plain value (the transliterator locks internally).
    package struct MindboxReports: Sendable {
        package var fields: MindboxFields
        /// `MindboxOperationNCOpen=` / `MindboxOperationNCPushOpen=`: projects name their
        /// operations themselves; the guide's names are the defaults.
        package var ncOpenOperation = "mobileapp.NCOpen"
        package var ncPushOpenOperation = "mobileapp.NCPushOpen"
        /// `MindboxCustomerIdKey=`: the customer identifier the event's user is sent under
        /// (`customer.ids.<key>`); `nil` = no `customer` block.
        package var customerIdKey: String?
        /// `MindboxPushClicks=`: an open or a button action is also the SDK's push click.
        package var pushClicks = false
        /// Mindbox's own push-click operation, the one both SDKs send (iOS `Event.Operation.trackClick`,
        /// Android `EventType.PushClicked`); not a project's name, so not configurable.
        package static let trackClickOperation = "MobilePush.TrackClick"

        package init(fields: MindboxFields) {
            self.fields = fields
        }

        /// `customer: {ids: {<key>: <user>}}` for an event of `user`, as the SDK's
        /// `CustomerRequest.ids` encodes it (values are strings); `nil` without a key or user.
        func customer(user: String?) -> JSONValue? {
            guard let customerIdKey, let user else { return nil }
            return .object(["ids": .object([customerIdKey: .string(user)])])
        }

        /// The SDK's `TrackClick` body: the push's `uniqueKey` and, for a button, its `uniqueKey`
        /// (left out for the push itself, as both SDKs' encoders leave a nil out).
        static func click(push: String, button: String?) -> JSONValue {
            var body: JSONObject = ["messageUniqueKey": .string(push)]
            if let button { body["buttonUniqueKey"] = .string(button) }
            return .object(body)
        }
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
        let record = FollowedRecord(JournalRecord(seq: seq, ingestMillis: ingestMillis, key: "", body: body, segment: "", offset: 0))
        return map(record) { lookup($0).map(RecordBody.init(decoded:)) }
    }

    /// What one decoded record maps to. `lookup(seq)` returns the decoded body of the record
    /// at `seq` (the item an event names).
    package func map(_ record: FollowedRecord, lookup: (UInt64) -> RecordBody?) -> Mapping {
        switch record.body {
        case .event(let event):
            return map(event, seq: record.seq, ingestMillis: record.ingestMillis, lookup: lookup)
        // Only an app's event is reported to a vendor.
        case .notification, .erasure, .tombstone, .undecodable:
            return Mapping()
        }
    }

    private func map(_ event: EventBody, seq: UInt64, ingestMillis: Int64, lookup: (UInt64) -> RecordBody?) -> Mapping {
        guard let eventId = event["eventId"]?.stringValue else { return Mapping() }
        let type = event.type.rawValue
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

        switch event.type {
        case .opened:
            guard mindbox else { return Mapping() }
            // The guide's NCOpen carries no data: `data: {}`. It names no push: the event's own
            // `platform` (the app's) picks the endpoint; without one only `MindboxEndpointId=` can.
            let platform = event["platform"]?.stringValue.flatMap { $0 == "ios" || $0 == "android" ? $0 : nil }
            var body: JSONObject = [:]
            if let customer = mindboxReports.customer(user: user) { body["customer"] = customer }
            return Mapping(deliveries: [make(.mindbox, operation: mindboxReports.ncOpenOperation, payload: .object(body), index: 0,
                                             platform: platform)])
        case .open, .action:
            guard let itemSeq = event["item"]?.numberLexeme.flatMap({ UInt64($0) }), itemSeq < seq,
                  case .notification(let notification)? = lookup(itemSeq) else { return Mapping() }
            let item = notification.json
            guard EventMapper.belongs(item, user: user, device: device) else { return Mapping() }
            let vendor = item["vendor"]?.stringValue
            if event.type == .open {
                if vendor == "mindbox", mindbox {
                    let (fields, problems) = mindboxFields.customFields(item["customPayload"])
                    var body: JSONObject = ["customerAction": .object(["customFields": .object(fields)])]
                    if let customer = mindboxReports.customer(user: user) { body["customer"] = customer }
                    let platform = EventMapper.platform(item)
                    let delivery = make(.mindbox, operation: mindboxReports.ncPushOpenOperation, payload: .object(body), index: 0,
                                        platform: platform)
                    let notices = problems.map {
                        OutboxNotice.fieldProblem(id: delivery.id, target: delivery.target.rawValue, field: $0.field, reason: $0.reason,
                                                  message: $0.message)
                    }
                    var deliveries = [delivery]
                    // Opening the item is a tap on the push: the click the SDK reports for it.
                    if mindboxReports.pushClicks, let push = EventMapper.mindboxUniqueKey(item) {
                        deliveries.append(make(.mindbox, operation: MindboxReports.trackClickOperation,
                                               payload: MindboxReports.click(push: push, button: nil), index: 1, platform: platform))
                    }
                    return Mapping(deliveries: deliveries, notices: notices)
                }
                if vendor == "infobip", infobip, let messageId = item["id"]?.stringValue {
                    var seen = make(.infobipSeen, operation: nil, payload: .object(["messageId": .string(messageId)]), index: 0,
                                    platform: EventMapper.platform(item))
                    seen.device = EventMapper.registrationId(device: device, item: item)
                    return Mapping(deliveries: [seen])
                }
                return Mapping()
            }
            if vendor == "mindbox" {
                // A button tapped: the SDK's click with the button's own uniqueKey.
                guard mindbox, mindboxReports.pushClicks, let action = event["action"]?.stringValue, let push = EventMapper.mindboxUniqueKey(item),
                      EventMapper.hasButton(item, id: action) else { return Mapping() }
                return Mapping(deliveries: [make(.mindbox, operation: MindboxReports.trackClickOperation,
                                                 payload: MindboxReports.click(push: push, button: action), index: 0,
                                                 platform: EventMapper.platform(item))])
            }
            guard vendor == "infobip", infobip, let action = event["action"]?.stringValue,
                  let messageId = item["id"]?.stringValue else { return Mapping() }
            let registrationId = EventMapper.registrationId(device: device, item: item)
            return Mapping(deliveries: infobipActionReports(item: item, messageId: messageId, action: action, eventId: eventId) {
                var delivery = make($0, operation: nil, payload: $1, index: $2, platform: $3)
                delivery.device = registrationId
                return delivery
            })
        // Inbox state only: no vendor hears of these.
        case .seen, .read, .archive, .readAll, .archiveRead, .actionRevert, .inAppShown, .inAppOptOut, .unread, .unarchive,
             .delete, .pin, .unpin, .preferences, .snooze, .unsnooze:
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
        var message: JSONObject = [
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

    /// The push's `uniqueKey`, the key Mindbox knows it by; `nil` when pushspool derived the
    /// id (an iOS push without `uniqueKey`): a click on a key Mindbox never issued counts nowhere.
    static func mindboxUniqueKey(_ item: JSONValue) -> String? {
        guard let id = item["id"]?.stringValue, !id.isEmpty else { return nil }
        if item["warnings"]?.arrayValue?.contains(.string("derived_id")) == true { return nil }
        return id
    }

    /// Whether the push offered a button with this id (a Mindbox button's `uniqueKey`).
    static func hasButton(_ item: JSONValue, id: String) -> Bool {
        item["buttons"]?.arrayValue?.contains { $0["id"]?.stringValue == id } == true
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
