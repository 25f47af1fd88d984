import PushSystem

/// Where one delivery goes.
package enum OutboxTarget: String, Sendable, CaseIterable {
    /// `POST {MindboxURL}/v3/operations/async?endpointId=…&operation=…&deviceUUID=…&transactionId=…`
    case mindbox
    /// `POST {InfobipURL}/mobile/2/messages/seen`, body `{"messages":[…]}`.
    case infobipSeen = "infobip-seen"
    /// `POST {InfobipURL}/mobile/1/messages/mo?platformType=APNS|GCM`, body `{"from":…,"messages":[…]}`.
    case infobipMO = "infobip-mo"

    /// Whether consecutive deliveries of one user to this target may share one POST: Infobip's
    /// seen and MO bodies carry a `messages` array; a Mindbox operation is one per request.
    package var batchable: Bool { self != .mindbox }
}

/// One POST-to-be derived from one journaled event, with its delivery state. Stored as one
/// JSON file in `<state>/outbox/pending/` or `parked/` (name: `OutboxDelivery.fileName`).
///
/// `Sendable`: a plain value.
package struct OutboxDelivery: Sendable, Equatable {
    /// Journal seq of the event record.
    package var seq: UInt64
    /// Which of the event's deliveries (an event may need more than one).
    package var index: Int
    package var target: OutboxTarget
    package var eventId: String
    package var eventType: String
    /// Ordering key: `u:<user>` or `d:<device>`; a user's deliveries go out in seq order.
    package var orderKey: String
    /// The event's journal ingest time, epoch ms: the age limit counts from here.
    package var createdMillis: Int64
    /// The event's `at` (or ingest time), epoch ms: Infobip's `timestampDelta` counts from here.
    package var atMillis: Int64
    /// Mindbox: operation name and device. Infobip: the push registration id (`from` of an MO).
    package var operation: String?
    package var device: String?
    /// The platform of the push the event is about (`ios`/`android`): Mindbox's endpoint,
    /// Infobip's `platformType`; `nil` for an event without a push (NCOpen) and for files
    /// written before it.
    package var platform: String?
    /// Mindbox: the whole request body. Infobip: this delivery's element of `messages`.
    package var payload: JSONValue
    package var attempts = 0
    /// Not before this wall-clock time (epoch ms): the backoff.
    package var notBeforeMillis: Int64 = 0
    package var lastStatus: Int?
    /// The first KiB of the last response body, secrets redacted.
    package var lastResponse: String?
    package var lastError: String?
    /// Set when parked: why (`http_4xx`, `attempts`, `max_age`, `refused`) and when.
    package var parkedReason: String?
    package var parkedAtMillis: Int64?

    package init(seq: UInt64, index: Int, target: OutboxTarget, eventId: String, eventType: String, orderKey: String,
                 createdMillis: Int64, atMillis: Int64, operation: String?, device: String?, payload: JSONValue) {
        self.seq = seq
        self.index = index
        self.target = target
        self.eventId = eventId
        self.eventType = eventType
        self.orderKey = orderKey
        self.createdMillis = createdMillis
        self.atMillis = atMillis
        self.operation = operation
        self.device = device
        self.payload = payload
    }

    /// The id operators type: `<seq>-<index>`.
    package var id: String { "\(seq)-\(index)" }

    /// Zero-padded so that a directory listing sorted by name is journal order.
    package var fileName: String { OutboxDelivery.fileName(seq: seq, index: index) }

    package static func fileName(seq: UInt64, index: Int) -> String {
        let digits = String(seq)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + "-\(index).json"
    }

    /// `42-0` or `00000000000000000042-0.json` → the file name; `nil` for anything else.
    package static func fileName(forID id: String) -> String? {
        var text = Substring(id)
        if text.hasSuffix(".json") { text = text.dropLast(5) }
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count <= 20, parts[1].count <= 3,
              let seq = UInt64(parts[0]), let index = Int(parts[1]), index >= 0 else { return nil }
        return fileName(seq: seq, index: index)
    }

    /// A stable per-delivery idempotency id: a replayed or crash-repeated POST carries the same
    /// one. The event's first delivery carries the event id; a further one (the push click
    /// after an NCPushOpen) carries `<event id>.<index>`, or Mindbox would take it for a repeat
    /// of the first and drop it.
    package var transactionId: String { index == 0 ? eventId : "\(eventId).\(index)" }

    package var jsonValue: JSONValue {
        var object: JSONObject = [
            "seq": .integer(seq), "index": .integer(index), "target": .string(target.rawValue),
            "eventId": .string(eventId), "eventType": .string(eventType), "orderKey": .string(orderKey),
            "createdMillis": .integer(createdMillis), "atMillis": .integer(atMillis), "payload": payload,
            "attempts": .integer(attempts), "notBeforeMillis": .integer(notBeforeMillis),
        ]
        if let operation { object["operation"] = .string(operation) }
        if let device { object["device"] = .string(device) }
        if let platform { object["platform"] = .string(platform) }
        if let lastStatus { object["lastStatus"] = .integer(lastStatus) }
        if let lastResponse { object["lastResponse"] = .string(lastResponse) }
        if let lastError { object["lastError"] = .string(lastError) }
        if let parkedReason { object["parkedReason"] = .string(parkedReason) }
        if let parkedAtMillis { object["parkedAtMillis"] = .integer(parkedAtMillis) }
        return .object(object)
    }

    /// Reads a stored delivery; `nil` when the file is not one (then it is left alone).
    package init?(json: JSONValue) {
        guard let seqText = json["seq"]?.numberLexeme, let seq = UInt64(seqText),
              let index = json["index"]?.intValue,
              let target = json["target"]?.stringValue.flatMap(OutboxTarget.init(rawValue:)),
              let eventId = json["eventId"]?.stringValue, let eventType = json["eventType"]?.stringValue,
              let orderKey = json["orderKey"]?.stringValue,
              let created = json["createdMillis"]?.numberLexeme.flatMap({ Int64($0) }),
              let at = json["atMillis"]?.numberLexeme.flatMap({ Int64($0) }),
              let payload = json["payload"] else { return nil }
        self.init(seq: seq, index: index, target: target, eventId: eventId, eventType: eventType, orderKey: orderKey,
                  createdMillis: created, atMillis: at, operation: json["operation"]?.stringValue,
                  device: json["device"]?.stringValue, payload: payload)
        platform = json["platform"]?.stringValue
        attempts = json["attempts"]?.intValue ?? 0
        notBeforeMillis = json["notBeforeMillis"]?.numberLexeme.flatMap({ Int64($0) }) ?? 0
        lastStatus = json["lastStatus"]?.intValue
        lastResponse = json["lastResponse"]?.stringValue
        lastError = json["lastError"]?.stringValue
        parkedReason = json["parkedReason"]?.stringValue
        parkedAtMillis = json["parkedAtMillis"]?.numberLexeme.flatMap({ Int64($0) })
    }
}
