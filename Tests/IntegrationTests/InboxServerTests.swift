@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushInboxServer
import PushJournal
import PushSystem

/// A running `pushspool-inbox --listen 127.0.0.1:0` on a ``DaemonHarness``'s directories,
/// driven with Debian's `curl` the way an app back end would.
final class InboxServerHarness: @unchecked Sendable {
    static let secret = "test-secret-0123456789abcdef-0123456789"
    let daemon: DaemonHarness
    private(set) var process: Process
    private(set) var port: Int
    private let environment: [String: String]
    private let extraArguments: [String]

    /// `secretByCredential`: no `TokenSecretFile=`; the secret sits where systemd's
    /// `LoadCredential=inbox-token-secret:…` puts it, `$CREDENTIALS_DIRECTORY/inbox-token-secret`
    /// (the user manager here cannot run LoadCredential= itself).
    /// `extraEnvironment`: set for pushspool-inbox only (a test's `NOTIFY_SOCKET`).
    init(name: String, extraConfig: String = "", arguments extra: [String] = [], secretByCredential: Bool = false,
         extraEnvironment: [String: String] = [:]) throws {
        let secretLine = secretByCredential ? "" : "TokenSecretFile=__SECRET__\n"
        daemon = try DaemonHarness(name: name, config: "[Media]\nEnabled=no\n[Inbox]\n\(secretLine)\(extraConfig)")
        var environment = ProcessInfo.processInfo.environment
        if secretByCredential {
            let credentials = daemon.root + "/credentials"
            try Posix.mkdirs(credentials)
            try Posix.writeFileAtomically(directory: credentials, name: "inbox-token-secret", bytes: Array(Self.secret.utf8), mode: 0o400)
            environment["CREDENTIALS_DIRECTORY"] = credentials
        } else {
            let secretPath = daemon.root + "/inbox-token-secret"
            try Self.secret.write(toFile: secretPath, atomically: true, encoding: .utf8)
            let text = try String(contentsOfFile: daemon.config, encoding: .utf8).replacingOccurrences(of: "__SECRET__", with: secretPath)
            try text.write(toFile: daemon.config, atomically: true, encoding: .utf8)
            environment["CREDENTIALS_DIRECTORY"] = nil
        }
        environment.merge(extraEnvironment) { _, extra in extra }
        try daemon.start()
        let indexPath = daemon.state + "/inbox/index.sqlite"
        try waitUntil(timeout: 30, "the inbox index") { FileManager.default.fileExists(atPath: indexPath) }
        self.environment = environment
        extraArguments = extra
        (process, port) = try Self.spawn(daemon: daemon, environment: environment, extra: extra)
    }

    /// Starts pushspool-inbox on a free port and waits for "listening on 127.0.0.1:PORT".
    private static func spawn(daemon: DaemonHarness, environment: [String: String], extra: [String]) throws -> (Process, Int) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: DaemonHarness.binDirectory + "/pushspool-inbox")
        process.arguments = ["--listen", "127.0.0.1:0", "--spool", daemon.spool, "--state-dir", daemon.state, "--config", daemon.config] + extra
        process.environment = environment
        // Files, not pipes: the tests run in parallel, and a pipe's write end leaks into every
        // child spawned meanwhile (curl, pushspoolctl), so a reader of it would wait for them all.
        let outPath = daemon.root + "/inbox.stdout"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        process.standardOutput = FileHandle(forWritingAtPath: outPath)
        _ = FileManager.default.createFile(atPath: daemon.root + "/inbox.stderr", contents: nil)
        process.standardError = FileHandle(forWritingAtPath: daemon.root + "/inbox.stderr")
        try process.run()
        // "listening on 127.0.0.1:PORT"
        var port: Int?
        let child = process
        try waitUntil(timeout: 30, "pushspool-inbox to listen") {
            if !child.isRunning { throw TimeoutError(description: "pushspool-inbox exited with \(child.terminationStatus)") }
            let text = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
            guard text.hasSuffix("\n"), let last = text.split(separator: ":").last else { return false }
            port = Int(last.trimmingCharacters(in: .whitespacesAndNewlines))
            return port != nil
        }
        guard let port else { throw TimeoutError(description: "pushspool-inbox did not say where it listens") }
        return (process, port)
    }

    /// Stops pushspool-inbox (SIGTERM) and starts a new one, on another port.
    func restart() throws {
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        (process, port) = try Self.spawn(daemon: daemon, environment: environment, extra: extraArguments)
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGTERM); process.waitUntilExit() }
    }

    var base: String { "http://127.0.0.1:\(port)" }
    var stderr: String { (try? String(contentsOfFile: daemon.root + "/inbox.stderr", encoding: .utf8)) ?? "" }
    /// The `inboxAuthFailed` event lines on stderr.
    var authEvents: [Substring] { stderr.split(separator: "\n").filter { $0.contains(" EVENT=inboxAuthFailed") } }
    /// The sum of `AGGREGATED_COUNT` over the summaries of suppressed `inboxAuthFailed` events.
    var suppressedAuthEvents: Int {
        stderr.split(separator: "\n").filter { $0.contains("AGGREGATED_EVENT=inboxAuthFailed") }.reduce(0) { sum, line in
            let field = line.split(separator: " ").first { $0.hasPrefix("AGGREGATED_COUNT=") }
            return sum + (field.flatMap { Int($0.dropFirst("AGGREGATED_COUNT=".count)) } ?? 0)
        }
    }

    static func token(_ user: String) -> String { TokenAuth(secret: Array(secret.utf8)).token(user: user) }

    struct Reply {
        var status: Int
        var headers: [String: String]
        var body: String
        var json: JSONValue? { try? JSONParser().parse(body) }
    }

    /// One request through curl. `user` signs it with that user's token unless `token` is given.
    func request(_ method: String, _ path: String, user: String? = "alice", token: String? = nil, body: String? = nil,
                 headers: [String] = []) throws -> Reply {
        var arguments = ["-s", "-S", "-i", "--max-time", "10", "-X", method]
        if let user {
            arguments += ["-H", "X-Pushspool-User: \(user)", "-H", "Authorization: Bearer \(token ?? Self.token(user))"]
        }
        for header in headers { arguments += ["-H", header] }
        if let body { arguments += ["-H", "Content-Type: application/json", "--data-binary", body] }
        arguments.append(base + path)
        let result = try ProcessRunner.run("/usr/bin/curl", arguments)
        return try Self.parse(result.stdout, curlError: result.stderr)
    }

    static func parse(_ raw: String, curlError: String = "") throws -> Reply {
        guard let split = raw.range(of: "\r\n\r\n") else { throw TimeoutError(description: "no HTTP response: \(raw) \(curlError)") }
        let head = raw[..<split.lowerBound].split(separator: "\r\n")
        let status = Int(head.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return Reply(status: status, headers: headers, body: String(raw[split.upperBound...]))
    }

    /// Drops a plain APNs push for `user` through the spool.
    func push(user: String, title: String, category: String? = nil) throws {
        let categoryText = category.map { ",\"category\":\"\($0)\"" } ?? ""
        let json = """
            {"pushspool":1,"user":"\(user)","platform":"ios","payload":{"aps":{"alert":{"title":"\(title)","body":"b"}\(categoryText)},"n":"\(UUID().uuidString)"}}
            """
        try daemon.drop(Array(json.utf8), name: UUID().uuidString + ".json")
    }

    /// Pushes a marker item to a user of its own and waits until the index lists it. The index
    /// applies the journal in order, so everything journaled before the marker has been applied
    /// by then: the positive mark a "nothing happened" assertion waits for instead of a sleep.
    func waitAppliedPastMarker() throws {
        let user = "marker-" + UUID().uuidString.prefix(8)
        try push(user: user, title: "marker")
        try waitUntil(timeout: 30, "the marker item in the index") { try counts(user).unread == 1 }
    }

    func counts(_ user: String = "alice") throws -> (unseen: Int, unread: Int) {
        let reply = try request("GET", "/v1/inbox/counts", user: user)
        return (reply.json?["unseen"]?.intValue ?? -1, reply.json?["unread"]?.intValue ?? -1)
    }

    func items(_ user: String = "alice", query: String = "") throws -> [JSONValue] {
        try request("GET", "/v1/inbox" + query, user: user).json?["items"]?.arrayValue ?? []
    }
}

@Suite struct InboxServerTests {
    /// The secret as LoadCredential= delivers it: tokens made with it are accepted, others not;
    /// with neither a credential nor TokenSecretFile= the server refuses to start and says how.
    @Test func theSecretComesFromTheCredentialsDirectory() throws {
        let server = try InboxServerHarness(name: "inbox-credential", secretByCredential: true)
        #expect(try server.request("GET", "/v1/inbox/counts", user: "alice").status == 200)
        #expect(try server.request("GET", "/v1/inbox/counts", user: "alice", token: String(repeating: "0", count: 64)).status == 401)

        let bare = Process()
        bare.executableURL = URL(fileURLWithPath: DaemonHarness.binDirectory + "/pushspool-inbox")
        bare.arguments = ["--listen", "127.0.0.1:0", "--spool", server.daemon.spool, "--state-dir", server.daemon.state,
                          "--config", server.daemon.config]
        var environment = ProcessInfo.processInfo.environment
        environment["CREDENTIALS_DIRECTORY"] = nil
        bare.environment = environment
        let errorPath = server.daemon.root + "/bare.stderr"
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        bare.standardError = FileHandle(forWritingAtPath: errorPath)
        bare.standardOutput = FileHandle.nullDevice
        try bare.run()
        bare.waitUntilExit()
        #expect(bare.terminationStatus == 78)
        #expect(try String(contentsOfFile: errorPath, encoding: .utf8).contains("LoadCredential=inbox-token-secret"))
    }

    /// Issue 33, defect 8: pushspool-inbox ignored SIGHUP, so after `systemctl reload` with a
    /// new `[Inbox] RetentionSec=` pushspoolctl nc (which reads the file each run) and the
    /// HTTP API disagreed until a restart. A reload now applies it to the API's queries, and
    /// names the keys it read at start that wait for a restart.
    @Test func aReloadAppliesANewRetention() throws {
        let server = try InboxServerHarness(name: "inbox-reload")
        try server.push(user: "alice", title: "kept until the reload")
        try waitUntil(timeout: 30, "alice's push") { try server.counts().unread == 1 }
        let config = try String(contentsOfFile: server.daemon.config, encoding: .utf8)
        // The harness's file ends in [Inbox]: one key pushspool-inbox reloads, one it reads at start.
        try (config + "RetentionSec=1s\nMaxConnections=100\n").write(toFile: server.daemon.config, atomically: true, encoding: .utf8)
        kill(server.process.processIdentifier, SIGHUP)
        try waitUntil(timeout: 30, "the reload") { server.stderr.contains("EVENT=reload") }
        let line = try #require(server.stderr.split(separator: "\n").first { $0.contains("EVENT=reload") })
        #expect(line.contains("Inbox.MaxConnections take effect at the next restart"), "\(line)")
        #expect(line.contains("CHANGED=\"Inbox.RetentionSec Inbox.MaxConnections\""), "\(line)")
        // The item is over a second old once this holds; the CLI, reading the file, agrees.
        try waitUntil(timeout: 30, "the new retention in the API") { try server.counts().unread == 0 }
        #expect(try server.items().isEmpty)
        let (status, out, err) = try server.daemon.ctl(["nc", "count", "--user", "alice", "--json"])
        #expect(status == 0, "\(err)")
        #expect(out.contains("\"unread\":0"), "\(out)")
        #expect(server.process.isRunning)

        // A file that does not load leaves the running configuration in force.
        try (config + "RetentionSec=nonsense\n").write(toFile: server.daemon.config, atomically: true, encoding: .utf8)
        kill(server.process.processIdentifier, SIGHUP)
        try waitUntil(timeout: 30, "the refused reload") { server.stderr.contains("EVENT=reloadFailed") }
        #expect(try server.counts().unread == 0)
        #expect(server.process.isRunning)
    }

    @Test func refusalsAreIdenticalAndRevealNothing() throws {
        let server = try InboxServerHarness(name: "inbox-auth")
        try server.push(user: "bob", title: "for bob")
        try waitUntil(timeout: 30, "bob's push") { try server.counts("bob").unread == 1 }
        let bobItem = try #require(try server.items("bob").first?["item"]?.stringValue)

        let missing = try server.request("GET", "/v1/inbox", user: nil)
        let wrong = try server.request("GET", "/v1/inbox", user: "alice", token: String(repeating: "0", count: 64))
        let othersToken = try server.request("GET", "/v1/inbox", user: "alice", token: InboxServerHarness.token("bob"))
        let unknownUser = try server.request("GET", "/v1/inbox/counts", user: "nobody", token: "x")
        let unknownRoute = try server.request("GET", "/v1/nothing-here", user: nil)
        for reply in [missing, wrong, othersToken, unknownUser, unknownRoute] {
            #expect(reply.status == 401)
            #expect(reply.body == missing.body)
            #expect(reply.headers["www-authenticate"] == "Bearer realm=\"pushspool-inbox\"")
        }
        // Each refusal is an inboxAuthFailed event (stderr lines here: not a journal stream)
        // with the address, method, route template and reason, and never the token.
        try waitUntil(timeout: 10, "the auth failures logged") { server.authEvents.count == 5 }
        let events = server.authEvents
        #expect(events.allSatisfy { $0.contains("REMOTE_ADDR=127.0.0.1") && $0.contains("HTTP_METHOD=GET") })
        #expect(events.filter { $0.contains("REASON_CODE=missing_credentials") }.count == 2)
        #expect(events.filter { $0.contains("REASON_CODE=invalid_token") }.count == 3)
        #expect(events.filter { $0.contains("INBOX_ROUTE=/v1/inbox/counts") }.count == 1)
        #expect(events.filter { $0.contains("INBOX_ROUTE=other") }.count == 1)
        #expect(!server.stderr.contains(InboxServerHarness.token("bob")))
        #expect(!server.stderr.contains(String(repeating: "0", count: 64)))
        // Alice cannot act on bob's item: the same 404 as an item that does not exist.
        let cross = try server.request("POST", "/v1/inbox/\(bobItem)/read")
        let none = try server.request("POST", "/v1/inbox/999999/read")
        #expect(cross.status == 404)
        #expect(cross.body == none.body)
        let crossAction = try server.request("POST", "/v1/inbox/\(bobItem)/actions/accept", body: "{}")
        #expect(crossAction.status == 404)
        #expect(try server.items("alice").isEmpty)
        // Nothing was dropped for it: bob's item stays unread (checked once the index is past a
        // later marker).
        try server.waitAppliedPastMarker()
        #expect(try server.counts("bob").unread == 1)
        #expect(server.daemon.files(in: "failed").isEmpty)
    }

    /// A token-guessing client: 400 refusals in one keep-alive connection as fast as curl
    /// sends them. Events stay within the per-second budget, and the summaries account for
    /// every one that was not logged.
    @Test func authFailureEventsAreRateLimited() throws {
        let server = try InboxServerHarness(name: "inbox-authrate")
        let total = 400
        let started = Posix.monotonicNanos()
        // One -o per URL: curl pairs them in order (a single -o covers only the first).
        let urls = (0..<total).flatMap { ["-o", "/dev/null", "\(server.base)/v1/inbox/\($0 + 1)/read"] }
        let result = try ProcessRunner.run("/usr/bin/curl", ["-s", "-w", "%{http_code}\\n", "-X", "POST",
                                                             "-H", "X-Pushspool-User: mallory", "-H", "Authorization: Bearer guess"] + urls)
        let seconds = Int((Posix.monotonicNanos() - started) / 1_000_000_000) + 1
        #expect(result.stdout.split(separator: "\n").allSatisfy { $0 == "401" })
        // The status thread flushes summaries once a second.
        try waitUntil(timeout: 10, "every refusal accounted for") {
            server.authEvents.count + server.suppressedAuthEvents == total
        }
        let logged = server.authEvents.count
        #expect(logged <= ServerStats.authEventsPerSecond * (seconds + 1), "\(logged) events in about \(seconds) s")
        #expect(server.suppressedAuthEvents >= total - ServerStats.authEventsPerSecond * (seconds + 1))
        #expect(server.authEvents.allSatisfy { $0.contains("INBOX_ROUTE=/v1/inbox/{item}/read") && !$0.contains("guess") })
        let metrics = try server.request("GET", "/metrics", user: nil)
        #expect(metrics.body.contains("pushspool_inbox_auth_failures_total \(total)"))
    }

    /// Four libmicrohttpd workers, each with its own index connection, answering 16
    /// connections at once: every answer is right (no connection shared across threads).
    @Test func aThreadPoolAnswersConcurrentConnections() throws {
        let server = try InboxServerHarness(name: "inbox-pool", arguments: ["--threads", "4"])
        try server.push(user: "alice", title: "one")
        try server.push(user: "bob", title: "two")
        try waitUntil(timeout: 30, "the pushes") { try server.counts().unread == 1 && server.counts("bob").unread == 1 }
        // The workers are threads of the process: main, the hub's poller, the status thread, 4 workers.
        let tasks = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(server.process.processIdentifier)/task").count
        #expect(tasks >= 7, "\(tasks) threads")
        var arguments = ["-s", "--parallel", "--parallel-immediate", "--parallel-max", "16", "-w", "%{http_code} %{size_download}\\n", "-o", "/dev/null"]
        for index in 0..<400 {
            let user = index % 2 == 0 ? "alice" : "bob"
            arguments += ["-H", "X-Pushspool-User: \(user)", "-H", "Authorization: Bearer \(InboxServerHarness.token(user))",
                          "\(server.base)/v1/inbox/counts?n=\(index)", "--next", "-o", "/dev/null", "-w", "%{http_code} %{size_download}\\n"]
        }
        arguments.removeLast(5)
        let result = try ProcessRunner.run("/usr/bin/curl", arguments)
        let lines = result.stdout.split(separator: "\n")
        #expect(lines.count == 400)
        #expect(lines.allSatisfy { $0.hasPrefix("200 ") }, "\(Set(lines))")
        let metrics = try server.request("GET", "/metrics", user: nil)
        #expect(metrics.body.contains("pushspool_inbox_requests_total{route=\"counts\",code=\"200\"}"))
    }

    @Test func everyRouteAnswersAndStateChangesGoThroughTheJournal() throws {
        let server = try InboxServerHarness(name: "inbox-routes", extraConfig: "[Category promo]\nAction=reply:Reply:\n")
        try server.push(user: "alice", title: "one", category: "promo")
        try waitUntil(timeout: 30, "the first push") { try server.counts().unread == 1 }
        try server.push(user: "alice", title: "two")
        try server.push(user: "alice", title: "three")
        try waitUntil(timeout: 30, "three pushes") { try server.counts().unread == 3 }

        let all = try server.items()
        #expect(all.map { $0["title"]?.stringValue } == ["three", "two", "one"])
        #expect(try server.items(query: "?category=promo").map { $0["title"]?.stringValue } == ["one"])
        #expect(try server.request("GET", "/v1/inbox?limit=0").status == 400)
        #expect(try server.request("GET", "/v1/inbox?cursor=bogus").status == 400)
        let ids = all.compactMap { $0["item"]?.stringValue }
        let (three, two, one) = (ids[0], ids[1], ids[2])

        let seen = try server.request("POST", "/v1/inbox/\(three)/seen")
        #expect(seen.status == 202)
        #expect(seen.json?["item"]?["state"]?["seen"]?.boolValue == true)
        #expect(seen.json?["item"]?["state"]?["read"]?.boolValue == false)
        let read = try server.request("POST", "/v1/inbox/\(two)/read")
        #expect(read.json?["item"]?["state"]?["read"]?.boolValue == true)
        try waitUntil(timeout: 30, "seen and read applied") { try server.counts() == (1, 2) }
        #expect(try server.items(query: "?unread=true").map { $0["title"]?.stringValue } == ["three", "one"])

        let action = try server.request("POST", "/v1/inbox/\(one)/actions/reply", body: #"{"text":"thanks"}"#)
        #expect(action.status == 202)
        #expect(action.json?["item"]?["state"]?["acted"] == .string("reply") && action.json?["item"]?["state"]?["actedText"] == .string("thanks"))
        let archive = try server.request("POST", "/v1/inbox/\(two)/archive")
        #expect(archive.json?["item"]?["state"]?["archived"]?.boolValue == true)
        try waitUntil(timeout: 30, "archive applied") { try server.items().count == 2 }

        let readAll = try server.request("POST", "/v1/inbox/read-all")
        #expect(readAll.status == 202)
        try waitUntil(timeout: 30, "read-all applied") { try server.counts() == (0, 0) }

        let inapp = try server.request("GET", "/v1/inapp")
        #expect(inapp.status == 200)
        #expect(inapp.json?["item"]?.isNull == true)
        let open = try server.request("POST", "/v1/events/nc-open", headers: ["X-Pushspool-Device: d1"])
        #expect(open.status == 202)
        let openId = try #require(open.json?["eventId"]?.stringValue)

        // Every change is a journaled event record; the text of the action travels with it.
        try waitUntil(timeout: 30, "the events journaled") {
            try server.daemon.records().contains { $0.key == "event:" + openId }
        }
        let events = try server.daemon.records().compactMap { record -> JSONValue? in
            guard record.key.hasPrefix("event:") else { return nil }
            return try JSONParser().parse(record.body)
        }
        #expect(events.map { $0["type"]?.stringValue ?? "" } == ["nc.seen", "nc.read", "nc.action", "nc.archive", "nc.read-all", "nc.opened"])
        #expect(events.allSatisfy { $0["user"]?.stringValue == "alice" })
        #expect(events[2]["text"]?.stringValue == "thanks")
        #expect(events[5]["device"]?.stringValue == "d1")

        // Over-size bodies are refused before they are read.
        let big = try server.request("POST", "/v1/inbox/\(one)/actions/reply", body: "{\"text\":\"" + String(repeating: "x", count: 20_000) + "\"}")
        #expect(big.status == 413)
        let metrics = try server.request("GET", "/metrics", user: nil)
        #expect(metrics.body.contains("pushspool_inbox_requests_total{route=\"inbox\",code=\"200\"}"))
    }

    @Test func idempotencyKeyMakesARepeatCountOnce() throws {
        let server = try InboxServerHarness(name: "inbox-idem")
        try server.push(user: "alice", title: "x")
        try waitUntil(timeout: 30, "the push") { try server.counts().unread == 1 }
        let item = try #require(try server.items().first?["item"]?.stringValue)
        let first = try server.request("POST", "/v1/inbox/\(item)/read", headers: ["Idempotency-Key: tap-42"])
        let second = try server.request("POST", "/v1/inbox/\(item)/read", headers: ["Idempotency-Key: tap-42"])
        #expect(first.status == 202 && second.status == 202)
        let id = try #require(first.json?["eventId"]?.stringValue)
        #expect(second.json?["eventId"]?.stringValue == id)
        // Bob's same key is another event.
        try server.push(user: "bob", title: "y")
        try waitUntil(timeout: 30, "bob's push") { try server.counts("bob").unread == 1 }
        let bobItem = try #require(try server.items("bob").first?["item"]?.stringValue)
        let bob = try server.request("POST", "/v1/inbox/\(bobItem)/read", user: "bob", headers: ["Idempotency-Key: tap-42"])
        #expect(bob.json?["eventId"]?.stringValue != id)
        try waitUntil(timeout: 30, "both reads applied") { try server.counts().unread == 0 && server.counts("bob").unread == 0 }
        try waitUntil(timeout: 30, "the spool drained") { server.daemon.files(in: "incoming").isEmpty && server.daemon.files(in: "processing").isEmpty }
        #expect(try server.daemon.records().filter { $0.key == "event:" + id }.count == 1)
    }

    @Test func cursorPagesStayCorrectWhileItemsArrive() throws {
        let server = try InboxServerHarness(name: "inbox-cursor")
        for i in 1...5 { try server.push(user: "alice", title: "p\(i)") }
        try waitUntil(timeout: 30, "five pushes") { try server.counts().unread == 5 }
        let first = try server.request("GET", "/v1/inbox?limit=2")
        let page1 = first.json?["items"]?.arrayValue?.compactMap { $0["title"]?.stringValue } ?? []
        let cursor = try #require(first.json?["nextCursor"]?.stringValue)
        for i in 6...8 { try server.push(user: "alice", title: "p\(i)") }
        try waitUntil(timeout: 30, "eight pushes") { try server.counts().unread == 8 }
        var seen = page1
        var next: String? = cursor
        while let cursorText = next {
            let reply = try server.request("GET", "/v1/inbox?limit=2&cursor=\(cursorText)")
            seen += reply.json?["items"]?.arrayValue?.compactMap { $0["title"]?.stringValue } ?? []
            next = reply.json?["nextCursor"]?.stringValue
        }
        // The pages that started before p6-p8 arrived show p5…p1 once each, in order.
        #expect(seen == ["p5", "p4", "p3", "p2", "p1"])
    }

    @Test func mediaIsServedByContentAddress() throws {
        let server = try InboxServerHarness(name: "inbox-media")
        let bytes: [UInt8] = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]
        let sha = SHA256.hex(of: bytes)
        let directory = server.daemon.state + "/media/" + sha.prefix(2)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: directory + "/" + sha.dropFirst(2) + ".png"))
        let reply = try server.request("GET", "/v1/media/\(sha)")
        #expect(reply.status == 200)
        #expect(reply.headers["content-type"] == "image/png")
        #expect(reply.headers["etag"] == "\"\(sha)\"")
        #expect(reply.headers["cache-control"]?.contains("immutable") == true)
        #expect(reply.headers["content-length"] == String(bytes.count))
        // A client holding the file revalidates with its ETag: 304, no body, same caching headers.
        for tag in ["\"\(sha)\"", "W/\"\(sha)\"", "\"other\", \"\(sha)\"", "*"] {
            let cached = try server.request("GET", "/v1/media/\(sha)", headers: ["If-None-Match: \(tag)"])
            #expect(cached.status == 304, "If-None-Match: \(tag)")
            #expect(cached.body.isEmpty)
            #expect(cached.headers["etag"] == "\"\(sha)\"")
            #expect(cached.headers["cache-control"]?.contains("immutable") == true)
        }
        #expect(try server.request("GET", "/v1/media/\(sha)", headers: ["If-None-Match: \"\(sha)-thumb\""]).status == 200)
        // A tag for a file that is not there is no reason for 304.
        let absent = String(repeating: "0", count: 64)
        #expect(try server.request("GET", "/v1/media/\(absent)", headers: ["If-None-Match: *"]).status == 404)
        #expect(try server.request("GET", "/v1/media/\(sha)/thumb").status == 404)
        try Data([0xff, 0xd8, 0xff]).write(to: URL(fileURLWithPath: directory + "/" + sha.dropFirst(2) + ".thumb320.jpg"))
        let thumb = try server.request("GET", "/v1/media/\(sha)/thumb")
        #expect(thumb.status == 200)
        #expect(thumb.headers["content-type"] == "image/jpeg")
        let thumbCached = try server.request("GET", "/v1/media/\(sha)/thumb", headers: ["If-None-Match: \(thumb.headers["etag"] ?? "none")"])
        #expect(thumbCached.status == 304)
        #expect(thumb.headers["etag"] == "\"\(sha)-thumb\"")
        #expect(try server.request("GET", "/v1/media/../../etc/passwd").status == 404)
        #expect(try server.request("GET", "/v1/media/\(sha)", user: nil).status == 401)
    }

    @Test func aStateChangeSurvivesADaemonKillBetweenDropAndApply() throws {
        let server = try InboxServerHarness(name: "inbox-kill")
        try server.push(user: "alice", title: "x")
        try waitUntil(timeout: 30, "the push") { try server.counts().unread == 1 }
        let item = try #require(try server.items().first?["item"]?.stringValue)
        // Stop pushspoold hard, then accept the change: the envelope waits in the spool.
        #expect(server.daemon.stop(signal: SIGKILL) != 0)
        let read = try server.request("POST", "/v1/inbox/\(item)/read", headers: ["Idempotency-Key: k1"])
        #expect(read.status == 202)
        #expect(server.daemon.files(in: "incoming").count == 1)
        #expect(try server.counts().unread == 1)
        try server.daemon.start()
        try waitUntil(timeout: 30, "the read applied after the restart") { try server.counts().unread == 0 }
        // The client retries (it never saw the answer): the same key changes nothing more.
        _ = try server.request("POST", "/v1/inbox/\(item)/read", headers: ["Idempotency-Key: k1"])
        try waitUntil(timeout: 30, "the spool drained") { server.daemon.files(in: "incoming").isEmpty && server.daemon.files(in: "processing").isEmpty }
        #expect(try server.daemon.records().filter { $0.key.hasPrefix("event:") }.count == 1)
    }
}
