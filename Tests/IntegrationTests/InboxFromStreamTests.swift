@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushSystem
import PushExport
import PushInbox
import TestTraits

/// An inbox node that builds its index from the export stream (`[Inbox] Source=nats`):
/// pushspoold exports into a real nats-server, and pushspool-inbox on a second state
/// directory follows the stream. Serialized: servers and daemons of their own, few cores.
@Suite(.serialized, .tags(.nats)) struct InboxFromStreamTests {
    static let stream = "ITINBOX"
    static let secret = "test-secret-0123456789abcdef-0123456789"

    /// The ingest host: pushspoold with its journal-built index, exporting.
    static func ingestConfig(url: String) -> String {
        """
        [Media]
        Enabled=no
        [Journal]
        MaxBatchDelaySec=0
        [Export]
        Enabled=yes
        URL=\(url)
        HostId=ingest
        Stream=\(stream)
        AckTimeoutSec=2s

        """
    }

    /// An inbox node: no pushspoold, its index from the stream.
    static func nodeConfig(url: String, hostId: String, secretFile: String) -> String {
        """
        [Export]
        URL=\(url)
        HostId=\(hostId)
        Stream=\(stream)
        [Inbox]
        Source=nats
        TokenSecretFile=\(secretFile)

        """
    }

    /// A state directory and configuration for an inbox node (the harness's daemon is never started).
    static func node(_ name: String, url: String) throws -> DaemonHarness {
        let harness = try DaemonHarness(name: name)
        let secretFile = harness.root + "/secret"
        try secret.write(toFile: secretFile, atomically: true, encoding: .utf8)
        try nodeConfig(url: url, hostId: name, secretFile: secretFile).write(toFile: harness.config, atomically: true, encoding: .utf8)
        for directory in ["/spool/incoming", "/spool/tmp", "/state"] { try Posix.mkdirs(harness.root + directory) }
        return harness
    }

    /// pushspool-inbox on `node`'s directories; stdout and stderr into files of the node.
    static func launchInbox(_ node: DaemonHarness, environment: [String: String] = [:]) throws -> Process {
        let process = Process()
        if !environment.isEmpty { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        process.executableURL = URL(fileURLWithPath: DaemonHarness.binDirectory + "/pushspool-inbox")
        process.arguments = ["--listen", "127.0.0.1:0", "--threads", "1", "--spool", node.spool, "--state-dir", node.state,
                             "--config", node.config]
        for name in ["inbox.stdout", "inbox.stderr"] { _ = FileManager.default.createFile(atPath: node.root + "/" + name, contents: nil) }
        process.standardOutput = FileHandle(forWritingAtPath: node.root + "/inbox.stdout")
        process.standardError = FileHandle(forWritingAtPath: node.root + "/inbox.stderr")
        try process.run()
        return process
    }

    static func stderr(_ node: DaemonHarness) -> String {
        (try? String(contentsOfFile: node.root + "/inbox.stderr", encoding: .utf8)) ?? ""
    }

    static func indexPath(_ harness: DaemonHarness) -> String { InboxIndex.path(stateDirectory: harness.state) }

    static func appliedSeq(_ harness: DaemonHarness) -> UInt64? {
        try? InboxIndex(path: indexPath(harness), readOnly: true).appliedSeq()
    }

    /// The index row by row, without the stream identity a stream-built index records
    /// (`meta.stream_created`; a journal-built one has none).
    static func dump(_ harness: DaemonHarness) throws -> [String] {
        try InboxIndex(path: indexPath(harness), readOnly: true).canonicalDump().filter { !$0.hasPrefix("meta|stream_created|") }
    }

    static func drop(_ harness: DaemonHarness, _ range: Range<Int>, tag: String) throws {
        for index in range { try harness.drop(generatedPayload(index: index, tag: tag), name: "\(tag)-\(index).json") }
    }

    static func waitIngestedAndExported(_ harness: DaemonHarness, count: Int) throws {
        try waitUntil(timeout: 90, "\(count) records journaled and exported") {
            (try? harness.records().count) == count && (try? ExportCursor.read(stateDirectory: harness.state)) == UInt64(count)
        }
    }

    /// `nc list --json` and `nc count --json` of every user the payloads name, as printed.
    static func answers(_ harness: DaemonHarness) throws -> [String] {
        var out: [String] = []
        for user in 0..<97 {
            let (s1, list, e1) = try harness.ctl(["nc", "list", "--user", "user-\(user)", "--json", "--limit", "500"])
            let (s2, count, e2) = try harness.ctl(["nc", "count", "--user", "user-\(user)", "--json"])
            guard s1 == 0, s2 == 0 else { throw TimeoutError(description: "nc list/count failed: \(e1) \(e2)") }
            out.append(list + count)
        }
        return out
    }

    @Test func anIndexBuiltFromTheStreamAnswersLikeTheJournalsAcrossKillNine() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let ingest = try DaemonHarness(name: "stream-ingest", config: Self.ingestConfig(url: server.url))
        try ingest.start()
        try Self.drop(ingest, 0..<400, tag: "s")
        try Self.waitIngestedAndExported(ingest, count: 400)
        // State changes travel too: they are journal records like the pushes.
        for item in [3, 10, 200] {
            let (status, _, error) = try ingest.ctl(["nc", "read", "--user", "user-\(item - 1)", String(item)])
            #expect(status == 0, "\(error)")
        }
        try Self.waitIngestedAndExported(ingest, count: 403)

        // The inbox node, killed with SIGKILL at different points while it applies and more
        // records arrive, then left to finish.
        let node = try Self.node("stream-node", url: server.url)
        var total = 403
        var killedBehind = 0
        // Eight rounds, and more (killed at once) while none landed behind: on a loaded
        // machine a sleep can outlast the whole catch-up.
        for round in 0..<16 {
            if round >= 8 && killedBehind > 0 { break }
            // A backlog waits in the stream at each start (so the short rounds kill it before it
            // caught up: ingest and export keep pace with drops, and a node started first would
            // be level with them), and more records arrive while it applies.
            let first = 1000 + round * 150
            try Self.drop(ingest, first..<(first + 100), tag: "k")
            try Self.waitIngestedAndExported(ingest, count: total + 100)
            let process = try Self.launchInbox(node)
            try Self.drop(ingest, (first + 100)..<(first + 150), tag: "k")
            total += 150
            if round < 8 { usleep(UInt32(20_000 + (round * 53_000) % 300_000)) }  // why: the fault: the kill at a different moment each round
            if (Self.appliedSeq(node) ?? 0) < UInt64(total) { killedBehind += 1 }
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try Self.waitIngestedAndExported(ingest, count: total)
        let process = try Self.launchInbox(node)
        defer { if process.isRunning { kill(process.processIdentifier, SIGTERM); process.waitUntilExit() } }
        try waitUntil(timeout: 60, "the node's index at stream seq \(total)") { Self.appliedSeq(node) == UInt64(total) }
        #expect(killedBehind > 0, "no kill landed before the node caught up")

        // One ingest host into a fresh stream: its journal seq is the stream seq, so the two
        // indexes must be the same row for row (items, states, counters, the applied seq)…
        try waitUntil(timeout: 30, "the journal's index at \(total)") { Self.appliedSeq(ingest) == UInt64(total) }
        let journalBuilt = try Self.dump(ingest)
        let streamBuilt = try Self.dump(node)
        #expect(journalBuilt.count == streamBuilt.count)
        #expect(journalBuilt == streamBuilt, "first difference: \(zip(journalBuilt, streamBuilt).first { $0 != $1 }.map { "\($0) / \($1)" } ?? "length")")
        // …and every user's answers byte for byte.
        #expect(try Self.answers(ingest) == Self.answers(node))

        // A new node (or one that lost its disk) rebuilds from the stream alone.
        let fresh = try Self.node("stream-fresh", url: server.url)
        let (status, out, error) = try fresh.ctl(["nc", "reindex", "--from-stream"])
        #expect(status == 0, "\(error)")
        #expect(out.contains("stream seq \(total)"), "\(out)")
        #expect(try Self.dump(fresh) == journalBuilt)

        // The journal's rebuild is refused on a node whose index follows the stream.
        let (refused, _, refusal) = try fresh.ctl(["nc", "reindex"])
        #expect(refused == 64)
        #expect(refusal.contains("--from-stream"))
        #expect(ingest.stop() == 0)
    }

    @Test func aStreamPurgedPastTheIndexRefusesTheStartUntilRebuilt() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let ingest = try DaemonHarness(name: "stream-purge", config: Self.ingestConfig(url: server.url))
        try ingest.start()
        try Self.drop(ingest, 0..<50, tag: "p")
        try Self.waitIngestedAndExported(ingest, count: 50)

        let node = try Self.node("purge-node", url: server.url)
        var process = try Self.launchInbox(node)
        try waitUntil(timeout: 60, "the node's index at stream seq 50") { Self.appliedSeq(node) == 50 }
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)

        // The stream moves on and its oldest records go before the node sees them.
        try Self.drop(ingest, 50..<80, tag: "p")
        try Self.waitIngestedAndExported(ingest, count: 80)
        let client = try NatsClient(urls: [server.url], name: "it-purge")
        defer { client.close() }
        try client.purgeStream(Self.stream, keepFrom: 60)
        #expect(try client.streamBounds(Self.stream).firstSeq == 60)

        process = try Self.launchInbox(node)
        try waitUntil(timeout: 30, "pushspool-inbox to refuse") { !process.isRunning }
        #expect(process.terminationStatus == 78)
        let text = Self.stderr(node)
        #expect(text.contains("up to seq 50, but the stream now starts at seq 60"), "\(text)")
        #expect(text.contains("pushspoolctl nc reindex --from-stream"))
        #expect(Self.appliedSeq(node) == 50)

        // The rebuild takes what the stream holds; the node then starts and follows.
        let (status, out, error) = try node.ctl(["nc", "reindex", "--from-stream"])
        #expect(status == 0, "\(error)")
        #expect(out.contains("21 items, stream seq 80"), "\(out)")
        process = try Self.launchInbox(node)
        defer { if process.isRunning { kill(process.processIdentifier, SIGTERM); process.waitUntilExit() } }
        try Self.drop(ingest, 80..<90, tag: "p")
        try Self.waitIngestedAndExported(ingest, count: 90)
        try waitUntil(timeout: 60, "the rebuilt index to follow to 90") { Self.appliedSeq(node) == 90 }
        #expect(process.isRunning)
        #expect(try InboxIndex(path: Self.indexPath(node), readOnly: true).itemCount() == 31)
        #expect(ingest.stop() == 0)
    }

    /// The gap check at start is not enough: a node that follows while the stream's head is
    /// purged gets the records after the purge from its consumer, which skips the rest.
    @Test func aStreamPurgedWhileTheNodeFollowsIsRefusedNotSkipped() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let ingest = try DaemonHarness(name: "stream-live-purge", config: Self.ingestConfig(url: server.url))
        try ingest.start()
        try Self.drop(ingest, 0..<20, tag: "l")
        try Self.waitIngestedAndExported(ingest, count: 20)

        let node = try Self.node("live-purge-node", url: server.url)
        let process = try Self.launchInbox(node)
        defer { if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() } }
        try waitUntil(timeout: 60, "the node's index at stream seq 20") { Self.appliedSeq(node) == 20 }

        // Frozen, the node cannot see seqs 21..40 before the purge takes 21..29 away. Its
        // pending pull request expires first (fetchWait, 10 s), or the server would push the
        // new records into the frozen node's socket.
        kill(process.processIdentifier, SIGSTOP)
        Thread.sleep(forTimeInterval: 11)  // why: nats-server's own 10 s pull expiry must pass; no client event says it did
        try Self.drop(ingest, 20..<40, tag: "l")
        try Self.waitIngestedAndExported(ingest, count: 40)
        let client = try NatsClient(urls: [server.url], name: "it-live-purge")
        defer { client.close() }
        try client.purgeStream(Self.stream, keepFrom: 30)
        kill(process.processIdentifier, SIGCONT)

        try waitUntil(timeout: 60, "pushspool-inbox to refuse") { !process.isRunning }
        #expect(process.terminationStatus == 78)
        let text = Self.stderr(node)
        #expect(text.contains("up to seq 20, but the stream now starts at seq 30"), "\(text)")
        #expect(Self.appliedSeq(node) == 20)
        #expect(ingest.stop() == 0)
    }
}
