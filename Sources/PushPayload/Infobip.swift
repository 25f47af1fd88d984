import PushSystem
/// Infobip Mobile Messaging (docs/design/vendor-payloads.md, "Infobip").
extension Session {
    mutating func infobipIOS() throws(PayloadRefusal) -> PushNotification {
        guard let messageId = map["messageId"]?.stringValue, !messageId.isEmpty else {
            throw PayloadRefusal(.missingId, "infobip-ios needs a non-empty messageId", vendor: .infobip, platform: .ios, path: "messageId")
        }
        var n = PushNotification(vendor: .infobip, platform: .ios, format: "infobip-ios", id: messageId)
        let internalData = object(map["internalData"], "internalData") ?? [:]
        let aps = object(map["aps"], "aps") ?? [:]
        // MessageUtils reads aps.sound only as a String, and aps.alert only as a dict: for a
        // string alert the SDK's `text` is nil, yet it accepts the message (messageId + aps)
        // and iOS displays the string. Acceptance follows the SDK; the record carries what the
        // user saw, so a string alert is the body.
        readAps(aps, soundAsDict: false, into: &n)
        var category = string(aps["category"], "aps.category")
        if case .object(let silent)? = internalData["silent"] {
            // apsByMerging: the silent dict supplies what a visible push keeps in aps.
            n.silent = true
            n.title = string(silent["title"], "internalData.silent.title") ?? n.title
            n.body = string(silent["body"], "internalData.silent.body") ?? n.body
            n.sound = string(silent["sound"], "internalData.silent.sound") ?? n.sound
            category = string(silent["category"], "internalData.silent.category") ?? category
        } else if Detection.present(internalData["silent"]) {
            warn(.wrongType, "internalData.silent")
        }
        resolveCategory(category, platform: .ios, into: &n)

        n.sentAt = epochMillis(internalData["sendDateTime"], "internalData.sendDateTime", loose: false)
        n.expiresAt = epochMillis(internalData["inAppExpiryDateTime"], "internalData.inAppExpiryDateTime", loose: false)
        n.messageType = string(internalData["messageType"], "internalData.messageType")
        n.bulkId = nonEmpty(string(internalData["bulkId"], "internalData.bulkId"))
        n.inAppOpenTitle = string(internalData["inAppOpenTitle"], "internalData.inAppOpenTitle")
        n.inAppDismissTitle = string(internalData["inAppDismissTitle"], "internalData.inAppDismissTitle")
        if case .array(let atts)? = internalData["atts"], let first = atts.first {
            n.mediaUrl = mediaURL(string(first["url"], "internalData.atts[0].url"), "internalData.atts[0].url")
        } else if Detection.present(internalData["atts"]) {
            warn(.wrongType, "internalData.atts")
        }
        n.deeplink = clickURL(string(internalData["deeplink"], "internalData.deeplink"), "internalData.deeplink")
        n.webViewUrl = clickURL(string(internalData["webViewUrl"], "internalData.webViewUrl"), "internalData.webViewUrl")
        n.browserUrl = clickURL(string(internalData["browserUrl"], "internalData.browserUrl"), "internalData.browserUrl")
        n.clickUrl = n.deeplink ?? n.webViewUrl ?? n.browserUrl
        switch internalData["inAppStyle"] {
        case nil, .null?:
            if bool(internalData["inApp"], "internalData.inApp", loose: false) == true { n.presentation = .modal }
        case let style?:
            switch int(style, "internalData.inAppStyle") {
            case 0?: n.presentation = .modal
            case 1?: n.presentation = .banner
            case nil: break
            case _?: warn(.invalidValue, "internalData.inAppStyle")
            }
        }
        if let details = object(internalData["inAppDetails"], "internalData.inAppDetails") {
            n.presentation = .inApp
            if n.clickUrl == nil {
                n.clickUrl = clickURL(string(details["clickUrl"], "internalData.inAppDetails.clickUrl"), "internalData.inAppDetails.clickUrl")
            }
        }
        n.customPayload = object(map["customPayload"], "customPayload").map(JSONValue.object)
        try requireBody(n)
        return n
    }

    /// FCM data key `org_ib_d`: a JSON string `{messageId, text, notification{…}, custom, internal}`.
    mutating func infobipAndroid() throws(PayloadRefusal) -> PushNotification {
        let message: JSONObject
        switch map["org_ib_d"] {
        case .string(let s)?:
            do throws(PayloadRefusal) {
                let value = try JSONParser(maxDepth: options.maxDepth).parsePayload(s)
                guard case .object(let o) = value else {
                    throw PayloadRefusal(.typeMismatch, "org_ib_d must hold a JSON object, found \(value.typeName)", path: "org_ib_d")
                }
                message = o
            } catch {
                var refusal = error
                refusal.message = "org_ib_d: \(refusal.message)"
                refusal.vendor = .infobip
                refusal.platform = .android
                refusal.path = "org_ib_d" + (refusal.path.map { $0.hasPrefix("@") ? $0 : ".\($0)" } ?? "")
                throw refusal
            }
        case .object(let o)?:
            // Already decoded by a producer; the content is what matters.
            message = o
        case let other?:
            throw PayloadRefusal(.typeMismatch, "org_ib_d must be a JSON string, found \(other.typeName)", vendor: .infobip, platform: .android, path: "org_ib_d")
        case nil:
            throw PayloadRefusal(.unrecognized, "org_ib_d is missing", vendor: .infobip, platform: .android)
        }
        guard let messageId = text(message["messageId"], "org_ib_d.messageId"), !messageId.isEmpty else {
            throw PayloadRefusal(.missingId, "infobip-android needs a non-empty org_ib_d.messageId", vendor: .infobip, platform: .android, path: "org_ib_d.messageId")
        }
        var n = PushNotification(vendor: .infobip, platform: .android, format: "infobip-android", id: messageId)
        n.body = text(message["text"], "org_ib_d.text")
        let notification = object(message["notification"], "org_ib_d.notification") ?? [:]
        let internals = object(message["internal"], "org_ib_d.internal") ?? [:]
        n.title = text(notification["title"], "org_ib_d.notification.title")
        n.sound = text(notification["sound"], "org_ib_d.notification.sound")
        n.silent = bool(notification["silent"], "org_ib_d.notification.silent", loose: true) ?? false
        n.mediaUrl = mediaURL(text(notification["contentUrl"], "org_ib_d.notification.contentUrl"), "org_ib_d.notification.contentUrl")
        resolveCategory(text(notification["category"], "org_ib_d.notification.category"), platform: .android, into: &n)
        switch notification["inAppStyle"] {
        case nil, .null?:
            if bool(internals["inApp"], "org_ib_d.internal.inApp", loose: true) == true { n.presentation = .modal }
        case let style?:
            // Message.java accepts "MODAL"/"0" and "BANNER"/"1".
            switch text(style, "org_ib_d.notification.inAppStyle") {
            case "MODAL"?, "0"?: n.presentation = .modal
            case "BANNER"?, "1"?: n.presentation = .banner
            case nil: break
            case _?: warn(.invalidValue, "org_ib_d.notification.inAppStyle")
            }
        }
        n.sentAt = epochMillis(internals["sendDateTime"], "org_ib_d.internal.sendDateTime", loose: true)
        n.expiresAt = epochMillis(internals["inAppExpiryDateTime"], "org_ib_d.internal.inAppExpiryDateTime", loose: true)
        n.messageType = text(internals["messageType"], "org_ib_d.internal.messageType")
        n.bulkId = nonEmpty(text(internals["bulkId"], "org_ib_d.internal.bulkId"))
        n.inAppOpenTitle = text(internals["inAppOpenTitle"], "org_ib_d.internal.inAppOpenTitle")
        n.inAppDismissTitle = text(internals["inAppDismissTitle"], "org_ib_d.internal.inAppDismissTitle")
        n.deeplink = clickURL(text(internals["deeplink"], "org_ib_d.internal.deeplink"), "org_ib_d.internal.deeplink")
        n.webViewUrl = clickURL(text(internals["webViewUrl"], "org_ib_d.internal.webViewUrl"), "org_ib_d.internal.webViewUrl")
        n.browserUrl = clickURL(text(internals["browserUrl"], "org_ib_d.internal.browserUrl"), "org_ib_d.internal.browserUrl")
        n.clickUrl = n.deeplink ?? n.webViewUrl ?? n.browserUrl
        switch message["custom"] {
        case nil, .null?: break
        case .object(let o)?: n.customPayload = .object(o)
        case .string(let s)?: n.customPayload = decodeEmbedded(s)
        case _?: warn(.wrongType, "org_ib_d.custom")
        }
        try requireBody(n)
        return n
    }
}
