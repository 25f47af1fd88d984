import PushInbox
import PushSystem
import Testing

/// The Infobip SDK's predefined button titles in the client's language, and the buttons of an
/// in-app modal (issue 22: default MODAL actions, interactive categories, localised titles).
@Suite struct ActionTitlesTests {
    /// The 32 languages the vendor's document says the SDK translates the titles into, by the
    /// SDK's tags: Arabic, Czech, Danish, German, English, Spanish (Latin America), Spanish,
    /// Finnish, French, Hebrew, Croatian, Hungarian, Indonesian, Italian, Japanese, Korean,
    /// Malay, Norwegian, Dutch, Polish, Portuguese (Portugal), Portuguese, Romanian, Russian,
    /// Slovak, Swedish, Thai, Turkish, Vietnamese, Chinese (Simplified and Traditional), Hindi.
    static let documentLanguages = [
        "ar", "cs", "da", "de", "en", "es-419", "es", "fi", "fr", "he", "hr", "hu", "id", "it", "ja", "ko", "ms", "nb", "nl",
        "pl", "pt-PT", "pt", "ro", "ru", "sk", "sv", "th", "tr", "vi", "zh-Hans", "zh-Hant", "hi",
    ]

    @Test func everyLanguageOfTheDocumentHasAllFourTitles() throws {
        #expect(Set(Self.documentLanguages).count == 32)
        for tag in Self.documentLanguages {
            let titles = try #require(PredefinedTitles.byLanguage[tag], "no titles for \(tag)")
            for title in [titles.accept, titles.decline, titles.cancel, titles.open] {
                #expect(title.contains { !$0.isWhitespace }, "\(tag)")
            }
            // Each language is reachable by its own tag.
            #expect(TitleLanguage.lookup(tag)?.tag == tag)
        }
        #expect(PredefinedTitles.byLanguage["en"] == .english)
        #expect(PredefinedTitles.byLanguage["de"] == PredefinedTitles(accept: "Akzeptieren", decline: "Ablehnen", cancel: "Abbrechen", open: "Öffnen"))
        #expect(PredefinedTitles.byLanguage["ja"]?.cancel == "キャンセルする")
    }

    @Test(arguments: [
        (nil, "en"), ("", "en"), ("de", "de"), ("de-AT", "de"), ("DE-at", "de"), ("de_CH", "de"),
        ("fr-CA,en;q=0.8", "fr"), ("en;q=0.5, de;q=0.9", "de"), ("xx, de;q=0.1", "de"), ("en-US,en;q=0.9,ru;q=0.8", "en"),
        ("*", "en"), ("*, ru;q=0.5", "ru"), ("de;q=0", "en"), ("de;q=0.000, fr;q=0.001", "fr"), ("fr;q=0.5, de;q=0.5", "fr"),
        ("de ; Q = 0.7 , fr;q=0.6", "de"), ("de;q=abc, fr;q=0.5", "fr"), ("de;q=1.5", "en"), ("de;q=-1", "en"),
        ("de;q=0.1234", "en"), ("de;q=1e0", "en"), ("de;q=1.000", "de"), ("de;q=1.", "de"), ("de;level=1", "de"),
        ("zh-TW", "zh-Hant"), ("zh-Hant-HK", "zh-Hant"), ("zh-HK", "zh-Hant"), ("zh-Hans-HK", "zh-Hans"), ("zh-CN", "zh-Hans"),
        ("zh", "zh-Hans"), ("es-MX", "es-419"), ("es-419", "es-419"), ("es-ES", "es"), ("es", "es"), ("pt-BR", "pt"),
        ("pt-PT", "pt-PT"), ("pt", "pt"), ("iw", "he"), ("in-ID", "id"), ("no", "nb"), ("nb-NO", "nb"),
        ("tlh, sw;q=0.9", "en"), (",,, ;;, ru", "ru"), ("1de, de-1", "de"),
    ] as [(String?, String)])
    func acceptLanguage(header: String?, expected: String) {
        #expect(TitleLanguage.negotiate(acceptLanguage: header).tag == expected, "\(header ?? "nil")")
    }

    /// Headers built to hurt: huge, thousands of entries, malformed weights, binary junk, an
    /// endless tag. None traps, and each is answered in far less than a second (a debug build
    /// on a busy machine; a release build takes about a millisecond for the biggest).
    @Test func hostileHeadersNeitherTrapNorTakeLong() {
        // 2,500 entries: as many as pushspool-inbox lets in.
        let thousands = Array(repeating: "xx-YY;q=0.5", count: 2_500).joined(separator: ",") + ",de;q=0.6"
        let semicolons = "de" + String(repeating: ";", count: 500_000) + "q=0.9, fr"
        let cases = [
            thousands, semicolons,
            String(repeating: "a", count: 1_000_000),
            String(repeating: ",", count: 1_000_000),
            String(repeating: "de;q=0.5;q=", count: 100_000),
            "de;q=" + String(repeating: "9", count: 100_000),
            "de;q=0." + String(repeating: "0", count: 100_000) + "1",
            "\u{0}\u{1}\u{7f};q=\u{0}, 😀, ru-\u{0}, ,",
            String(repeating: "é", count: 100_000),
            "de-" + String(repeating: "a-", count: 200_000),
        ]
        let clock = ContinuousClock()
        for header in cases {
            var language = TitleLanguage.english
            let elapsed = clock.measure { language = TitleLanguage.negotiate(acceptLanguage: header) }
            #expect(elapsed < .seconds(1), "\(header.prefix(40))…: \(elapsed)")
            #expect(!language.titles.open.isEmpty)
        }
        #expect(TitleLanguage.negotiate(acceptLanguage: thousands).tag == "de", "the one translated entry wins")
        #expect(TitleLanguage.negotiate(acceptLanguage: "de" + String(repeating: ";", count: 1_000) + "q=0.9, fr;q=0.5").tag == "de",
                "empty parameters are skipped, the weight kept")
        // Only the first 32 KiB are read, and only whole elements of them.
        #expect(TitleLanguage.negotiate(acceptLanguage: semicolons).tag == "en")
        #expect(TitleLanguage.negotiate(acceptLanguage: String(repeating: "xx,", count: 11_000) + "de").tag == "en")
        #expect(TitleLanguage.negotiate(acceptLanguage: String(repeating: "xx,", count: 10_000) + "de").tag == "de")
        #expect(TitleLanguage.negotiate(acceptLanguage: String(repeating: " ", count: 32_766) + "de-AT").tag == "en", "de-AT cut is not de")
        // Random bytes: never a trap.
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let bytes = (0..<Int.random(in: 0...64, using: &generator)).map { _ in
                [UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: "q"), UInt8(ascii: "-"), UInt8(ascii: "."),
                 UInt8(ascii: "0"), UInt8(ascii: "1"), UInt8(ascii: "d"), UInt8(ascii: "e"), 0x20, 0xff, 0x00].randomElement(using: &generator)!
            }
            _ = TitleLanguage.negotiate(acceptLanguage: String(decoding: bytes, as: UTF8.self))
        }
    }

    @Test func langTagsAreCheckedForForm() {
        for good in ["de", "de-AT", "zh-Hant-TW", "pt_PT", "es-419", "x"] { #expect(TitleLanguage.isWellFormed(good), "\(good)") }
        for bad in ["", "*", "de-", "-de", "de--at", "d3", "deutschland", "de-abcdefghi", "de;q=1", "de,fr", "dé", String(repeating: "a-", count: 40) + "a"] {
            #expect(!TitleLanguage.isWellFormed(bad), "\(bad)")
        }
        #expect(TitleLanguage.lookup("tlh") == nil, "well formed, not translated")
    }

    // MARK: items

    static let now: Int64 = 1_800_000_000_000 + 60_000

    static let acceptDecline: JSONValue = .array([
        .object(["id": .string("mm_decline"), "title": .string("Decline"), "options": .array([.string("destructive"), .string("authenticationRequired"), .string("moRequired")])]),
        .object(["id": .string("mm_accept"), "title": .string("Accept"), "options": .array([.string("foreground"), .string("authenticationRequired"), .string("moRequired")])]),
    ])

    /// A resolved category is in both `actions` and `buttons` of the record.
    static func buttons(_ actions: JSONValue) -> JSONValue {
        .array((actions.arrayValue ?? []).map { action in
            .object(["id": action["id"]!, "text": action["title"]!, "options": action["options"]!])
        })
    }

    @Test func aModalWithoutACategoryHasCancelThenOpenInTheClientsLanguage() async throws {
        let f = try InboxFixture()
        let seq = try await f.notification(title: "plain", vendor: "infobip", presentation: "modal")
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        let item = try #require(try index.inapp(.user("alice"), now: Self.now))
        #expect(item.seq == seq)
        let english = item.inAppActions(.english)
        #expect(english.map(\.id) == ["mm_cancel", "mm_open"])
        #expect(english.map(\.title) == ["Cancel", "Open"])
        #expect(english.map(\.kind) == [.dismiss, .open])
        #expect(english.map(\.event) == ["nc.inapp-shown", "nc.open"])
        let german = try #require(TitleLanguage.lookup("de-AT"))
        #expect(item.inAppActions(german).map(\.title) == ["Abbrechen", "Öffnen"])
        #expect(item.inAppActions(TitleLanguage.negotiate(acceptLanguage: "zh-TW")).map(\.title) == ["取消", "打開"])
        let json = item.inAppJSON(german)
        #expect(json["inAppActions"]?.arrayValue?.first?["title"]?.stringValue == "Abbrechen")
        #expect(json["inAppActions"]?.arrayValue?.last?["event"]?.stringValue == "nc.open")
        #expect(json["inAppActions"]?.arrayValue?.last?["options"] == .array([.string("foreground")]))
    }

    @Test func thePushsOwnButtonTitlesWinOverTheSDKs() async throws {
        let f = try InboxFixture()
        try await f.notification(title: "titled", vendor: "infobip", presentation: "modal",
                                 extra: ["inAppOpenTitle": .string("Go"), "inAppDismissTitle": .string("Later")])
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        let item = try #require(try index.inapp(.user("alice"), now: Self.now))
        #expect(item.inAppActions(TitleLanguage.lookup("fr")!).map(\.title) == ["Later", "Go"])
        #expect(item.inAppActions(.english).map(\.kind) == [.dismiss, .open])
    }

    @Test func anInteractiveModalKeepsItsCategorysActionsInTheSDKsOrder() async throws {
        let f = try InboxFixture()
        try await f.notification(title: "invite", vendor: "infobip", presentation: "modal", category: "mm_accept_decline",
                                 extra: ["actions": Self.acceptDecline, "buttons": Self.buttons(Self.acceptDecline),
                                         "inAppOpenTitle": .string("Go")])
        // A MODAL is presented, not listed: a banner of the same category shows the list.
        try await f.notification(title: "invite banner", vendor: "infobip", category: "mm_accept_decline",
                                 extra: ["actions": Self.acceptDecline, "buttons": Self.buttons(Self.acceptDecline)])
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        let item = try #require(try index.inapp(.user("alice"), now: Self.now))
        let english = item.inAppActions(.english)
        // Decline first, as both SDKs set the category up; the push's open title does not
        // apply to a category's buttons.
        #expect(english.map(\.id) == ["mm_decline", "mm_accept"])
        #expect(english.map(\.title) == ["Decline", "Accept"])
        #expect(english.allSatisfy { $0.kind == .category && $0.event == "nc.action" })
        #expect(english[0].options == ["destructive", "authenticationRequired", "moRequired"])
        let french = try #require(TitleLanguage.lookup("fr-CA"))
        #expect(item.inAppActions(french).map(\.title) == ["Refuser", "Accepter"])
        // A listed item is localised too, in `actions` and in the category's `buttons`.
        let listed = try #require(try index.list(.user("alice"), now: Self.now).items.first).localized(french)
        #expect(listed.actions?.arrayValue?.compactMap { $0["title"]?.stringValue } == ["Refuser", "Accepter"])
        #expect(listed.buttons.arrayValue?.compactMap { $0["text"]?.stringValue } == ["Refuser", "Accepter"])
        #expect(listed.jsonValue()["actions"]?.arrayValue?.last?["options"]?.arrayValue?.count == 3, "only titles change")
    }

    @Test func aModalWhoseCategoryDidNotResolveOrTakesTextGetsTheDefaults() async throws {
        let f = try InboxFixture()
        try await f.notification(title: "unknown category", vendor: "infobip", presentation: "modal", category: "nowhere")
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try #require(try index.inapp(.user("alice"), now: Self.now)).inAppActions(.english).map(\.id) == ["mm_cancel", "mm_open"])
        let chat: JSONValue = .array([
            .object(["id": .string("like"), "title": .string("Like"), "options": .array([])]),
            .object(["id": .string("reply"), "title": .string("Reply"), "options": .array([]),
                     "textInput": .object(["buttonTitle": .string("Send"), "placeholder": .string("…")])]),
        ])
        try await f.notification(title: "chat", vendor: "infobip", presentation: "modal", category: "chat", extra: ["actions": chat])
        try index.catchUp(journalDirectory: f.journalDirectory)
        let item = try #require(try index.inapp(.user("alice"), now: Self.now))
        #expect(item.title == "chat")
        #expect(item.inAppActions(.english).map(\.id) == ["mm_cancel", "mm_open"])
    }

    /// Only the SDK's own action ids are retitled, and `buttons` only when they are a
    /// category's: a Mindbox button that happens to be called `mm_accept` keeps its text.
    @Test func onlyPredefinedActionsAreRetitled() async throws {
        let f = try InboxFixture()
        let custom: JSONValue = .array([.object(["id": .string("share"), "title": .string("Share"), "options": .array([])])])
        try await f.notification(title: "custom", vendor: "infobip", category: "share", extra: ["actions": custom, "buttons": Self.buttons(custom)])
        try await f.notification(title: "mindbox", extra: ["buttons": .array([.object(["id": .string("mm_accept"), "text": .string("Yes please")])])])
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        let german = try #require(TitleLanguage.lookup("de"))
        let items = try index.list(.user("alice"), now: Self.now).items.map { $0.localized(german) }
        #expect(items.first { $0.title == "custom" }?.actions?.arrayValue?.first?["title"]?.stringValue == "Share")
        #expect(items.first { $0.title == "mindbox" }?.buttons.arrayValue?.first?["text"]?.stringValue == "Yes please")
    }
}
