import Foundation
import PushInbox
import PushPayload
import PushSpool
import PushSystem
import Testing
import TestSupport
@testable import PushInboxServer

/// Issue 37, rule 2: `POST /v1/inbox/{item}/actions/{action}` takes only an action the push
/// offered (an id of its `actions` or `buttons`); any other answers 404 `unknown_action` and
/// nothing is journaled, on a journal node (spool) and on a fleet node (event sink) alike.
@Suite struct UnofferedActionTests {
    /// An event sink that keeps what it is given, as a fleet node's publisher would publish it.
    final class Recorder: EventSink {
        let accepted = Locked<[PushEvent]>([])
        func accept(_ event: PushEvent, fingerprint: String?) -> EventSinkFailure? {
            accepted.withLock { $0.append(event) }
            return nil
        }
        func acceptErasure(erasureID: String, body: [UInt8]) -> EventSinkFailure? { nil }
    }

    static func post(_ api: InboxAPI, _ path: String) -> (status: Int, json: JSONValue?) {
        let headers = ["authorization": "Bearer " + TokenAuth(secret: Array("a-secret-of-some-length".utf8)).token(user: "alice"),
                       "x-pushspool-user": "alice"]
        let response = api.handle(HTTPRequest(method: "POST", path: path, headers: headers))
        guard case .bytes(let body) = response.body else { return (response.status, nil) }
        return (response.status, try? JSONParser().parse(body))
    }

    /// A `category_share_cancel` push (actions `share`, `cancel`) and a Mindbox push whose
    /// buttons have ids; returns their seqs once indexed.
    static func items(_ setup: EventHubTests.Setup) async throws -> (share: UInt64, buttons: UInt64) {
        let actions: JSONValue = .array([
            .object(["id": .string("share"), "title": .string("Share"), "options": .array([.string("foreground")])]),
            .object(["id": .string("cancel"), "title": .string("Cancel"), "options": .array([])]),
        ])
        let share = try await setup.append(["vendor": .string("infobip"), "id": .string("s1"), "user": .string("alice"), "title": .string("share?"),
                                            "category": .string("category_share_cancel"), "actions": actions,
                                            "buttons": .array([])], key: "s1")
        let buttons = try await setup.append(["vendor": .string("mindbox"), "id": .string("b1"), "user": .string("alice"), "title": .string("sale"),
                                              "buttons": .array([.object(["id": .string("btn-1"), "text": .string("Buy")])])], key: "b1")
        let index = try InboxIndex(path: setup.indexPath)
        try index.catchUp(journalDirectory: setup.journal)
        return (share, buttons)
    }

    @Test func aJournalNodeRefusesAnActionThePushNeverOffered() async throws {
        let setup = try EventHubTests.Setup()
        let (share, buttons) = try await Self.items(setup)
        let spool = SpoolLayout(root: setup.temp.appending("spool"))
        try spool.create()
        let api = setup.api(EventHub(indexPath: setup.indexPath, journalDirectory: setup.journal))

        let refused = Self.post(api, "/v1/inbox/\(share)/actions/mm_accept")
        #expect(refused.status == 404)
        #expect(refused.json?["error"] == .string("unknown_action"))
        #expect(refused.json?["message"]?.stringValue?.contains("share, cancel") == true, "\(String(describing: refused.json))")
        #expect(Self.post(api, "/v1/inbox/\(buttons)/actions/share").status == 404)
        #expect(try FileManager.default.contentsOfDirectory(atPath: spool.incoming).isEmpty, "nothing journaled")

        let offered = Self.post(api, "/v1/inbox/\(share)/actions/share")
        #expect(offered.status == 202 && offered.json?["item"]?["state"]?["acted"] == .string("share"))
        #expect(Self.post(api, "/v1/inbox/\(buttons)/actions/btn-1").status == 202)
        // A revert of an action never offered changes nothing and stays accepted.
        #expect(Self.post(api, "/v1/inbox/\(share)/actions/mm_accept/revert").status == 202)
        #expect(try FileManager.default.contentsOfDirectory(atPath: spool.incoming).count == 3)
    }

    @Test func aFleetNodeRefusesItTooAndPublishesNothing() async throws {
        let setup = try EventHubTests.Setup()
        let (share, _) = try await Self.items(setup)
        let recorder = Recorder()
        let api = setup.api(EventHub(indexPath: setup.indexPath, journalDirectory: setup.journal), events: recorder)
        let refused = Self.post(api, "/v1/inbox/\(share)/actions/mm_accept")
        #expect(refused.status == 404 && refused.json?["error"] == .string("unknown_action"))
        #expect(recorder.accepted.withLock { $0.isEmpty })
        #expect(Self.post(api, "/v1/inbox/\(share)/actions/cancel").status == 202)
        #expect(recorder.accepted.withLock { $0.map(\.action) } == ["cancel"])
    }
}
