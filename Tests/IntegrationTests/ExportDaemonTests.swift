@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushSystem
import PushJournal
import PushExport
import TestTraits

/// pushspoold exporting to real nats-server processes on 127.0.0.1, started and stopped here.
/// Serialized: each test runs servers and daemons of its own and the cores are few.
@Suite(.serialized, .tags(.nats)) struct ExportDaemonTests {
    static func config(urls: [String], hostId: String, stream: String = "ITEXPORT", replicas: Int = 1) -> String {
        """
        [Media]
        Enabled=no
        [Journal]
        MaxBatchDelaySec=0
        [Export]
        Enabled=yes
        URL=\(urls.joined(separator: " "))
        HostId=\(hostId)
        Stream=\(stream)
        Replicas=\(replicas)
        AckTimeoutSec=2s
        LagWarnRecords=20

        """
    }

    /// Every journal record's expected `Nats-Msg-Id`.
    static func expectedIds(_ harness: DaemonHarness, hostId: String) throws -> Set<String> {
        Set(try harness.records().map { ExportMessage.messageId(hostId: hostId, key: $0.key) })
    }

    static func drop(_ harness: DaemonHarness, range: Range<Int>, tag: String) throws {
        for index in range { try harness.drop(generatedPayload(index: index, tag: tag), name: "\(tag)-\(index).json") }
    }

    static func waitExported(_ harness: DaemonHarness, count: Int, timeout: Double = 90) throws {
        try waitUntil(timeout: timeout, "export cursor at \(count)") {
            (try? ExportCursor.read(stateDirectory: harness.state)) == UInt64(count)
        }
    }

    static func waitIngested(_ harness: DaemonHarness, count: Int) throws {
        try waitUntil(timeout: 60, "\(count) records journaled") { (try? harness.records().count) == count }
    }

    @Test func sigkillMidExportTwentyTimesStillExactlyOnce() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let harness = try DaemonHarness(name: "export-kill", config: Self.config(urls: [server.url], hostId: "killhost"))
        var total = 0
        var killedWithLag = 0
        for round in 0..<20 {
            try harness.start()
            try Self.drop(harness, range: total..<(total + 40), tag: "kill")
            total += 40
            // Kill while records are being journaled and exported: at a different point each round.
            usleep(UInt32(30_000 + (round * 37_000) % 250_000))  // why: the fault: the kill moment
            if let acknowledged = try? ExportCursor.read(stateDirectory: harness.state), acknowledged < UInt64(total) { killedWithLag += 1 }
            harness.stop(signal: SIGKILL)
        }
        try harness.start()
        try Self.waitIngested(harness, count: total)
        try Self.waitExported(harness, count: total)
        #expect(harness.stop() == 0)
        #expect(killedWithLag > 0, "no kill landed before export finished")
        let client = try NatsClient(urls: [server.url], name: "it-reader")
        defer { client.close() }
        let stored = try client.readStream("ITEXPORT")
        #expect(stored.count == total)
        let ids = Set(stored.map(\.msgId))
        #expect(ids.count == total)
        let difference = ids.symmetricDifference(try Self.expectedIds(harness, hostId: "killhost"))
        #expect(difference.isEmpty, "ids missing or unexpected: \(difference.sorted().prefix(5))")
    }

    @Test func natsStoppedIngestGoesOnLagGrowsThenExportCatchesUp() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        let harness = try DaemonHarness(name: "export-down", config: Self.config(urls: [server.url], hostId: "downhost"))
        try harness.start()
        try Self.drop(harness, range: 0..<50, tag: "down")
        try Self.waitIngested(harness, count: 50)
        try Self.waitExported(harness, count: 50)

        server.stop()
        try Self.drop(harness, range: 50..<250, tag: "down")
        try Self.waitIngested(harness, count: 250)  // ingest does not wait for NATS
        // Files are unlinked after their batch is durable, on the acknowledger's thread: the
        // journal may show the records a moment before incoming/ is empty.
        try waitUntil(timeout: 10, "incoming/ emptied") { harness.files(in: "incoming").isEmpty }
        try waitUntil(timeout: 30, "status file shows the outage") {
            let (status, out, _) = try harness.ctl(["export", "status", "--json"])
            guard status == 0, let object = try? JSONParser().parse(out.trimmingSpaces).objectValue else { return false }
            return object["lag"]?.intValue == 200 && object["connected"]?.boolValue == false
        }
        try waitUntil(timeout: 30, "the lag event") { harness.daemonStderr.contains("export to NATS JetStream is lagging") }

        try server.start()
        try Self.waitExported(harness, count: 250)
        let (status, out, _) = try harness.ctl(["export", "status"])
        #expect(status == 0)
        #expect(out.contains("lag: 0 records"))
        #expect(harness.stop() == 0)
        let client = try NatsClient(urls: [server.url], name: "it-reader")
        defer { client.close() }
        let stored = try client.readStream("ITEXPORT")
        #expect(stored.count == 250)
        #expect(Set(stored.map(\.msgId)).symmetricDifference(try Self.expectedIds(harness, hostId: "downhost")).isEmpty)

        // A replay inside the duplicate window publishes and the stream drops every one.
        let (replayStatus, _, replayErr) = try harness.ctl(["export", "replay", "--from-seq", "10", "--to-seq", "19"])
        #expect(replayStatus == 0, "\(replayErr)")
        #expect(replayErr.contains("published 10 record(s); 10 dropped"))
        #expect(try client.streamState("ITEXPORT").messages == 250)
        server.stop()
    }

    /// What `LoadCredential=nats-ca.pem:… nats-cert.pem:… nats-key.pem:…` leaves in
    /// `$CREDENTIALS_DIRECTORY`: copies of the files under the names the daemon looks for.
    static func credentialsDirectory(_ path: String, pki: TestPKI, withCA: Bool) throws -> String {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        var files = [("nats-cert.pem", pki.clientCertificate), ("nats-key.pem", pki.clientKey)]
        if withCA { files.append(("nats-ca.pem", pki.caCertificate)) }
        for (name, source) in files { try FileManager.default.copyItem(atPath: source, toPath: path + "/" + name) }
        return path
    }

    static func tlsServer(_ temp: TempDir) throws -> (NatsServer, TestPKI) {
        let pki = try TestPKI(directory: temp.appending("pki"))
        let server = try NatsServer(storeDirectory: temp.appending("nats"),
                                    tls: .init(certificate: pki.serverCertificate, key: pki.serverKey, ca: pki.caCertificate))
        try server.start()
        return (server, pki)
    }

    /// `URL=tls://…` with no TLS keys in the configuration: the CA, the client certificate and
    /// its key come from `$CREDENTIALS_DIRECTORY` alone, and the server refuses a client
    /// without a certificate, so an export that arrives proves the daemon used them.
    @Test func mutualTLSWithFilesFromTheCredentialsDirectoryExportsExactlyOnce() throws {
        let temp = TempDir()
        let (server, pki) = try Self.tlsServer(temp)
        defer { server.stop() }
        #expect(server.url.hasPrefix("tls://"))
        // verify: true is in force: the CA alone, without a client certificate, is refused.
        #expect(throws: ExportError.self) { try NatsClient(urls: [server.url], tlsCAFile: pki.caCertificate, name: "it-no-cert") }

        let credentials = try Self.credentialsDirectory(temp.appending("credentials"), pki: pki, withCA: true)
        let harness = try DaemonHarness(name: "export-tls", config: Self.config(urls: [server.url], hostId: "tlshost"))
        try harness.start(extraEnvironment: ["CREDENTIALS_DIRECTORY": credentials])
        try Self.drop(harness, range: 0..<60, tag: "tls")
        try Self.waitIngested(harness, count: 60)
        try Self.waitExported(harness, count: 60)
        // A restart reconnects over TLS and resumes from the cursor without publishing twice.
        #expect(harness.stop() == 0)
        try harness.start(extraEnvironment: ["CREDENTIALS_DIRECTORY": credentials])
        try Self.drop(harness, range: 60..<120, tag: "tls")
        try Self.waitIngested(harness, count: 120)
        try Self.waitExported(harness, count: 120)
        #expect(harness.stop() == 0)

        let client = try NatsClient(urls: [server.url], tlsCAFile: pki.caCertificate, tlsCertFile: pki.clientCertificate,
                                    tlsKeyFile: pki.clientKey, name: "it-reader")
        defer { client.close() }
        let stored = try client.readStream("ITEXPORT")
        #expect(stored.count == 120)
        let ids = Set(stored.map(\.msgId))
        #expect(ids.count == 120)
        #expect(ids == (try Self.expectedIds(harness, hostId: "tlshost")))
    }

    /// The same server, but the credentials directory lacks `nats-ca.pem`: the server's
    /// certificate cannot be verified, so nothing is exported — ingest goes on, the lag stays,
    /// and the reason shows in `export status` and on stderr. With the CA delivered and a
    /// restart, export catches up.
    @Test func withoutTheCAExportWaitsWithAClearErrorAndIngestGoesOn() throws {
        let temp = TempDir()
        let (server, pki) = try Self.tlsServer(temp)
        defer { server.stop() }
        let credentials = try Self.credentialsDirectory(temp.appending("credentials"), pki: pki, withCA: false)
        let harness = try DaemonHarness(name: "export-tls-noca", config: Self.config(urls: [server.url], hostId: "nocahost"))
        try harness.start(extraEnvironment: ["CREDENTIALS_DIRECTORY": credentials])
        try Self.drop(harness, range: 0..<40, tag: "noca")
        try Self.waitIngested(harness, count: 40)
        try waitUntil(timeout: 10, "incoming/ emptied") { harness.files(in: "incoming").isEmpty }
        var lastError = ""
        try waitUntil(timeout: 30, "export status with the TLS error") {
            let (status, out, _) = try harness.ctl(["export", "status", "--json"])
            guard status == 0, let object = try? JSONParser().parse(out.trimmingSpaces).objectValue else { return false }
            lastError = object["lastError"]?.stringValue ?? ""
            return object["lag"]?.intValue == 40 && object["connected"]?.boolValue == false && !lastError.isEmpty
        }
        // libnats 3.4.1 says: SSL handshake error: 20:unable to get local issuer certificate:…
        #expect(lastError.hasPrefix("export: connect to \(server.url): "), "\(lastError)")
        #expect(lastError.contains("SSL handshake error") && lastError.contains("certificate"), "\(lastError)")
        try waitUntil(timeout: 30, "the lag event with the reason") {
            harness.daemonStderr.split(separator: "\n").contains {
                $0.contains("export to NATS JetStream is lagging") && $0.contains("(export: connect to \(server.url)")
            }
        }
        #expect((try? ExportCursor.read(stateDirectory: harness.state)) ?? 0 == 0)
        #expect(harness.stop() == 0)

        try FileManager.default.copyItem(atPath: pki.caCertificate, toPath: credentials + "/nats-ca.pem")
        try harness.start(extraEnvironment: ["CREDENTIALS_DIRECTORY": credentials])
        try Self.waitExported(harness, count: 40)
        #expect(harness.stop() == 0)
        let client = try NatsClient(urls: [server.url], tlsCAFile: pki.caCertificate, tlsCertFile: pki.clientCertificate,
                                    tlsKeyFile: pki.clientKey, name: "it-reader")
        defer { client.close() }
        #expect(Set(try client.readStream("ITEXPORT").map(\.msgId)) == (try Self.expectedIds(harness, hostId: "nocahost")))
    }

    /// NATS decentralized authentication: the server runs in operator mode and takes only
    /// users of its accounts; the daemon's JWT and nkey seed come from
    /// `$CREDENTIALS_DIRECTORY/nats.creds` alone. Without the file the daemon cannot log in
    /// (nothing exported, the reason in `export status`, ingest goes on); with it delivered
    /// and a restart, every record arrives exactly once.
    @Test func credsFileFromTheCredentialsDirectoryLogsInAndExportsExactlyOnce() throws {
        let temp = TempDir()
        let accounts = try NatsOperator(directory: temp.appending("auth"))
        let server = try NatsServer(storeDirectory: temp.appending("nats"), accounts: accounts)
        try server.start()
        defer { server.stop() }
        #expect(throws: ExportError.self) { try NatsClient(urls: [server.url], name: "it-anonymous") }

        let credentials = temp.appending("credentials")
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        let harness = try DaemonHarness(name: "export-creds", config: Self.config(urls: [server.url], hostId: "credshost"))
        try harness.start(extraEnvironment: ["CREDENTIALS_DIRECTORY": credentials])
        try Self.drop(harness, range: 0..<30, tag: "creds")
        try Self.waitIngested(harness, count: 30)
        var lastError = ""
        try waitUntil(timeout: 30, "export status with the refused login") {
            let (status, out, _) = try harness.ctl(["export", "status", "--json"])
            guard status == 0, let object = try? JSONParser().parse(out.trimmingSpaces).objectValue else { return false }
            lastError = object["lastError"]?.stringValue ?? ""
            return object["lag"]?.intValue == 30 && !lastError.isEmpty
        }
        #expect(lastError.hasPrefix("export: connect to \(server.url): "), "\(lastError)")
        // libnats 3.4.1: "Authentication Violation: (conn.c:…): Authorization Violation".
        #expect(lastError.contains("Authorization Violation"), "\(lastError)")
        #expect(harness.stop() == 0)

        try FileManager.default.copyItem(atPath: accounts.credentialsFile, toPath: credentials + "/nats.creds")
        try harness.start(extraEnvironment: ["CREDENTIALS_DIRECTORY": credentials])
        try Self.drop(harness, range: 30..<60, tag: "creds")
        try Self.waitIngested(harness, count: 60)
        try Self.waitExported(harness, count: 60)
        #expect(harness.stop() == 0)
        let client = try NatsClient(urls: [server.url], credentialsFile: accounts.credentialsFile, name: "it-reader")
        defer { client.close() }
        let stored = try client.readStream("ITEXPORT")
        #expect(stored.count == 60)
        #expect(Set(stored.map(\.msgId)) == (try Self.expectedIds(harness, hostId: "credshost")))
    }

    /// Three daemons (three spools and state dirs, as the template unit runs them) export into
    /// a 3-node cluster with an R3 stream; one node is killed during export and export goes on;
    /// a durable pull consumer then reads every id of all three exactly once.
    @Test func threeDaemonsIntoAThreeNodeClusterSurviveANodeKill() throws {
        let temp = TempDir()
        let servers = try NatsServer.cluster(count: 3, in: temp.path)
        for server in servers { try server.start() }
        defer { servers.forEach { $0.stop(signal: SIGKILL) } }
        let urls = servers.map(\.url)
        let hosts = ["host-a", "host-b", "host-c"]
        let harnesses = try hosts.map {
            try DaemonHarness(name: "export-\($0)", config: Self.config(urls: urls, hostId: $0, stream: "CLUSTER", replicas: 3))
        }
        for harness in harnesses { try harness.start() }
        // The same payload ids on every host: the host id keeps their messages apart.
        for harness in harnesses { try Self.drop(harness, range: 0..<100, tag: "cl") }
        for harness in harnesses { try Self.waitIngested(harness, count: 100) }
        try waitUntil(timeout: 90, "export under way on all three") {
            harnesses.allSatisfy { ((try? ExportCursor.read(stateDirectory: $0.state)) ?? 0) > 0 }
        }
        servers[0].stop(signal: SIGKILL)
        for harness in harnesses { try Self.drop(harness, range: 100..<200, tag: "cl") }
        for harness in harnesses { try Self.waitIngested(harness, count: 200) }
        for harness in harnesses { try Self.waitExported(harness, count: 200, timeout: 120) }
        for harness in harnesses { #expect(harness.stop() == 0) }

        var expected = Set<String>()
        for (harness, host) in zip(harnesses, hosts) { expected.formUnion(try Self.expectedIds(harness, hostId: host)) }
        #expect(expected.count == 600)
        let client = try NatsClient(urls: [servers[1].url, servers[2].url], name: "it-consumer")
        defer { client.close() }
        #expect(try client.streamState("CLUSTER").messages == 600)
        // Creating an R3 consumer needs the cluster's meta leader, which may still be moving
        // after the kill: retry like any client would. The durable remembers what was
        // acknowledged, so a retry reads on where the last attempt stopped.
        var consumed: [StreamRecord] = []
        for attempt in 1...10 {
            do {
                let consumer = try NatsPullConsumer(client: client, stream: "CLUSTER", config: PullConsumerConfig(
                    name: .shared("it-reader"), ack: .explicit(wait: .seconds(30), maxDeliver: 1_000, maxPending: 1_000), filterSubject: "pushspool.*.*"))
                func read() throws -> Int {
                    let messages = try consumer.fetch(batch: 256, timeout: .seconds(2))
                    for message in messages { try consumer.acknowledge(message.streamSeq) }
                    consumed += messages
                    return messages.count
                }
                // Fetches come back empty until the consumer has a leader again.
                try waitUntil(timeout: 60, "600 messages through it-reader") {
                    _ = try read()
                    return consumed.count >= 600
                }
                // Then on until a fetch stays empty: a message past the 600 would be read too.
                while try read() > 0 {}
                break
            } catch {
                if attempt == 10 { throw error }
                // why: the retry's backoff: an R3 consumer has no leader for a moment after a
                // node died, and nothing signals when it has one again.
                sleep(2)
            }
        }
        #expect(consumed.count == 600)
        let ids = Set(consumed.map(\.msgId))
        #expect(ids.count == 600, "an id was read twice")
        #expect(expected.subtracting(ids).isEmpty, "not consumed: \(expected.subtracting(ids).sorted().prefix(5))")
    }
}
