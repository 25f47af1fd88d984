@preconcurrency import Glibc
import Foundation
import PushInbox
import PushJournal
import PushPayload
import PushSpool
import PushSystem
import Testing
import TestSupport
@testable import PushInboxServer

/// Issue 33, defect 2: a path is percent-decoded once, in the router, for every route; ids
/// with `%`, `/`, `+`, spaces and non-ASCII text reach the handlers as sent, and control
/// characters (NUL, a newline) are refused with a 400 naming the parameter. The handler-level
/// tests hand `InboxAPI` the raw path as libmicrohttpd now does; the loopback ones go through
/// libmicrohttpd itself (``HTTPServer`` on port 0).
@Suite struct PathDecodingTests {
    static let adminToken = "an-admin-token-of-some-length"
    static let secret = Array("a-secret-of-some-length".utf8)

    /// A journal and index holding one item of alice's, and an API on them with an admin
    /// token; its spool in its own temp dir.
    final class Setup {
        let journal: EventHubTests.Setup
        let api: InboxAPI
        let item: UInt64
        let spool: SpoolLayout

        init(_ label: String = #function, selfErase: Bool = false, users: [String] = []) async throws {
            journal = try EventHubTests.Setup(label)
            // Its buttons offer every action id the tests send (issue 37: only an offered
            // action is accepted).
            let offered = PathDecodingTests.encodedIds.map(\.id) + ["a/b c%"]
            item = try await journal.append(["vendor": .string("mindbox"), "id": .string("hello"), "user": .string("alice"), "title": .string("hello"),
                                             "buttons": .array(offered.map { .object(["id": .string($0), "text": .string($0)]) })], key: "hello")
            for (n, user) in users.enumerated() {
                _ = try await journal.append(["vendor": .string("mindbox"), "id": .string("u\(n)"), "user": .string(user),
                                              "title": .string("t"), "buttons": .array([])], key: "u\(n)")
            }
            let index = try InboxIndex(path: journal.indexPath)
            try index.catchUp(journalDirectory: journal.journal)
            spool = SpoolLayout(root: journal.temp.appending("spool"))
            try spool.create()
            api = InboxAPI(settings: .init(indexPath: journal.indexPath, mediaDirectory: journal.state + "/media", spool: spool,
                                           retention: nil, journalDirectory: journal.journal,
                                           adminToken: Array(PathDecodingTests.adminToken.utf8), selfErase: selfErase,
                                           stateDirectory: journal.state),
                           auth: TokenAuth(secret: PathDecodingTests.secret),
                           hub: EventHub(indexPath: journal.indexPath, journalDirectory: journal.journal), stats: ServerStats())
        }

        /// The events and erasure requests in the spool's `incoming/`.
        func dropped() throws -> (events: [PushEvent], erasures: [ErasureRequest]) {
            var events: [PushEvent] = []
            var erasures: [ErasureRequest] = []
            for name in try FileManager.default.contentsOfDirectory(atPath: spool.incoming) {
                switch Normalizer.classify(try Posix.readFile(spool.incoming + "/" + name)) {
                case .event(let event): events.append(event)
                case .erasure(let request): erasures.append(request)
                default: Issue.record("unexpected file in the spool: \(name)")
                }
            }
            return (events, erasures)
        }
    }

    /// The headers of a request by `user` (with their token), or by the admin.
    static func credentials(user: String?) -> [String: String] {
        guard let user else { return ["authorization": "Bearer " + adminToken] }
        return ["authorization": "Bearer " + TokenAuth(secret: secret).token(user: user), "x-pushspool-user": user]
    }

    static func send(_ api: InboxAPI, _ method: String, _ path: String, user: String? = "alice") -> (status: Int, json: JSONValue?) {
        let response = api.handle(HTTPRequest(method: method, path: path, headers: credentials(user: user)))
        guard case .bytes(let body) = response.body else { return (response.status, nil) }
        return (response.status, try? JSONParser().parse(body))
    }

    /// Raw path components (as a client sends them) and the id each stands for.
    static let encodedIds: [(raw: String, id: String)] = [
        ("50%2541", "50%41"), ("100%25", "100%"), ("a%2Fb", "a/b"), ("%2F", "/"), ("a+b", "a+b"), ("a%2Bb", "a+b"),
        ("a%20b", "a b"), ("jos%C3%A9", "jos\u{e9}"), ("jose%CC%81", "jose\u{301}"), ("jos\u{e9}", "jos\u{e9}"),
        ("%E2%9C%93%40x", "\u{2713}@x"), ("alice%40example.com", "alice@example.com"),
    ]

    /// A path for `route` with `value` for the placeholder `name` and a valid one for the others.
    static func path(_ route: Route, item: UInt64, _ name: String, _ value: String) -> String {
        "/" + route.segments.map { segment in
            switch segment {
            case .literal(let text): text
            case .parameter(let parameter) where parameter == name: value
            case .parameter("item"): String(item)
            case .parameter("sha256"): String(repeating: "ab", count: 32)
            case .parameter("erasureId"): String(repeating: "0", count: 32)
            case .parameter: "reply"
            }
        }.joined(separator: "/")
    }

    static var parameterised: [(route: Route, name: String)] {
        InboxAPI.routes.flatMap { route in
            route.segments.compactMap { segment -> (Route, String)? in
                guard case .parameter(let name) = segment else { return nil }
                return (route, name)
            }
        }
    }

    @Test func theAdminEraseRoutesTakeIdsDecodedOnce() async throws {
        let setup = try await Setup()
        var expected: [String] = []
        for (raw, id) in Self.encodedIds {
            for scope in ["users", "devices"] {
                let (status, body) = Self.send(setup.api, "POST", "/v1/admin/\(scope)/\(raw)/erase", user: nil)
                #expect(status == 202, "\(scope)/\(raw): \(String(describing: body))")
                expected.append(scope + ":" + id)
            }
        }
        let erasures = try setup.dropped().erasures.map { $0.scope.rawValue + "s:" + $0.id }
        #expect(Set(erasures.map { Array($0.utf8) }) == Set(expected.map { Array($0.utf8) }), "\(erasures)")
    }

    @Test func actionIdsAreDecodedOnce() async throws {
        let setup = try await Setup()
        var expected: [[UInt8]] = []
        for (raw, id) in Self.encodedIds {
            for suffix in ["", "/revert"] {
                let (status, body) = Self.send(setup.api, "POST", "/v1/inbox/\(setup.item)/actions/\(raw)\(suffix)")
                #expect(status == 202, "\(raw)\(suffix): \(String(describing: body))")
                expected.append(Array(id.utf8))
            }
        }
        let actions = try setup.dropped().events.map { Array(($0.action ?? "").utf8) }
        #expect(actions.sorted { $0.lexicographicallyPrecedes($1) } == expected.sorted { $0.lexicographicallyPrecedes($1) })
    }

    /// Every route with a placeholder: each value of ``encodedIds`` reaches the handler (which
    /// answers as for any id it does not know, or accepts it), never a 400 or a routing miss.
    @Test func everyRouteTakesPercentSlashPlusSpaceAndNonASCII() async throws {
        let setup = try await Setup()
        let accepted: Set<String> = ["action", "user", "device"]
        for (route, name) in Self.parameterised {
            for (raw, _) in Self.encodedIds {
                let path = Self.path(route, item: setup.item, name, raw)
                let (status, body) = Self.send(setup.api, route.method.rawValue, path, user: route.name.hasPrefix("admin") ? nil : "alice")
                #expect(status == (accepted.contains(name) ? 202 : 404), "\(route.method.rawValue) \(path): \(String(describing: body))")
            }
        }
    }

    /// Every route with a placeholder refuses a value with a NUL or a newline, a broken escape
    /// and bytes that are not UTF-8, with a 400 that names the placeholder; nothing is dropped.
    @Test func everyRouteRefusesControlCharactersAndBrokenEscapesNamingTheParameter() async throws {
        let setup = try await Setup()
        for (route, name) in Self.parameterised {
            for raw in ["a%00b", "%00", "a%0Ab", "a%0D%0Ab", "%7F", "a%09", "al%ZZice", "a%4", "%", "%FF", "%C3"] {
                let path = Self.path(route, item: setup.item, name, raw)
                let (status, body) = Self.send(setup.api, route.method.rawValue, path, user: route.name.hasPrefix("admin") ? nil : "alice")
                #expect(status == 400, "\(route.method.rawValue) \(path)")
                #expect(body?["error"]?.stringValue == "invalid_path_parameter", "\(path): \(String(describing: body))")
                #expect(body?["message"]?.stringValue?.contains("{\(name)}") == true, "\(path): \(String(describing: body))")
            }
        }
        let dropped = try setup.dropped()
        #expect(dropped.events.isEmpty && dropped.erasures.isEmpty)
    }

    /// A user id or device id with a control character in a header or `?user=` is refused
    /// naming where it came from.
    @Test func controlCharactersInTheUserOrDeviceHeaderAreRefusedNamingIt() async throws {
        let setup = try await Setup()
        let user = "al\u{7}ice"
        var headers = Self.credentials(user: user)
        var response = setup.api.handle(HTTPRequest(method: "GET", path: "/v1/inbox/counts", headers: headers))
        #expect(response.status == 400)
        guard case .bytes(let body) = response.body else { Issue.record("no body"); return }
        #expect(String(decoding: body, as: UTF8.self).contains("X-Pushspool-User"))
        response = setup.api.handle(HTTPRequest(method: "GET", path: "/v1/inbox/counts",
                                                query: ["user": "a\u{0}b", "token": TokenAuth(secret: Self.secret).token(user: "a\u{0}b")]))
        #expect(response.status == 400)
        headers = Self.credentials(user: "alice")
        headers["x-pushspool-device"] = "dev\u{1b}[31m"
        response = setup.api.handle(HTTPRequest(method: "POST", path: "/v1/inbox/\(setup.item)/open", headers: headers))
        #expect(response.status == 400)
        guard case .bytes(let deviceBody) = response.body else { Issue.record("no body"); return }
        #expect(String(decoding: deviceBody, as: UTF8.self).contains("X-Pushspool-Device"))
        #expect(try setup.dropped().events.isEmpty)
    }

    // MARK: over libmicrohttpd

    /// A minimal HTTP/1.1 exchange on a new connection to 127.0.0.1:`port`: sends `head`
    /// (request line and headers, `Connection: close` added) and reads to the server's close.
    static func exchange(port: UInt16, _ method: String, _ target: String, headers: [String: String] = [:]) throws -> (status: Int, body: String) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(connected == 0)
        var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Length: 0\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        let bytes = Array((head + "\r\n").utf8)
        try #require(bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count)
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            try #require(poll(&pfd, 1, 10_000) > 0, "no answer within 10 s")
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received += buffer[..<n]
        }
        let text = String(decoding: received, as: UTF8.self)
        let status = Int(text.split(separator: " ").dropFirst().first ?? "") ?? 0
        let body = text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? ""
        return (status, body)
    }

    static func serve(_ handler: any HTTPHandler) throws -> (HTTPServer, UInt16) {
        let bound = try Listener.bind(host: "127.0.0.1", port: 0)
        let server = HTTPServer(listenFD: bound.fd, limits: HTTPLimits(maxConnections: 16, maxConnectionsPerIP: 16,
                                                                       connectionTimeout: .seconds(10), maxRequestBytes: 1 << 20),
                                handler: handler)
        try server.start()
        return (server, bound.port)
    }

    /// What the handler is handed: the path as sent, the query decoded once.
    final class Recorder: HTTPHandler {
        let requests = Locked<[HTTPRequest]>([])
        func handle(_ request: HTTPRequest) -> HTTPResponse {
            requests.withLock { $0.append(request) }
            return HTTPResponse(status: 204)
        }
    }

    @Test func libmicrohttpdHandsOverThePathUndecodedAndTheQueryIsDecodedOnce() throws {
        let recorder = Recorder()
        let (server, port) = try Self.serve(recorder)
        defer { server.stop() }
        #expect(try Self.exchange(port: port, "GET", "/v1/a%2Fb/50%2541/%00/jos%C3%A9?x=a+b%2Bc&y=%2541&z=%E2%9C%93&e=").status == 204)
        let first = try #require(recorder.requests.withLock { $0.first })
        #expect(first.path == "/v1/a%2Fb/50%2541/%00/jos%C3%A9")
        #expect(first.query == ["x": "a b+c", "y": "%41", "z": "\u{2713}", "e": ""])
        // A broken escape in a query argument: 400 naming it, the handler never called.
        let refused = try Self.exchange(port: port, "GET", "/x?limit=%ZZ")
        #expect(refused.status == 400 && refused.body.contains("limit"), "\(refused)")
        #expect(recorder.requests.withLock { $0.count } == 1)
    }

    /// The issue's cases end to end: `50%2541` erased `50A`, `a%2Fb` was a 404, `100%25` a
    /// 400, an action `a%0Ab` reached the journal.
    @Test func overHTTPEveryIdIsDecodedOnce() async throws {
        let setup = try await Setup()
        let (server, port) = try Self.serve(setup.api)
        defer { server.stop() }
        let admin = Self.credentials(user: nil)
        for (raw, _) in Self.encodedIds where raw.utf8.allSatisfy({ $0 < 0x80 }) {
            let answer = try Self.exchange(port: port, "POST", "/v1/admin/users/\(raw)/erase", headers: admin)
            #expect(answer.status == 202, "\(raw): \(answer)")
        }
        let ids = try setup.dropped().erasures.map(\.id)
        let erased = ids.map { Array($0.utf8) }
        let expected = Self.encodedIds.filter { $0.raw.utf8.allSatisfy { $0 < 0x80 } }.map { Array($0.id.utf8) }
        #expect(Set(erased) == Set(expected), "\(ids)")
        #expect(!erased.contains(Array("50A".utf8)))

        for raw in ["a%00b", "a%0Ab", "%ZZ"] {
            let answer = try Self.exchange(port: port, "POST", "/v1/admin/devices/\(raw)/erase", headers: admin)
            #expect(answer.status == 400 && answer.body.contains("{device}"), "\(raw): \(answer)")
        }
        let alice = Self.credentials(user: "alice")
        let newline = try Self.exchange(port: port, "POST", "/v1/inbox/\(setup.item)/actions/a%0Ab", headers: alice)
        #expect(newline.status == 400 && newline.body.contains("{action}"), "\(newline)")
        let slash = try Self.exchange(port: port, "POST", "/v1/inbox/\(setup.item)/actions/a%2Fb%20c%25", headers: alice)
        #expect(slash.status == 202, "\(slash)")
        #expect(try setup.dropped().events.map { Array(($0.action ?? "").utf8) } == [Array("a/b c%".utf8)])
        // `?user=&token=` on GET still authenticates, its values decoded once.
        let token = TokenAuth(secret: Self.secret).token(user: "alice")
        #expect(try Self.exchange(port: port, "GET", "/v1/inbox/counts?user=%61lice&token=\(token)").status == 200)
    }
}
