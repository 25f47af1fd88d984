import PushInbox
import PushSystem
import Testing
import TestSupport
@testable import PushInboxServer

/// Issue 37, rule 4, over HTTP: a stored image is `media.url`; one not stored, or stored but
/// undecodable, is `{sourceUrl, stored: false, reason}` and never `media.url`.
@Suite struct UnstoredMediaAPITests {
    @Test func anUnstoredOrUndecodableImageIsNamedByItsSourceNeverServed() async throws {
        let setup = try EventHubTests.Setup()
        let sha = String(repeating: "ab", count: 32)
        let path = "/state/media/ab/" + String(sha.dropFirst(2)) + ".jpg"
        func media(_ status: String, _ extra: JSONObject) -> JSONValue {
            var o: JSONObject = ["url": .string("https://cdn.example/\(status).jpg"), "status": .string(status)]
            for (k, v) in extra { o[k] = v }
            return .object(o)
        }
        func push(_ id: String, _ media: JSONValue) async throws -> UInt64 {
            try await setup.append(["vendor": .string("sfmc"), "id": .string(id), "user": .string("alice"), "title": .string(id),
                                    "body": .string("alt text"), "originalBody": .string("body"), "buttons": .array([]), "media": media], key: id)
        }
        let off = try await push("off", media("skipped", ["reason": .string("media_disabled")]))
        let broken = try await push("broken", media("stored", ["path": .string(path), "decodable": .bool(false)]))
        let shown = try await push("shown", media("stored", ["path": .string(path), "decodable": .bool(true)]))
        try InboxIndex(path: setup.indexPath).catchUp(journalDirectory: setup.journal)
        let api = setup.api(EventHub(indexPath: setup.indexPath, journalDirectory: setup.journal))
        let headers = ["authorization": "Bearer " + TokenAuth(secret: Array("a-secret-of-some-length".utf8)).token(user: "alice"),
                       "x-pushspool-user": "alice"]
        let response = api.handle(HTTPRequest(method: "GET", path: "/v1/inbox", headers: headers))
        guard case .bytes(let body) = response.body else { Issue.record("no body: \(response.status)"); return }
        let items = try JSONParser().parse(body)["items"]?.arrayValue ?? []
        func mediaOf(_ seq: UInt64) -> JSONValue? { items.first { $0["item"]?.stringValue == String(seq) }?["media"] }

        #expect(mediaOf(off) == .object(["sourceUrl": .string("https://cdn.example/skipped.jpg"), "stored": .bool(false),
                                         "reason": .string("media_disabled")]))
        #expect(mediaOf(broken) == .object(["sourceUrl": .string("https://cdn.example/stored.jpg"), "stored": .bool(false),
                                            "reason": .string("undecodable")]))
        #expect(mediaOf(shown) == .object(["url": .string("/v1/media/\(sha)"), "sourceUrl": .string("https://cdn.example/stored.jpg"),
                                           "stored": .bool(true)]))
    }
}
