import PushPayload
import PushSystem

/// The titles the Infobip SDKs give their predefined buttons: Accept and Decline of the
/// `mm_accept_decline` category, Cancel and Open of a non-interactive in-app modal. The SDKs
/// translate them into the device's language; ``byLanguage`` (InfobipActionTitles.swift,
/// generated from the iOS SDK's `MobileMessaging.strings`) holds their translations.
/// `Sendable` value.
package struct PredefinedTitles: Sendable, Equatable {
    package var accept: String
    package var decline: String
    package var cancel: String
    package var open: String

    package init(accept: String, decline: String, cancel: String, open: String) {
        self.accept = accept
        self.decline = decline
        self.cancel = cancel
        self.open = open
    }

    /// What a record stores and what is served when no language is asked for.
    package static let english = PredefinedTitles(accept: "Accept", decline: "Decline", cancel: "Cancel", open: "Open")

    /// The title of predefined category action `id` (`mm_accept`, `mm_decline`), `nil` for
    /// any other id. Apps cannot define `mm_` ids (the configuration refuses them), so an
    /// action with one of these ids always is the SDK's.
    package func title(ofAction id: String) -> String? {
        switch id {
        case "mm_accept": accept
        case "mm_decline": decline
        default: nil
        }
    }
}

/// The language the predefined titles are served in, chosen from what a client asked for:
/// an HTTP `Accept-Language` header (``negotiate(acceptLanguage:)``) or one tag
/// (`pushspoolctl … --lang`, ``lookup(_:)``). English when nothing asked for is translated.
/// `Sendable` value.
package struct TitleLanguage: Sendable, Equatable {
    /// The SDK's tag for it: `de`, `es-419`, `pt-PT`, `zh-Hans`.
    package let tag: String
    package let titles: PredefinedTitles

    package static let english = TitleLanguage(tag: "en", titles: .english)

    /// The longest language range considered, in bytes: a real tag (`zh-Hant-TW`,
    /// `de-CH-1996`) is far shorter, so a longer one is skipped without a look.
    static let maxTagBytes = 64

    /// The most of an `Accept-Language` value read: what pushspool-inbox admits of a whole
    /// request head (32 KiB). A real one is a few dozen bytes; the elements past this are
    /// ignored.
    static let maxHeaderBytes = 32 << 10

    /// The translated language that serves `tag` (a BCP 47 language tag, `_` accepted for `-`
    /// as POSIX locales write it: `de_AT`), or `nil` when none does or `tag` is not a
    /// language tag (`*` included). The rule is RFC 4647 lookup — a language-region tag falls
    /// back to its language (`de-AT` → `de`) — plus what the SDK's translations need: a
    /// Chinese script or region picks Simplified or Traditional (`zh-TW`, `zh-HK`, `zh-MO` and
    /// `zh-Hant…` Traditional, other `zh` Simplified), a Latin-American Spanish (`es-419`,
    /// `es-MX`…) picks `es-419`, `pt-PT` is kept apart from `pt`, and the deprecated or
    /// macrolanguage codes Android still uses (`iw` Hebrew, `in` Indonesian, `no` Norwegian)
    /// name the SDK's `he`, `id`, `nb`.
    package static func lookup(_ tag: String) -> TitleLanguage? {
        tag.utf8.count <= maxTagBytes ? lookup(Array(tag.utf8)[...]) : nil
    }

    /// Whether `tag` is a language tag as `--lang` takes it: 1-8 letters, then any number of
    /// `-` (or `_`) and 1-8 letters or digits, at most 64 bytes.
    package static func isWellFormed(_ tag: String) -> Bool {
        tag.utf8.count <= maxTagBytes && subtags(Array(tag.utf8)[...]) != nil
    }

    /// The language for an `Accept-Language` header (RFC 9110 12.5.4): the translated
    /// language of the range with the highest weight, the earliest among equal weights;
    /// English when there is no header or nothing in it is translated. Ranges with `q=0`
    /// ("not acceptable") or a malformed weight are skipped, as are empty elements and
    /// malformed or over-long ranges: a bad entry never spoils the rest. One pass over the
    /// bytes, allocating nothing per element but for a range that may name a translated
    /// language, and over ``maxHeaderBytes`` at most: a header of thousands of entries costs
    /// about a millisecond.
    package static func negotiate(acceptLanguage header: String?) -> TitleLanguage {
        guard let header else { return .english }
        var bytes = Array(header.utf8.prefix(maxHeaderBytes))
        if bytes.count == maxHeaderBytes, header.utf8.count > maxHeaderBytes {
            // Cut: only the elements that are whole count.
            bytes.removeSubrange((bytes.lastIndex(of: UInt8(ascii: ",")) ?? 0)...)
        }
        var best: TitleLanguage?
        var bestWeight = 0
        var start = 0
        while start <= bytes.count {
            var end = start
            while end < bytes.count, bytes[end] != UInt8(ascii: ",") { end += 1 }
            if let (range, weight) = element(bytes[start..<end]), weight > bestWeight, let language = lookup(range) {
                best = language
                bestWeight = weight
                if weight == 1000 { break }  // nothing later can outweigh it
            }
            start = end + 1
        }
        return best ?? .english
    }

    /// One element of the list: its range and its weight in thousandths (1000 without `q`),
    /// or `nil` when it is empty, has a malformed weight or weighs 0.
    /// Scans in place, allocating nothing: an element may hold any number of parameters.
    static func element(_ bytes: ArraySlice<UInt8>) -> (range: ArraySlice<UInt8>, weight: Int)? {
        let semicolon = UInt8(ascii: ";")
        var cursor = bytes.startIndex
        while cursor < bytes.endIndex, bytes[cursor] != semicolon { cursor += 1 }
        let range = trimmed(bytes[bytes.startIndex..<cursor])
        guard !range.isEmpty else { return nil }
        var weight = 1000
        while cursor < bytes.endIndex {  // at a `;`
            let start = cursor + 1
            var end = start
            while end < bytes.endIndex, bytes[end] != semicolon { end += 1 }
            cursor = end
            let parameter = bytes[start..<end]
            guard let equals = parameter.firstIndex(of: UInt8(ascii: "=")) else { continue }
            let name = trimmed(parameter[..<equals])
            // Accept-Language defines no parameter but `q` (any case): ignore another one.
            guard name.count == 1, name[name.startIndex] | 0x20 == UInt8(ascii: "q") else { continue }
            guard let q = qvalue(trimmed(parameter[(equals + 1)...])) else { return nil }
            weight = q
        }
        return weight > 0 ? (range, weight) : nil
    }

    /// RFC 9110 12.4.2 `qvalue` in thousandths: `0` or `1`, optionally `.` and up to three
    /// digits (only zeros after a `1`). Anything else (`1.5`, `-1`, `0.0001`, `1e3`) is `nil`.
    static func qvalue(_ text: ArraySlice<UInt8>) -> Int? {
        guard let first = text.first, first == UInt8(ascii: "0") || first == UInt8(ascii: "1") else { return nil }
        var value = Int(first - UInt8(ascii: "0")) * 1000
        let rest = text.dropFirst()
        if rest.isEmpty { return value }
        guard rest.first == UInt8(ascii: "."), rest.count <= 4 else { return nil }
        var scale = 100
        for digit in rest.dropFirst() {
            guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return nil }
            value += Int(digit - UInt8(ascii: "0")) * scale
            scale /= 10
        }
        return value <= 1000 ? value : nil
    }

    static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, first == 0x20 || first == 0x09 { slice = slice.dropFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice = slice.dropLast() }
        return slice
    }

    /// The lower-cased subtags of a well-formed tag, `nil` for anything else (`*` included).
    static func subtags(_ bytes: ArraySlice<UInt8>) -> [String]? {
        guard !bytes.isEmpty, bytes.count <= maxTagBytes else { return nil }
        var result: [String] = []
        for part in bytes.split(omittingEmptySubsequences: false, whereSeparator: isSeparator) {
            // The primary language subtag is letters only; later ones may hold digits.
            guard let subtag = lowered(part, digits: !result.isEmpty) else { return nil }
            result.append(subtag)
        }
        return result
    }

    static func isSeparator(_ byte: UInt8) -> Bool { byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") }

    /// `part` lower-cased when it is 1-8 ASCII letters (or digits too, with `digits`), else
    /// `nil`. At most 8 bytes: Swift keeps such a string inline, without an allocation.
    static func lowered(_ part: ArraySlice<UInt8>, digits: Bool) -> String? {
        guard (1...8).contains(part.count) else { return nil }
        var valid = true
        let text = String(unsafeUninitializedCapacity: part.count) { buffer in
            for (offset, byte) in part.enumerated() {
                let folded = byte | 0x20
                if folded >= UInt8(ascii: "a"), folded <= UInt8(ascii: "z") {
                    buffer[offset] = folded
                } else if digits, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") {
                    buffer[offset] = byte
                } else {
                    valid = false
                    return 0
                }
            }
            return part.count
        }
        return valid ? text : nil
    }

    /// The primary subtags that can name a translated language: a range with another one is
    /// passed over before its other subtags are looked at.
    static let translatedPrimaries: Set<String> = Set(PredefinedTitles.byLanguage.keys.map { String($0.prefix { $0 != "-" }) })
        .union(["iw", "in", "no"])

    /// Regions whose Spanish is Latin-American Spanish (`es-419`): the Americas.
    static let latinAmericanRegions: Set<String> = [
        "419", "ar", "bo", "br", "bz", "cl", "co", "cr", "cu", "do", "ec", "gt", "hn", "mx", "ni", "pa", "pe", "pr", "py",
        "sv", "us", "uy", "ve",
    ]

    static func lookup(_ bytes: ArraySlice<UInt8>) -> TitleLanguage? {
        guard !bytes.isEmpty, bytes.count <= maxTagBytes,
              let primary = lowered(bytes.prefix { !isSeparator($0) }, digits: false), translatedPrimaries.contains(primary),
              let subtags = subtags(bytes) else { return nil }
        let rest = subtags.dropFirst()
        let tag: String
        switch primary {
        case "zh":
            let traditional = rest.contains("hant") || (!rest.contains("hans") && rest.contains { ["tw", "hk", "mo"].contains($0) })
            tag = traditional ? "zh-Hant" : "zh-Hans"
        case "es": tag = rest.contains { latinAmericanRegions.contains($0) } ? "es-419" : "es"
        case "pt": tag = rest.contains("pt") ? "pt-PT" : "pt"
        case "iw": tag = "he"
        case "in": tag = "id"
        case "no": tag = "nb"
        default: tag = primary
        }
        guard let titles = PredefinedTitles.byLanguage[tag] else { return nil }
        return TitleLanguage(tag: tag, titles: titles)
    }
}

/// One button of an in-app modal, in display order. `Sendable` value.
package struct InAppAction: Sendable, Equatable {
    /// What a person's tap on it means.
    package enum Kind: String, Sendable {
        /// Cancel: the modal is dismissed; it was shown (`nc.inapp-shown`) and is not presented again.
        case dismiss
        /// Open: the push is opened, as a tap on it in the inbox (`nc.open`).
        case open
        /// An action of the push's interactive category (`nc.action`).
        case category
    }

    package var id: String
    package var title: String
    package var kind: Kind
    package var options: [String]

    /// The event type a tap writes.
    package var event: String {
        switch kind {
        case .dismiss: EventType.inAppShown.rawValue
        case .open: EventType.open.rawValue
        case .category: EventType.action.rawValue
        }
    }

    /// `{id, title, event, options}`.
    package func jsonValue() -> JSONValue {
        .object(["id": .string(id), "title": .string(title), "event": .string(event), "options": .array(options.map { .string($0) })])
    }
}

extension InboxItem {
    /// The item with the predefined actions' titles (`mm_accept`, `mm_decline`) in
    /// `language`: in `actions`, and in `buttons` when those are the category's actions
    /// (a record lists a resolved category's actions in both). Other titles are the app's
    /// or the push's own and stay as they are.
    package func localized(_ language: TitleLanguage) -> InboxItem {
        guard let actions, case .array(let list) = actions else { return self }
        var copy = self
        copy.actions = .array(list.map { Self.retitle($0, key: "title", language) })
        if case .array(let buttons) = buttons {
            copy.buttons = .array(buttons.map { Self.retitle($0, key: "text", language) })
        }
        return copy
    }

    private static func retitle(_ action: JSONValue, key: String, _ language: TitleLanguage) -> JSONValue {
        guard case .object(var o) = action, let id = o["id"]?.stringValue, let title = language.titles.title(ofAction: id) else { return action }
        o[key] = .string(title)
        return .object(o)
    }

    /// The buttons of this item presented as an in-app modal, as the Infobip SDKs build
    /// them: an interactive push (its category resolved to actions, none of them a text
    /// input) shows its category's actions in their order; any other shows Cancel then Open,
    /// titled by the push's `inAppDismissTitle` / `inAppOpenTitle` when it has them, else by
    /// the SDK's titles in `language`.
    package func inAppActions(_ language: TitleLanguage) -> [InAppAction] {
        if let list = actions?.arrayValue, !list.isEmpty, !list.contains(where: { $0["textInput"] != nil }) {
            return list.compactMap { action in
                guard let id = action["id"]?.stringValue, !id.isEmpty else { return nil }
                let title = language.titles.title(ofAction: id) ?? action["title"]?.stringValue ?? id
                let options = (action["options"]?.arrayValue ?? []).compactMap(\.stringValue)
                return InAppAction(id: id, title: title, kind: .category, options: options)
            }
        }
        func given(_ title: String?) -> String? { title.flatMap { $0.isEmpty ? nil : $0 } }
        return [
            InAppAction(id: "mm_cancel", title: given(inAppDismissTitle) ?? language.titles.cancel, kind: .dismiss, options: []),
            InAppAction(id: "mm_open", title: given(inAppOpenTitle) ?? language.titles.open, kind: .open, options: ["foreground"]),
        ]
    }

    /// The ids of the actions the push offered: its category's resolved actions (`actions`,
    /// as many as the platform shows) and the ids of its buttons, in that order, without
    /// repeats. An action id outside these was never shown to the user.
    package var offeredActionIds: [String] {
        let fromActions = (actions?.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
        let fromButtons = (buttons.arrayValue ?? []).compactMap { $0["id"]?.stringValue }
        return IdBytes.unique((fromActions + fromButtons).filter { !$0.isEmpty })
    }

    /// Whether `action` is one of ``offeredActionIds`` (compared by bytes).
    package func offersAction(_ action: String) -> Bool {
        offeredActionIds.contains { IdBytes.equal($0, action) }
    }

    /// ``jsonValue()`` of the item localized to `language`, with its modal's buttons as
    /// `inAppActions`: what `pushspoolctl nc inapp --json` prints.
    package func inAppJSON(_ language: TitleLanguage) -> JSONValue {
        guard case .object(var o) = localized(language).jsonValue() else { return jsonValue() }
        o["inAppActions"] = .array(inAppActions(language).map { $0.jsonValue() })
        return .object(o)
    }
}
