import Testing
@testable import PushPayload

@Suite struct HelperTests {
    @Test(arguments: [
        ("https://example.com/a.png", true), ("http://example.com", true), ("myapp://offers/7", true),
        ("mailto:a@example.com", true), ("https://cdn.example.com/img%20one.png", true), ("https://[::1]:8443/x", true),
        ("https://user@host.example/x", true),
        ("not a url", false), ("https://", false), ("https:///path", false), ("//example.com/a.jpg", false),
        ("javascript:alert(1)", false), ("JavaScript:alert(1)", false), ("data:text/html,x", false), ("/relative/path", false),
        ("https://exa mple.com/a.jpg", false), ("https://example.com/a b.jpg", false), ("myapp:", false), ("1http://x", false),
    ])
    func urlValidation(_ url: String, _ valid: Bool) {
        if case .valid = URLCheck.check(url) {
            #expect(valid, "\(url) should be invalid")
        } else {
            #expect(!valid, "\(url) should be valid")
        }
    }

    @Test(arguments: [
        (Int64(0), "1970-01-01T00:00:00.000Z"), (Int64(1_700_000_000_123), "2023-11-14T22:13:20.123Z"),
        (Int64(951_782_400_000), "2000-02-29T00:00:00.000Z"), (Int64(253_402_300_799_999), "9999-12-31T23:59:59.999Z"),
    ])
    func epochMillisecondsToISO(_ ms: Int64, _ iso: String) {
        #expect(EpochTime.iso8601(milliseconds: ms) == iso)
    }

    @Test func epochOutOfRangeIsNil() {
        #expect(EpochTime.iso8601(milliseconds: -1) == nil)
        #expect(EpochTime.iso8601(milliseconds: 253_402_300_800_000) == nil)
    }
}
