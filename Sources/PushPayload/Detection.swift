import PushSystem
/// Vendor detection (docs/design/vendor-payloads.md, "Detection"): collect every claim, then
/// decide.
struct Detection {
    enum Kind: Equatable {
        case mindboxIOSCurrent, mindboxIOSLegacy, mindboxAndroid, mindboxAndroidConverted
        case infobipIOS, infobipAndroid, sfmc, apns, fcm
    }

    var kind: Kind
    /// Where vendor keys live: the payload itself, or its FCM `data` map.
    var map: JSONObject
    /// The object around an unwrapped `data` map (FCM `notification`, `messageId`), or the
    /// whole flat bundle, if any.
    var fcmWrapper: JSONObject?
    /// The payload is the flat FCM bundle an Android app receives (see ``isFlatFCMBundle(_:)``).
    var flatBundle = false

    /// Top-level keys of the Mindbox iOS model (`MBPushNotification`).
    static let mindboxIOSKeys: Set<String> = ["aps", "clickUrl", "imageUrl", "payload", "buttons", "uniqueKey"]
    /// R2: any of these at the top level means the payload is not an FCM `data` wrapper.
    static let vendorTopKeys = ["aps", "_sid", "messageId", "uniqueKey", "org_ib_d"]

    /// `maxDepth` bounds the JSON strings decoded to look for foreign markers.
    static func detect(_ payload: JSONObject, maxDepth: Int) throws(PayloadRefusal) -> Detection {
        var map = payload
        var wrapper: JSONObject?
        var flat = false
        if case .object(let data)? = payload["data"], !vendorTopKeys.contains(where: { present(payload[$0]) }) {
            map = data
            wrapper = payload
        } else if isFlatFCMBundle(payload) {
            // The data keys sit beside FCM's own; vendors read only the data keys, as
            // `RemoteMessage.getData()` gives them to the app.
            map = payload.filter { !isFCMReserved($0.key) }
            wrapper = payload
            flat = true
        }

        var claims: [(name: String, kind: Kind?)] = []
        if let kind = mindboxKind(map) { claims.append(("mindbox", kind)) }
        if map["_sid"]?.stringValue == "SFMC" { claims.append(("sfmc", .sfmc)) }
        if present(map["org_ib_d"]) { claims.append(("infobip", .infobipAndroid)) }
        let foreign = foreignVendors(payload, maxDepth: maxDepth) + (wrapper == nil ? [] : foreignVendors(map, maxDepth: maxDepth))
        for name in foreign where !claims.contains(where: { $0.name == name }) {
            claims.append((name, nil))
        }

        if claims.count > 1 {
            throw PayloadRefusal(.ambiguousVendor, "markers of several vendors are present: \(claims.map(\.name).joined(separator: ", "))")
        }
        if let claim = claims.first {
            guard let kind = claim.kind else {
                throw PayloadRefusal(.unsupportedVendor, "this is a push from \(claim.name), a vendor pushspool does not support")
            }
            return Detection(kind: kind, map: map, fcmWrapper: wrapper, flatBundle: flat)
        }

        if let shape = nonPushShape(payload) ?? nonPushShape(map) {
            throw PayloadRefusal(.notAPush, "this is \(shape), not a push notification")
        }
        // Infobip iOS is weak (`messageId` is a common name), so it comes after every strong marker.
        if map["messageId"]?.stringValue != nil, map["aps"]?.objectValue != nil || map["internalData"]?["silent"]?.objectValue != nil {
            return Detection(kind: .infobipIOS, map: map, fcmWrapper: wrapper)
        }
        if map["aps"]?.objectValue != nil {
            return Detection(kind: .apns, map: map, fcmWrapper: wrapper)
        }
        if wrapper != nil {
            return Detection(kind: .fcm, map: map, fcmWrapper: wrapper, flatBundle: flat)
        }
        if payload["notification"]?.objectValue != nil || payload["data"]?.objectValue != nil {
            // An FCM message that also carries `messageId` and so was not unwrapped above.
            return Detection(kind: .fcm, map: payload["data"]?.objectValue ?? [:], fcmWrapper: payload)
        }
        throw PayloadRefusal(.unrecognized, "no vendor markers found (keys: \(payload.keys.sorted().prefix(8).joined(separator: ", ")))")
    }

    static func present(_ value: JSONValue?) -> Bool {
        switch value {
        case nil, .null?: false
        default: true
        }
    }

    /// "Mindbox shapes" (docs/design/vendor-payloads.md): Mindbox iOS legacy/current and Android
    /// data/converted.
    static func mindboxKind(_ map: JSONObject) -> Kind? {
        if case .object(let aps)? = map["aps"] {
            if aps["clickUrl"] != nil && aps["uniqueKey"] != nil { return .mindboxIOSLegacy }
            // Current format: `clickUrl` at the top, and either only model keys or a `uniqueKey`
            // (so a generic APNs payload with a stray `clickUrl` is not claimed).
            if present(map["clickUrl"]), map.keys.allSatisfy(mindboxIOSKeys.contains) || present(map["uniqueKey"]) {
                return .mindboxIOSCurrent
            }
            return nil
        }
        guard !present(map["aps"]), map["uniqueKey"] != nil else { return nil }
        if ["pushActions", "pushLink", "description"].contains(where: { present(map[$0]) }) { return .mindboxAndroidConverted }
        if ["message", "title", "clickUrl", "buttons", "imageUrl", "payload"].contains(where: { present(map[$0]) }) { return .mindboxAndroid }
        return nil
    }

    /// FCM's own keys in the bundle an Android app receives: `from`, `collapse_key`, `message_type`
    /// and everything under `google.` (reserved for data, docs/design/vendor-payloads.md, "APNs and
    /// FCM") or `gcm.` (the notification block, `gcm.notification.*` / `gcm.n.*`).
    static func isFCMReserved(_ key: String) -> Bool {
        key == "from" || key == "collapse_key" || key == "message_type" || key.hasPrefix("google.") || key.hasPrefix("gcm.")
    }

    /// The flat form: the data keys and FCM's keys side by side, no `aps`, no `data` or
    /// `notification` object. Only `google.*`/`gcm.*` mark it: FCM refuses those as data
    /// keys, so a producer cannot send them by accident, while `from` alone is too common.
    static func isFlatFCMBundle(_ payload: JSONObject) -> Bool {
        guard !present(payload["aps"]), payload["data"]?.objectValue == nil, payload["notification"]?.objectValue == nil else { return false }
        return payload.keys.contains { $0.hasPrefix("google.") || $0.hasPrefix("gcm.") }
    }

    /// "Unsupported vendors" (docs/design/vendor-payloads.md): vendors pushspool recognises but
    /// does not support. Markers are also looked for where the vendor sends them inside a JSON
    /// string, as Android data values must be strings.
    static func foreignVendors(_ map: JSONObject, maxDepth: Int) -> [String] {
        var found: [String] = []
        if map["os_data"] != nil || hasOneSignalId(map["custom"], maxDepth: maxDepth) { found.append("onesignal") }
        if map["_"] != nil || map["com.urbanairship.metadata"] != nil || map["com.urbanairship.media_attachment"] != nil { found.append("airship") }
        if map["ab"]?.objectValue != nil { found.append("braze") }
        if map["experienceId"] != nil || map["scopeKey"] != nil { found.append("expo") }
        return found
    }

    /// OneSignal's notification id `i` inside `custom`: an object in the iOS payload, a JSON
    /// string in the Android data (as delivered to devices). A string that is not a JSON
    /// object with `i` is someone else's `custom`.
    static func hasOneSignalId(_ custom: JSONValue?, maxDepth: Int) -> Bool {
        switch custom {
        case .object(let o)?:
            return o["i"] != nil
        case .string(let text)?:
            guard text.trimmingSpaces.utf8.first == UInt8(ascii: "{"),
                  case .object(let o)? = try? JSONParser(maxDepth: maxDepth).parse(text) else { return false }
            return o["i"] != nil
        default:
            return false
        }
    }

    /// "Not a push" (docs/design/vendor-payloads.md): JSON that belongs to the same systems but is
    /// not a push.
    static func nonPushShape(_ map: JSONObject) -> String? {
        if map["messageId"] != nil, map["text"] != nil, map["aps"] == nil, map["destination"] != nil || map["statusCode"] != nil {
            return "an Infobip MO (mobile-originated) message"
        }
        let fields = map["customAction"]?["customFields"] ?? map["data"]?["customAction"]?["customFields"]
        if fields?["mobPushSendDateTime"] != nil || fields?["mobPushTranslateName"] != nil {
            return "a Mindbox operation body (mobileapp.NCPushOpen)"
        }
        return nil
    }
}
