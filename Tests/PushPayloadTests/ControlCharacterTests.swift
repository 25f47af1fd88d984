import Testing
@testable import PushPayload
import PushSystem

/// Issue 21 #2: a user, device or id with a control character is refused at intake
/// (`control_character`) rather than journaled: it cannot be shown on a terminal, addressed
/// in the inbox API or carried in a NATS header safely.
@Suite struct ControlCharacterTests {
    /// JSON escapes of every control character the rule covers (and CR LF, as a producer writes it).
    static let refusedEscapes = (0x00...0x1F).map(Self.escape) + [#"\u007f"#, #"\r\n"#, #"\t"#]

    /// `\u00XX` for `code`.
    static func escape(_ code: Int) -> String {
        let hex = String(code, radix: 16)
        return #"\u00"# + String(repeating: "0", count: 2 - hex.count) + hex
    }

    @Test(arguments: refusedEscapes)
    func aUserWithAControlCharacterIsRefused(_ escape: String) {
        let r = refusal(#"{"pushspool": 1, "user": "z"# + escape + #"one", "payload": {"aps": {"alert": "x"}}}"#)
        #expect(r?.code == .controlCharacter, "\(String(describing: r))")
        #expect(r?.path == "user")
        #expect(r?.message.contains("at byte 1") == true, "\(String(describing: r))")
    }

    @Test func aDeviceWithAControlCharacterIsRefused() {
        let r = refusal(#"{"pushspool": 1, "device": "d\u001b[31m", "payload": {"aps": {"alert": "x"}}}"#)
        #expect(r?.code == .controlCharacter && r?.path == "device", "\(String(describing: r))")
        #expect(r?.message.contains("U+001B") == true)
    }

    @Test(arguments: [
        #"{"messageId": "m\n1", "aps": {"alert": "x"}}"#,
        #"{"_sid": "SFMC", "_m": "\u0000", "aps": {"alert": "x"}}"#,
        #"{"data": {"uniqueKey": "k\u007f", "message": "m"}}"#,
    ])
    func anIdWithAControlCharacterIsRefused(_ json: String) {
        let r = refusal(json)
        #expect(r?.code == .controlCharacter, "\(String(describing: r))")
        #expect(r?.vendor != nil)
    }

    @Test func anEventEnvelopeNameWithAControlCharacterIsRefused() {
        for member in ["user", "device"] {
            let r = refusal(#"{"pushspool": 1, ""# + member + #"": "a\r\nb", "event": {"type": "nc.read-all", "eventId": "e1"}}"#)
            #expect(r?.code == .controlCharacter && r?.path == member, "\(String(describing: r))")
        }
    }

    @Test func otherCharactersStayAccepted() throws {
        // Space, DEL's neighbours, non-ASCII and C1-range letters are not control characters here.
        let n = try accept(#"{"pushspool": 1, "user": "J\u00f6rg Smith ~", "device": "\u0080\u00a0", "payload": {"messageId": "a b%c", "aps": {"alert": "x"}}}"#)
        #expect(n.user == "Jörg Smith ~" && n.id == "a b%c")
        #expect(ControlCharacters.first(in: "ab\u{7F}")?.offset == 2)
        #expect(ControlCharacters.first(in: "é\u{0}")?.offset == 2)
        #expect(ControlCharacters.first(in: "é~") == nil)
    }
}
