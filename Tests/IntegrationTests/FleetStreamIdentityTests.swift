@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushSystem
import PushExport
import PushInbox
import TestTraits

/// An inbox node must know which stream its index was built from (a stream deleted and
/// created again numbers its messages from 1, under the same name), and must not share its
/// host id (and so its durable consumer) with another live node. A real nats-server on
/// 127.0.0.1, pushspoold exporting, pushspool-inbox nodes. Serialized: servers and daemons of
/// their own, few cores.
@Suite(.serialized, .tags(.nats)) struct FleetStreamIdentityTests {
    typealias Node = InboxFromStreamTests

    static func streamCreated(_ harness: DaemonHarness) -> Int64? {
        try? InboxIndex(path: Node.indexPath(harness), readOnly: true).streamCreated()
    }

    /// The node's index is built from the stream as it is now: the same creation time, every
    /// seq applied.
    static func waitFollows(_ node: DaemonHarness, _ client: NatsClient, _ what: String) throws {
        try waitUntil(timeout: 90, what) {
            let info = try client.streamInfo(Node.stream)
            return info.lastSeq > 0 && Self.streamCreated(node) == info.createdNanos && Node.appliedSeq(node) == info.lastSeq
        }
    }

    static func stop(_ process: Process) -> Int32 {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        process.waitUntilExit()
        return process.terminationStatus
    }

    @Test func aReplacedStreamIsNoticedWhileFollowingAndAtStartAndTheIndexRebuilt() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let ingest = try DaemonHarness(name: "identity-ingest", config: Node.ingestConfig(url: server.url))
        try ingest.start()
        try Node.drop(ingest, 0..<30, tag: "a")
        try Node.waitIngestedAndExported(ingest, count: 30)
        let client = try NatsClient(urls: [server.url], name: "it-identity")
        defer { client.close() }

        let node = try Node.node("identity-node", url: server.url)
        let notify = try NotifySocket()
        let process = try Node.launchInbox(node, environment: ["NOTIFY_SOCKET": notify.path])
        defer { _ = Self.stop(process) }
        let port = try Node.port(node, process)
        try Self.waitFollows(node, client, "the node at stream seq 30")
        let healthy = try Node.http(port, "GET", "/healthz", user: "user-1")
        #expect(healthy.status == 200 && healthy.body.contains("\"status\":\"ready\""), "\(healthy.body)")
        let first = try #require(Self.streamCreated(node))

        // Deleted while the node follows: the exporter creates it again on its next publish,
        // numbering from 1, below the node's applied seq 30.
        try client.deleteStream(Node.stream)
        try Node.drop(ingest, 30..<35, tag: "b")
        try Node.waitIngestedAndExported(ingest, count: 35)
        #expect(try client.streamInfo(Node.stream).lastSeq < 30)
        try Self.waitFollows(node, client, "the node rebuilt from the re-created stream")
        #expect(Self.streamCreated(node) != first)
        #expect(process.isRunning)
        #expect(Node.stderr(node).contains("is not the one the inbox index was built from"), "\(Node.stderr(node))")
        #expect(Node.stderr(node).contains("inbox index rebuilt from the new stream"))
        // Said on STATUS=, in /metrics, and ready again once rebuilt.
        try waitUntil(timeout: 10, "STATUS= naming the replaced stream") {
            notify.messages.contains { $0.contains("STATUS=stream replaced 1x; serving on") }
        }
        let metrics = try Node.http(port, "GET", "/metrics", user: "user-1").body
        #expect(metrics.contains("pushspool_inbox_stream_replaced_total 1\n"), "\(metrics)")
        #expect(metrics.contains("pushspool_inbox_stream_ready 1\n"))
        #expect(metrics.contains("pushspool_inbox_stream_rebuilding 0\n"))
        #expect(try Node.http(port, "GET", "/healthz", user: "user-1").status == 200)
        // A state change accepted now goes through the new stream and is applied.
        let item = try #require(try Node.http(port, "GET", "/v1/inbox", user: "user-30").json?["items"]?.arrayValue?.first?["item"]?.stringValue)
        #expect(try Node.http(port, "POST", "/v1/inbox/\(item)/read", user: "user-30").status == 202)
        try waitUntil(timeout: 30, "the read applied") { try Node.state(port, user: "user-30", item: item)?["read"] == .bool(true) }

        // The README's answer to a lost stream: the journal replayed into the new stream,
        // which the node follows on (the same stream: no second rebuild).
        let (status, _, error) = try ingest.ctl(["export", "replay", "--from-seq", "1"])
        #expect(status == 0, "\(error)")
        try waitUntil(timeout: 90, "the replay in the stream") { try client.streamInfo(Node.stream).messages >= 35 }
        try Self.waitFollows(node, client, "the node after the replay")
        try waitUntil(timeout: 60, "the node's items as many as the journal's") {
            let built = try InboxIndex(path: Node.indexPath(node), readOnly: true).itemCount()
            return try built > 0 && built == InboxIndex(path: Node.indexPath(ingest), readOnly: true).itemCount()
        }

        // Deleted while the node is down: noticed at its start.
        #expect(Self.stop(process) == 0)
        let beforeRestart = try #require(Self.streamCreated(node))
        try client.deleteStream(Node.stream)
        try Node.drop(ingest, 35..<38, tag: "c")
        try Node.waitIngestedAndExported(ingest, count: 38)
        let again = try Node.launchInbox(node)
        defer { _ = Self.stop(again) }
        try Self.waitFollows(node, client, "the restarted node rebuilt from the re-created stream")
        #expect(Self.streamCreated(node) != beforeRestart)
        #expect(again.isRunning)
        #expect(ingest.stop() == 0)
    }

    @Test func aSecondNodeWithTheSameHostIdRefusesToStartAnotherHostIdRuns() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let ingest = try DaemonHarness(name: "hostid-ingest", config: Node.ingestConfig(url: server.url))
        try ingest.start()
        defer { _ = ingest.stop() }
        try Node.drop(ingest, 0..<10, tag: "h")
        try Node.waitIngestedAndExported(ingest, count: 10)

        func node(_ name: String, hostId: String) throws -> DaemonHarness {
            let harness = try Node.node(name, url: server.url)
            try Node.nodeConfig(url: server.url, hostId: hostId, secretFile: harness.root + "/secret")
                .write(toFile: harness.config, atomically: true, encoding: .utf8)
            return harness
        }
        let one = try node("hostid-one", hostId: "cloned")
        let first = try Node.launchInbox(one)
        defer { _ = Self.stop(first) }
        try waitUntil(timeout: 60, "the first node at stream seq 10") { Node.appliedSeq(one) == 10 }

        // Same host id on another state directory (a cloned VM): refused, saying what to set.
        let two = try node("hostid-two", hostId: "cloned")
        let second = try Node.launchInbox(two)
        try waitUntil(timeout: 60, "the second node to exit") { !second.isRunning }
        #expect(second.terminationStatus == 78)
        #expect(Node.stderr(two).contains("[Export] HostId="), "\(Node.stderr(two))")
        #expect(Node.stderr(two).contains("another inbox node with host id cloned"))
        #expect(first.isRunning)

        // Another host id: both run and follow.
        let three = try node("hostid-three", hostId: "other")
        let third = try Node.launchInbox(three)
        defer { _ = Self.stop(third) }
        try Node.drop(ingest, 10..<12, tag: "h")
        try Node.waitIngestedAndExported(ingest, count: 12)
        try waitUntil(timeout: 60, "both nodes at stream seq 12") { Node.appliedSeq(one) == 12 && Node.appliedSeq(three) == 12 }
        #expect(first.isRunning && third.isRunning)

        // The first node's restart is not refused: a node that is gone no longer answers.
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        let restarted = try Node.launchInbox(one)
        defer { _ = Self.stop(restarted) }
        try Node.drop(ingest, 12..<13, tag: "h")
        try Node.waitIngestedAndExported(ingest, count: 13)
        try waitUntil(timeout: 60, "the restarted node at stream seq 13") { Node.appliedSeq(one) == 13 }
        #expect(restarted.isRunning)
    }
}
