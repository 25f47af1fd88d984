/// Salesforce Marketing Cloud (docs/design/vendor-payloads.md, "Salesforce Marketing Cloud").
extension Session {
    /// Keys SFMC itself uses; everything else at the top level is the marketer's custom data.
    static let sfmcReserved: Set<String> = ["_sid", "_m", "_r", "_h", "_mt", "_od", "_x", "_pb", "_mediaUrl", "_mediaAlt", "aps",
                                           "alert", "title", "subtitle", "sound"]

    mutating func sfmc() throws(PayloadRefusal) -> PushNotification {
        let ios = map["aps"] != nil
        let platform: Platform = ios ? .ios : .android
        let format = ios ? "sfmc-ios" : "sfmc-android"
        guard let id = text(map["_m"], "_m"), !id.isEmpty else {
            throw PayloadRefusal(.missingId, "\(format) needs a non-empty _m (message id)", vendor: .sfmc, platform: platform, path: "_m")
        }
        var n = PushNotification(vendor: .sfmc, platform: platform, format: format, id: id)
        if ios {
            let aps = object(map["aps"], "aps") ?? [:]
            readAps(aps, soundAsDict: true, into: &n)
            n.silent = apsIsSilent(aps, n)
            resolveCategory(string(aps["category"], "aps.category"), platform: .ios, into: &n)
        } else {
            n.title = text(map["title"], "title")
            n.subtitle = text(map["subtitle"], "subtitle")
            n.body = text(map["alert"], "alert")
            n.sound = text(map["sound"], "sound")
        }
        n.messageType = text(map["_mt"], "_mt")
        n.requestId = nonEmpty(text(map["_r"], "_r"))
        n.hashId = nonEmpty(text(map["_h"], "_h"))
        n.clickUrl = clickURL(text(map["_od"], "_od"), "_od") ?? clickURL(text(map["_x"], "_x"), "_x")
        readMediaKeys(into: &n)
        let custom = map.filter { !Session.sfmcReserved.contains($0.key) }
        if !custom.isEmpty { n.customPayload = .object(custom) }
        try requireBody(n)
        return n
    }

    /// `_mediaUrl` / `_mediaAlt` (R7, R8). Without a usable URL no media is fetched, and the
    /// daemon's `MediaFallback` makes the alt text the body, as SFMC's sample extension does;
    /// the warning says why the body changed. The alt text is taken only as a String, as the
    /// sample reads it (`as? String`): a number or boolean is ignored with `wrong_type:_mediaAlt`
    /// and the body stays.
    mutating func readMediaKeys(into n: inout PushNotification) {
        let rawURL = text(map["_mediaUrl"], "_mediaUrl")
        n.mediaUrl = mediaURL(rawURL, "_mediaUrl")
        if let alt = string(map["_mediaAlt"], "_mediaAlt"), !alt.isEmpty {
            n.mediaAlt = alt
            if rawURL?.isEmpty ?? true { warn(.mediaAltWithoutURL) }
        }
    }
}
