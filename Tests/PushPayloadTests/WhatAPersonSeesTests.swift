import PushSystem
import Testing
@testable import PushPayload

/// Issue 22, "What a person sees": what the normaliser records so the inbox can tell a silent
/// push from a visible one and carry what the app renders.
@Suite struct WhatAPersonSeesPayloadTests {
    /// Which pushes are silent, per format (docs/vendor-rules.md).
    @Test(arguments: [
        (#"{"aps": {"content-available": 1}}"#, true),
        (#"{"aps": {"content-available": 1, "badge": 2, "sound": "s.caf"}}"#, true),
        (#"{"aps": {"content-available": 1, "alert": {"title-loc-key": "T"}}}"#, false),
        (#"{"aps": {"content-available": 1, "alert": {"loc-key": "K"}}}"#, false),
        (#"{"aps": {"content-available": 1, "alert": "shown"}}"#, false),
        (#"{"_sid": "SFMC", "_m": "S1", "aps": {"content-available": 1}}"#, true),
        (#"{"_sid": "SFMC", "_m": "S2", "aps": {"content-available": 1, "alert": {"title-loc-key": "T"}}}"#, false),
        (#"{"data": {"type": "sync"}}"#, true),
        (#"{"data": {"body": "shown"}}"#, false),
        (#"{"messageId": "I1", "aps": {"content-available": 1}, "internalData": {"silent": {"title": "T", "body": "B"}}}"#, true),
        (#"{"org_ib_d": "{\"messageId\":\"A1\",\"text\":\"B\",\"notification\":{\"silent\":\"true\"}}"}"#, true),
        (#"{"aps": {"alert": {"body": "b"}, "content-available": 1, "mutable-content": 1}, "clickUrl": "https://e.example", "uniqueKey": "m"}"#, false),
    ])
    func silentPerFormat(json: String, silent: Bool) throws {
        #expect(try accept(json).silent == silent, "\(json)")
    }

    /// A `title-loc-key` alone is something to display: accepted, not silent (it was refused
    /// as `missing_body` before).
    @Test func aTitleLocKeyAloneIsAVisiblePush() throws {
        let n = try accept(#"{"aps": {"alert": {"title-loc-key": "GREETING", "title-loc-args": ["Ann"]}, "badge": 4, "sound": "default"}}"#)
        #expect(!n.silent && n.body == nil && n.titleLocKey == "GREETING" && n.titleLocArgs == ["Ann"])
        #expect(n.badge == 4 && n.sound == "default")
        let json = n.jsonValue()
        #expect(json["titleLocKey"]?.stringValue == "GREETING" && json["badge"]?.numberLexeme == "4" && json["sound"]?.stringValue == "default")
    }

    /// FCM's loc args: an array in the send API's `notification`, a JSON string in the bundle
    /// the app receives.
    @Test func fcmLocArgsAreCarried() throws {
        let sent = try accept(#"{"notification": {"body_loc_key": "B", "body_loc_args": ["1", "2"], "title_loc_key": "T", "title_loc_args": ["x"]}}"#)
        #expect(sent.locKey == "B" && sent.locArgs == ["1", "2"] && sent.titleLocKey == "T" && sent.titleLocArgs == ["x"])
        #expect(!sent.silent && sent.warnings.map(\.description) == ["derived_id"])
        let bundle = try accept(#"{"from": "123", "google.message_id": "0:1", "gcm.n.body_loc_key": "B", "gcm.n.body_loc_args": "[\"a\",\"b\"]", "gcm.n.title_loc_key": "T"}"#)
        #expect(bundle.locKey == "B" && bundle.locArgs == ["a", "b"] && bundle.titleLocKey == "T" && bundle.titleLocArgs == nil)
        let bad = try accept(#"{"notification": {"body": "b", "body_loc_args": "not json", "title_loc_args": [1]}}"#)
        #expect(bad.locArgs == nil && bad.titleLocArgs == nil)
        #expect(bad.warnings.map(\.description) == ["wrong_type:notification.body_loc_args", "wrong_type:notification.title_loc_args", "derived_id"])
    }

    /// Infobip's three link kinds stay apart; `clickUrl` is the first valid of them.
    @Test func infobipLinkKindsStayDistinct() throws {
        let ios = try accept(#"""
            {"messageId": "L1", "aps": {"alert": {"body": "B"}},
             "internalData": {"deeplink": "myapp://cart", "webViewUrl": "https://e.example/w", "browserUrl": "https://e.example/b"}}
            """#)
        #expect(ios.deeplink == "myapp://cart" && ios.webViewUrl == "https://e.example/w" && ios.browserUrl == "https://e.example/b")
        #expect(ios.clickUrl == "myapp://cart")
        let json = ios.jsonValue()
        #expect(json["deeplink"]?.stringValue == "myapp://cart" && json["webViewUrl"]?.stringValue == "https://e.example/w"
                && json["browserUrl"]?.stringValue == "https://e.example/b" && json["clickUrl"]?.stringValue == "myapp://cart")

        let browserOnly = try accept(#"{"messageId": "L2", "aps": {"alert": "B"}, "internalData": {"deeplink": "javascript:x", "browserUrl": "https://e.example/b"}}"#)
        #expect(browserOnly.deeplink == nil && browserOnly.webViewUrl == nil && browserOnly.browserUrl == "https://e.example/b")
        #expect(browserOnly.clickUrl == "https://e.example/b" && browserOnly.hasWarning(.invalidURL))

        let android = try accept(#"""
            {"org_ib_d": "{\"messageId\":\"L3\",\"text\":\"B\",\"internal\":{\"webViewUrl\":\"https://e.example/w\",\"browserUrl\":\"https://e.example/b\"}}"}
            """#)
        #expect(android.deeplink == nil && android.webViewUrl == "https://e.example/w" && android.browserUrl == "https://e.example/b")
        #expect(android.clickUrl == "https://e.example/w")
    }

    /// Mindbox `payload`: a JSON object is carried as the object, anything else as the text.
    @Test(arguments: [
        (#"{\"expires\":\"2026-12-31\",\"pushName\":\"sale\"}"#, JSONValue.object(["expires": .string("2026-12-31"), "pushName": .string("sale")])),
        ("[1, 2]", JSONValue.string("[1, 2]")),
        ("42", JSONValue.string("42")),
        ("{broken", JSONValue.string("{broken")),
        ("Пример полезной нагрузки", JSONValue.string("Пример полезной нагрузки")),
    ])
    func mindboxPayloadIsCarried(payload: String, expected: JSONValue) throws {
        let ios = try accept(#"{"aps": {"alert": {"body": "b"}}, "clickUrl": "https://e.example", "uniqueKey": "u", "payload": "\#(payload)"}"#)
        #expect(ios.customPayload == expected)
        let android = try accept(#"{"data": {"uniqueKey": "u", "message": "m", "payload": "\#(payload)"}}"#)
        #expect(android.customPayload == expected)
    }
}
