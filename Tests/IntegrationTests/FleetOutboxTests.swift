@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushSystem
import PushExport
import PushInbox

/// The outbox runs once per event, fleet-wide: two `[Inbox] Source=nats` nodes with
/// `[Outbox] Enabled=yes` share one durable consumer on the stream; a stand-in Mindbox on
/// 127.0.0.1 records every POST. In ``InboxFromStreamTests`` (serialized: servers of their own).
extension InboxFromStreamTests {
    /// `[Outbox]` of a node delivering Mindbox events to `vendor`. A POST may take 10 s, so
    /// the consumer's ack wait is 15 s.
    static func outboxSection(vendor: LoopbackHTTPServer, keyFile: String) -> String {
        """
        [Outbox]
        Enabled=yes
        AllowHTTP=yes
        AllowNetworks=127.0.0.1/32
        MindboxURL=\(vendor.url(""))
        MindboxEndpointId=app-ios
        MindboxSecretKeyFile=\(keyFile)
        ConnectTimeoutSec=1s
        RequestTimeoutSec=10s
        RetryBaseSec=200ms
        MaxAttempts=3

        """
    }

    /// An inbox node whose fleet outbox delivers to `vendor`.
    static func outboxNode(_ name: String, url: String, vendor: LoopbackHTTPServer) throws -> DaemonHarness {
        let node = try Self.node(name, url: url)
        let keyFile = node.root + "/mindbox.key"
        try "mindbox-secret-key\n".write(toFile: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile, 0o600)
        let config = try String(contentsOfFile: node.config, encoding: .utf8) + outboxSection(vendor: vendor, keyFile: keyFile)
        try config.write(toFile: node.config, atomically: true, encoding: .utf8)
        return node
    }

    /// The `transactionId` of every NCPushOpen the vendor received, in arrival order.
    static func transactionIds(_ vendor: LoopbackHTTPServer) -> [String] {
        vendor.requests("/v3/operations/async").compactMap { request -> String? in
            guard request.target.contains("operation=mobileapp.NCPushOpen") else { return nil }
            let query = request.target.split(separator: "?", maxSplits: 1).last ?? ""
            for pair in query.split(separator: "&") where pair.hasPrefix("transactionId=") {
                return String(pair.dropFirst("transactionId=".count)).removingPercentEncoding
            }
            return nil
        }
    }

    /// Dead letters in a node's fleet outbox.
    static func parked(_ node: DaemonHarness) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: node.state + "/inbox/outbox/parked")) ?? []).filter { $0.hasSuffix(".json") }
    }

    /// One of a node's `pushspool_inbox_fleet_outbox_*` figures from its /metrics, nil while
    /// the node does not answer.
    static func fleetMetric(_ port: Int, _ series: String) -> Int? {
        guard let body = try? Self.http(port, "GET", "/metrics", user: "user-1").body else { return nil }
        for line in body.split(separator: "\n") where line.hasPrefix("pushspool_inbox_fleet_outbox_" + series + " ") {
            return Int(line.split(separator: " ").last ?? "")
        }
        return nil
    }

    /// Waits until no node holds a fleet message (in flight 0 on each of `ports`) and the nodes
    /// together count at least `delivered` deliveries: every message a node fetched is finished,
    /// so a second copy of an event, had a node worked one, has been sent by then. The positive
    /// mark that replaces sleeping "long enough for a second copy to show".
    static func waitFleetIdle(_ ports: [Int], delivered: Int = 0) throws {
        try waitUntil(timeout: 30, "the fleet outbox idle with \(delivered) delivered") {
            var total = 0
            for port in ports {
                guard fleetMetric(port, "in_flight") == 0,
                      let count = fleetMetric(port, "deliveries_total{result=\"delivered\"}") else { return false }
                total += count
            }
            return total >= delivered
        }
    }

    static func stopInbox(_ process: Process) {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
    }

    @Test func theFleetOutboxDeliversEachEventOnceParksOnceAndTakesOverFromAKilledNode() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let vendor = try LoopbackHTTPServer()
        vendor.route("/v3/operations/async", .ok(Array("{\"status\":\"Success\"}".utf8), contentType: "application/json"))
        let ingest = try DaemonHarness(name: "fleet-outbox-ingest", config: Self.ingestConfig(url: server.url))
        try ingest.start()
        defer { ingest.stop() }
        try Self.drop(ingest, 0..<97, tag: "o")
        try Self.waitIngestedAndExported(ingest, count: 97)

        let node1 = try Self.outboxNode("fleet-outbox-node1", url: server.url, vendor: vendor)
        let node2 = try Self.outboxNode("fleet-outbox-node2", url: server.url, vendor: vendor)
        let process1 = try Self.launchInbox(node1)
        defer { Self.stopInbox(process1) }
        var process2 = try Self.launchInbox(node2)
        defer { Self.stopInbox(process2) }
        let port1 = try Self.port(node1, process1)
        var port2 = try Self.port(node2, process2)
        try waitUntil(timeout: 60, "both nodes at stream seq 97") { Self.appliedSeq(node1) == 97 && Self.appliedSeq(node2) == 97 }

        // Opens accepted on both nodes, 40 users' first items: each reaches the vendor once,
        // whichever node took it, with the event id as transactionId.
        var eventIds: [String] = []
        for user in 0..<40 {
            let port = user % 2 == 0 ? port1 : port2
            let item = try #require(try Self.http(port, "GET", "/v1/inbox", user: "user-\(user)").json?["items"]?.arrayValue?.first?["item"]?.stringValue)
            let open = try Self.http(port, "POST", "/v1/inbox/\(item)/open", user: "user-\(user)", headers: ["Idempotency-Key: open-\(user)"])
            #expect(open.status == 202, "\(open.body)")
            eventIds.append(try #require(open.json?["eventId"]?.stringValue))
        }
        try waitUntil(timeout: 60, "40 NCPushOpen at the vendor") { Self.transactionIds(vendor).count >= 40 }
        // Both nodes done with every message they fetched: any other node working the same
        // message would have posted by now (past the ack wait, 15 s, would be a redelivery).
        try Self.waitFleetIdle([port1, port2], delivered: 40)
        #expect(Self.transactionIds(vendor).sorted() == eventIds.sorted(), "each event delivered exactly once fleet-wide")
        #expect(Self.parked(node1).isEmpty && Self.parked(node2).isEmpty)

        // A vendor 400: parked once, on the node that worked it, and not sent again.
        let before = vendor.hits("/v3/operations/async")
        vendor.route("/v3/operations/async", .status(400))
        let refusedItem = try #require(try Self.http(port1, "GET", "/v1/inbox", user: "user-50").json?["items"]?.arrayValue?.first?["item"]?.stringValue)
        let refused = try Self.http(port1, "POST", "/v1/inbox/\(refusedItem)/open", user: "user-50")
        #expect(refused.status == 202)
        let refusedId = try #require(refused.json?["eventId"]?.stringValue)
        try waitUntil(timeout: 30, "the 400 to be parked") { Self.parked(node1).count + Self.parked(node2).count == 1 }
        try Self.waitFleetIdle([port1, port2])
        #expect(vendor.hits("/v3/operations/async") == before + 1, "a 400 is not retried")
        #expect(Self.parked(node1).count + Self.parked(node2).count == 1, "parked once fleet-wide")
        let letter = try #require((Self.parked(node1) + Self.parked(node2)).first)
        let parkedNode = Self.parked(node1).isEmpty ? node2 : node1
        let dead = try JSONParser().parse(try Posix.readFile(parkedNode.state + "/inbox/outbox/parked/" + letter, limit: 1 << 20))
        #expect(dead["eventId"]?.stringValue == refusedId)
        #expect(dead["parkedReason"]?.stringValue == "http_400")

        // A 503 is handed back and sent again (by whichever node fetches it), same transactionId.
        let retryHits = vendor.hits("/v3/operations/async")
        vendor.route("/v3/operations/async", .sequence(Array(repeating: .ok([]), count: retryHits) + [.status(503), .ok([])]))
        let retriedItem = try #require(try Self.http(port1, "GET", "/v1/inbox", user: "user-55").json?["items"]?.arrayValue?.first?["item"]?.stringValue)
        let retried = try #require(try Self.http(port1, "POST", "/v1/inbox/\(retriedItem)/open", user: "user-55").json?["eventId"]?.stringValue)
        try waitUntil(timeout: 30, "the 503 to be retried") { Self.transactionIds(vendor).filter { $0 == retried }.count == 2 }
        try Self.waitFleetIdle([port1, port2], delivered: 41)
        #expect(Self.transactionIds(vendor).filter { $0 == retried }.count == 2)
        #expect(Self.parked(node1).count + Self.parked(node2).count == 1, "delivered on the second attempt, not parked")

        // A vendor that keeps answering 503: MaxAttempts=3 POSTs, then parked once.
        vendor.route("/v3/operations/async", .status(503))
        let failingItem = try #require(try Self.http(port2, "GET", "/v1/inbox", user: "user-56").json?["items"]?.arrayValue?.first?["item"]?.stringValue)
        let failing = try #require(try Self.http(port2, "POST", "/v1/inbox/\(failingItem)/open", user: "user-56").json?["eventId"]?.stringValue)
        try waitUntil(timeout: 30, "the failing event to be parked") { Self.parked(node1).count + Self.parked(node2).count == 2 }
        try Self.waitFleetIdle([port1, port2])
        #expect(Self.transactionIds(vendor).filter { $0 == failing }.count == 3, "at most MaxAttempts= POSTs")
        #expect(Self.parked(node1).count + Self.parked(node2).count == 2)

        // Kill -9 mid-POST: only node 1 runs the outbox when the event comes, the vendor hangs
        // on that first POST, node 1 dies; node 2 delivers it once the ack wait has passed.
        Self.stopInbox(process2)
        let hits = vendor.hits("/v3/operations/async")
        vendor.route("/v3/operations/async", .sequence(Array(repeating: .ok([]), count: hits) + [.silent, .ok([])]))
        let hungItem = try #require(try Self.http(port1, "GET", "/v1/inbox", user: "user-60").json?["items"]?.arrayValue?.first?["item"]?.stringValue)
        let hung = try Self.http(port1, "POST", "/v1/inbox/\(hungItem)/open", user: "user-60")
        let hungId = try #require(hung.json?["eventId"]?.stringValue)
        try waitUntil(timeout: 30, "node 1's POST to reach the vendor") { vendor.hits("/v3/operations/async") == hits + 1 }
        kill(process1.processIdentifier, SIGKILL)
        process1.waitUntilExit()
        let killedAt = Posix.monotonicNanos()
        process2 = try Self.launchInbox(node2)
        port2 = try Self.port(node2, process2)
        try waitUntil(timeout: 60, "node 2 to deliver the event node 1 held") { Self.transactionIds(vendor).filter { $0 == hungId }.count == 2 }
        let tookOver = Double(Posix.monotonicNanos() - killedAt) / 1e9
        #expect(tookOver >= 10, "not before the ack wait passed (\(tookOver) s)")
        try Self.waitFleetIdle([port2], delivered: 1)
        // Twice, both with the event id as transactionId: within the documented bound
        // (MaxAttempts=), and Mindbox recognises the repeat.
        #expect(Self.transactionIds(vendor).filter { $0 == hungId }.count == 2)
        #expect(Self.parked(node2).count + Self.parked(node1).count == 2, "nothing more parked")
        #expect(try Self.http(port2, "GET", "/v1/inbox/counts", user: "user-60").status == 200)

        // SIGTERM while the vendor hangs on a POST: the POST is aborted within about a second,
        // so the node stops well inside RequestTimeoutSec= (10 s) + 1 s.
        vendor.route("/v3/operations/async", .silent)
        let stuckAt = vendor.hits("/v3/operations/async")
        let stuckItem = try #require(try Self.http(port2, "GET", "/v1/inbox", user: "user-70").json?["items"]?.arrayValue?.first?["item"]?.stringValue)
        #expect(try Self.http(port2, "POST", "/v1/inbox/\(stuckItem)/open", user: "user-70").status == 202)
        try waitUntil(timeout: 30, "node 2's POST to hang at the vendor") { vendor.hits("/v3/operations/async") == stuckAt + 1 }
        let termAt = Posix.monotonicNanos()
        kill(process2.processIdentifier, SIGTERM)
        process2.waitUntilExit()
        let stopSeconds = Double(Posix.monotonicNanos() - termAt) / 1e9
        #expect(stopSeconds < 5, "stopped in \(stopSeconds) s")
        #expect(process2.terminationStatus == 0, "\(Self.stderr(node2))")
    }
}

extension InboxFromStreamTests {
    /// A fleet dead letter is listed, shown and retried by `pushspoolctl outbox` on the node
    /// that parked it, and the node's pushspool-inbox sends it again at once (inotify on
    /// `retry/`), exactly once.
    @Test func pushspoolctlListsAndRetriesAFleetDeadLetter() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let vendor = try LoopbackHTTPServer()
        vendor.route("/v3/operations/async", .status(400))
        let ingest = try DaemonHarness(name: "fleet-retry-ingest", config: Self.ingestConfig(url: server.url))
        try ingest.start()
        defer { ingest.stop() }
        try Self.drop(ingest, 0..<3, tag: "r")
        try Self.waitIngestedAndExported(ingest, count: 3)
        let node = try Self.outboxNode("fleet-retry-node", url: server.url, vendor: vendor)
        let notify = try NotifySocket()
        let process = try Self.launchInbox(node, environment: ["NOTIFY_SOCKET": notify.path])
        defer { Self.stopInbox(process) }
        let port = try Self.port(node, process)
        try waitUntil(timeout: 60, "the node at stream seq 3") { Self.appliedSeq(node) == 3 }

        let item = try #require(try Self.http(port, "GET", "/v1/inbox", user: "user-1").json?["items"]?.arrayValue?.first?["item"]?.stringValue)
        let open = try Self.http(port, "POST", "/v1/inbox/\(item)/open", user: "user-1")
        #expect(open.status == 202)
        let eventId = try #require(open.json?["eventId"]?.stringValue)
        try waitUntil(timeout: 30, "the 400 to be parked") { Self.parked(node).count == 1 }
        // STATUS= and /metrics show the dead letter, as pushspoold's show its outbox.
        try waitUntil(timeout: 10, "STATUS= with the parked delivery") {
            notify.messages.contains { $0.contains("fleet outbox 0 delivered, 1 parked, 0 in flight") && $0.contains("last error: ") }
        }
        let metrics = try Self.http(port, "GET", "/metrics", user: "user-1").body
        #expect(metrics.contains("pushspool_inbox_fleet_outbox_parked 1\n"), "\(metrics)")
        #expect(metrics.contains("pushspool_inbox_fleet_outbox_deliveries_total{result=\"delivered\"} 0\n"))
        #expect(metrics.contains("pushspool_inbox_fleet_outbox_connected 1\n"))

        let (listStatus, listed, summary) = try node.ctl(["outbox", "list"])
        #expect(listStatus == 0, "\(summary)")
        let line = try #require(listed.split(separator: "\n").first.map(String.init), "\(listed)")
        let fields = line.split(separator: "\t").map(String.init)
        #expect(fields.count == 7 && fields[0].hasPrefix("fleet:") && fields[1] == "parked" && fields[5] == "400", "\(line)")
        #expect(summary.contains("0 pending, 1 parked"), "\(summary)")
        let id = fields[0]
        let (showStatus, shown, _) = try node.ctl(["outbox", "show", "--json", id])
        #expect(showStatus == 0)
        let shownJSON = try JSONParser().parse(Array(shown.utf8))
        #expect(shownJSON["eventId"]?.stringValue == eventId && shownJSON["id"]?.stringValue == id)
        // A fleet id on the journal side, or a journal id that names no fleet letter, is not found.
        #expect(try node.ctl(["outbox", "show", String(id.dropFirst("fleet:".count))]).0 == 1)

        vendor.route("/v3/operations/async", .ok(Array("{\"status\":\"Success\"}".utf8), contentType: "application/json"))
        let (retryStatus, _, retried) = try node.ctl(["outbox", "retry", id])
        #expect(retryStatus == 0, "\(retried)")
        // Signalled, not waited for: well inside the fetch wait (10 s).
        let retriedAt = Posix.monotonicNanos()
        try waitUntil(timeout: 30, "the retried delivery at the vendor") { Self.transactionIds(vendor).filter { $0 == eventId }.count == 2 }
        #expect(Double(Posix.monotonicNanos() - retriedAt) / 1e9 < 5)
        try waitUntil(timeout: 10, "the retried delivery done") {
            ((try? FileManager.default.contentsOfDirectory(atPath: node.state + "/inbox/outbox/pending")) ?? []).isEmpty
        }
        // The node's own report that it is done (one delivered, nothing in flight) is the mark
        // past which a second send would already have happened.
        try waitUntil(timeout: 10, "STATUS= with the delivery") {
            notify.messages.contains { $0.contains("fleet outbox 1 delivered, 0 parked, 0 in flight") }
        }
        #expect(Self.transactionIds(vendor).filter { $0 == eventId }.count == 2, "sent once more, not twice")
        #expect(Self.parked(node).isEmpty)
        let metricsAfter = try Self.http(port, "GET", "/metrics", user: "user-1").body
        #expect(metricsAfter.contains("pushspool_inbox_fleet_outbox_parked 0\n"), "\(metricsAfter)")
        #expect(metricsAfter.contains("pushspool_inbox_fleet_outbox_deliveries_total{result=\"delivered\"} 1\n"))
        let (_, after, afterSummary) = try node.ctl(["outbox", "list"])
        #expect(after.isEmpty && afterSummary.contains("0 pending, 0 parked"), "\(after)\(afterSummary)")
    }
}

extension InboxFromStreamTests {
    /// Infobip seen reports through the fleet outbox of two nodes: twenty Infobip pushes of
    /// four users, each opened on one node or the other while the outboxes are off; then both
    /// nodes start their outboxes, fetch the waiting events and batch each user's reports. The
    /// stand-in Infobip receives every push's `messageId` in exactly one report.
    @Test func infobipSeenReportsThroughTheFleetOutboxReportEachMessageOnce() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let vendor = try LoopbackHTTPServer()
        vendor.route("/mobile/2/messages/seen", .ok(Array("{}".utf8), contentType: "application/json"))
        let ingest = try DaemonHarness(name: "fleet-ib-ingest", config: Self.ingestConfig(url: server.url))
        try ingest.start()
        defer { ingest.stop() }
        for index in 0..<20 {
            let json = """
                {"pushspool":1,"user":"ib-user-\(index % 4)","platform":"ios","payload":{"aps":{"alert":{"title":"Hi \(index)","body":"Body \(index)"}},\
                "messageId":"ib-msg-\(index)","internalData":{"sendDateTime":1764500000000}}}
                """
            try ingest.drop(Array(json.utf8), name: "ib-\(index).json")
        }
        try Self.waitIngestedAndExported(ingest, count: 20)

        let nodes = [try Self.node("fleet-ib-node1", url: server.url), try Self.node("fleet-ib-node2", url: server.url)]
        var process1 = try Self.launchInbox(nodes[0])
        defer { Self.stopInbox(process1) }
        var process2 = try Self.launchInbox(nodes[1])
        defer { Self.stopInbox(process2) }
        var ports = [try Self.port(nodes[0], process1), try Self.port(nodes[1], process2)]
        try waitUntil(timeout: 60, "both nodes at stream seq 20") { Self.appliedSeq(nodes[0]) == 20 && Self.appliedSeq(nodes[1]) == 20 }

        var opened = 0
        for user in 0..<4 {
            let items = try #require(try Self.http(ports[0], "GET", "/v1/inbox", user: "ib-user-\(user)").json?["items"]?.arrayValue)
            #expect(items.count == 5)
            for (position, item) in items.enumerated() {
                let seq = try #require(item["item"]?.stringValue)
                let port = ports[(user + position) % 2]
                let open = try Self.http(port, "POST", "/v1/inbox/\(seq)/open", user: "ib-user-\(user)")
                #expect(open.status == 202, "\(open.body)")
                opened += 1
            }
        }
        #expect(opened == 20)
        try waitUntil(timeout: 60, "both nodes at stream seq 40") { Self.appliedSeq(nodes[0]) == 40 && Self.appliedSeq(nodes[1]) == 40 }
        Self.stopInbox(process1)
        Self.stopInbox(process2)

        for node in nodes {
            let keyFile = node.root + "/infobip.key"
            try "infobip-app-key\n".write(toFile: keyFile, atomically: true, encoding: .utf8)
            chmod(keyFile, 0o600)
            let config = try String(contentsOfFile: node.config, encoding: .utf8) + """
                [Outbox]
                Enabled=yes
                AllowHTTP=yes
                AllowNetworks=127.0.0.1/32
                InfobipURL=\(vendor.url(""))
                InfobipAppKeyFile=\(keyFile)
                ConnectTimeoutSec=1s
                RequestTimeoutSec=10s
                RetryBaseSec=200ms

                """
            try config.write(toFile: node.config, atomically: true, encoding: .utf8)
        }
        process1 = try Self.launchInbox(nodes[0])
        process2 = try Self.launchInbox(nodes[1])
        ports = [try Self.port(nodes[0], process1), try Self.port(nodes[1], process2)]
        func reported() -> [String] {
            vendor.requests("/mobile/2/messages/seen").flatMap { request -> [String] in
                let messages = (try? JSONParser().parse(request.body))?["messages"]?.arrayValue ?? []
                return messages.compactMap { $0["messageId"]?.stringValue }
            }
        }
        try waitUntil(timeout: 60, "twenty messages reported seen") { reported().count >= 20 }
        // Both nodes done with what they fetched: past any second copy a node working the same
        // message would have sent.
        try Self.waitFleetIdle(ports, delivered: 20)
        #expect(reported().sorted() == (0..<20).map { "ib-msg-\($0)" }.sorted(), "each message reported once fleet-wide")
        let requests = vendor.requests("/mobile/2/messages/seen")
        for request in requests {
            #expect(request.header("Authorization") == "App infobip-app-key")
        }
        #expect(requests.count < 20, "a user's reports of one fetch share a POST (\(requests.count) POSTs)")
        #expect(Self.parked(nodes[0]).isEmpty && Self.parked(nodes[1]).isEmpty)
    }

    /// Issue 37: an Infobip action taken on a fleet node reports what the SDK reports — the
    /// message seen, then the MO in the SDK's shape (`text` "<category> <action>", the push's
    /// `customPayload` and `bulkId`, the registration id from `X-Pushspool-Device`) — each once,
    /// through the node's pending deliveries (the stream's message is answered only after both
    /// are written there).
    @Test func anInfobipActionOnAFleetNodeReportsSeenAndTheMOOnce() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let vendor = try LoopbackHTTPServer()
        vendor.route("/mobile/2/messages/seen", .ok(Array("{}".utf8), contentType: "application/json"))
        vendor.route("/mobile/1/messages/mo", .ok(Array("{}".utf8), contentType: "application/json"))
        let ingest = try DaemonHarness(name: "fleet-ibmo-ingest", config: Self.ingestConfig(url: server.url))
        try ingest.start()
        defer { ingest.stop() }
        let json = """
            {"pushspool":1,"user":"ib-mo-user","platform":"ios","payload":{"aps":{"alert":{"title":"Invite","body":"Join?"},\
            "category":"mm_accept_decline"},"messageId":"ib-mo-1","customPayload":{"promo":"spring"},"internalData":{"bulkId":"bulk-9"}}}
            """
        try ingest.drop(Array(json.utf8), name: "ibmo.json")
        try Self.waitIngestedAndExported(ingest, count: 1)

        let node = try Self.node("fleet-ibmo-node", url: server.url)
        let keyFile = node.root + "/infobip.key"
        try "infobip-app-key\n".write(toFile: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile, 0o600)
        let config = try String(contentsOfFile: node.config, encoding: .utf8) + """
            [Outbox]
            Enabled=yes
            AllowHTTP=yes
            AllowNetworks=127.0.0.1/32
            InfobipURL=\(vendor.url(""))
            InfobipAppKeyFile=\(keyFile)
            ConnectTimeoutSec=1s
            RequestTimeoutSec=10s
            RetryBaseSec=200ms

            """
        try config.write(toFile: node.config, atomically: true, encoding: .utf8)
        let process = try Self.launchInbox(node)
        defer { Self.stopInbox(process) }
        let port = try Self.port(node, process)
        try waitUntil(timeout: 60, "the node at stream seq 1") { Self.appliedSeq(node) == 1 }
        let items = try #require(try Self.http(port, "GET", "/v1/inbox", user: "ib-mo-user").json?["items"]?.arrayValue)
        let seq = try #require(items.first?["item"]?.stringValue)
        let action = try Self.http(port, "POST", "/v1/inbox/\(seq)/actions/mm_accept", user: "ib-mo-user",
                                   headers: ["X-Pushspool-Device: reg-fleet-1"])
        #expect(action.status == 202, "\(action.body)")

        try waitUntil(timeout: 60, "the seen report and the MO") {
            vendor.hits("/mobile/2/messages/seen") >= 1 && vendor.hits("/mobile/1/messages/mo") >= 1
        }
        // The node done with the message: past any second copy it would have sent.
        try Self.waitFleetIdle([port], delivered: 1)
        let seen = vendor.requests("/mobile/2/messages/seen")
        try #require(seen.count == 1)
        let seenMessages = try #require((try? JSONParser().parse(seen[0].body))?["messages"]?.arrayValue)
        #expect(seenMessages.compactMap { $0["messageId"]?.stringValue } == ["ib-mo-1"])
        #expect(seen[0].header("pushregistrationid") == "reg-fleet-1")
        let mo = vendor.requests("/mobile/1/messages/mo")
        try #require(mo.count == 1)
        #expect(mo[0].target == "/mobile/1/messages/mo?platformType=APNS")
        #expect(mo[0].header("Authorization") == "App infobip-app-key")
        let body = try #require(try? JSONParser().parse(mo[0].body))
        #expect(body["from"] == .string("reg-fleet-1"))
        let message = try #require(body["messages"]?.arrayValue?.first)
        #expect(message["text"] == .string("mm_accept_decline mm_accept"))
        #expect(message["initialMessageId"] == .string("ib-mo-1") && message["bulkId"] == .string("bulk-9"))
        #expect(message["customPayload"] == .object(["promo": .string("spring")]))
        #expect(message["messageId"]?.stringValue?.isEmpty == false)
        #expect(Set(message.objectValue?.keys.map { $0 } ?? []) == ["bulkId", "customPayload", "initialMessageId", "messageId", "text"])
        #expect(Self.parked(node).isEmpty)
    }
}
