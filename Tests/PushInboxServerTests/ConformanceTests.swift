import PushInbox
import PushPayload
import PushSpool
import PushSystem
import Testing
import TestSupport
@testable import PushInboxServer

/// What scripts/api-conformance.sh (Schemathesis against docs/openapi.yaml) found the server
/// and the document disagreeing on, through ``InboxAPI/handle(_:)`` (no sockets, no index:
/// each answer here comes before the index is opened).
@Suite struct ConformanceTests {
    static let secret = TokenAuth(secret: Array("a-secret-of-some-length".utf8))

    final class Setup {
        let temp = TempDir("conformance")
        let api: InboxAPI

        init() throws {
            let spool = SpoolLayout(root: temp.appending("spool"))
            try spool.create()
            let state = temp.appending("state")
            try Posix.mkdirs(state)
            api = InboxAPI(settings: .init(indexPath: state + "/inbox/index.sqlite", mediaDirectory: state + "/media", spool: spool,
                                           retention: nil, stateDirectory: state),
                           auth: ConformanceTests.secret, hub: EventHub(indexPath: state + "/inbox/index.sqlite", changes: .follower),
                           stats: ServerStats())
        }

        /// Alice's request (no credentials with `authenticated: false`): status, headers, JSON body.
        func send(_ method: String, _ path: String, headers: [String: String] = [:], body: String = "",
                  authenticated: Bool = true) -> (status: Int, headers: [(String, String)], json: JSONValue?) {
            var all = headers
            if authenticated {
                all["authorization"] = "Bearer " + ConformanceTests.secret.token(user: "alice")
                all["x-pushspool-user"] = "alice"
            }
            let response = api.handle(HTTPRequest(method: method, path: path, headers: all, body: Array(body.utf8)))
            guard case .bytes(let bytes) = response.body else { return (response.status, response.headers, nil) }
            return (response.status, response.headers, try? JSONParser().parse(bytes))
        }
    }

    static func allow(_ headers: [(String, String)]) -> String? { headers.first { $0.0 == "Allow" }?.1 }

    /// RFC 9110 15.5.6: a method the path does not take is 405 with the methods it takes; an
    /// unknown path stays 404, and under /v1/ the token comes first.
    @Test(arguments: [("TRACE", "/", "GET, HEAD"), ("POST", "/metrics", "GET, HEAD"), ("TRACE", "/v1/inbox/counts", "GET, HEAD"),
                      ("GET", "/v1/inbox/5/read", "POST"), ("PATCH", "/v1/preferences", "GET, HEAD, PUT"),
                      ("GET", "/v1/inbox/5", "DELETE"), ("DELETE", "/v1/admin/erasures/00", "GET, HEAD"),
                      ("GET", "/v1/inbox/read-all", "POST"), ("PUT", "/v1/inbox/counts", "GET, HEAD"),
                      ("DELETE", "/v1/inbox/counts", "GET, HEAD"), ("DELETE", "/v1/inbox/read-all", "POST")])
    func aKnownPathWithAnotherMethodIs405WithAllow(method: String, path: String, allowed: String) throws {
        let setup = try Setup()
        let answer = setup.send(method, path)
        #expect(answer.status == 405, "\(method) \(path)")
        #expect(Self.allow(answer.headers) == allowed)
        #expect(answer.json?["error"]?.stringValue == "method_not_allowed")
    }

    @Test func unknownPathsAndMissingTokensAnswerAsBefore() throws {
        let setup = try Setup()
        #expect(setup.send("TRACE", "/v1/nothing").status == 404)
        #expect(setup.send("GET", "/v1/inbox/5/read/more").status == 404)
        #expect(setup.send("TRACE", "/v1/inbox/counts", authenticated: false).status == 401)
        #expect(setup.send("TRACE", "/v1/admin/erasures/00", authenticated: false).status == 401)
    }

    /// An `X-Pushspool-Device` that is there must be a device pushspoold would take; the 400
    /// names the header. Absent, the event has no device.
    @Test(arguments: ["", String(repeating: "d", count: 256), "dev\t1", "dev\u{7f}"])
    func aBadDeviceHeaderIs400NamingIt(device: String) throws {
        let setup = try Setup()
        for (method, path, body) in [("POST", "/v1/events/nc-open", ""), ("PUT", "/v1/inapp/optout", #"{"enabled":true}"#),
                                     ("POST", "/v1/inbox/5/open", ""), ("POST", "/v1/inapp/5/shown", "")] {
            let answer = setup.send(method, path, headers: ["x-pushspool-device": device], body: body)
            #expect(answer.status == 400, "\(method) \(path)")
            #expect(answer.json?["error"]?.stringValue == "invalid_device")
            #expect(answer.json?["message"]?.stringValue?.contains("X-Pushspool-Device") == true)
        }
    }

    @Test func aGoodOrAbsentDeviceHeaderIsAccepted() throws {
        let setup = try Setup()
        #expect(setup.send("POST", "/v1/events/nc-open").status == 202)
        #expect(setup.send("POST", "/v1/events/nc-open", headers: ["x-pushspool-device": String(repeating: "d", count: 255)]).status == 202)
        #expect(setup.send("PUT", "/v1/inapp/optout", headers: ["x-pushspool-device": "dev-1"], body: #"{"enabled":false}"#).status == 202)
    }

    /// Last-Event-ID (or `?lastEventId=`) is digits, as docs/openapi.yaml's pattern says; empty
    /// is as without it.
    @Test func aLastEventIdOtherThanDigitsIs400() async throws {
        let setup = try EventHubTests.Setup()
        _ = try await setup.notification("one")
        try InboxIndex(path: setup.indexPath).catchUp(journalDirectory: setup.journal)
        let api = setup.api(EventHub(indexPath: setup.indexPath, journalDirectory: setup.journal))
        let alice = ["authorization": "Bearer " + ConformanceTests.secret.token(user: "alice"), "x-pushspool-user": "alice"]
        for id in ["+1", "-1", " 1", "1x"] {
            let header = api.handle(HTTPRequest(method: "GET", path: "/v1/inbox/stream", headers: alice.merging(["last-event-id": id]) { $1 }))
            #expect(header.status == 400, "Last-Event-ID: \(id)")
            let query = api.handle(HTTPRequest(method: "GET", path: "/v1/inbox/stream", query: ["lastEventId": id], headers: alice))
            #expect(query.status == 400, "?lastEventId=\(id)")
        }
        for id in ["1", ""] {
            #expect(api.handle(HTTPRequest(method: "GET", path: "/v1/inbox/stream", headers: alice.merging(["last-event-id": id]) { $1 })).status == 200)
        }
        // Digits past UInt64 name no event of this journal: a resync, as an id past its end.
        let huge = api.handle(HTTPRequest(method: "GET", path: "/v1/inbox/stream", headers: alice.merging(["last-event-id": "91279257245988083936329453101"]) { $1 }))
        #expect(huge.status == 200)
        guard case .stream(let stream) = huge.body else { Issue.record("no stream: \(huge.status)"); return }
        #expect(String(decoding: stream.pending, as: UTF8.self).contains(#""type":"resync""#))
        // An empty header does not hide a query value; a bad one is refused whichever is used.
        let both = api.handle(HTTPRequest(method: "GET", path: "/v1/inbox/stream", query: ["lastEventId": "\u{84}"],
                                          headers: alice.merging(["last-event-id": ""]) { $1 }))
        #expect(both.status == 400)
    }

    /// `unread` is a boolean: `true` or `false` (before the index is opened: 503 here).
    @Test(arguments: [("", 400), ("1", 400), ("yes", 400), ("TRUE", 400), ("true", 503), ("false", 503)])
    func unreadIsTrueOrFalse(text: String, status: Int) throws {
        let setup = try Setup()
        let answer = setup.api.handle(HTTPRequest(method: "GET", path: "/v1/inbox", query: ["unread": text], headers: [
            "authorization": "Bearer " + ConformanceTests.secret.token(user: "alice"), "x-pushspool-user": "alice"]))
        #expect(answer.status == status, "unread=\(text)")
    }

    /// A category name pushspoold would refuse is a 400 naming `muted`, not the vague refusal
    /// of the whole event.
    @Test(arguments: [#"{"muted":{"":true}}"#, #"{"muted":{"a\u0001":false}}"#, #"{"muted":{"\#(String(repeating: "c", count: 256))":true}}"#])
    func aBadCategoryNameIs400NamingMuted(body: String) throws {
        let setup = try Setup()
        let answer = setup.send("PUT", "/v1/preferences", body: body)
        #expect(answer.status == 400)
        #expect(answer.json?["error"]?.stringValue == "invalid_body")
        #expect(answer.json?["message"]?.stringValue?.hasPrefix("muted: ") == true, "\(String(describing: answer.json))")
    }
}
