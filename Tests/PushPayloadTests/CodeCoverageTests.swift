import Foundation
import Testing
@testable import PushPayload
import PushSystem

/// One payload per reason and warning code: each test fails if its code stops being produced,
/// and the coverage tests fail when a code is added without a fixture here.
struct CodeFixture: Sendable, CustomTestStringConvertible {
    var code: String
    var json: String
    var fiveActions = false
    var testDescription: String { code }
}

let reasonFixtures: [CodeFixture] = [
    CodeFixture(code: "invalid_json", json: #"{"aps": {"alert": "x"}"#),
    CodeFixture(code: "duplicate_keys", json: #"{"aps": {"alert": "x", "alert": "y"}}"#),
    CodeFixture(code: "too_deep", json: #"{"aps": {"alert": "x"}, "d": "# + String(repeating: "[", count: 33) + String(repeating: "]", count: 33) + "}"),
    CodeFixture(code: "payload_too_large", json: #"{"aps": {"alert": ""# + String(repeating: "y", count: 4100) + #""}}"#),
    CodeFixture(code: "not_an_object", json: #""just a string""#),
    CodeFixture(code: "invalid_envelope", json: #"{"pushspool": 1, "payload": "not an object"}"#),
    CodeFixture(code: "unrecognized", json: #"{"title": "t", "body": "b"}"#),
    CodeFixture(code: "ambiguous_vendor", json: #"{"_sid": "SFMC", "_m": "1", "org_ib_d": "{}", "aps": {"alert": "x"}}"#),
    CodeFixture(code: "unsupported_vendor", json: #"{"aps": {"alert": "x"}, "os_data": {"i": "1"}}"#),
    CodeFixture(code: "not_a_push", json: #"{"messageId": "m", "text": "hi", "statusCode": 0}"#),
    CodeFixture(code: "missing_id", json: #"{"_sid": "SFMC", "_m": "", "aps": {"alert": "x"}}"#),
    CodeFixture(code: "id_too_long", json: #"{"data": {"uniqueKey": ""# + String(repeating: "k", count: 248) + #"", "message": "m"}}"#),
    CodeFixture(code: "missing_body", json: #"{"messageId": "m1", "aps": {"alert": {"title": "only a title"}}}"#),
    CodeFixture(code: "control_character", json: #"{"pushspool": 1, "user": "a\r\nX: 1", "payload": {"aps": {"alert": "x"}}}"#),
    CodeFixture(code: "invalid_event", json: #"{"pushspool": 1, "user": "u", "event": {"type": "nc.read", "eventId": "e1", "item": 0}}"#),
    CodeFixture(code: "type_mismatch", json: #"{"aps": {"alert": {"body": "b"}, "mutable-content": "1"}, "clickUrl": "https://e.example", "uniqueKey": "u"}"#),
]

let warningFixtures: [CodeFixture] = [
    CodeFixture(code: "derived_id", json: #"{"aps": {"alert": "x"}}"#),
    CodeFixture(code: "buttons_truncated", json: #"{"data": {"uniqueKey": "u", "message": "m", "buttons": "[{\"text\":\"1\"},{\"text\":\"2\"},{\"text\":\"3\"},{\"text\":\"4\"}]"}}"#),
    CodeFixture(code: "button_dropped", json: #"{"data": {"uniqueKey": "u", "message": "m", "buttons": "[{\"text\":\"\"},{\"text\":\"ok\"}]"}}"#),
    CodeFixture(code: "buttons_invalid", json: #"{"data": {"uniqueKey": "u", "message": "m", "buttons": "[{\"text\":"}}"#),
    CodeFixture(code: "actions_truncated", json: #"{"messageId": "m", "aps": {"alert": {"body": "b"}, "category": "five"}}"#, fiveActions: true),
    CodeFixture(code: "media_insecure_scheme", json: #"{"_sid": "SFMC", "_m": "1", "_mediaUrl": "http://cdn.example/a.png", "aps": {"alert": "x"}}"#),
    CodeFixture(code: "invalid_url", json: #"{"_sid": "SFMC", "_m": "1", "_od": "javascript:alert(1)", "aps": {"alert": "x"}}"#),
    CodeFixture(code: "media_alt_without_url", json: #"{"_sid": "SFMC", "_m": "1", "_mediaAlt": "alt", "aps": {"alert": "x"}}"#),
    CodeFixture(code: "reserved_category_unknown", json: #"{"messageId": "m", "aps": {"alert": {"body": "b"}, "category": "mm_other"}}"#),
    CodeFixture(code: "category_unknown", json: #"{"messageId": "m", "aps": {"alert": {"body": "b"}, "category": "APP_CAT"}}"#),
    CodeFixture(code: "wrong_type", json: #"{"messageId": "m", "aps": {"alert": {"body": "b"}, "sound": 3}}"#),
    CodeFixture(code: "invalid_value", json: #"{"messageId": "m", "aps": {"alert": {"body": "b"}}, "internalData": {"inAppStyle": 7}}"#),
    CodeFixture(code: "platform_mismatch", json: #"{"pushspool": 1, "platform": "android", "payload": {"aps": {"alert": "x"}}}"#),
]

@Suite struct CodeCoverageTests {
    @Test(arguments: reasonFixtures)
    func reasonCodeIsProduced(_ fixture: CodeFixture) {
        let r = refusal(fixture.json)
        #expect(r?.code.rawValue == fixture.code, "got \(String(describing: r))")
        #expect(!(r?.message.isEmpty ?? true))
    }

    @Test(arguments: warningFixtures)
    func warningCodeIsProduced(_ fixture: CodeFixture) throws {
        let n = try accept(fixture.json, options: fixture.fiveActions ? fiveActionOptions : NormalizerOptions())
        #expect(n.warnings.contains { $0.code.rawValue == fixture.code }, "warnings: \(n.warnings)")
    }

    @Test func everyNormaliserReasonCodeHasAFixture() {
        // Read- and journal-stage codes come from the spool and the journal, not from here.
        let normaliserCodes = ReasonCode.allCases.filter { $0.stage == .normalize }
        #expect(Set(normaliserCodes.map(\.rawValue)) == Set(reasonFixtures.map(\.code)))
    }

    @Test func everyWarningCodeHasAFixture() {
        #expect(Set(WarningCode.allCases.map(\.rawValue)) == Set(warningFixtures.map(\.code)))
    }

    @Test func everyCodeIsDocumented() throws {
        // Every stage's codes, in a table row of their own (`| `code` |`), not just mentioned.
        let doc = try String(contentsOfFile: repositoryRoot + "/docs/reason-codes.md", encoding: .utf8)
        for code in ReasonCode.allCases.map(\.rawValue) + WarningCode.allCases.map(\.rawValue) {
            #expect(doc.contains("| `\(code)` |"), "docs/reason-codes.md has no row for \(code)")
        }
    }

    @Test func codesAreUniqueAndSnakeCase() {
        let raw = ReasonCode.allCases.map(\.rawValue) + WarningCode.allCases.map(\.rawValue)
        #expect(Set(raw).count == raw.count)
        #expect(raw.allSatisfy { $0.allSatisfy { $0 == "_" || ("a"..."z").contains($0) } })
    }
}
