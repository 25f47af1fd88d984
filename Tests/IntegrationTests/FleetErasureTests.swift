@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushSystem
import PushExport
import PushInbox
import PushJournal

/// Erasure on inbox nodes (`[Inbox] Source=nats`; docs/design/fleet-inbox.md, "Erasure"):
/// one fleet erasure key given to the ingest host and the node (`[Export] ErasureKeyFile=`);
/// an erasure record in the stream — exported by the ingest host, published as an exporter
/// would, or published by the node's own admin route — makes the node resolve the hash
/// against its index and erase that user there, before its index passes the record. In
/// ``InboxFromStreamTests`` (serialized: servers of their own).
extension InboxFromStreamTests {
    /// A fleet erasure key: 32 raw bytes, mode 0600, in `directory`.
    static func fleetKey(in directory: String) throws -> (path: String, bytes: [UInt8]) {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let path = directory + "/fleet-erase-key"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        chmod(path, 0o600)
        return (path, bytes)
    }

    static func erasingIngestConfig(url: String, keyFile: String) -> String {
        ingestConfig(url: url).replacingOccurrences(of: "[Export]\n", with: "[Export]\nErasureKeyFile=\(keyFile)\n")
    }

    /// A node with the fleet key and, when given, an admin token file.
    static func erasingNode(_ name: String, url: String, keyFile: String, adminToken: String? = nil) throws -> DaemonHarness {
        let harness = try node(name, url: url)
        var config = nodeConfig(url: url, hostId: name, secretFile: harness.root + "/secret")
            .replacingOccurrences(of: "[Export]\n", with: "[Export]\nErasureKeyFile=\(keyFile)\n")
        if let adminToken {
            let path = harness.root + "/admin-token"
            try adminToken.write(toFile: path, atomically: true, encoding: .utf8)
            chmod(path, 0o600)
            config += "AdminTokenFile=\(path)\n"
        }
        try config.write(toFile: harness.config, atomically: true, encoding: .utf8)
        return harness
    }

    /// alice's and bob's pushes (three each) and one read of each, journaled and exported.
    static func aliceAndBob(_ ingest: DaemonHarness) throws {
        for user in ["alice", "bob"] {
            for index in 0..<3 {
                try ingest.drop(UserExportTests.push(user: user, device: "dev-\(user)", tag: "\(user)-secret-\(index)"), name: "\(user)-\(index).json")
            }
        }
        try waitIngestedAndExported(ingest, count: 6)
        for user in ["alice", "bob"] {
            let (status, out, _) = try ingest.ctl(["nc", "list", "--user", user, "--json"])
            var items: [String] = []
            for line in out.split(separator: "\n") {
                if let value = try? JSONParser().parse(String(line)), let item = value["item"]?.stringValue { items.append(item) }
            }
            let item = try #require(items.first)
            let (read, _, error) = try ingest.ctl(["nc", "read", "--user", user, item])
            #expect(status == 0 && read == 0, "\(error)")
        }
        try waitIngestedAndExported(ingest, count: 8)
    }

    /// The node's files hold no byte of alice and her pushes; bob's are all there.
    static func expectAliceGoneBobKept(node: DaemonHarness) throws {
        let files = try RawFiles.everyRegularFile(under: node.state)
        for needle in ["alice", "u:alice", "alice-secret-0", "alice-secret-2"] {
            #expect(UserEraseTests.holding(Array(needle.utf8), files).isEmpty, "\(needle) in \(UserEraseTests.holding(Array(needle.utf8), files))")
        }
        for needle in ["u:bob", "bob-secret-0", "bob-secret-1", "bob-secret-2"] {
            #expect(!UserEraseTests.holding(Array(needle.utf8), files).isEmpty, "\(needle) is gone from the node")
        }
    }

    static func nodeStatus(_ node: DaemonHarness, _ erasureID: String) -> JSONValue? {
        guard let bytes = try? Posix.readFile(node.state + "/erase/" + erasureID + ".status", limit: 1 << 20) else { return nil }
        return try? JSONParser().parse(bytes)
    }

    /// An erasure requested on the ingest host (`pushspoolctl user erase`, its exporter puts
    /// the record into the stream) is applied by the node: alice's items and owner row are
    /// gone from the node's index file and WAL, bob's untouched, the node's status says so.
    @Test func anErasureExportedByTheIngestHostIsAppliedByTheNode() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let key = try Self.fleetKey(in: temp.path)
        let ingest = try DaemonHarness(name: "fe-ingest", config: Self.erasingIngestConfig(url: server.url, keyFile: key.path))
        try ingest.start()
        defer { _ = ingest.stop() }
        try Self.aliceAndBob(ingest)
        let node = try Self.erasingNode("fe-node", url: server.url, keyFile: key.path)
        let process = try Self.launchInbox(node)
        defer { if process.isRunning { kill(process.processIdentifier, SIGTERM); process.waitUntilExit() } }
        try waitUntil(timeout: 60, "the node applied the stream") { (Self.appliedSeq(node) ?? 0) >= 8 }
        #expect(try UserEraseTests.listed(node, "alice") == 3)
        // The fleet key is every instance's erase.key.
        #expect(try Posix.readFile(node.state + "/erase.key", limit: 64) == key.bytes)
        #expect(try Posix.readFile(ingest.state + "/erase.key", limit: 64) == key.bytes)

        let (status, out, error) = try ingest.ctl(["user", "erase", "alice", "--json"])
        #expect(status == 0, "\(error)")
        let summary = try JSONParser().parse(String(out.split(separator: "\n").last ?? ""))
        let erasureID = try #require(summary["erasureId"]?.stringValue)
        try waitUntil(timeout: 60, "the node applied erasure \(erasureID)") { Self.nodeStatus(node, erasureID)?["complete"]?.boolValue == true }
        let nodeStatus = try #require(Self.nodeStatus(node, erasureID))
        #expect(nodeStatus["statusScope"]?.stringValue == "node")
        #expect(nodeStatus["inboxItems"]?.intValue == 3, "\(nodeStatus)")
        #expect(nodeStatus["steps"]?.arrayValue?.compactMap(\.stringValue) == ["inbox-done", "outbox-done"])
        #expect(try UserEraseTests.listed(node, "alice") == 0)
        #expect(try UserEraseTests.listed(node, "bob") == 3)
        let (_, count, _) = try node.ctl(["nc", "count", "--user", "bob", "--json"])
        #expect(count.contains(#""unread":2"#), "\(count)")
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        try Self.expectAliceGoneBobKept(node: node)
    }

    /// A node killed with SIGKILL after the erasure record arrived — before it erased, and
    /// after it erased but before its index passed the record — ends erased after a restart.
    @Test(arguments: ["erasure-received", "erasure-applied"])
    func aNodeKilledAtAnErasureEndsErasedAfterARestart(_ step: String) throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let key = try Self.fleetKey(in: temp.path)
        // The ingest host keeps its own key: the record is published below as its exporter would.
        let ingest = try DaemonHarness(name: "fe-kill-ingest", config: Self.ingestConfig(url: server.url))
        try ingest.start()
        defer { _ = ingest.stop() }
        try Self.aliceAndBob(ingest)
        let node = try Self.erasingNode("fe-kill-node", url: server.url, keyFile: key.path)
        let first = try Self.launchInbox(node, environment: ["PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_TEST_ERASE_KILL_AT": step])
        defer { if first.isRunning { kill(first.processIdentifier, SIGKILL); first.waitUntilExit() } }
        try waitUntil(timeout: 60, "the node applied the stream") { (Self.appliedSeq(node) ?? 0) >= 8 }

        let erasureID = String((0..<32).map { _ in "0123456789abcdef".randomElement()! })
        let subject = ErasureSecret(bytes: key.bytes).subjectHash(.user("alice"))
        let body = #"{"erasureId":"\#(erasureID)","kind":"erasure","requestedAt":"2026-12-01T10:00:00.000Z","scope":"user","subject":"\#(subject)"}"#
        let client = try NatsClient(urls: [server.url], credentialsFile: "", tlsCAFile: "", tlsCertFile: "", tlsKeyFile: "",
                                    ackTimeout: .seconds(5), name: "test")
        defer { client.close() }
        let ack = try client.publish(subject: "pushspool.erasure.none", msgId: "ingest:erasure:" + erasureID, body: Array(body.utf8), headers: [])
        try waitUntil(timeout: 60, "the node killed itself at \(step)") { !first.isRunning }
        #expect(first.terminationReason == .uncaughtSignal && first.terminationStatus == SIGKILL)
        // Killed before its index passed the record, whichever step.
        #expect((Self.appliedSeq(node) ?? 0) < ack.streamSeq)
        // Received: nothing erased yet. Applied: erased and the status written, the index not
        // yet past the record.
        #expect((Self.nodeStatus(node, erasureID) != nil) == (step == "erasure-applied"))
        #expect(try UserEraseTests.listed(node, "alice") == (step == "erasure-applied" ? 0 : 3))

        let second = try Self.launchInbox(node)
        defer { if second.isRunning { kill(second.processIdentifier, SIGTERM); second.waitUntilExit() } }
        try waitUntil(timeout: 60, "the node applied erasure \(erasureID) after the restart") {
            Self.nodeStatus(node, erasureID)?["complete"]?.boolValue == true && (Self.appliedSeq(node) ?? 0) >= ack.streamSeq
        }
        // Erased once whichever step it died at: the restart either does it or, finding the
        // status complete, passes the record.
        let status = try #require(Self.nodeStatus(node, erasureID))
        #expect(status["inboxItems"]?.intValue == 3 && status["unmatched"] == nil, "\(status)")
        #expect(try UserEraseTests.listed(node, "alice") == 0)
        #expect(try UserEraseTests.listed(node, "bob") == 3)
        kill(second.processIdentifier, SIGTERM)
        second.waitUntilExit()
        try Self.expectAliceGoneBobKept(node: node)
    }

    /// The admin route on a node publishes the erasure record to the stream (202, status
    /// scope `node`) and the node applies it like any other; its status route answers 404
    /// until then and the node's status after.
    @Test func theAdminRouteOnANodePublishesAnErasureTheNodeApplies() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let key = try Self.fleetKey(in: temp.path)
        let ingest = try DaemonHarness(name: "fe-admin-ingest", config: Self.erasingIngestConfig(url: server.url, keyFile: key.path))
        try ingest.start()
        defer { _ = ingest.stop() }
        try Self.aliceAndBob(ingest)
        let adminToken = "admin-token-0123456789abcdef-0123456789"
        let node = try Self.erasingNode("fe-admin-node", url: server.url, keyFile: key.path, adminToken: adminToken)
        let process = try Self.launchInbox(node)
        defer { if process.isRunning { kill(process.processIdentifier, SIGTERM); process.waitUntilExit() } }
        let port = try Self.port(node, process)
        try waitUntil(timeout: 60, "the node applied the stream") { (Self.appliedSeq(node) ?? 0) >= 8 }
        // The ingest host would follow the node's erasure from the stream (FleetEraseIngestTests)
        // and erase alice's pushes there too; stopped, it leaves them, so that the rebuild
        // below can only drop her by applying the erasure record.
        #expect(ingest.stop() == 0)

        func admin(_ method: String, _ path: String) throws -> InboxServerHarness.Reply {
            let result = try ProcessRunner.run("/usr/bin/curl", ["-s", "-S", "-i", "--max-time", "20", "-X", method,
                                                                 "-H", "Authorization: Bearer \(adminToken)", "http://127.0.0.1:\(port)\(path)"])
            return try InboxServerHarness.parse(result.stdout, curlError: result.stderr)
        }
        let reply = try admin("POST", "/v1/admin/users/alice/erase")
        #expect(reply.status == 202, "\(reply.body)")
        #expect(reply.json?["statusScope"]?.stringValue == "node")
        let erasureID = try #require(reply.json?["erasureId"]?.stringValue)
        try waitUntil(timeout: 60, "the node applied its own erasure") {
            try admin("GET", "/v1/admin/erasures/\(erasureID)").json?["complete"]?.boolValue == true
        }
        let status = try admin("GET", "/v1/admin/erasures/\(erasureID)")
        #expect(status.status == 200 && status.json?["statusScope"]?.stringValue == "node" && status.json?["inboxItems"]?.intValue == 3,
                "\(status.body)")
        // The record in the stream is the exporter's form, under this node's host id, naming only the hash.
        let client = try NatsClient(urls: [server.url], credentialsFile: "", tlsCAFile: "", tlsCertFile: "", tlsKeyFile: "",
                                    ackTimeout: .seconds(5), name: "test")
        defer { client.close() }
        let last = try client.streamBounds(Self.stream).lastSeq
        let message = try #require(try client.message(Self.stream, seq: last))
        #expect(message.msgId == "fe-admin-node:erasure:" + erasureID)
        #expect(!String(decoding: message.body, as: UTF8.self).contains("alice"))
        #expect(String(decoding: message.body, as: UTF8.self).contains(ErasureSecret(bytes: key.bytes).subjectHash(.user("alice"))))
        #expect(try UserEraseTests.listed(node, "alice") == 0)
        #expect(try UserEraseTests.listed(node, "bob") == 3)
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        try Self.expectAliceGoneBobKept(node: node)
        // The stream still holds alice's pushes (the ingest host was stopped before it could
        // follow the erasure): an index rebuilt from it applies the erasure record again and
        // stays without her.
        let (rebuilt, _, rebuildError) = try node.ctl(["nc", "reindex", "--from-stream"])
        #expect(rebuilt == 0, "\(rebuildError)")
        #expect(try UserEraseTests.listed(node, "alice") == 0)
        #expect(try UserEraseTests.listed(node, "bob") == 3)
        try Self.expectAliceGoneBobKept(node: node)
    }
}

extension InboxFromStreamTests {
    /// A node whose `erase.key` differs from the fleet key refuses to start (78) and says
    /// why, keeping its key; one without a key installs it. No NATS needed: both happen
    /// before the node connects.
    @Test func aNodeWithAnotherErasureKeyRefusesToStart() throws {
        let temp = TempDir()
        let key = try Self.fleetKey(in: temp.path)
        let node = try Self.erasingNode("fe-refuse-node", url: "nats://127.0.0.1:\(try NatsServer.freePort())", keyFile: key.path)
        let own = try ErasureSecret.loadOrCreate(stateDirectory: node.state)
        let refused = try Self.launchInbox(node)
        refused.waitUntilExit()
        #expect(refused.terminationStatus == 78)
        #expect(Self.stderr(node).contains("differs from the fleet erasure key"), "\(Self.stderr(node))")
        #expect(try ErasureSecret.load(stateDirectory: node.state) == own)
        // A loose key file is refused by the configuration check, before anything is installed.
        unlink(node.state + "/erase.key")
        chmod(key.path, 0o644)
        let loose = try Self.launchInbox(node)
        loose.waitUntilExit()
        #expect(loose.terminationStatus == 78)
        #expect(Self.stderr(node).contains("chmod 600"), "\(Self.stderr(node))")
        #expect(try ErasureSecret.load(stateDirectory: node.state) == nil)
    }
}
