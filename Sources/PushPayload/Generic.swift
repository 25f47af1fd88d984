import PushSystem
/// Plain APNs and FCM, the fall-through when no vendor marker matched, and the `aps`
/// reading shared with the vendors that ride on APNs.
extension Session {
    /// Plain APNs: no id in the payload (`apns-id` is an HTTP header), so it is derived.
    mutating func apns() throws(PayloadRefusal) -> PushNotification {
        var n = PushNotification(vendor: .apns, platform: .ios, format: "apns", id: "")
        let aps = object(map["aps"], "aps") ?? [:]
        readAps(aps, soundAsDict: true, into: &n)
        n.silent = apsIsSilent(aps, n)
        resolveCategory(string(aps["category"], "aps.category"), platform: .ios, into: &n)
        // Many NSE samples copy SFMC's media keys, so plain APNs honours them too.
        readMediaKeys(into: &n)
        let custom = map.filter { $0.key != "aps" && $0.key != "_mediaUrl" && $0.key != "_mediaAlt" }
        if !custom.isEmpty { n.customPayload = .object(custom) }
        try requireBody(n)
        n.id = derivedId()
        return n
    }

    /// Plain FCM: a `data` map and/or a `notification` block, or the flat bundle an Android
    /// app receives (`flatBundle`: the block as `gcm.notification.*` keys). Without a
    /// notification block and without a body it is a data message for the app, i.e. silent.
    mutating func fcm(wrapper: JSONObject?, flatBundle: Bool) throws(PayloadRefusal) -> PushNotification {
        var n = PushNotification(vendor: .fcm, platform: .android, format: "fcm", id: "")
        let top = wrapper ?? [:]
        let notification: JSONObject?
        let path: String
        if flatBundle {
            notification = Session.bundleNotification(top)
            path = "gcm.notification."
        } else {
            notification = object(top["notification"], "notification")
            path = "notification."
        }
        if let notification {
            n.title = text(notification["title"], path + "title")
            n.body = text(notification["body"], path + "body")
            n.sound = text(notification["sound"], path + "sound")
            n.locKey = text(notification["body_loc_key"], path + "body_loc_key")
            n.locArgs = fcmLocArgs(notification["body_loc_args"], path + "body_loc_args")
            n.titleLocKey = text(notification["title_loc_key"], path + "title_loc_key")
            n.titleLocArgs = fcmLocArgs(notification["title_loc_args"], path + "title_loc_args")
            n.mediaUrl = mediaURL(text(notification["image"], path + "image"), path + "image")
        } else {
            n.title = text(map["title"], "data.title")
            n.body = text(map["body"], "data.body") ?? text(map["message"], "data.message")
            n.silent = n.body == nil
        }
        if !map.isEmpty { n.customPayload = .object(map) }
        try requireBody(n)
        n.ttlMillis = fcmTTL(top)
        let sentId = text(top["messageId"], "messageId") ?? text(top["message_id"], "message_id")
            ?? text(top["google.message_id"], "google.message_id") ?? text(map["google.message_id"], "data.google.message_id")
        if let sentId, !sentId.isEmpty { n.id = sentId } else { n.id = derivedId() }
        return n
    }

    /// The longest FCM time to live: 28 days.
    static let maxTTLMillis: Int64 = 28 * 86_400_000

    /// FCM's time to live in ms, as the send APIs spell it: HTTP v1 `android.ttl` (or a
    /// top-level `ttl`) as a duration string `"3.5s"` or seconds as a number, the legacy
    /// `time_to_live` in seconds. Outside 0...28 days, or malformed: warned and absent.
    mutating func fcmTTL(_ top: JSONObject) -> Int64? {
        let candidates: [(JSONValue?, String)] = [(top["android"]?.objectValue?["ttl"], "android.ttl"), (top["ttl"], "ttl"),
                                                  (top["time_to_live"], "time_to_live")]
        guard let found = candidates.first(where: { $0.0 != nil && $0.0 != .null }), let value = found.0 else { return nil }
        let path = found.1
        var text: Substring
        switch value {
        case .string(let s) where s.hasSuffix("s"): text = s.dropLast()
        case .number(let n): text = Substring(n)
        default: warn(.wrongType, path); return nil
        }
        // Seconds with up to 9 fraction digits; read digit by digit, bounded, never trapping.
        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let whole = parts.first, !whole.isEmpty, whole.count <= 9, whole.allSatisfy({ $0.isASCII && $0.isNumber }),
              parts.count == 1 || (parts[1].count >= 1 && parts[1].count <= 9 && parts[1].allSatisfy({ $0.isASCII && $0.isNumber })),
              let seconds = Int64(whole) else {
            warn(.invalidValue, path)
            return nil
        }
        let fraction = parts.count == 2 ? Int64(String((parts[1] + "00").prefix(3))) ?? 0 : 0
        let millis = seconds * 1000 + fraction
        guard millis <= Self.maxTTLMillis else {
            warn(.invalidValue, path)
            return nil
        }
        return millis
    }

    /// FCM's `body_loc_args` / `title_loc_args`: an array of strings in the send API's
    /// `notification`, a JSON string holding that array in the bundle an app receives
    /// (`gcm.n.body_loc_args`). Anything else warns and reads as absent.
    mutating func fcmLocArgs(_ value: JSONValue?, _ path: String) -> [String]? {
        guard case .string(let s)? = value else { return strings(value, path) }
        guard let parsed = try? JSONParser(maxDepth: 2).parse(s), case .array = parsed else {
            warn(.wrongType, path)
            return nil
        }
        return strings(parsed, path)
    }

    /// The notification block of a flat bundle: `gcm.n.NAME`, else the older
    /// `gcm.notification.NAME`, keyed by NAME; `nil` when the bundle has none.
    static func bundleNotification(_ bundle: JSONObject) -> JSONObject? {
        var block: JSONObject = [:]
        for (key, value) in bundle where key.hasPrefix("gcm.notification.") {
            block[String(key.dropFirst("gcm.notification.".count))] = value
        }
        for (key, value) in bundle where key.hasPrefix("gcm.n.") {
            block[String(key.dropFirst("gcm.n.".count))] = value
        }
        return block.isEmpty ? nil : block
    }

    /// The APNs `aps` dictionary, shared by Infobip iOS, SFMC iOS and generic APNs. A string
    /// `alert` is the body: it is what iOS displays, whether or not a vendor SDK models it.
    mutating func readAps(_ aps: JSONObject, soundAsDict: Bool, into n: inout PushNotification) {
        switch aps["alert"] {
        case nil, .null?: break
        case .string(let s)?:
            n.body = s
        case .object(let alert)?:
            n.title = string(alert["title"], "aps.alert.title")
            n.subtitle = string(alert["subtitle"], "aps.alert.subtitle")
            n.body = string(alert["body"], "aps.alert.body")
            n.locKey = string(alert["loc-key"], "aps.alert.loc-key")
            n.locArgs = strings(alert["loc-args"], "aps.alert.loc-args")
            n.titleLocKey = string(alert["title-loc-key"], "aps.alert.title-loc-key")
            n.titleLocArgs = strings(alert["title-loc-args"], "aps.alert.title-loc-args")
        case _?: warn(.wrongType, "aps.alert")
        }
        switch aps["sound"] {
        case .object(let sound)? where soundAsDict: n.sound = string(sound["name"], "aps.sound.name")
        default: n.sound = string(aps["sound"], "aps.sound")
        }
        n.badge = int(aps["badge"], "aps.badge")
        n.threadId = boundedKey(aps["thread-id"], "aps.thread-id")
    }

    /// The collapse id of an FCM send request (the object around a `data` map): the HTTP v1
    /// `android.collapse_key`, the legacy API's top-level `collapse_key`, else the v1
    /// `apns.headers.apns-collapse-id`. Not the flat bundle's `collapse_key`: FCM fills that
    /// in on delivery with the app's package name when the sender set none (firebase-admin-java
    /// issue 561), so taking it would collapse every push of the app into one item. GCM's
    /// `do_not_collapse` means none.
    mutating func collapseId(wrapper: JSONObject?, flatBundle: Bool) -> String? {
        guard let wrapper, !flatBundle else { return nil }
        let key = boundedKey(wrapper["android"]?["collapse_key"], "android.collapse_key")
            ?? boundedKey(wrapper["collapse_key"], "collapse_key")
            ?? boundedKey(wrapper["apns"]?["headers"]?["apns-collapse-id"], "apns.headers.apns-collapse-id")
        return key == "do_not_collapse" ? nil : key
    }

    /// A grouping or collapse key: a non-empty string of at most 255 bytes without control
    /// characters; anything else warns (`wrong_type`, `invalid_value`) and reads as absent.
    mutating func boundedKey(_ value: JSONValue?, _ path: String) -> String? {
        guard let key = string(value, path), !key.isEmpty else { return nil }
        guard key.utf8.count <= PushEvent.maxNameBytes, ControlCharacters.first(in: key) == nil else {
            warn(.invalidValue, path)
            return nil
        }
        return key
    }

    /// R10: `content-available: 1` (a background push for the app) with nothing to display:
    /// no title, subtitle or body, and no `loc-key` / `title-loc-key` for the app to localise.
    /// A badge or a sound alone is not something to list.
    mutating func apsIsSilent(_ aps: JSONObject, _ n: PushNotification) -> Bool {
        guard int(aps["content-available"], "aps.content-available") == 1 else { return false }
        return n.title == nil && n.body == nil && n.locKey == nil && n.titleLocKey == nil && n.subtitle == nil
    }
}
