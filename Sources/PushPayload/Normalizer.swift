import PushSystem

/// Turns spool file bytes into a ``PushNotification`` or a ``PayloadRefusal``
/// (docs/design/vendor-payloads.md, "Detection" and "Rules").
///
/// Pure: no I/O, no clock, no randomness, so the same bytes always give the same outcome
/// (derived ids included) and the daemon may re-run it after a crash.
package enum Normalizer {
    package static func normalize(_ bytes: [UInt8], options: NormalizerOptions = NormalizerOptions()) -> NormalizeOutcome {
        do throws(PayloadRefusal) {
            return .accepted(try normalizeOrThrow(bytes, options: options))
        } catch {
            return .refused(error)
        }
    }

    /// What a spool file is: a push, a Notification Center event, or refused. The daemon's
    /// one entry point; pure like ``normalize(_:options:)``, which it extends with event
    /// envelopes (`{"pushspool":1, "user"?, "device"?, "event":{…}}`, checked strictly:
    /// `invalid_event`).
    package static func classify(_ bytes: [UInt8], options: NormalizerOptions = NormalizerOptions()) -> IntakeOutcome {
        do throws(PayloadRefusal) {
            switch try parseTop(bytes, options: options) {
            case .event(let top): return .event(try EventParser.parse(top))
            case .erase(let top): return .erasure(try ErasureRequest.parse(top))
            case .payload(let top): return .notification(try normalizeTop(top, inputBytes: bytes.count, options: options))
            }
        } catch {
            return .refused(error)
        }
    }

    /// ``normalize(_:options:)`` with the refusal thrown, for callers that prefer `try`.
    /// An event envelope is refused (`invalid_envelope`): only ``classify(_:options:)`` takes events.
    package static func normalizeOrThrow(_ bytes: [UInt8], options: NormalizerOptions = NormalizerOptions()) throws(PayloadRefusal) -> PushNotification {
        switch try parseTop(bytes, options: options) {
        case .event:
            throw PayloadRefusal(.invalidEnvelope, "this is a Notification Center event envelope (\"event\"), not a push", path: "event")
        case .erase:
            throw PayloadRefusal(.invalidEnvelope, "this is an erasure request (\"erase\"), not a push", path: "erase")
        case .payload(let top):
            return try normalizeTop(top, inputBytes: bytes.count, options: options)
        }
    }

    private enum Top {
        case payload(JSONObject)
        case event(JSONObject)
        case erase(JSONObject)
    }

    /// Size, syntax and object checks shared by pushes and events; tells them apart.
    private static func parseTop(_ bytes: [UInt8], options: NormalizerOptions) throws(PayloadRefusal) -> Top {
        if bytes.count > options.maxInputBytes {
            throw PayloadRefusal(.payloadTooLarge, "input is \(bytes.count) bytes, over the \(options.maxInputBytes)-byte input limit")
        }
        let root = try JSONParser(maxDepth: options.maxDepth).parsePayload(bytes)
        guard case .object(let top) = root else {
            throw PayloadRefusal(.notAnObject, "the top level is a JSON \(root.typeName), not an object")
        }
        // Only an envelope can be an event: a bare vendor payload with an `event` key stays a
        // payload, and JSON null means absent as everywhere else, so no push that was
        // accepted before becomes an event now.
        // An erasure request (`erase`) is an envelope too, and only with `"pushspool"`.
        if let version = top["pushspool"], let erase = top["erase"], !erase.isNull, top["event"] == nil, top["payload"] == nil {
            guard version.intValue == 1 else {
                throw PayloadRefusal(.invalidEnvelope, "envelope version \"pushspool\" must be the number 1, found \(version.typeName) \(version.serializedString())", path: "pushspool")
            }
            return .erase(top)
        }
        guard let version = top["pushspool"], let event = top["event"], !event.isNull else { return .payload(top) }
        guard version.intValue == 1 else {
            throw PayloadRefusal(.invalidEnvelope, "envelope version \"pushspool\" must be the number 1, found \(version.typeName) \(version.serializedString())", path: "pushspool")
        }
        if top["payload"] != nil {
            throw PayloadRefusal(.invalidEnvelope, "an envelope carries either \"payload\" (a push) or \"event\", not both", path: "event")
        }
        return .event(top)
    }

    private static func normalizeTop(_ top: JSONObject, inputBytes: Int, options: NormalizerOptions) throws(PayloadRefusal) -> PushNotification {
        let envelope = try Envelope(top)
        // Compact re-serialisation never exceeds the raw bytes (escapes only shrink and
        // whitespace goes), so small inputs skip the size walk.
        if inputBytes > options.maxPayloadBytes, case let size = JSONValue.object(envelope.payload).serializedCount, size > options.maxPayloadBytes {
            throw PayloadRefusal(.payloadTooLarge, "vendor payload is \(size) bytes compact, over the \(options.maxPayloadBytes)-byte limit")
        }
        let detection = try Detection.detect(envelope.payload, maxDepth: options.maxDepth)
        var session = Session(options: options, payload: envelope.payload, map: detection.map)
        var n: PushNotification
        switch detection.kind {
        case .mindboxIOSCurrent: n = try session.mindboxIOS(legacy: false)
        case .mindboxIOSLegacy: n = try session.mindboxIOS(legacy: true)
        case .mindboxAndroid: n = try session.mindboxAndroid(converted: false)
        case .mindboxAndroidConverted: n = try session.mindboxAndroid(converted: true)
        case .infobipIOS: n = try session.infobipIOS()
        case .infobipAndroid: n = try session.infobipAndroid()
        case .sfmc: n = try session.sfmc()
        case .apns: n = try session.apns()
        case .fcm: n = try session.fcm(wrapper: detection.fcmWrapper, flatBundle: detection.flatBundle)
        }
        n.collapseId = envelope.collapseId ?? session.collapseId(wrapper: detection.fcmWrapper, flatBundle: detection.flatBundle)
        n.user = envelope.user
        n.device = envelope.device
        n.receivedAt = envelope.receivedAt
        // The item expires at the earliest of the producer's and the vendor's expiry.
        if let producer = envelope.expiresAtMillis,
           n.expiresAt.flatMap(ISO8601Check.millis).map({ producer < $0 }) ?? true {
            n.expiresAt = EpochTime.iso8601(milliseconds: producer) ?? n.expiresAt
        }
        // The journal cannot hold a longer key; refusing here makes `validate` say so too.
        let keyBytes = n.dedupKey.utf8.count
        if keyBytes > DedupKey.maxBytes {
            let parts = (n.user ?? "").isEmpty ? "vendor, id" : "vendor, id, user"
            throw PayloadRefusal(.idTooLong, "the dedup key (\(parts)) would be \(keyBytes) bytes, over the journal's \(DedupKey.maxBytes)-byte limit (the id is \(n.id.utf8.count) bytes)",
                                 vendor: n.vendor, platform: n.platform)
        }
        try ControlCharacters.check(n.id, "the \(n.vendor.rawValue) id", path: nil, vendor: n.vendor, platform: n.platform)
        if let hint = envelope.platform, hint != n.platform {
            session.warn(.platformMismatch, hint.rawValue)
        }
        n.warnings = session.warnings
        return n
    }
}

/// The optional `{"pushspool": 1, ...}` wrapper a producer may add (docs/design/spool-protocol.md,
/// "Envelope").
struct Envelope {
    var payload: JSONObject
    var user: String?
    /// The device the push was delivered to: names a shared-device inbox for pushes
    /// without a user.
    var device: String?
    var platform: Platform?
    var receivedAt: String?
    /// `collapseId`: the producer's collapse id (it knows the `apns-collapse-id` header or the
    /// FCM collapse key it sent with); 1-255 bytes without control characters.
    var collapseId: String?
    /// `expiresAt`: when the producer wants the item gone (ISO-8601), as epoch ms.
    var expiresAtMillis: Int64?

    init(_ top: JSONObject) throws(PayloadRefusal) {
        guard let version = top["pushspool"] else {
            payload = top
            return
        }
        guard version.intValue == 1 else {
            throw PayloadRefusal(.invalidEnvelope, "envelope version \"pushspool\" must be the number 1, found \(version.typeName) \(version.serializedString())", path: "pushspool")
        }
        guard case .object(let inner)? = top["payload"] else {
            throw PayloadRefusal(.invalidEnvelope, "envelope member \"payload\" must be an object, found \(top["payload"]?.typeName ?? "nothing")", path: "payload")
        }
        payload = inner
        func optionalString(_ key: String) throws(PayloadRefusal) -> String? {
            switch top[key] {
            case nil, .null?: return nil
            case .string(let s)?: return s
            case let other?: throw PayloadRefusal(.invalidEnvelope, "envelope member \"\(key)\" must be a string, found \(other.typeName)", path: key)
            }
        }
        user = try optionalString("user")
        device = try optionalString("device")
        if let device, device.utf8.count > PushEvent.maxNameBytes {
            throw PayloadRefusal(.invalidEnvelope, "envelope member \"device\" is \(device.utf8.count) bytes, over \(PushEvent.maxNameBytes)", path: "device")
        }
        try ControlCharacters.check(user, "envelope member \"user\"", path: "user")
        try ControlCharacters.check(device, "envelope member \"device\"", path: "device")
        if device?.isEmpty == true { device = nil }
        receivedAt = try optionalString("receivedAt")
        if let collapseId = try optionalString("collapseId"), !collapseId.isEmpty {
            guard collapseId.utf8.count <= PushEvent.maxNameBytes else {
                throw PayloadRefusal(.invalidEnvelope, "envelope member \"collapseId\" is \(collapseId.utf8.count) bytes, over \(PushEvent.maxNameBytes)", path: "collapseId")
            }
            try ControlCharacters.check(collapseId, "envelope member \"collapseId\"", path: "collapseId")
            self.collapseId = collapseId
        }
        if let text = try optionalString("expiresAt") {
            guard let millis = ISO8601Check.millis(text), millis >= 0 else {
                throw PayloadRefusal(.invalidEnvelope, "envelope member \"expiresAt\" must be an ISO-8601 date-time after 1970 like 2026-12-01T09:00:00Z, found \"\(text.prefix(40))\"", path: "expiresAt")
            }
            expiresAtMillis = millis
        }
        if let p = try optionalString("platform") {
            guard let platform = Platform(rawValue: p) else {
                throw PayloadRefusal(.invalidEnvelope, "envelope member \"platform\" must be \"ios\" or \"android\", found \"\(p)\"", path: "platform")
            }
            self.platform = platform
        }
    }
}

/// Per-payload state: the options, the vendor payload, and the warnings collected so far.
/// Field readers come in two flavours: lenient (wrong type → `nil` + `wrong_type` warning,
/// R11) and strict (wrong type → `type_mismatch` refusal, for Mindbox's Codable model).
struct Session {
    let options: NormalizerOptions
    /// The vendor payload after the envelope (what the size bound and derived ids use).
    let payload: JSONObject
    /// The object vendor keys are read from: `payload`, or its FCM `data` map.
    let map: JSONObject
    var warnings: [PayloadWarning] = []

    init(options: NormalizerOptions, payload: JSONObject, map: JSONObject) {
        self.options = options
        self.payload = payload
        self.map = map
    }

    mutating func warn(_ code: WarningCode, _ detail: String? = nil) {
        warnings.append(PayloadWarning(code, detail))
    }

    /// R5: a stable id from the canonical (compact, sorted) payload.
    mutating func derivedId() -> String {
        warn(.derivedId)
        return SHA256.hex(of: JSONValue.object(payload).serialized())
    }

    // MARK: lenient readers (R11)

    /// A String member; JSON null is absent; other types warn and read as absent.
    mutating func string(_ value: JSONValue?, _ path: String) -> String? {
        switch value {
        case nil, .null?: return nil
        case .string(let s)?: return s
        case _?: warn(.wrongType, path); return nil
        }
    }

    /// A String member where numbers and booleans are also taken as text (Android data maps,
    /// whose values are strings on the device whatever the producer wrote).
    mutating func text(_ value: JSONValue?, _ path: String) -> String? {
        switch value {
        case nil, .null?: return nil
        case .string(let s)?: return s
        case .number(let n)?: return n
        case .bool(let b)?: return b ? "true" : "false"
        case _?: warn(.wrongType, path); return nil
        }
    }

    /// `text` unless it is empty: an empty id names nothing to attribute to.
    func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.isEmpty else { return nil }
        return text
    }

    /// An integral number (iOS SDKs read `as? Int`: no string coercion).
    mutating func int(_ value: JSONValue?, _ path: String) -> Int? {
        switch value {
        case nil, .null?: return nil
        case .number?:
            if let i = value?.intValue { return i }
            warn(.wrongType, path)
            return nil
        case _?: warn(.wrongType, path); return nil
        }
    }

    /// An integer from a number or a numeric string (Android).
    mutating func looseInt(_ value: JSONValue?, _ path: String) -> Int? {
        if case .string(let s)? = value {
            if let i = Int(s.trimmingSpaces) { return i }
            warn(.wrongType, path)
            return nil
        }
        return int(value, path)
    }

    mutating func object(_ value: JSONValue?, _ path: String) -> JSONObject? {
        switch value {
        case nil, .null?: return nil
        case .object(let o)?: return o
        case _?: warn(.wrongType, path); return nil
        }
    }

    mutating func bool(_ value: JSONValue?, _ path: String, loose: Bool) -> Bool? {
        switch value {
        case nil, .null?: return nil
        case .bool(let b)?: return b
        case .string(let s)? where loose && (s == "true" || s == "false"): return s == "true"
        case .number(let n)? where loose && (n == "0" || n == "1"): return n == "1"
        case _?: warn(.wrongType, path); return nil
        }
    }

    /// Array of strings (`loc-args`); wrong element types warn and drop the whole list.
    mutating func strings(_ value: JSONValue?, _ path: String) -> [String]? {
        switch value {
        case nil, .null?: return nil
        case .array(let items)?:
            var out: [String] = []
            for item in items {
                guard case .string(let s) = item else { warn(.wrongType, path); return nil }
                out.append(s)
            }
            return out
        case _?: warn(.wrongType, path); return nil
        }
    }

    /// Epoch milliseconds (number, or numeric string when `loose`) as ISO-8601 UTC (R12).
    mutating func epochMillis(_ value: JSONValue?, _ path: String, loose: Bool) -> String? {
        var lexeme: String
        switch value {
        case nil, .null?: return nil
        case .number(let n)?: lexeme = n
        case .string(let s)? where loose: lexeme = s.trimmingSpaces
        case _?: warn(.wrongType, path); return nil
        }
        if lexeme.isEmpty { return nil }
        // Range-check before Int64(_:), which traps on huge doubles like 1e30.
        guard let ms = Double(lexeme), ms >= 0, ms < 253_402_300_800_000, let iso = EpochTime.iso8601(milliseconds: Int64(ms)) else {
            warn(.invalidValue, path)
            return nil
        }
        return iso
    }

    // MARK: strict readers (Mindbox iOS Codable model)

    func strictString(_ value: JSONValue?, _ path: String, vendor: Vendor = .mindbox) throws(PayloadRefusal) -> String? {
        switch value {
        case nil, .null?: return nil
        case .string(let s)?: return s
        case let other?: throw mismatch(path, expected: "string", found: other, vendor: vendor)
        }
    }

    func strictInt(_ value: JSONValue?, _ path: String) throws(PayloadRefusal) -> Int? {
        switch value {
        case nil, .null?: return nil
        case let v? where v.intValue != nil: return v.intValue
        case let other?: throw mismatch(path, expected: "integer", found: other, vendor: .mindbox)
        }
    }

    func strictObject(_ value: JSONValue?, _ path: String) throws(PayloadRefusal) -> JSONObject? {
        switch value {
        case nil, .null?: return nil
        case .object(let o)?: return o
        case let other?: throw mismatch(path, expected: "object", found: other, vendor: .mindbox)
        }
    }

    func mismatch(_ path: String, expected: String, found: JSONValue, vendor: Vendor) -> PayloadRefusal {
        PayloadRefusal(.typeMismatch, "\(path) must be \(expected == "object" || expected == "array" || expected == "integer" ? "an" : "a") \(expected), found \(found.typeName); the \(vendor.rawValue) SDK would not accept this push",
                       vendor: vendor, platform: .ios, path: path)
    }

    // MARK: URLs (R6, R7)

    /// A click/deep-link URL: empty → absent; invalid → absent + `invalid_url:<path>`.
    mutating func clickURL(_ url: String?, _ path: String) -> String? {
        guard let url, !url.isEmpty else { return nil }
        if case .invalid = URLCheck.check(url) {
            warn(.invalidURL, path)
            return nil
        }
        return url
    }

    /// A media URL: only http(s) with a host; `http` is kept but flagged (not fetched).
    mutating func mediaURL(_ url: String?, _ path: String) -> String? {
        guard let url, !url.isEmpty else { return nil }
        switch URLCheck.check(url) {
        case .valid(scheme: "https"): return url
        case .valid(scheme: "http"):
            warn(.mediaInsecureScheme, path)
            return url
        default:
            warn(.invalidURL, path)
            return nil
        }
    }

    // MARK: shared pieces

    /// Buttons from an interactive category (R9); at most 4 kept on iOS, 3 on Android.
    mutating func resolveCategory(_ id: String?, platform: Platform, into n: inout PushNotification) {
        guard let id, !id.isEmpty else { return }
        n.category = id
        guard let category = options.categories[id] else {
            warn(id.hasPrefix("mm_") ? .reservedCategoryUnknown : .categoryUnknown, id)
            return
        }
        let shown = platform == .ios ? 4 : 3
        if category.actions.count > shown { warn(.actionsTruncated, String(category.actions.count)) }
        n.actions = Array(category.actions.prefix(shown))
        n.actionsCut = category.actions.count - n.actions.count
        n.buttons = category.actions.prefix(shown).map {
            NotificationButton(id: $0.id, text: $0.title, url: nil, options: $0.options)
        }
    }

    /// R5: refuse when there is nothing to show.
    func requireBody(_ n: PushNotification) throws(PayloadRefusal) {
        if let body = n.body, !body.isEmpty { return }
        // A localised push displays the app's strings for its keys (the SDKs fall back to the
        // key itself), so it needs no literal body; `title-loc-key` alone shows a title.
        if n.silent || n.locKey != nil || n.titleLocKey != nil { return }
        throw PayloadRefusal(.missingBody, "the \(n.format) payload has no body and is neither silent nor localised (loc-key, title-loc-key)",
                             vendor: n.vendor, platform: n.platform)
    }

    /// Mindbox/Infobip string payloads: JSON objects/arrays are decoded, anything else is kept as text.
    func decodeEmbedded(_ text: String) -> JSONValue {
        let trimmed = text.trimmingSpaces
        if let first = trimmed.utf8.first, first == UInt8(ascii: "{") || first == UInt8(ascii: "["),
           let value = try? JSONParser(maxDepth: options.maxDepth).parse(trimmed) {
            return value
        }
        return .string(text)
    }
}
