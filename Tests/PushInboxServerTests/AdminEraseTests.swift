@preconcurrency import Glibc
import Foundation
import PushJournal
import PushPayload
import PushSpool
import PushSystem
import PushErasure
import Testing
import TestSupport
@testable import PushInboxServer

/// `/v1/admin/`: who may request an erasure (docs/inbox-api.md, "Erasure"). The admin token
/// may erase anyone; a user's own token nobody, unless `[Inbox] SelfErase=yes`, and then only
/// that user. An accepted request is an erasure envelope in the spool and a 202 with its id.
@Suite struct AdminEraseTests {
    static let adminToken = "an-admin-token-of-some-length"
    static let secret = TokenAuth(secret: Array("a-secret-of-some-length".utf8))

    final class Setup {
        let temp = TempDir("admin-erase")
        var spool: SpoolLayout { SpoolLayout(root: temp.appending("spool")) }
        var state: String { temp.appending("state") }

        func api(selfErase: Bool, admin: Bool = true) throws -> InboxAPI {
            try spool.create()
            try Posix.mkdirs(state)
            return InboxAPI(settings: .init(indexPath: state + "/inbox/index.sqlite", mediaDirectory: state + "/media", spool: spool,
                                            retention: nil, adminToken: admin ? Array(AdminEraseTests.adminToken.utf8) : nil,
                                            selfErase: selfErase, stateDirectory: state),
                            auth: AdminEraseTests.secret, hub: EventHub(indexPath: state + "/inbox/index.sqlite", changes: .follower),
                            stats: ServerStats())
        }

        /// The erasure requests in `incoming/`.
        func requests() throws -> [ErasureRequest] {
            try FileManager.default.contentsOfDirectory(atPath: spool.incoming).compactMap { name in
                let bytes = try Posix.readFile(spool.incoming + "/" + name)
                guard case .erasure(let request) = Normalizer.classify(bytes) else { return nil }
                return request
            }
        }
    }

    static func post(_ api: InboxAPI, _ path: String, token: String?, user: String? = nil) -> (Int, JSONValue?) {
        var headers: [String: String] = [:]
        if let token { headers["authorization"] = "Bearer " + token }
        if let user { headers["x-pushspool-user"] = user }
        let response = api.handle(HTTPRequest(method: "POST", path: path, headers: headers))
        guard case .bytes(let body) = response.body else { return (response.status, nil) }
        return (response.status, try? JSONParser().parse(body))
    }

    @Test func theAdminTokenErasesAnyUserOrDevice() throws {
        let setup = Setup()
        let api = try setup.api(selfErase: false)
        let (status, body) = Self.post(api, "/v1/admin/users/alice%40example.com/erase", token: Self.adminToken)
        #expect(status == 202)
        let id = try #require(body?["erasureId"]?.stringValue)
        #expect(body?["status"]?.stringValue == "/v1/admin/erasures/" + id)
        let (deviceStatus, _) = Self.post(api, "/v1/admin/devices/dev-1/erase", token: Self.adminToken)
        #expect(deviceStatus == 202)
        let requests = try setup.requests().sorted { $0.scope.rawValue > $1.scope.rawValue }
        #expect(requests.map(\.id) == ["alice@example.com", "dev-1"])
        #expect(requests.first?.erasureId == id)
        // Until pushspoold has taken it, the status is unknown; then it is what the eraser wrote.
        let get = { api.handle(HTTPRequest(method: "GET", path: "/v1/admin/erasures/" + id, headers: ["authorization": "Bearer " + Self.adminToken])) }
        #expect(get().status == 404)
        var written = ErasureRequests.Status(erasureID: id, scope: "user", subject: "hash", seq: 7)
        written.steps = ["planned"]
        try ErasureRequests(stateDirectory: setup.state).write(written)
        let response = get()
        #expect(response.status == 200)
        guard case .bytes(let bytes) = response.body else { Issue.record("no body"); return }
        #expect(try JSONParser().parse(bytes)["steps"] == .array([.string("planned")]))
    }

    @Test func aUsersTokenIsRefusedWithoutSelfErase() throws {
        let setup = Setup()
        let api = try setup.api(selfErase: false)
        let (status, body) = Self.post(api, "/v1/admin/users/alice/erase", token: Self.secret.token(user: "alice"), user: "alice")
        #expect(status == 403, "\(String(describing: body))")
        #expect(try setup.requests().isEmpty)
        // No credentials, or a wrong token: 401, as for every /v1/ route.
        #expect(Self.post(api, "/v1/admin/users/alice/erase", token: nil).0 == 401)
        #expect(Self.post(api, "/v1/admin/users/alice/erase", token: "not-the-admin-token").0 == 401)
    }

    @Test func withSelfEraseAUserMayEraseOnlyThemselves() throws {
        let setup = Setup()
        let api = try setup.api(selfErase: true, admin: false)
        let aliceToken = Self.secret.token(user: "alice")
        #expect(Self.post(api, "/v1/admin/users/bob/erase", token: aliceToken, user: "alice").0 == 403)
        #expect(Self.post(api, "/v1/admin/devices/dev-1/erase", token: aliceToken, user: "alice").0 == 403)
        #expect(try setup.requests().isEmpty)
        let (status, _) = Self.post(api, "/v1/admin/users/alice/erase", token: aliceToken, user: "alice")
        #expect(status == 202)
        #expect(try setup.requests().map(\.id) == ["alice"])
        // Without an admin token configured, no bearer token passes as one.
        #expect(Self.post(api, "/v1/admin/users/bob/erase", token: Self.adminToken).0 == 401)
    }

    @Test func aBrokenEscapeIsRefused() throws {
        let setup = Setup()
        let api = try setup.api(selfErase: false)
        #expect(Self.post(api, "/v1/admin/users/al%ZZice/erase", token: Self.adminToken).0 == 400)
        #expect(Self.post(api, "/v1/admin/users/%00/erase", token: Self.adminToken).0 == 400)
        #expect(try setup.requests().isEmpty)
    }
}

/// On a stream-fed node (an ``EventSink`` set) the admin route publishes the erasure record
/// itself: the body names only the subject's hash under the node's `erase.key`, the answer
/// says the status is the node's; without a key nothing is published and the answer is 503.
@Suite struct NodeAdminEraseTests {
    final class Recording: EventSink, Sendable {
        let published = Locked<[(String, [UInt8])]>([])
        func accept(_ event: PushEvent, fingerprint: String?) -> EventSinkFailure? { nil }
        func acceptErasure(erasureID: String, body: [UInt8]) -> EventSinkFailure? {
            published.withLock { $0.append((erasureID, body)) }
            return nil
        }
    }

    static func api(_ setup: AdminEraseTests.Setup, sink: Recording) throws -> InboxAPI {
        try setup.spool.create()
        try Posix.mkdirs(setup.state)
        return InboxAPI(settings: .init(indexPath: setup.state + "/inbox/index.sqlite", mediaDirectory: setup.state + "/media",
                                        spool: setup.spool, retention: nil, events: sink,
                                        adminToken: Array(AdminEraseTests.adminToken.utf8), stateDirectory: setup.state),
                        auth: AdminEraseTests.secret, hub: EventHub(indexPath: setup.state + "/inbox/index.sqlite", changes: .follower),
                        stats: ServerStats())
    }

    @Test func aNodePublishesTheErasureRecordNamingOnlyTheHash() throws {
        let setup = AdminEraseTests.Setup()
        let sink = Recording()
        let api = try Self.api(setup, sink: sink)
        // No key: refused, nothing published.
        let (refused, problem) = AdminEraseTests.post(api, "/v1/admin/users/alice/erase", token: AdminEraseTests.adminToken)
        #expect(refused == 503 && problem?["error"]?.stringValue == "erasure_unavailable", "\(String(describing: problem))")
        #expect(sink.published.withLock { $0.isEmpty })

        let key = ErasureSecret(bytes: Array(0..<32))
        try ErasureSecret.provision(stateDirectory: setup.state, key: key)
        let (status, body) = AdminEraseTests.post(api, "/v1/admin/users/alice/erase", token: AdminEraseTests.adminToken)
        #expect(status == 202 && body?["statusScope"]?.stringValue == "node", "\(String(describing: body))")
        let id = try #require(body?["erasureId"]?.stringValue)
        let (publishedID, record) = try #require(sink.published.withLock { $0.first })
        #expect(publishedID == id)
        let parsed = try #require(ErasureRecord.parse(key: "erasure:" + id, body: record))
        #expect(parsed.erasureID == id && parsed.scope == .user && parsed.subject == key.subjectHash(.user("alice")))
        #expect(!String(decoding: record, as: UTF8.self).contains("alice"))
        // Nothing went into the spool: no pushspoold journals for a node.
        #expect(try setup.requests().isEmpty)
        // Its status is 404 until the node applied the record from the stream.
        let response = api.handle(HTTPRequest(method: "GET", path: "/v1/admin/erasures/" + id,
                                              headers: ["authorization": "Bearer " + AdminEraseTests.adminToken]))
        #expect(response.status == 404)
    }
}
