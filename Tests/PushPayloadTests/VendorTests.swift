import Testing
@testable import PushPayload
import PushSystem

@Suite struct MindboxTests {
    @Test func iosCurrentMapsEveryField() throws {
        let n = try accept(#"""
            {"aps": {"alert": {"title": "T", "body": "B"}, "sound": "default", "mutable-content": 1, "content-available": 1.0},
             "clickUrl": "https://e.example/c", "imageUrl": "https://cdn.example/i.png",
             "payload": "{\"pushName\":\"N\",\"pushDate\":\"2026-01-02\"}",
             "buttons": [{"text": "Open", "url": "https://e.example/o", "uniqueKey": "k1"}, {"text": "NoUrl", "uniqueKey": "k2"}],
             "uniqueKey": "U1"}
            """#)
        #expect(n.vendor == .mindbox && n.platform == .ios && n.format == "mindbox-ios")
        #expect(n.id == "U1" && n.dedupKey == "mindbox:U1")
        #expect(n.title == "T" && n.body == "B" && n.sound == "default")
        #expect(n.clickUrl == "https://e.example/c" && n.mediaUrl == "https://cdn.example/i.png")
        #expect(n.buttons == [NotificationButton(id: "k1", text: "Open", url: "https://e.example/o", options: [.foreground]),
                              NotificationButton(id: "k2", text: "NoUrl", url: nil, options: [.foreground])])
        #expect(n.customPayload == .object(["pushName": .string("N"), "pushDate": .string("2026-01-02")]))
        #expect(n.sentAt == "2026-01-02")
        #expect(!n.silent && n.warnings.isEmpty)
    }

    @Test func iosLegacyReadsFromAps() throws {
        let n = try accept(#"""
            {"aps": {"alert": {"body": "B"}, "clickUrl": "https://e.example/l", "uniqueKey": "L1", "imageUrl": "https://cdn.example/l.jpg",
                     "buttons": [{"text": "ok", "url": "https://e.example/b", "uniqueKey": "b"}, {"text": "no key", "url": "https://e.example/x"}]}}
            """#)
        #expect(n.format == "mindbox-ios-legacy" && n.id == "L1" && n.clickUrl == "https://e.example/l" && n.mediaUrl == "https://cdn.example/l.jpg")
        #expect(n.buttons.map(\.id) == ["b"])
        #expect(n.warnings == [PayloadWarning(.buttonDropped, "aps.buttons[1]")])
    }

    @Test(arguments: [
        (#"{"aps": {"alert": "s"}, "clickUrl": "https://e.example", "uniqueKey": "u"}"#, "aps.alert"),
        (#"{"aps": {"alert": {"body": "b"}, "sound": {"name": "x"}}, "clickUrl": "https://e.example", "uniqueKey": "u"}"#, "aps.sound"),
        (#"{"aps": {"alert": {"body": "b"}, "mutable-content": 1.5}, "clickUrl": "https://e.example", "uniqueKey": "u"}"#, "aps.mutable-content"),
        (#"{"aps": {"alert": {"body": "b"}, "content-available": true}, "clickUrl": "https://e.example", "uniqueKey": "u"}"#, "aps.content-available"),
        (#"{"aps": {"alert": {"body": "b"}}, "clickUrl": "https://e.example", "payload": {"a": 1}, "uniqueKey": "u"}"#, "payload"),
        (#"{"aps": {"alert": {"body": "b"}}, "clickUrl": "https://e.example", "buttons": [{"text": 5}]}"#, "buttons[0].text"),
        (#"{"aps": {"alert": {"body": 7}}, "clickUrl": "https://e.example"}"#, "aps.alert.body"),
        (#"{"aps": {"alert": {"body": "b"}}, "clickUrl": 1, "uniqueKey": "u"}"#, "clickUrl"),
    ])
    func iosStrictTypesRefuse(_ json: String, _ path: String) {
        let r = refusal(json)
        #expect(r?.code == .typeMismatch)
        #expect(r?.path == path)
        #expect(r?.vendor == .mindbox)
    }

    @Test func iosWithoutUniqueKeyGetsStableDerivedId() throws {
        let a = try accept(#"{"aps": {"alert": {"body": "b"}}, "clickUrl": "https://e.example"}"#)
        let b = try accept("{ \"clickUrl\" : \"https:\\/\\/e.example\",\n \"aps\": {\"alert\": {\"body\": \"b\"}} }")
        #expect(a.id == b.id)
        #expect(a.id.count == 64)
        #expect(a.warnings == [PayloadWarning(.derivedId)])
        let c = try accept(#"{"aps": {"alert": {"body": "c"}}, "clickUrl": "https://e.example"}"#)
        #expect(c.id != a.id)
    }

    @Test func iosPlainTextPayloadIsKeptAsString() throws {
        let n = try accept(#"{"aps": {"alert": {"body": "b"}}, "clickUrl": "https://e.example", "uniqueKey": "u", "payload": "Пример полезной нагрузки"}"#)
        #expect(n.customPayload == .string("Пример полезной нагрузки"))
        #expect(n.sentAt == nil)
    }

    @Test func genericApnsWithStrayClickUrlIsNotClaimed() throws {
        let n = try accept(#"{"aps": {"alert": "x"}, "clickUrl": "https://e.example", "other": 1}"#)
        #expect(n.vendor == .apns)
    }

    @Test func androidDataWithButtonsString() throws {
        let n = try accept(#"""
            {"data": {"uniqueKey": "A1", "title": "T", "message": "M", "clickUrl": "https://e.example/a", "imageUrl": "https://cdn.example/a.webp",
             "buttons": "[{\"text\":\"Buy\",\"url\":\"https://e.example/b\",\"uniqueKey\":\"buy\"},{\"uniqueKey\":\"notext\"}]",
             "payload": "{\"pushDate\":\"d\"}"}}
            """#)
        #expect(n.vendor == .mindbox && n.platform == .android && n.format == "mindbox-android" && n.id == "A1")
        #expect(n.title == "T" && n.body == "M" && n.clickUrl == "https://e.example/a" && n.mediaUrl == "https://cdn.example/a.webp")
        #expect(n.buttons == [NotificationButton(id: "buy", text: "Buy", url: "https://e.example/b", options: [])])
        #expect(n.warnings == [PayloadWarning(.buttonDropped, "buttons[1]")])
        #expect(n.sentAt == "d")
    }

    /// The guide's step 4.7 names the saved values `push_name` / `push_date`: the date gives
    /// `sentAt` as `pushDate` does (which wins when both are there).
    @Test func theGuidesUnderscoreDateGivesSentAt() throws {
        let n = try accept(#"{"uniqueKey": "A3", "message": "M", "payload": "{\"push_name\":\"n\",\"push_date\":\"01.03.2026 10:00\"}"}"#)
        #expect(n.sentAt == "01.03.2026 10:00")
        let both = try accept(#"{"uniqueKey": "A4", "message": "M", "payload": "{\"pushDate\":\"a\",\"push_date\":\"b\"}"}"#)
        #expect(both.sentAt == "a")
    }

    @Test func androidButtonsMayBeAnArray() throws {
        let n = try accept(#"{"uniqueKey": "A2", "message": "M", "buttons": [{"text": "x"}]}"#)
        #expect(n.buttons.map(\.text) == ["x"])
    }

    @Test func androidTruncatesToThreeButtons() throws {
        let n = try accept(#"{"uniqueKey": "A3", "message": "M", "buttons": [{"text": "1"}, {"text": "2"}, {"text": "3"}, {"text": "4"}, {"text": "5"}]}"#)
        #expect(n.buttons.map(\.text) == ["1", "2", "3"])
        #expect(n.warnings == [PayloadWarning(.buttonsTruncated, "5")])
    }

    @Test func androidConvertedForm() throws {
        let n = try accept(#"{"uniqueKey": "C1", "title": "T", "description": "D", "pushLink": "https://e.example/p", "pushActions": [{"uniqueKey": "a", "text": "Act", "url": "https://e.example/x"}]}"#)
        #expect(n.format == "mindbox-android-converted" && n.body == "D" && n.clickUrl == "https://e.example/p")
        #expect(n.buttons == [NotificationButton(id: "a", text: "Act", url: "https://e.example/x")])
    }

    @Test func androidEmptyUniqueKeyIsMissingId() {
        #expect(refusal(#"{"data": {"uniqueKey": "", "message": "m"}}"#)?.code == .missingId)
    }

    @Test func androidWithoutMessageIsMissingBody() {
        #expect(refusal(#"{"data": {"uniqueKey": "u", "title": "only title"}}"#)?.code == .missingBody)
    }

    @Test func nullApsDoesNotHideAndroidData() throws {
        let n = try accept(#"{"aps": null, "uniqueKey": "A4", "message": "M"}"#)
        #expect(n.format == "mindbox-android")
    }

    @Test func uniqueKeyAloneIsNotMindbox() {
        #expect(refusal(#"{"uniqueKey": "u"}"#)?.code == .unrecognized)
    }
}

@Suite struct InfobipTests {
    @Test func iosMirrorModalWithEverything() throws {
        let n = try accept(#"""
            {"messageId": "I1", "aps": {"alert": {"title": "T", "body": "B"}, "badge": 3, "sound": "s.caf"},
             "internalData": {"sendDateTime": 1700000000123, "inAppStyle": 0, "inAppExpiryDateTime": 1700003600000,
                              "atts": [{"url": "https://cdn.example/1.jpg", "t": "image"}, {"url": "https://cdn.example/2.jpg"}],
                              "webViewUrl": "https://e.example/w", "messageType": "chat"},
             "customPayload": {"nested": {"k": [1, 2]}}}
            """#)
        #expect(n.vendor == .infobip && n.platform == .ios && n.format == "infobip-ios" && n.id == "I1")
        #expect(n.title == "T" && n.body == "B" && n.badge == 3 && n.sound == "s.caf")
        #expect(n.presentation == .modal)
        #expect(n.sentAt == "2023-11-14T22:13:20.123Z" && n.expiresAt == "2023-11-14T23:13:20.000Z")
        #expect(n.mediaUrl == "https://cdn.example/1.jpg" && n.clickUrl == "https://e.example/w" && n.messageType == "chat")
        #expect(n.customPayload == .object(["nested": .object(["k": .array([.number("1"), .number("2")])])]))
        #expect(n.warnings.isEmpty)
    }

    @Test(arguments: [
        (#""inAppStyle": 1"#, Presentation.banner), (#""inAppStyle": 0"#, .modal), (#""inApp": true"#, .modal),
        (#""inAppDetails": {"url": "https://e.example/ia", "type": 1}"#, .inApp),
    ])
    func iosPresentation(_ member: String, _ expected: Presentation) throws {
        let n = try accept(#"{"messageId": "I2", "aps": {"alert": {"body": "B"}}, "internalData": {"# + member + "}}")
        #expect(n.presentation == expected)
    }

    @Test func iosDeeplinkPreferredOverBrowserUrl() throws {
        let n = try accept(#"{"messageId": "I3", "aps": {"alert": {"body": "B"}}, "internalData": {"browserUrl": "https://e.example/b", "deeplink": "app://d"}}"#)
        #expect(n.clickUrl == "app://d")
    }

    @Test func iosAlertStringIsTheDisplayedBody() throws {
        // The SDK accepts it (its `text` stays nil); iOS shows the string (issue 8 defect 9).
        let n = try accept(#"{"messageId": "I4", "aps": {"alert": "plain"}}"#)
        #expect(n.body == "plain" && n.warnings.isEmpty)
    }

    @Test func iosSendDateTimeAsStringIsWrongType() throws {
        let n = try accept(#"{"messageId": "I5", "aps": {"alert": {"body": "B"}}, "internalData": {"sendDateTime": "1700000000000"}}"#)
        #expect(n.sentAt == nil)
        #expect(n.warnings == [PayloadWarning(.wrongType, "internalData.sendDateTime")])
    }

    @Test(arguments: ["1e30", "-5", "253402300800000"])
    func implausibleEpochIsInvalidValue(_ lexeme: String) throws {
        let n = try accept(#"{"messageId": "I5b", "aps": {"alert": {"body": "B"}}, "internalData": {"sendDateTime": "# + lexeme + "}}")
        #expect(n.sentAt == nil)
        #expect(n.warnings == [PayloadWarning(.invalidValue, "internalData.sendDateTime")])
    }

    @Test func iosSilentMergesTheSilentDictionary() throws {
        let n = try accept(#"{"messageId": "I6", "aps": {"content-available": 1}, "internalData": {"silent": {"title": "T", "body": "S", "sound": "x", "category": "mm_accept_decline"}}}"#)
        #expect(n.silent && n.title == "T" && n.body == "S" && n.sound == "x" && n.category == "mm_accept_decline")
        #expect(n.buttons.count == 2)
    }

    @Test func iosSilentWithoutBodyIsAccepted() throws {
        let n = try accept(#"{"messageId": "I7", "internalData": {"silent": {}}}"#)
        #expect(n.silent && n.body == nil)
    }

    @Test func builtInAcceptDeclineActions() throws {
        let n = try accept(#"{"messageId": "I8", "aps": {"alert": {"body": "B"}, "category": "mm_accept_decline"}}"#)
        #expect(n.buttons == [
            NotificationButton(id: "mm_decline", text: "Decline", url: nil, options: [.destructive, .authenticationRequired, .moRequired]),
            NotificationButton(id: "mm_accept", text: "Accept", url: nil, options: [.foreground, .authenticationRequired, .moRequired]),
        ])
        #expect(n.warnings.isEmpty)
    }

    @Test func appCategoryWithFiveActionsShowsFourOnIOSAndThreeOnAndroid() throws {
        let ios = try accept(#"{"messageId": "I9", "aps": {"alert": {"body": "B"}, "category": "five"}}"#, options: fiveActionOptions)
        #expect(ios.buttons.map(\.id) == ["a1", "a2", "a3", "a4"])
        #expect(ios.warnings == [PayloadWarning(.actionsTruncated, "5")])
        let android = try accept(#"{"data": {"org_ib_d": "{\"messageId\":\"I9a\",\"text\":\"t\",\"notification\":{\"category\":\"five\"}}"}}"#, options: fiveActionOptions)
        #expect(android.buttons.count == 3)
    }

    @Test func categoryTableRefusesReservedAndDuplicateIds() {
        #expect(throws: CategoryTableError.self) { try CategoryTable.builtIn.adding(NotificationCategory(id: "mm_mine", actions: [])) }
        #expect(throws: CategoryTableError.self) {
            try CategoryTable.builtIn.adding(NotificationCategory(id: "ok", actions: [CategoryAction(id: "mm_x", title: "x")]))
        }
        #expect(throws: CategoryTableError.self) {
            try CategoryTable.builtIn.adding(NotificationCategory(id: "c", actions: [])).adding(NotificationCategory(id: "c", actions: []))
        }
    }

    @Test func appCategoriesResolveAfterAdding() throws {
        let table = try CategoryTable.builtIn.adding(contentsOf: [
            NotificationCategory(id: "MEETING", actions: [CategoryAction(id: "join", title: "Join", options: [.foreground])]),
        ])
        var options = NormalizerOptions()
        options.categories = table
        let json = #"{"messageId": "I10", "aps": {"alert": {"body": "B"}, "category": "MEETING"}}"#
        #expect(try accept(json, options: options).buttons == [NotificationButton(id: "join", text: "Join", url: nil, options: [.foreground])])
        #expect(try accept(json).warnings == [PayloadWarning(.categoryUnknown, "MEETING")])
        #expect(table["mm_accept_decline"] != nil)
    }

    @Test func androidOrgIbD() throws {
        let inner = #"{\"messageId\":\"IA1\",\"text\":\"Hello\",\"notification\":{\"title\":\"T\",\"sound\":\"default\",\"inAppStyle\":\"BANNER\",\"contentUrl\":\"https://cdn.example/a.png\"},\"custom\":{\"k\":\"v\"},\"internal\":{\"sendDateTime\":\"1700000000000\",\"deeplink\":\"app://x\"}}"#
        let n = try accept(#"{"data": {"org_ib_d": ""# + inner + #""}}"#)
        #expect(n.vendor == .infobip && n.platform == .android && n.format == "infobip-android" && n.id == "IA1")
        #expect(n.title == "T" && n.body == "Hello" && n.sound == "default" && n.presentation == .banner)
        #expect(n.mediaUrl == "https://cdn.example/a.png" && n.clickUrl == "app://x" && n.sentAt == "2023-11-14T22:13:20.000Z")
        #expect(n.customPayload == .object(["k": .string("v")]))
    }

    /// The SDKs put the push's `bulkId` into the MO an action sends; the record keeps it
    /// (iOS `internalData.bulkId`, Android `org_ib_d.internal.bulkId`).
    @Test func bulkIdIsKeptOnBothPlatforms() throws {
        let ios = try accept(#"{"messageId": "IB9", "aps": {"alert": {"body": "b"}}, "internalData": {"bulkId": "bulk-ios"}}"#)
        #expect(ios.jsonValue()["bulkId"] == .string("bulk-ios"))
        let inner = #"{\"messageId\":\"IA9\",\"text\":\"Hello\",\"internal\":{\"bulkId\":\"bulk-android\"}}"#
        let android = try accept(#"{"data": {"org_ib_d": ""# + inner + #""}}"#)
        #expect(android.jsonValue()["bulkId"] == .string("bulk-android"))
    }

    @Test(arguments: [(#""MODAL""#, Presentation.modal), (#""0""#, .modal), ("0", .modal), (#""1""#, .banner), ("1", .banner)])
    func androidInAppStyleVariants(_ style: String, _ expected: Presentation) throws {
        let orgIbD = JSONValue.object([
            "messageId": .string("IA2"), "text": .string("t"),
            "notification": .object(["inAppStyle": try JSONParser().parse(style)]),
        ])
        let json = JSONValue.object(["data": .object(["org_ib_d": .string(orgIbD.serializedString())])]).serializedString()
        let n = try accept(json)
        #expect(n.presentation == expected)
    }

    @Test func androidWithoutNotificationObjectIsAccepted() throws {
        // The SDK's mapper looks like it would NPE here (docs/design/vendor-payloads.md,
        // "Infobip"); pushspool just reads it.
        let n = try accept(#"{"org_ib_d": "{\"messageId\":\"IA3\",\"text\":\"t\"}"}"#)
        #expect(n.id == "IA3" && n.title == nil)
    }

    @Test func androidOrgIbDFaults() {
        #expect(refusal(#"{"org_ib_d": "{\"messageId\":"}"#)?.code == .invalidJSON)
        #expect(refusal(#"{"org_ib_d": "{\"messageId\":\"a\",\"messageId\":\"b\",\"text\":\"t\"}"}"#)?.code == .duplicateKeys)
        #expect(refusal(#"{"org_ib_d": "[1]"}"#)?.code == .typeMismatch)
        #expect(refusal(#"{"org_ib_d": 5}"#)?.code == .typeMismatch)
        #expect(refusal(#"{"org_ib_d": "{\"messageId\":\"m\",\"text\":\"\"}"}"#)?.code == .missingBody)
        #expect(refusal(#"{"org_ib_d": "{\"text\":\"t\"}"}"#)?.code == .missingId)
    }

    @Test func moMessageIsNotAPush() {
        #expect(refusal(#"{"messageId": "m", "text": "STOP", "destination": "123"}"#)?.code == .notAPush)
    }

    @Test func messageIdWithoutApsIsNotInfobip() {
        #expect(refusal(#"{"messageId": "m", "text": "t"}"#)?.code == .unrecognized)
    }
}

@Suite struct SFMCTests {
    @Test func iosRichPush() throws {
        let n = try accept(#"""
            {"_sid": "SFMC", "_m": "S1", "_mt": 1, "_od": "https://e.example/od", "_x": "https://e.example/x",
             "_mediaUrl": "https://cdn.example/m.jpg", "_mediaAlt": "Alt", "custom1": "c",
             "aps": {"alert": {"title": "T", "subtitle": "Sub", "body": "B"}, "badge": 4, "sound": "custom.caf", "category": "APP", "mutable-content": 1}}
            """#)
        #expect(n.vendor == .sfmc && n.platform == .ios && n.format == "sfmc-ios" && n.id == "S1")
        #expect(n.title == "T" && n.subtitle == "Sub" && n.body == "B" && n.badge == 4 && n.sound == "custom.caf")
        #expect(n.clickUrl == "https://e.example/od" && n.mediaUrl == "https://cdn.example/m.jpg" && n.mediaAlt == "Alt")
        #expect(n.messageType == "1" && n.category == "APP")
        #expect(n.customPayload == .object(["custom1": .string("c")]))
        #expect(n.warnings == [PayloadWarning(.categoryUnknown, "APP")])
    }

    @Test func iosAlertStringAndCloudPage() throws {
        let n = try accept(#"{"_sid": "SFMC", "_m": "S2", "_x": "https://e.example/x", "aps": {"alert": "Hello"}}"#)
        #expect(n.body == "Hello" && n.clickUrl == "https://e.example/x")
    }

    @Test func iosSilentIsContentAvailableWithoutAlert() throws {
        let silent = try accept(#"{"_sid": "SFMC", "_m": "S3", "aps": {"content-available": 1}}"#)
        #expect(silent.silent)
        let visible = try accept(#"{"_sid": "SFMC", "_m": "S4", "aps": {"content-available": 1, "alert": "x"}}"#)
        #expect(!visible.silent)
        #expect(refusal(#"{"_sid": "SFMC", "_m": "S5", "aps": {"sound": "default"}}"#)?.code == .missingBody)
    }

    @Test func androidDataMapWithStrings() throws {
        let n = try accept(#"{"data": {"_sid": "SFMC", "_m": "SA1", "_mt": "8", "title": "T", "subtitle": "S", "alert": "B", "sound": "default", "_mediaUrl": "https://cdn.example/a.png", "k": "v"}}"#)
        #expect(n.platform == .android && n.format == "sfmc-android")
        #expect(n.title == "T" && n.subtitle == "S" && n.body == "B" && n.messageType == "8" && n.mediaUrl == "https://cdn.example/a.png")
        #expect(n.customPayload == .object(["k": .string("v")]))
    }

    /// `_r` and `_h` name the send with `_m`: the record keeps them for attribution (they
    /// were dropped before: reserved, so not custom data either), on both platforms.
    @Test func requestAndHashIdsAreKept() throws {
        let ios = try accept(#"{"_sid": "SFMC", "_m": "S7", "_r": "req-1", "_h": "hash-1", "aps": {"alert": "x"}}"#)
        #expect(ios.jsonValue()["requestId"] == .string("req-1") && ios.jsonValue()["hashId"] == .string("hash-1"))
        #expect(ios.customPayload == nil)
        let android = try accept(#"{"data": {"_sid": "SFMC", "_m": "SA7", "_r": "req-2", "_h": "hash-2", "alert": "B"}}"#)
        #expect(android.jsonValue()["requestId"] == .string("req-2") && android.jsonValue()["hashId"] == .string("hash-2"))
        let without = try accept(#"{"_sid": "SFMC", "_m": "S8", "_r": "", "aps": {"alert": "x"}}"#)
        #expect(without.jsonValue()["requestId"] == nil && without.jsonValue()["hashId"] == nil)
    }

    @Test func androidNumericIdIsAccepted() throws {
        let n = try accept(#"{"_sid": "SFMC", "_m": 42, "alert": "B"}"#)
        #expect(n.id == "42")
    }

    @Test func mediaUrlsAreNeverReencoded() throws {
        let n = try accept(#"{"_sid": "SFMC", "_m": "S6", "_mediaUrl": "https://cdn.example/a%20b.png?x=%2F", "aps": {"alert": "x"}}"#)
        #expect(n.mediaUrl == "https://cdn.example/a%20b.png?x=%2F")
    }

    @Test func sidMustBeExactlySFMC() {
        #expect(refusal(#"{"_sid": "sfmc", "_m": "1", "alert": "x"}"#)?.code == .unrecognized)
    }
}

@Suite struct GenericTests {
    @Test func apnsAlertDictWithLocKeys() throws {
        let n = try accept(#"{"aps": {"alert": {"loc-key": "K", "loc-args": ["a", "b"], "title-loc-key": "TK", "title-loc-args": ["t"]}, "sound": {"name": "n.caf", "critical": 1}}}"#)
        #expect(n.vendor == .apns && n.format == "apns" && n.platform == .ios)
        #expect(n.locKey == "K" && n.locArgs == ["a", "b"] && n.titleLocKey == "TK" && n.titleLocArgs == ["t"] && n.sound == "n.caf")
        #expect(n.body == nil)
    }

    @Test func apnsCustomKeysBecomeCustomPayload() throws {
        let n = try accept(#"{"aps": {"alert": "x"}, "order": {"id": 123456789012345678901}}"#)
        #expect(n.customPayload == .object(["order": .object(["id": .number("123456789012345678901")])]))
    }

    @Test func apnsSilent() throws {
        let n = try accept(#"{"aps": {"content-available": 1}}"#)
        #expect(n.silent)
        #expect(refusal(#"{"aps": {"badge": 1}}"#)?.code == .missingBody)
    }

    @Test func fcmNotificationMessage() throws {
        let n = try accept(#"{"messageId": "F1", "notification": {"title": "T", "body": "B", "image": "https://cdn.example/f.png"}, "data": {"k": "v"}}"#)
        #expect(n.vendor == .fcm && n.platform == .android && n.id == "F1")
        #expect(n.title == "T" && n.body == "B" && n.mediaUrl == "https://cdn.example/f.png")
        #expect(n.customPayload == .object(["k": .string("v")]))
        #expect(n.warnings.isEmpty)
    }

    @Test func fcmDataOnlyIsSilentWithDerivedOrSentId() throws {
        let derived = try accept(#"{"data": {"k": "v"}}"#)
        #expect(derived.silent && derived.hasWarning(.derivedId))
        let sent = try accept(#"{"data": {"google.message_id": "0:99", "body": "shown"}}"#)
        #expect(!sent.silent && sent.id == "0:99" && sent.body == "shown")
    }

    @Test func fcmNotificationWithoutBodyIsMissingBody() {
        #expect(refusal(#"{"notification": {"title": "t"}}"#)?.code == .missingBody)
    }
}

@Suite struct DetectionAndEnvelopeTests {
    @Test(arguments: [
        #"{"aps": {"alert": "x"}, "custom": {"i": "1"}}"#,
        #"{"aps": {"alert": "x"}, "_": "1"}"#,
        #"{"aps": {"alert": "x"}, "com.urbanairship.media_attachment": {}}"#,
        #"{"aps": {"alert": "x"}, "ab": {"att": {}}}"#,
        #"{"data": {"experienceId": "@a/b", "message": "m"}}"#,
        #"{"data": {"scopeKey": "@a/b"}}"#,
    ])
    func foreignVendorsAreUnsupported(_ json: String) {
        #expect(refusal(json)?.code == .unsupportedVendor)
    }

    @Test(arguments: [
        #"{"_sid": "SFMC", "_m": "1", "uniqueKey": "u", "clickUrl": "https://e.example", "aps": {"alert": {"body": "b"}}}"#,
        #"{"_sid": "SFMC", "_m": "1", "alert": "b", "org_ib_d": "{}"}"#,
        #"{"_sid": "SFMC", "_m": "1", "alert": "b", "_": "airship"}"#,
    ])
    func twoVendorsAreAmbiguous(_ json: String) {
        #expect(refusal(json)?.code == .ambiguousVendor)
    }

    @Test func airshipUnderscoreIsNotSFMC() {
        #expect(refusal(#"{"_": "x", "alert": "b"}"#)?.code == .unsupportedVendor)
    }

    @Test(arguments: [
        #"{"customAction": {"customFields": {"mobPushSendDateTime": "d"}}}"#,
        #"{"data": {"customAction": {"customFields": {"mobPushTranslateName": "n"}}}}"#,
    ])
    func mindboxOperationBodiesAreNotPushes(_ json: String) {
        #expect(refusal(json)?.code == .notAPush)
    }

    @Test func envelopeSuppliesUserAndReceivedAt() throws {
        let n = try accept(#"{"pushspool": 1, "user": "u-1", "platform": "ios", "receivedAt": "2026-01-01T00:00:00Z", "payload": {"messageId": "E1", "aps": {"alert": {"body": "b"}}}}"#)
        #expect(n.user == "u-1" && n.receivedAt == "2026-01-01T00:00:00Z" && n.id == "E1")
        #expect(n.warnings.isEmpty)
    }

    @Test func envelopePlatformMismatchIsAWarning() throws {
        let n = try accept(#"{"pushspool": 1, "platform": "ios", "payload": {"data": {"uniqueKey": "u", "message": "m"}}}"#)
        #expect(n.platform == .android)
        #expect(n.warnings == [PayloadWarning(.platformMismatch, "ios")])
    }

    @Test(arguments: [
        #"{"pushspool": 2, "payload": {}}"#, #"{"pushspool": "1", "payload": {}}"#, #"{"pushspool": 1}"#,
        #"{"pushspool": 1, "payload": {}, "user": 5}"#, #"{"pushspool": 1, "payload": {}, "platform": "web"}"#,
    ])
    func badEnvelopes(_ json: String) {
        #expect(refusal(json)?.code == .invalidEnvelope)
    }

    @Test func sizeBoundsAreConfigurable() {
        let body = String(repeating: "a", count: 200)
        let json = #"{"aps": {"alert": ""# + body + #""}}"#
        var options = NormalizerOptions()
        options.maxPayloadBytes = 200
        #expect(refusal(json, options: options)?.code == .payloadTooLarge)
        options.maxPayloadBytes = 4096
        options.maxInputBytes = 100
        #expect(refusal(json, options: options)?.code == .payloadTooLarge)
        #expect(refusal(json) == nil)
    }

    @Test func sizeIsMeasuredOnTheCompactVendorPayload() {
        // Whitespace and the envelope do not count against the 4096-byte payload bound.
        let body = String(repeating: "b", count: 4000)
        let padded = #"{"pushspool": 1, "user": ""# + String(repeating: "u", count: 150) + #"", "payload": {"aps":      {"alert": ""# + body + "\"}}}" + String(repeating: " ", count: 2000)
        #expect(refusal(padded) == nil)
    }

    @Test func depthBoundIsConfigurable() {
        var options = NormalizerOptions()
        options.maxDepth = 3
        #expect(refusal(#"{"aps": {"alert": {"body": "b"}}}"#, options: options) == nil)
        #expect(refusal(#"{"aps": {"alert": {"body": "b"}}, "x": [[1]]}"#, options: options) == nil)
        #expect(refusal(#"{"aps": {"alert": {"body": "b"}}, "x": [[[1]]]}"#, options: options)?.code == .tooDeep)
    }

    /// SFMC's sample takes `_mediaAlt` only `as? String`: a number or boolean must not
    /// become the body (issue 37); the payload says why it was ignored.
    @Test(arguments: ["7", "true", "1.5"])
    func mediaAltThatIsNotAStringIsIgnoredWithAWarning(_ alt: String) throws {
        for json in [#"{"_sid": "SFMC", "_m": "M1", "_mediaUrl": "https://cdn.example/x.png", "_mediaAlt": \#(alt), "aps": {"alert": "Body"}}"#,
                     #"{"_sid": "SFMC", "_m": "M1", "_mediaUrl": "https://cdn.example/x.png", "_mediaAlt": \#(alt), "alert": "Body"}"#,
                     #"{"aps": {"alert": "Body"}, "_mediaUrl": "https://cdn.example/x.png", "_mediaAlt": \#(alt)}"#] {
            let n = try accept(json)
            #expect(n.mediaAlt == nil && n.body == "Body", "\(json)")
            #expect(n.warnings.contains(PayloadWarning(.wrongType, "_mediaAlt")), "\(json)")
        }
    }

    @Test func nullMeansAbsent() throws {
        let n = try accept(#"{"_sid": "SFMC", "_m": "N1", "_mediaUrl": null, "_mediaAlt": null, "_od": null, "aps": {"alert": {"title": null, "body": "b"}, "badge": null}}"#)
        #expect(n.title == nil && n.mediaUrl == nil && n.badge == nil && n.warnings.isEmpty)
    }
}

@Suite struct ModelTests {
    @Test func daemonCanApplyMediaAltFallback() throws {
        var n = try accept(#"{"_sid": "SFMC", "_m": "M1", "_mediaUrl": "https://cdn.example/x.png", "_mediaAlt": "Alt", "aps": {"alert": "Body"}}"#)
        n.originalBody = n.body
        n.body = n.mediaAlt
        let json = n.jsonValue()
        #expect(json["body"] == .string("Alt"))
        #expect(json["originalBody"] == .string("Body"))
    }

    @Test func jsonValueOmitsAbsentFieldsAndRoundTrips() throws {
        let n = try accept(#"{"messageId": "M2", "aps": {"alert": {"body": "b"}, "badge": 2}}"#)
        let json = n.jsonValue()
        #expect(json["title"] == nil && json["mediaUrl"] == nil)
        #expect(json["badge"] == .number("2") && json["silent"] == .bool(false) && json["warnings"] == .array([]))
        #expect(json["vendor"] == .string("infobip") && json["platform"] == .string("ios") && json["format"] == .string("infobip-ios"))
        #expect(try JSONParser().parse(json.serialized()) == json)
    }

    @Test func warningsRenderWithDetail() {
        #expect(PayloadWarning(.buttonsTruncated, "5").description == "buttons_truncated:5")
        #expect(PayloadWarning(.derivedId).description == "derived_id")
    }

    @Test func versionIsSemantic() {
        #expect(pushspoolVersion.split(separator: ".").count == 3)
    }
}
