@preconcurrency import Glibc
import Foundation
import PushOutbox
import PushOutboxStore
import PushSystem
import Testing

/// Issue 21 #7: a vendor's error body that echoes the `Authorization` header must not leave the
/// key, or part of it, in `outbox/parked/*.json` (what `pushspoolctl outbox show` prints).
@Suite struct OutboxRedactionTests {
    static let path = "/v3/operations/async"
    /// Shaped like a real key: base64-ish, with the characters JSON and URLs escape.
    static let key = "mbk/2026+q7Rx/Vz_u9Lw3k"
    static let header = "Authorization: SecretKey \(key)"

    /// How the echo spells the key, and the text it was cut from that must not survive.
    struct Echo: Sendable, CustomTestStringConvertible {
        var name: String
        var body: String
        /// The key as this echo spells it.
        var spelled: String
        /// Whether something of the body besides the key must still be there.
        var keepsContext: Bool
        var testDescription: String { name }
    }

    static let base64Header = Data(header.utf8).base64EncodedString()

    static let echoes: [Echo] = [
        // The key straddles the first KiB: cut first, half of it stayed.
        Echo(name: "after padding", body: String(repeating: "x", count: 1024 - 25 - key.count / 2) + header,
             spelled: key, keepsContext: true),
        Echo(name: "JSON escaping /", body: #"{"status":"ValidationError","echo":{"Authorization":"SecretKey mbk\/2026+q7Rx\/Vz_u9Lw3k"}}"#,
             spelled: #"mbk\/2026+q7Rx\/Vz_u9Lw3k"#, keepsContext: true),
        Echo(name: "JSON \\u escapes", body: #"{"status":"ValidationError","echo":"SecretKey mbk\u002f2026\u002Bq7Rx\u002FVz_u9Lw3k"}"#,
             spelled: #"mbk\u002f2026\u002Bq7Rx\u002FVz_u9Lw3k"#, keepsContext: true),
        Echo(name: "percent-encoded", body: "ValidationError: Authorization=SecretKey%20mbk%2F2026%2Bq7Rx%2FVz_u9Lw3k&x=1",
             spelled: "mbk%2F2026%2Bq7Rx%2FVz_u9Lw3k", keepsContext: true),
        Echo(name: "HTML references", body: "<p>ValidationError: SecretKey mbk&#x2F;2026&#43;q7Rx&#47;Vz_u9Lw3k</p>",
             spelled: "mbk&#x2F;2026&#43;q7Rx&#47;Vz_u9Lw3k", keepsContext: true),
        Echo(name: "base64 of the header", body: #"{"status":"ValidationError","request":"\#(base64Header)"}"#,
             spelled: String(base64Header.dropFirst(36).prefix(24)), keepsContext: true),
        // Part of the key, in no form the redactor undoes whole: the body is not kept.
        Echo(name: "truncated echo", body: #"{"status":"ValidationError","auth":"SecretKey mbk/2026+q7R…"}"#,
             spelled: "mbk/2026+q7R", keepsContext: false),
    ]

    @Test(arguments: echoes)
    func theKeyLeavesNoTraceInADeadLetter(_ echo: Echo) async throws {
        let fixture = try OutboxFixture()
        try fixture.writeKey("mindbox.key", Self.key)
        fixture.server.route(Self.path, .respond(status: 400, headers: [("Content-Type", "application/json")], body: Array(echo.body.utf8)))
        try await fixture.journal([("e1", event("nc.opened", "e1"), now)])
        let follower = try OutboxFollower(options: fixture.options())
        let status = follower.catchUp()
        try #require(status.parked == 1)
        // The vendor got the real key; it is its echo that must not be kept.
        #expect(fixture.server.requests(Self.path).first?.header("Authorization") == "SecretKey \(Self.key)")

        let store = OutboxStore(stateDirectory: fixture.state)
        let parked = try #require(try store.list(store.parkedDirectory).first)
        let response = try #require(parked.lastResponse)
        #expect(response.utf8.count <= 1024)
        if echo.keepsContext {
            #expect(response.contains("ValidationError") || response.hasPrefix("xxxx"), "\(response)")
            #expect(response.contains("<redact"), "\(response)")
        } else {
            #expect(response == "<response withheld: it echoed part of a credential>")
        }
        // No 8-byte run of the key as sent, nor of the key as this echo spells it, anywhere.
        var runs: Set<String> = []
        for form in [Self.key, echo.spelled] {
            let bytes = Array(form.utf8)
            for start in 0...(bytes.count - 8) { runs.insert(String(decoding: bytes[start..<start + 8], as: UTF8.self)) }
        }
        for (name, bytes) in fixture.allStateBytes() {
            // Stored JSON escapes `\` itself; undo that so `\u002f` is looked for as sent.
            let text = String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: #"\\"#, with: #"\"#)
            for run in runs { #expect(!text.contains(run), "\(name) holds '\(run)'") }
        }
        #expect(!(status.lastError ?? "").contains(Self.key))
    }
}

/// `Redactor` alone.
@Suite struct RedactorTests {
    let redactor = Redactor(secrets: ["mbk/2026+q7Rx/Vz_u9Lw3k", "ib-key-456"])

    @Test func ordinaryTextIsKeptAsItIs() {
        let body = #"{"status":"ValidationError","errorMessage":"operation mobileapp.NCOpen is unknown","id":"5f3a9c2e"}"#
        #expect(redactor.clean(Array(body.utf8), limit: 1024) == body)
    }

    @Test func everyOccurrenceIsReplacedAndTheRestKept() {
        let body = "a ib-key-456 b ib\\u002Dkey-456 c ib-key%2D456 d"
        #expect(redactor.clean(Array(body.utf8), limit: 1024) == "a <redacted> b <redacted> c <redacted> d")
    }

    @Test(arguments: 0..<3)
    func base64AtEveryAlignment(_ padding: Int) {
        let text = String(repeating: "p", count: padding) + "Authorization: SecretKey mbk/2026+q7Rx/Vz_u9Lw3k trailing"
        for encoded in [Data(text.utf8).base64EncodedString(),
                        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")] {
            let cleaned = redactor.clean(Array(encoded.utf8), limit: 1024)
            #expect(cleaned.contains("<redacted>"), "\(encoded) → \(cleaned)")
        }
    }

    @Test func hexIsRedacted() {
        let hex = Array("ib-key-456".utf8).map { String(format: "%02x", $0) }.joined()
        #expect(redactor.clean(Array("token=\(hex);".utf8), limit: 1024) == "token=<redacted>;")
    }

    @Test func theCutNeverSplitsACharacter() {
        let body = String(repeating: "a", count: 1023) + "é and more"
        #expect(redactor.clean(Array(body.utf8), limit: 1024) == String(repeating: "a", count: 1023))
    }

    @Test func aKeyStraddlingTheCutIsRedactedBeforeTheCut() {
        let body = String(repeating: "x", count: 1020) + "ib-key-456"
        #expect(redactor.clean(Array(body.utf8), limit: 1024) == String(repeating: "x", count: 1020) + "<red")
    }
}
