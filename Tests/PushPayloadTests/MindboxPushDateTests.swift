import Testing
@testable import PushPayload
import PushSystem

/// Issue 37: a Mindbox `pushDate` written as a number — epoch seconds or, as JavaScript and
/// Java senders write it, milliseconds — gives the push its `sentAt`; a number no date can be
/// is a warning, never a trap.
@Suite struct MindboxPushDateTests {
    @Test(arguments: [
        ("1772359200000", "2026-03-01T10:00:00.000Z"),
        ("1772359200123", "2026-03-01T10:00:00.123Z"),
        ("1772359200", "2026-03-01T10:00:00.000Z"),
    ])
    func aNumericPushDateIsTheSendTime(lexeme: String, expected: String) throws {
        let n = try accept(#"{"uniqueKey": "A1", "message": "M", "payload": "{\"pushDate\":\#(lexeme)}"}"#)
        #expect(n.sentAt == expected)
        #expect(n.warnings.isEmpty)
        #expect(n.customPayload == .object(["pushDate": .number(lexeme)]))
    }

    @Test(arguments: ["253402300800000", "99999999999999999999999999", "1e12", "-1", "1.5"])
    func aNumberNoDateCanBeIsAWarning(lexeme: String) throws {
        let n = try accept(#"{"uniqueKey": "A2", "message": "M", "payload": "{\"push_date\":\#(lexeme)}"}"#)
        #expect(n.sentAt == nil)
        #expect(n.warnings == [PayloadWarning(.invalidValue, "payload.push_date")])
    }
}
