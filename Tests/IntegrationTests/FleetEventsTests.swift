@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushSystem
import PushExport
import PushInbox

/// Events from any node reach every node once: two inbox nodes with `[Inbox] Source=nats`
/// follow one stream that an ingest pushspoold exports into; a state change accepted on
/// either node (over HTTP or by `pushspoolctl nc`) is published to the stream, and both apply
/// it from their consumers. In ``InboxFromStreamTests`` (serialized: servers of their own).
extension InboxFromStreamTests {
    /// The port a node's pushspool-inbox printed ("listening on 127.0.0.1:PORT").
    static func port(_ node: DaemonHarness, _ process: Process) throws -> Int {
        var port: Int?
        try waitUntil(timeout: 30, "pushspool-inbox to listen") {
            if !process.isRunning { throw TimeoutError(description: "pushspool-inbox exited: \(stderr(node))") }
            let text = (try? String(contentsOfFile: node.root + "/inbox.stdout", encoding: .utf8)) ?? ""
            guard text.hasSuffix("\n"), let last = text.split(separator: ":").last else { return false }
            port = Int(last.trimmingCharacters(in: .whitespacesAndNewlines))
            return port != nil
        }
        return try #require(port)
    }

    /// One request to the node on `port` as `user`, through curl.
    static func http(_ port: Int, _ method: String, _ path: String, user: String, headers: [String] = []) throws -> InboxServerHarness.Reply {
        var arguments = ["-s", "-S", "-i", "--max-time", "20", "-X", method,
                         "-H", "X-Pushspool-User: \(user)", "-H", "Authorization: Bearer \(InboxServerHarness.token(user))"]
        for header in headers { arguments += ["-H", header] }
        arguments.append("http://127.0.0.1:\(port)\(path)")
        let result = try ProcessRunner.run("/usr/bin/curl", arguments)
        return try InboxServerHarness.parse(result.stdout, curlError: result.stderr)
    }

    /// The state flags of `item` in `user`'s list on the node on `port` (archived items are
    /// not listed: `nil`).
    static func state(_ port: Int, user: String, item: String) throws -> JSONValue? {
        let items = try http(port, "GET", "/v1/inbox?limit=500", user: user).json?["items"]?.arrayValue ?? []
        return items.first { $0["item"]?.stringValue == item }?["state"]
    }

    /// `nc list --json` and `nc count --json` of `users` on `node`, as printed.
    static func answers(_ node: DaemonHarness, users: [String]) throws -> [String] {
        try users.map { user in
            let (s1, list, e1) = try node.ctl(["nc", "list", "--user", user, "--json", "--limit", "500"])
            let (s2, count, e2) = try node.ctl(["nc", "count", "--user", user, "--json"])
            guard s1 == 0, s2 == 0 else { throw TimeoutError(description: "nc list/count failed: \(e1) \(e2)") }
            return list + count
        }
    }

    @Test func eventsAcceptedOnOneNodeReachEveryNodeOnce() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let ingest = try DaemonHarness(name: "fleet-ingest", config: Self.ingestConfig(url: server.url))
        try ingest.start()
        defer { ingest.stop() }
        try Self.drop(ingest, 0..<200, tag: "f")
        try Self.waitIngestedAndExported(ingest, count: 200)

        let node1 = try Self.node("fleet-node1", url: server.url)
        let node2 = try Self.node("fleet-node2", url: server.url)
        let process1 = try Self.launchInbox(node1)
        defer { if process1.isRunning { kill(process1.processIdentifier, SIGTERM); process1.waitUntilExit() } }
        let process2 = try Self.launchInbox(node2)
        defer { if process2.isRunning { kill(process2.processIdentifier, SIGTERM); process2.waitUntilExit() } }
        let port1 = try Self.port(node1, process1), port2 = try Self.port(node2, process2)
        try waitUntil(timeout: 60, "both nodes at stream seq 200") { Self.appliedSeq(node1) == 200 && Self.appliedSeq(node2) == 200 }

        // user-5 holds the pushes 5, 102 and 199; their ids are stream seqs, the same on both nodes.
        let user = "user-5"
        let listed = try Self.http(port1, "GET", "/v1/inbox", user: user).json?["items"]?.arrayValue ?? []
        let items = listed.compactMap { $0["item"]?.stringValue }
        try #require(items.count == 3, "\(listed)")
        #expect(try Self.http(port2, "GET", "/v1/inbox", user: user).json?["items"]?.arrayValue?.compactMap { $0["item"]?.stringValue } == items)
        let (opened, read, archived) = (items[0], items[1], items[2])

        // A live stream on node 2, before anything changes.
        let stream = try StreamClient(port: port2, user: user)
        defer { stream.close() }
        try waitUntil(timeout: 20, "node 2's stream to send its first counts") { stream.text.contains(#"data: {"unread":3,"unseen":3}"#) }

        // Open, read and archive on node 1: each answered 202 once the stream holds it.
        let open = try Self.http(port1, "POST", "/v1/inbox/\(opened)/open", user: user, headers: ["Idempotency-Key: tap-1"])
        #expect(open.status == 202, "\(open.body)")
        let openId = try #require(open.json?["eventId"]?.stringValue)
        #expect(try Self.http(port1, "POST", "/v1/inbox/\(read)/read", user: user).status == 202)
        #expect(try Self.http(port1, "POST", "/v1/inbox/\(archived)/archive", user: user).status == 202)
        // Nothing went into node 1's spool: no pushspoold runs there to journal it.
        #expect(node1.files(in: "incoming").isEmpty && node1.files(in: "tmp").isEmpty)

        // Node 2 shows every change, applied from its consumer.
        try waitUntil(timeout: 30, "node 2 to apply node 1's events") { Self.appliedSeq(node2) == 203 }
        #expect(try Self.state(port2, user: user, item: opened)?["read"] == .bool(true))
        #expect(try Self.state(port2, user: user, item: read)?["read"] == .bool(true))
        #expect(try Self.state(port2, user: user, item: archived) == nil, "archived items are not listed")
        #expect(try Self.http(port2, "GET", "/v1/inbox/counts", user: user).json == .object(["unread": .integer(0), "unseen": .integer(0)]))

        // Node 2's stream announced the state changes (and the new counts).
        try waitUntil(timeout: 30, "the state events on node 2's stream") {
            InboxIndexLifecycleTests.events(stream.text).filter { $0.event == "state" }.count >= 3
        }
        let states = InboxIndexLifecycleTests.events(stream.text).filter { $0.event == "state" }
        let first = try JSONParser().parse(Array(try #require(states.first).data.utf8))
        #expect(first["item"]?.stringValue == opened)
        #expect(first["state"]?["read"] == .bool(true))
        #expect(states.map(\.id) == ["201", "202", "203"], "state events carry the stream seqs of the events")
        try waitUntil(timeout: 10, "the new counts on node 2's stream") { stream.text.contains(#"data: {"unread":0,"unseen":0}"#) }

        // The tap retried — on node 2 this time, as a load balancer may send it: the same event
        // id, and the stream keeps one copy of it.
        let retried = try Self.http(port2, "POST", "/v1/inbox/\(opened)/open", user: user, headers: ["Idempotency-Key: tap-1"])
        #expect(retried.status == 202)
        #expect(retried.json?["eventId"]?.stringValue == openId)
        // Applied once: made unread afterwards, a second apply of the open would read it again.
        #expect(try Self.http(port1, "POST", "/v1/inbox/\(opened)/unread", user: user).status == 202)
        let again = try Self.http(port1, "POST", "/v1/inbox/\(opened)/open", user: user, headers: ["Idempotency-Key: tap-1"])
        #expect(again.status == 202 && again.json?["eventId"]?.stringValue == openId)
        let client = try NatsClient(urls: [server.url], name: "it-fleet")
        defer { client.close() }
        try waitUntil(timeout: 30, "both nodes to apply the unread") {
            let last = try client.streamBounds(Self.stream).lastSeq
            return last >= 204 && Self.appliedSeq(node1) == last && Self.appliedSeq(node2) == last
        }
        let stored = try client.readStream(Self.stream)
        #expect(stored.count == 204)
        #expect(stored.filter { $0.msgId == EventPublisher.messageId(eventId: openId) }.count == 1)
        #expect(try Self.state(port1, user: user, item: opened)?["read"] == .bool(false))
        #expect(try Self.state(port2, user: user, item: opened)?["read"] == .bool(false))

        // `pushspoolctl nc` on a node publishes too; the other node applies it.
        let (status, out, error) = try node2.ctl(["nc", "pin", "--user", user, opened])
        #expect(status == 0, "\(error)")
        try waitUntil(timeout: 30, "node 1 to apply node 2's pin") { try Self.state(port1, user: user, item: opened)?["pinned"] == .bool(true) }
        #expect(node2.files(in: "incoming").isEmpty)
        let pinId = EventPublisher.messageId(eventId: out.trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(try client.readStream(Self.stream).last?.msgId == pinId)

        // The exporter is not disturbed: pushes after the events get the next stream seqs on
        // both nodes, and a replay of the ingest journal adds nothing.
        try Self.drop(ingest, 200..<210, tag: "f")
        try Self.waitIngestedAndExported(ingest, count: 210)
        try waitUntil(timeout: 30, "both nodes at stream seq 215") { Self.appliedSeq(node1) == 215 && Self.appliedSeq(node2) == 215 }
        let (replayed, _, replayError) = try ingest.ctl(["export", "replay", "--from-seq", "1"])
        #expect(replayed == 0, "\(replayError)")
        #expect(try client.streamBounds(Self.stream).lastSeq == 215)

        // Both nodes give the same answers, byte for byte, for every user.
        let users = (0..<97).map { "user-\($0)" }
        #expect(try Self.answers(node1, users: users) == Self.answers(node2, users: users))

        // NATS stopped: a change is refused with 503 and Retry-After, and nothing of it is
        // applied once NATS is back.
        server.stop()
        let refused = try Self.http(port1, "POST", "/v1/inbox/\(read)/unread", user: user, headers: ["Idempotency-Key: later-1"])
        #expect(refused.status == 503, "\(refused.body)")
        #expect(refused.headers["retry-after"] == "5")
        #expect(refused.json?["error"]?.stringValue == "stream_unavailable")
        #expect(refused.json?["message"]?.stringValue?.contains("retry later") == true)
        let (ctlRefused, _, ctlError) = try node1.ctl(["nc", "unread", "--user", user, read])
        #expect(ctlRefused == 1)
        #expect(ctlError.contains("--event-id"), "\(ctlError)")
        try server.start()
        // The refused key is free again: the same request, retried, is accepted now.
        try waitUntil(timeout: 30, "the retried change to be accepted") {
            try Self.http(port1, "POST", "/v1/inbox/\(read)/unread", user: user, headers: ["Idempotency-Key: later-1"]).status == 202
        }
        try waitUntil(timeout: 30, "both nodes to apply it") { Self.appliedSeq(node1) == 216 && Self.appliedSeq(node2) == 216 }
        let after = try NatsClient(urls: [server.url], name: "it-fleet-after")
        defer { after.close() }
        #expect(try after.streamBounds(Self.stream).lastSeq == 216, "the refused publishes left nothing in the stream")
        #expect(try Self.state(port2, user: user, item: read)?["read"] == .bool(false))
        #expect(try Self.answers(node1, users: [user]) == Self.answers(node2, users: [user]))
    }
}

extension InboxFromStreamTests {
    /// An Idempotency-Key is one request fleet-wide: reused on another node, which never saw
    /// it, for a different request it is refused with 422 (the stream holds the first use
    /// under the same message id, with its request's fingerprint); the same request there is
    /// the retry it is, 202 with the first's event id, stored once. Without a key, every
    /// request is an event of its own, as before.
    @Test func anIdempotencyKeyReusedOnAnotherNodeIsRefused() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let ingest = try DaemonHarness(name: "fleet-key-ingest", config: Self.ingestConfig(url: server.url))
        try ingest.start()
        defer { ingest.stop() }
        try Self.drop(ingest, 0..<3, tag: "k")
        try Self.waitIngestedAndExported(ingest, count: 3)
        let node1 = try Self.node("fleet-key-node1", url: server.url)
        let node2 = try Self.node("fleet-key-node2", url: server.url)
        let process1 = try Self.launchInbox(node1)
        defer { if process1.isRunning { kill(process1.processIdentifier, SIGTERM); process1.waitUntilExit() } }
        let process2 = try Self.launchInbox(node2)
        defer { if process2.isRunning { kill(process2.processIdentifier, SIGTERM); process2.waitUntilExit() } }
        let port1 = try Self.port(node1, process1)
        let port2 = try Self.port(node2, process2)
        try waitUntil(timeout: 60, "both nodes at stream seq 3") { Self.appliedSeq(node1) == 3 && Self.appliedSeq(node2) == 3 }
        let user = "user-1"
        let item = try #require(try Self.http(port1, "GET", "/v1/inbox", user: user).json?["items"]?.arrayValue?.first?["item"]?.stringValue)

        let first = try Self.http(port1, "POST", "/v1/inbox/\(item)/seen", user: user, headers: ["Idempotency-Key: k-1"])
        #expect(first.status == 202, "\(first.body)")
        let eventId = try #require(first.json?["eventId"]?.stringValue)
        let reused = try Self.http(port2, "POST", "/v1/inbox/\(item)/read", user: user, headers: ["Idempotency-Key: k-1"])
        #expect(reused.status == 422, "\(reused.body)")
        #expect(reused.json?["error"]?.stringValue == "idempotency_key_reused")
        // Refused, the key stays free on node 2 for the request it was first used for.
        let retry = try Self.http(port2, "POST", "/v1/inbox/\(item)/seen", user: user, headers: ["Idempotency-Key: k-1"])
        #expect(retry.status == 202 && retry.json?["eventId"]?.stringValue == eventId, "\(retry.body)")
        // Node 2 now holds the binding itself and refuses locally too.
        #expect(try Self.http(port2, "POST", "/v1/inbox/\(item)/read", user: user, headers: ["Idempotency-Key: k-1"]).status == 422)
        let plain1 = try Self.http(port1, "POST", "/v1/inbox/\(item)/pin", user: user)
        let plain2 = try Self.http(port2, "POST", "/v1/inbox/\(item)/pin", user: user)
        #expect(plain1.status == 202 && plain2.status == 202)
        #expect(plain1.json?["eventId"]?.stringValue != plain2.json?["eventId"]?.stringValue)

        let client = try NatsClient(urls: [server.url], name: "it-fleet-key")
        defer { client.close() }
        try waitUntil(timeout: 30, "both nodes to apply the events") { Self.appliedSeq(node1) == 6 && Self.appliedSeq(node2) == 6 }
        let stored = try client.readStream(Self.stream)
        #expect(stored.count == 6, "three pushes, the seen once, two pins")
        #expect(stored.filter { $0.msgId == EventPublisher.messageId(eventId: eventId) }.count == 1)
        #expect(try Self.state(port2, user: user, item: item)?["read"] == .bool(false), "the refused read was not applied")
        #expect(try Self.state(port1, user: user, item: item)?["seen"] == .bool(true))
    }
}

extension InboxFromStreamTests {
    /// A TCP listener on 127.0.0.1 that completes connections (the kernel's backlog) and never
    /// answers: a NATS server that hangs. Closed with `close(fd)`.
    static func blackhole() throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        try #require(bound == 0 && listen(fd, 128) == 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// A node whose NATS accepts connections and never answers: state changes are refused with
    /// 503 at once (the publisher connects on a thread of its own, never in an HTTP worker),
    /// so eight concurrent POSTs do not hold up a GET, even with one HTTP thread.
    @Test func postsWhileNATSHangsDoNotStarveGets() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let ingest = try DaemonHarness(name: "fleet-hang-ingest", config: Self.ingestConfig(url: server.url))
        try ingest.start()
        defer { ingest.stop() }
        try Self.drop(ingest, 0..<3, tag: "h")
        try Self.waitIngestedAndExported(ingest, count: 3)
        let node = try Self.node("fleet-hang-node", url: server.url)
        let first = try Self.launchInbox(node)
        _ = try Self.port(node, first)
        try waitUntil(timeout: 60, "the node at stream seq 3") { Self.appliedSeq(node) == 3 }
        kill(first.processIdentifier, SIGTERM)
        first.waitUntilExit()

        let hole = try Self.blackhole()
        defer { close(hole.fd) }
        let config = try String(contentsOfFile: node.config, encoding: .utf8)
            .replacingOccurrences(of: "URL=\(server.url)", with: "URL=nats://127.0.0.1:\(hole.port)")
        try config.write(toFile: node.config, atomically: true, encoding: .utf8)
        let process = try Self.launchInbox(node)
        defer { if process.isRunning { kill(process.processIdentifier, SIGTERM); process.waitUntilExit() } }
        let port = try Self.port(node, process)
        let user = "user-1"
        let item = try #require(try Self.http(port, "GET", "/v1/inbox", user: user).json?["items"]?.arrayValue?.first?["item"]?.stringValue)

        let statuses = Locked<[Int]>([])
        let group = DispatchGroup()
        let started = Posix.monotonicNanos()
        for index in 0..<8 {
            DispatchQueue.global().async(group: group) {
                let reply = try? Self.http(port, "POST", "/v1/inbox/\(item)/read", user: user, headers: ["Idempotency-Key: hang-\(index)"])
                statuses.withLock { $0.append(reply?.status ?? 0) }
            }
        }
        // GETs while the POSTs come and go: none waits behind them.
        var slowest = 0.0
        for _ in 0..<10 {
            let getStarted = Posix.monotonicNanos()
            let get = try Self.http(port, "GET", "/v1/inbox/counts", user: user)
            slowest = max(slowest, Double(Posix.monotonicNanos() - getStarted) / 1e9)
            #expect(get.status == 200)
            usleep(100_000)  // why: the GETs' pacing: spread over the time the POSTs are in flight
        }
        group.wait()
        let postSeconds = Double(Posix.monotonicNanos() - started) / 1e9
        #expect(slowest < 1, "a GET waited \(slowest) s behind POSTs")
        #expect(statuses.withLock { $0 } == Array(repeating: 503, count: 8), "\(statuses.withLock { $0 })")
        #expect(postSeconds < 2, "eight POSTs took \(postSeconds) s")
    }
}
