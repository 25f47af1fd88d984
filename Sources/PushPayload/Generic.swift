/// Plain APNs and FCM, the fall-through when no vendor marker matched, and the `aps`
/// reading shared with the vendors that ride on APNs.
extension Session {
    /// Plain APNs: no id in the payload (`apns-id` is an HTTP header), so it is derived.
    mutating func apns() throws(PayloadRefusal) -> PushNotification {
        var n = PushNotification(vendor: .apns, platform: .ios, format: "apns", id: "")
        let aps = object(map["aps"], "aps") ?? [:]
        readAps(aps, alertAsString: true, soundAsDict: true, into: &n)
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

    /// Plain FCM: a `data` map and/or a `notification` block. Without a `notification`
    /// block and without a body it is a data message for the app, i.e. silent.
    mutating func fcm(wrapper: [String: JSONValue]?) throws(PayloadRefusal) -> PushNotification {
        var n = PushNotification(vendor: .fcm, platform: .android, format: "fcm", id: "")
        let top = wrapper ?? [:]
        let notification = object(top["notification"], "notification")
        if let notification {
            n.title = text(notification["title"], "notification.title")
            n.body = text(notification["body"], "notification.body")
            n.sound = text(notification["sound"], "notification.sound")
            n.locKey = text(notification["body_loc_key"], "notification.body_loc_key")
            n.titleLocKey = text(notification["title_loc_key"], "notification.title_loc_key")
            n.mediaUrl = mediaURL(text(notification["image"], "notification.image"), "notification.image")
        } else {
            n.title = text(map["title"], "data.title")
            n.body = text(map["body"], "data.body") ?? text(map["message"], "data.message")
            n.silent = n.body == nil
        }
        if !map.isEmpty { n.customPayload = .object(map) }
        try requireBody(n)
        let sentId = text(top["messageId"], "messageId") ?? text(top["message_id"], "message_id") ?? text(map["google.message_id"], "data.google.message_id")
        if let sentId, !sentId.isEmpty { n.id = sentId } else { n.id = derivedId() }
        return n
    }

    /// The APNs `aps` dictionary, shared by Infobip iOS, SFMC iOS and generic APNs.
    mutating func readAps(_ aps: [String: JSONValue], alertAsString: Bool, soundAsDict: Bool, into n: inout PushNotification) {
        switch aps["alert"] {
        case nil, .null?: break
        case .string(let s)?:
            if alertAsString { n.body = s } else { warn(.wrongType, "aps.alert") }
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
    }

    /// R10: `content-available: 1` with nothing to display.
    mutating func apsIsSilent(_ aps: [String: JSONValue], _ n: PushNotification) -> Bool {
        guard int(aps["content-available"], "aps.content-available") == 1 else { return false }
        return n.title == nil && n.body == nil && n.locKey == nil && n.subtitle == nil
    }
}
