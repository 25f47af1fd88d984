import Testing
@testable import PushPayload

/// Issue 8 defects 6, 9, 10 and 11: each test failed on the tree before its fix.
@Suite struct IssueEightTests {
    // MARK: 6 — ids the journal cannot hold are refused by the normaliser

    /// A Mindbox Android payload whose `uniqueKey` has `length` bytes, optionally in an envelope naming `user`.
    static func mindbox(uniqueKeyBytes length: Int, user: String? = nil) -> String {
        let payload = #"{"data": {"uniqueKey": ""# + String(repeating: "k", count: length) + #"", "message": "m"}}"#
        guard let user else { return payload }
        return #"{"pushspool": 1, "user": ""# + user + #"", "payload": "# + payload + "}"
    }

    @Test func uniqueKeyOf248BytesIsRefusedAsIdTooLong() {
        // "mindbox:" + 248 bytes = 256 > 255: the journal refused it as record_too_large.
        let r = refusal(Self.mindbox(uniqueKeyBytes: 248))
        #expect(r?.code.rawValue == "id_too_long")
        #expect(r?.vendor == .mindbox)
    }

    @Test func longestKeyThatFitsIsAccepted() throws {
        let n = try accept(Self.mindbox(uniqueKeyBytes: 255 - "mindbox:".utf8.count))
        #expect(n.dedupKey.utf8.count == 255)
    }

    @Test func theUserCountsTowardsTheKeyLimit() throws {
        let fits = try accept(Self.mindbox(uniqueKeyBytes: 100, user: "alice"))
        #expect(fits.user == "alice")
        let r = refusal(Self.mindbox(uniqueKeyBytes: 200, user: String(repeating: "u", count: 60)))
        #expect(r?.code.rawValue == "id_too_long")
    }

    @Test func multiByteIdsAreMeasuredInBytes() {
        // 120 × "é" is 120 characters but 240 bytes; with "mindbox:" 248 bytes, so it fits; 124 do not.
        let fits = #"{"data": {"uniqueKey": ""# + String(repeating: "é", count: 120) + #"", "message": "m"}}"#
        let over = #"{"data": {"uniqueKey": ""# + String(repeating: "é", count: 124) + #"", "message": "m"}}"#
        #expect(refusal(fits) == nil)
        #expect(refusal(over)?.code.rawValue == "id_too_long")
    }

    // MARK: 9 — Infobip iOS with a plain-string aps.alert

    @Test func infobipIOSAlertStringIsTheBody() throws {
        let n = try accept(#"{"messageId": "I4", "aps": {"alert": "plain"}}"#)
        #expect(n.vendor == .infobip && n.format == "infobip-ios")
        #expect(n.body == "plain" && n.title == nil)
        #expect(n.warnings.isEmpty)
    }

    @Test func infobipIOSEmptyAlertStringIsStillMissingBody() {
        #expect(refusal(#"{"messageId": "I4", "aps": {"alert": ""}}"#)?.code == .missingBody)
    }

    @Test func mindboxIOSAlertStringStaysATypeMismatch() {
        // The Mindbox SDK does not accept it at all, so neither do we.
        #expect(refusal(#"{"aps": {"alert": "x"}, "clickUrl": "https://e.example", "uniqueKey": "u"}"#)?.code == .typeMismatch)
    }

    // MARK: 10 — the same push to two users is two records

    static func apns(user: String?) -> String {
        let payload = #"{"aps": {"alert": "hello"}}"#
        guard let user else { return payload }
        return #"{"pushspool": 1, "user": ""# + user + #"", "payload": "# + payload + "}"
    }

    @Test func derivedIdPushToTwoUsersHasTwoKeys() throws {
        let alice = try accept(Self.apns(user: "alice"))
        let bob = try accept(Self.apns(user: "bob"))
        #expect(alice.id == bob.id)
        #expect(alice.dedupKey != bob.dedupKey)
        #expect(try accept(Self.apns(user: "alice")).dedupKey == alice.dedupKey)
    }

    @Test func sfmcCampaignIdToTwoUsersHasTwoKeys() throws {
        func sfmc(_ user: String) -> String {
            #"{"pushspool": 1, "user": ""# + user + #"", "payload": {"_sid": "SFMC", "_m": "campaign-7", "aps": {"alert": "sale"}}}"#
        }
        #expect(try accept(sfmc("alice")).dedupKey != accept(sfmc("bob")).dedupKey)
    }

    @Test func withoutAUserTheKeyIsTheOldVendorColonId() throws {
        #expect(try accept(#"{"messageId": "I9", "aps": {"alert": {"body": "b"}}}"#).dedupKey == "infobip:I9")
        let envelopeWithoutUser = #"{"pushspool": 1, "payload": {"messageId": "I9", "aps": {"alert": {"body": "b"}}}}"#
        #expect(try accept(envelopeWithoutUser).dedupKey == "infobip:I9")
    }

    @Test func userKeysCannotCollideWithEachOtherOrWithOldKeys() throws {
        // Pairs that a naive "vendor:id:user" would map to the same key.
        func key(_ id: String, _ user: String?) throws -> String {
            let payload = #"{"messageId": ""# + id + #"", "aps": {"alert": {"body": "b"}}}"#
            guard let user else { return try accept(payload).dedupKey }
            return try accept(#"{"pushspool": 1, "user": ""# + user + #"", "payload": "# + payload + "}").dedupKey
        }
        let keys = try [key("a:b", "c"), key("a", "b:c"), key("a:b:c", nil), key("a", "b/c"), key("a/b", "c"),
                        key("1/a/x", nil), key("x", "a"), key("infobip/1/a/x", nil)]
        #expect(Set(keys).count == keys.count, "\(keys)")
    }

    // MARK: 11 — OneSignal inside JSON strings, and the flat FCM bundle

    static let oneSignalCustom = #"{\"i\":\"3b2f8c1e-5a4d-4f7e-9c2b-7d1e0a9f6b54\",\"a\":{\"screen\":\"promo\"}}"#

    @Test func oneSignalCustomAsAJSONStringIsUnsupported() {
        let bare = #"{"alert": "Hi", "title": "T", "custom": ""# + Self.oneSignalCustom + #""}"#
        let wrapped = #"{"data": "# + bare + "}"
        #expect(refusal(bare)?.code == .unsupportedVendor)
        #expect(refusal(wrapped)?.code == .unsupportedVendor)
    }

    @Test func aCustomStringWithoutAnOneSignalIdIsNotForeign() throws {
        let n = try accept(#"{"data": {"body": "b", "custom": "{\"x\": 1}"}}"#)
        #expect(n.vendor == .fcm)
    }

    @Test func flatFCMBundleIsAnFCMPush() throws {
        let n = try accept(#"""
        {"google.message_id": "0:1700000000000000%abc", "google.sent_time": 1700000000000, "from": "123456789",
         "gcm.notification.title": "T", "gcm.notification.body": "B", "gcm.notification.image": "https://cdn.example/i.png",
         "order": "42"}
        """#)
        #expect(n.vendor == .fcm && n.platform == .android && n.format == "fcm")
        #expect(n.id == "0:1700000000000000%abc")
        #expect(n.title == "T" && n.body == "B" && n.mediaUrl == "https://cdn.example/i.png" && !n.silent)
        #expect(n.customPayload == .object(["order": .string("42")]))
        #expect(n.warnings.isEmpty)
    }

    @Test func flatFCMDataBundleWithoutNotificationIsSilent() throws {
        let n = try accept(#"{"google.message_id": "0:2", "from": "123", "k": "v"}"#)
        #expect(n.silent && n.id == "0:2")
        #expect(n.customPayload == .object(["k": .string("v")]))
    }

    @Test func vendorsAreDetectedInsideAFlatBundle() throws {
        let mindbox = try accept(#"{"google.message_id": "0:3", "from": "1", "uniqueKey": "u-1", "message": "m", "title": "t"}"#)
        #expect(mindbox.format == "mindbox-android" && mindbox.id == "u-1")
        let infobip = try accept(#"{"google.message_id": "0:4", "from": "1", "org_ib_d": "{\"messageId\":\"ib-1\",\"text\":\"hi\"}"}"#)
        #expect(infobip.format == "infobip-android" && infobip.id == "ib-1")
        let sfmc = try accept(#"{"google.message_id": "0:5", "google.sent_time": 1, "from": "1", "_sid": "SFMC", "_m": "m-1", "alert": "a", "deal": "7"}"#)
        #expect(sfmc.format == "sfmc-android" && sfmc.customPayload == .object(["deal": .string("7")]))
        let oneSignal = #"{"google.message_id": "0:6", "from": "1", "alert": "Hi", "custom": ""# + Self.oneSignalCustom + #""}"#
        #expect(refusal(oneSignal)?.code == .unsupportedVendor)
    }
}
