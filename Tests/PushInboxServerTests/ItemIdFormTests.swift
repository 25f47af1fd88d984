import Testing
@testable import PushInboxServer

/// Issue 33, defect 7: an item id has one text form, the decimal without leading zeros; any
/// other (`0020`, `+20`, ` 20`, `20.0`) answers 404 like a missing item, and so does a number
/// past the index's range, without trapping.
@Suite struct ItemIdFormTests {
    @Test func onlyTheCanonicalDecimalNamesAnItem() async throws {
        let setup = try await PathDecodingTests.Setup()
        let item = String(setup.item)
        for text in ["0" + item, "00" + item, "+" + item, "%2B" + item, "%20" + item, item + "%20", item + ".0", "-" + item,
                     "0", "00", "-0", "0x1", item + "e0", "9223372036854775808", "18446744073709551615", "18446744073709551616",
                     "99999999999999999999999999", "%EF%BC%91"] {
            for route in ["read", "seen", "open"] {
                let (status, body) = PathDecodingTests.send(setup.api, "POST", "/v1/inbox/\(text)/\(route)")
                #expect(status == 404, "\(text)/\(route): \(String(describing: body))")
            }
            #expect(PathDecodingTests.send(setup.api, "DELETE", "/v1/inbox/\(text)").status == 404, "\(text)")
            #expect(PathDecodingTests.send(setup.api, "POST", "/v1/inapp/\(text)/shown").status == 404, "\(text)")
            #expect(PathDecodingTests.send(setup.api, "POST", "/v1/inbox/\(text)/actions/reply").status == 404, "\(text)")
        }
        #expect(try setup.dropped().events.isEmpty)
        #expect(PathDecodingTests.send(setup.api, "POST", "/v1/inbox/\(item)/read").status == 202)
        #expect(try setup.dropped().events.map(\.item) == [setup.item])
    }

    /// `limit` too has one form: `+5` was read as 5 (Swift's `Int(_:)` takes a sign).
    @Test func aListLimitHasOneForm() async throws {
        let setup = try await PathDecodingTests.Setup()
        func list(limit: String) -> Int {
            setup.api.handle(HTTPRequest(method: "GET", path: "/v1/inbox", query: ["limit": limit],
                                         headers: PathDecodingTests.credentials(user: "alice"))).status
        }
        // The query as the server hands it over: decoded once.
        for text in ["+5", "05", " 5", "5 ", "5.0", "0", "-1", "0x5", "99999999999999999999", ""] {
            #expect(list(limit: text) == 400, "limit=\(text)")
        }
        #expect(list(limit: "5") == 200)
    }
}
