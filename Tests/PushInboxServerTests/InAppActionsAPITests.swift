import PushInbox
import PushSystem
import Testing
import TestSupport
@testable import PushInboxServer

/// `GET /v1/inapp` and `GET /v1/inbox` through ``InboxAPI/handle(_:)`` (no sockets): the
/// modal's buttons with the routes they call, and the predefined titles in the language of
/// `Accept-Language`.
@Suite struct InAppActionsAPITests {
    static let secret = Array("a-secret-of-some-length".utf8)

    static func get(_ api: InboxAPI, _ path: String, language: String? = nil) -> (status: Int, headers: [(String, String)], json: JSONValue?) {
        var headers = ["authorization": "Bearer " + TokenAuth(secret: secret).token(user: "alice"), "x-pushspool-user": "alice"]
        if let language { headers["accept-language"] = language }
        let response = api.handle(HTTPRequest(method: "GET", path: path, headers: headers))
        guard case .bytes(let bytes) = response.body else { return (response.status, response.headers, nil) }
        return (response.status, response.headers, try? JSONParser().parse(bytes))
    }

    static func titles(_ item: JSONValue?) -> [String] {
        (item?["inAppActions"]?.arrayValue ?? []).compactMap { $0["title"]?.stringValue }
    }

    static func paths(_ item: JSONValue?) -> [String] {
        (item?["inAppActions"]?.arrayValue ?? []).compactMap { $0["path"]?.stringValue }
    }

    @Test func theModalsButtonsNameTheirRoutesInTheAskedLanguage() async throws {
        let setup = try EventHubTests.Setup()
        let modal = try await setup.append(["vendor": .string("infobip"), "id": .string("m1"), "user": .string("alice"), "title": .string("plain"),
                                            "presentation": .string("modal"), "buttons": .array([])], key: "m1")
        let index = try InboxIndex(path: setup.indexPath)
        try index.catchUp(journalDirectory: setup.journal)
        let api = setup.api(EventHub(indexPath: setup.indexPath, journalDirectory: setup.journal))

        let english = Self.get(api, "/v1/inapp")
        #expect(english.status == 200)
        #expect(english.headers.contains { $0 == ("Vary", "Accept-Language") })
        let item = english.json?["item"]
        #expect(item?["item"]?.stringValue == "\(modal)")
        #expect(Self.titles(item) == ["Cancel", "Open"])
        #expect((item?["inAppActions"]?.arrayValue ?? []).compactMap { $0["id"]?.stringValue } == ["mm_cancel", "mm_open"])
        #expect(Self.paths(item) == ["/v1/inapp/\(modal)/shown", "/v1/inbox/\(modal)/open"])
        #expect(Self.titles(Self.get(api, "/v1/inapp", language: "de-CH, fr;q=0.9").json?["item"]) == ["Abbrechen", "Öffnen"])
        #expect(Self.titles(Self.get(api, "/v1/inapp", language: "ru;q=0.2, pt-PT;q=0.8, pt-BR;q=0.5").json?["item"]) == ["Cancelar", "Abrir"])
        #expect(Self.titles(Self.get(api, "/v1/inapp", language: "tlh").json?["item"]) == ["Cancel", "Open"])
        // A hostile header is a header like any other: answered, in English.
        let hostile = Self.get(api, "/v1/inapp", language: String(repeating: "x;q=0.5;q=zz,", count: 2_500) + "de;q=oops")
        #expect(hostile.status == 200 && Self.titles(hostile.json?["item"]) == ["Cancel", "Open"])
    }

    @Test func anInteractiveModalOffersItsCategoryAndTheListIsLocalisedToo() async throws {
        let setup = try EventHubTests.Setup()
        let actions: JSONValue = .array([
            .object(["id": .string("mm_decline"), "title": .string("Decline"), "options": .array([.string("destructive")])]),
            .object(["id": .string("mm_accept"), "title": .string("Accept"), "options": .array([.string("foreground")])]),
        ])
        let buttons: JSONValue = .array([
            .object(["id": .string("mm_decline"), "text": .string("Decline")]), .object(["id": .string("mm_accept"), "text": .string("Accept")]),
        ])
        let modal = try await setup.append(["vendor": .string("infobip"), "id": .string("m2"), "user": .string("alice"), "title": .string("invite"),
                                            "presentation": .string("modal"), "category": .string("mm_accept_decline"),
                                            "actions": actions, "buttons": buttons], key: "m2")
        // A MODAL is presented, not listed: a banner of the same category is the stream's and
        // the list's item.
        _ = try await setup.append(["vendor": .string("infobip"), "id": .string("b2"), "user": .string("alice"), "title": .string("invite banner"),
                                "category": .string("mm_accept_decline"), "actions": actions, "buttons": buttons], key: "b2")
        let index = try InboxIndex(path: setup.indexPath)
        try index.catchUp(journalDirectory: setup.journal)
        let hub = EventHub(indexPath: setup.indexPath, journalDirectory: setup.journal)
        let api = setup.api(hub)

        // The stream's items are in the language of the stream request.
        let token = TokenAuth(secret: Self.secret).token(user: "alice")
        let response = api.handle(HTTPRequest(method: "GET", path: "/v1/inbox/stream", headers: [
            "authorization": "Bearer " + token, "x-pushspool-user": "alice", "accept-language": "ja", "last-event-id": "0",
        ]))
        guard case .stream(let stream) = response.body else { Issue.record("no stream: \(response.status)"); return }
        api.fill(stream)
        let events = String(decoding: stream.pending, as: UTF8.self)
        #expect(events.contains("event: item") && events.contains(#""title":"拒否""#), "\(events)")

        let item = Self.get(api, "/v1/inapp", language: "ja").json?["item"]
        #expect(Self.titles(item) == ["拒否", "同意"])
        #expect(Self.paths(item) == ["/v1/inbox/\(modal)/actions/mm_decline", "/v1/inbox/\(modal)/actions/mm_accept"])
        #expect((item?["inAppActions"]?.arrayValue ?? []).allSatisfy { $0["event"]?.stringValue == "nc.action" })
        #expect((item?["actions"]?.arrayValue ?? []).compactMap { $0["title"]?.stringValue } == ["拒否", "同意"])

        let list = Self.get(api, "/v1/inbox", language: "sv")
        #expect(list.headers.contains { $0 == ("Vary", "Accept-Language") })
        let listed = list.json?["items"]?.arrayValue?.first
        #expect((listed?["actions"]?.arrayValue ?? []).compactMap { $0["title"]?.stringValue } == ["Neka", "Acceptera"])
        #expect((listed?["buttons"]?.arrayValue ?? []).compactMap { $0["text"]?.stringValue } == ["Neka", "Acceptera"])
        #expect(listed?["inAppActions"] == nil, "only the in-app answer lists the modal's buttons")
        let english = Self.get(api, "/v1/inbox").json?["items"]?.arrayValue?.first
        #expect((english?["actions"]?.arrayValue ?? []).compactMap { $0["title"]?.stringValue } == ["Decline", "Accept"])
    }
}
