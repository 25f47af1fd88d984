import PushSystem
/// Maestra/Mindbox (docs/design/vendor-payloads.md, "Mindbox (Maestra)"; rules R4, R9).
extension Session {
    /// The Mindbox SDKs show at most 3 buttons.
    static let mindboxMaxButtons = 3

    /// iOS current (`MBPushNotification`, strict Codable types) or legacy (`aps` holds the keys).
    mutating func mindboxIOS(legacy: Bool) throws(PayloadRefusal) -> PushNotification {
        let aps = try strictObject(map["aps"], "aps") ?? [:]
        // Legacy reads everything from `aps`; current from the top level.
        let source = legacy ? aps : map
        let prefix = legacy ? "aps." : ""
        let format = legacy ? "mindbox-ios-legacy" : "mindbox-ios"

        guard let alert = try strictObject(aps["alert"], "aps.alert") else {
            throw PayloadRefusal(.missingBody, "\(format) needs aps.alert.body", vendor: .mindbox, platform: .ios, path: "aps.alert")
        }
        let title = try strictString(alert["title"], "aps.alert.title")
        let body = try strictString(alert["body"], "aps.alert.body")
        let sound = try strictString(aps["sound"], "aps.sound")
        _ = try strictInt(aps["mutable-content"], "aps.mutable-content")
        _ = try strictInt(aps["content-available"], "aps.content-available")
        let click = try strictString(source["clickUrl"], "\(prefix)clickUrl")
        let image = try strictString(source["imageUrl"], "\(prefix)imageUrl")
        let payloadText = try strictString(source["payload"], "\(prefix)payload")
        let uniqueKey = try strictString(source["uniqueKey"], "\(prefix)uniqueKey")

        var rawButtons: [(id: String?, text: String?, url: String?)] = []
        switch source["buttons"] {
        case nil, .null?: break
        case .array(let items)?:
            for (i, item) in items.enumerated() {
                let path = "\(prefix)buttons[\(i)]"
                if legacy {
                    // LegacyFormatStrategy keeps a button only when all three are Strings.
                    guard let text = item["text"]?.stringValue, let url = item["url"]?.stringValue, let key = item["uniqueKey"]?.stringValue else {
                        warn(.buttonDropped, path)
                        continue
                    }
                    rawButtons.append((key, text, url))
                } else {
                    guard let button = try strictObject(item, path) else { warn(.buttonDropped, path); continue }
                    rawButtons.append((try strictString(button["uniqueKey"], "\(path).uniqueKey"),
                                       try strictString(button["text"], "\(path).text"),
                                       try strictString(button["url"], "\(path).url")))
                }
            }
        case let other?:
            if legacy { warn(.buttonsInvalid) } else { throw mismatch("buttons", expected: "array", found: other, vendor: .mindbox) }
        }

        var n = PushNotification(vendor: .mindbox, platform: .ios, format: format, id: "")
        if let uniqueKey, !uniqueKey.isEmpty { n.id = uniqueKey } else { n.id = derivedId() }
        n.title = title
        n.body = body
        n.sound = sound
        n.badge = int(aps["badge"], "aps.badge")
        n.clickUrl = clickURL(click, "\(prefix)clickUrl")
        n.mediaUrl = mediaURL(image, "\(prefix)imageUrl")
        mindboxButtons(rawButtons, prefix: prefix, options: [.foreground], into: &n)
        mindboxPayload(payloadText, into: &n)
        try requireBody(n)
        return n
    }

    /// Android FCM `data` (values are strings; `buttons` a JSON string) or the SDK's converted
    /// `MindboxRemoteMessage` (`description`, `pushLink`, `pushActions`).
    mutating func mindboxAndroid(converted: Bool) throws(PayloadRefusal) -> PushNotification {
        let format = converted ? "mindbox-android-converted" : "mindbox-android"
        guard let uniqueKey = text(map["uniqueKey"], "uniqueKey"), !uniqueKey.isEmpty else {
            // isMindboxPush(data) is exactly "uniqueKey is non-empty".
            throw PayloadRefusal(.missingId, "\(format) needs a non-empty uniqueKey", vendor: .mindbox, platform: .android, path: "uniqueKey")
        }
        var n = PushNotification(vendor: .mindbox, platform: .android, format: format, id: uniqueKey)
        n.title = text(map["title"], "title")
        let bodyKey = converted ? "description" : "message"
        n.body = text(map[bodyKey], bodyKey)
        let linkKey = converted ? "pushLink" : "clickUrl"
        n.clickUrl = clickURL(text(map[linkKey], linkKey), linkKey)
        n.mediaUrl = mediaURL(text(map["imageUrl"], "imageUrl"), "imageUrl")

        let buttonsKey = converted ? "pushActions" : "buttons"
        var list: [JSONValue] = []
        switch map[buttonsKey] {
        case nil, .null?: break
        case .array(let items)?: list = items
        case .string(let s)?:
            // The SDK parses the string with Gson; bad JSON means no buttons, not a lost push.
            if s.trimmingSpaces.isEmpty { break }
            if case .array(let items)? = try? JSONParser(maxDepth: options.maxDepth).parse(s) { list = items } else { warn(.buttonsInvalid, buttonsKey) }
        case _?: warn(.buttonsInvalid, buttonsKey)
        }
        var rawButtons: [(id: String?, text: String?, url: String?)] = []
        for (i, item) in list.enumerated() {
            let path = "\(buttonsKey)[\(i)]"
            guard let button = object(item, path) else { continue }
            rawButtons.append((text(button["uniqueKey"], "\(path).uniqueKey"), text(button["text"], "\(path).text"), text(button["url"], "\(path).url")))
        }
        mindboxButtons(rawButtons, prefix: "", pathKey: buttonsKey, options: [], into: &n)
        mindboxPayload(text(map["payload"], "payload"), into: &n)
        try requireBody(n)
        return n
    }

    /// R9: drop buttons without text, keep the first 3, validate URLs.
    mutating func mindboxButtons(_ raw: [(id: String?, text: String?, url: String?)], prefix: String, pathKey: String = "buttons",
                                 options: [ActionOption], into n: inout PushNotification) {
        var kept: [NotificationButton] = []
        var candidates = 0
        for (i, b) in raw.enumerated() {
            let path = "\(prefix)\(pathKey)[\(i)]"
            guard let text = b.text, !text.isEmpty else {
                warn(.buttonDropped, path)
                continue
            }
            candidates += 1
            if kept.count < Session.mindboxMaxButtons {
                kept.append(NotificationButton(id: b.id, text: text, url: clickURL(b.url, "\(path).url"), options: options))
            }
        }
        if candidates > Session.mindboxMaxButtons { warn(.buttonsTruncated, String(candidates)) }
        n.buttons = kept
    }

    /// `payload` is a String: the app's rendering data ("such as expiration dates", the
    /// Notification Center guide), often a JSON object (with the convention's `pushDate` /
    /// `pushName`, which the guide's step 4.7 also spells `push_date` / `push_name`), sometimes
    /// plain text. A JSON object is carried as the object; anything else (plain text, an
    /// array, a number) as the string it was sent as.
    mutating func mindboxPayload(_ text: String?, into n: inout PushNotification) {
        guard let text, !text.isEmpty else { return }
        var decoded = decodeEmbedded(text)
        if case .object = decoded {} else { decoded = .string(text) }
        n.customPayload = decoded
        dates: for key in ["pushDate", "push_date"] {
            switch decoded[key] {
            case .string(let date)? where !date.isEmpty:
                n.sentAt = date
                break dates
            case .number(let lexeme)?:
                // A number is an epoch, seconds or milliseconds (EpochNumber tells them apart);
                // as ISO-8601 it reads like every other vendor's sentAt.
                if let millis = EpochNumber.millis(digits: lexeme.utf8), let iso = EpochTime.iso8601(milliseconds: millis) {
                    n.sentAt = iso
                } else {
                    warn(.invalidValue, "payload.\(key)")
                }
                break dates
            default:
                continue
            }
        }
    }
}
