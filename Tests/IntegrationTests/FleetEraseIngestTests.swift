@preconcurrency import Glibc
import Foundation
import Testing
import PushJournal
import PushSystem
import TestSupport
import TestTraits

/// Issue 26 across a fleet of ingest hosts: two pushspoold (hosts a and b, one stream, one
/// `erase.key` copied into both state directories) hold pushes of ulla and vera; ulla is
/// erased on host a, and host b's fleet erasure listener, which takes a's `erasure` record
/// from the stream, resolves its hash to ulla and performs the erasure there as well. Then b's
/// journal holds only tombstones of ulla and no byte of her anywhere in its state directory or
/// spool, while vera's records stay on both; a kill -9 of b between its drop of the request and
/// its acknowledgement ends with the erasure done once after the restart; and an erasure whose
/// hash names nobody on b leaves b's journal byte for byte as it was.
@Suite(.tags(.nats)) struct FleetEraseIngestTests {
    static func config(nats: String, host: String, metrics: String, subject: String) -> String {
        """
        [Spool]
        StableAgeSec=0
        [Metrics]
        IntervalSec=1
        TextfilePath=\(metrics)
        [Media]
        Enabled=no
        [Journal]
        MaxBatchDelaySec=0
        [Export]
        Enabled=yes
        URL=\(nats)
        HostId=\(host)
        Stream=PUSHSPOOL
        Subject=\(subject)
        AckTimeoutSec=2s

        """
    }

    /// Two hosts on one nats-server, the same erasure key in both state directories (what
    /// the fleet's key provisioning does), each with pushes of ulla and vera.
    struct Fleet {
        let nats: NatsServer
        let a: DaemonHarness
        let b: DaemonHarness

        init(_ name: String, subject: String = "pushspool.{vendor}.{platform}", environmentOfB: [String: String] = [:]) throws {
            a = try DaemonHarness(name: name + "-a", config: "")
            b = try DaemonHarness(name: name + "-b", config: "")
            nats = try NatsServer(storeDirectory: a.root + "-nats")
            try nats.start()
            var generator = SystemRandomNumberGenerator()
            let key = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
            for (harness, host) in [(a, "host-a"), (b, "host-b")] {
                try Self.config(nats: nats.url, host: host, metrics: harness.root + "/metrics.prom", subject: subject)
                    .write(toFile: harness.config, atomically: true, encoding: .utf8)
                try FileManager.default.createDirectory(atPath: harness.state, withIntermediateDirectories: true)
                let path = harness.state + "/erase.key"
                #expect(FileManager.default.createFile(atPath: path, contents: Data(key), attributes: [.posixPermissions: 0o600]))
            }
            try a.start()
            try b.start(extraEnvironment: environmentOfB)
            for (harness, host) in [(a, "a"), (b, "b")] {
                for user in ["ulla", "vera"] {
                    for index in 0..<3 {
                        try harness.drop(UserExportTests.push(user: user, device: "dev-\(user)", tag: "\(user)-on-\(host)-\(index)"),
                                         name: "\(user)-\(index).json")
                    }
                }
                try waitUntil(timeout: 60, "six records on host \(host)") { (try? harness.records().count) == 6 }
            }
        }

        static func config(nats: String, host: String, metrics: String, subject: String) -> String {
            FleetEraseIngestTests.config(nats: nats, host: host, metrics: metrics, subject: subject)
        }

        /// Erases `user` on host a, without waiting; returns the erasure id.
        func erase(_ user: String) throws -> String {
            let (status, out, err) = try a.ctl(["user", "erase", user, "--no-wait"])
            #expect(status == 0, "\(err)")
            return try #require(out.split(separator: " ").dropFirst().first.map { String($0).trimmingCharacters(in: .whitespacesAndNewlines) })
        }

        func stop() {
            _ = a.stop()
            _ = b.stop()
            nats.stop()
        }
    }

    /// The `fleetErasure` member of a host's status.json.
    static func fleetStatus(_ harness: DaemonHarness) -> JSONValue? {
        guard let bytes = try? Posix.readFile(harness.state + "/status.json", limit: 1 << 20),
              let status = try? JSONParser().parse(bytes) else { return nil }
        return status["fleetErasure"]
    }

    static func count(_ harness: DaemonHarness, _ member: String) -> Int {
        fleetStatus(harness)?[member]?.intValue ?? 0
    }

    static func waitComplete(_ harness: DaemonHarness, _ id: String, _ host: String) throws {
        try waitUntil(timeout: 90, "erasure \(id) complete on host \(host)") {
            let (_, list, _) = try harness.ctl(["user", "erase", "--status", "--json"])
            return list.split(separator: "\n").contains { $0.contains(id) && $0.contains(#""complete":true"#) }
        }
    }

    /// ulla's three records on `harness` are tombstones, vera's are there; no byte of ulla in
    /// the state directory or the spool; `journal cat` says erased; verify is clean.
    static func expectUllaErased(_ harness: DaemonHarness, host: String, id: String) throws {
        let records = try harness.records()
        #expect(records.filter { $0.key.hasPrefix(ErasureSecret.tombstoneKeyPrefix) }.count == 3, "\(records.map(\.key))")
        #expect(records.filter { $0.key == "erasure:" + id }.count == 1, "\(records.map(\.key))")
        let (catStatus, cat, _) = try harness.ctl(["journal", "cat"])
        #expect(catStatus == 0)
        #expect(cat.split(separator: "\n").filter { $0.contains("erased (\(id))") }.count == 3, "\(cat)")
        let files = try RawFiles.everyRegularFile(under: harness.state) + RawFiles.everyRegularFile(under: harness.spool)
        #expect(UserEraseTests.holding(Array("ulla".utf8), files).isEmpty, "ulla in \(UserEraseTests.holding(Array("ulla".utf8), files))")
        for index in 0..<3 {
            #expect(!UserEraseTests.holding(Array("vera-on-\(host)-\(index)".utf8), files).isEmpty, "vera's push \(index) is gone on \(host)")
        }
        let (verify, verifyOut, verifyErr) = try harness.ctl(["journal", "verify"])
        #expect(verify == 0, "\(verifyOut) \(verifyErr)")
    }

    /// With `{vendor}` in the template the consumer takes the erasure subject only; without,
    /// the whole stream, and skips the pushes.
    @Test(arguments: ["pushspool.{vendor}.{platform}", "fleet.all.{platform}"])
    func anErasureOnOneHostErasesTheUserOnAnother(_ subject: String) throws {
        let fleet = try Fleet("fleet-erase", subject: subject)
        defer { fleet.stop() }
        let id = try fleet.erase("ulla")
        try Self.waitComplete(fleet.a, id, "a")
        try Self.waitComplete(fleet.b, id, "b")
        try waitUntil(timeout: 30, "b's status counts the resolved erasure") { Self.count(fleet.b, "resolved") == 1 }
        // a sees its own record (and b's, with the same id) as done here.
        try waitUntil(timeout: 30, "a's status counts its own erasure") { Self.count(fleet.a, "alreadyHere") >= 1 }
        #expect(Self.count(fleet.a, "resolved") == 0)
        #expect(Self.fleetStatus(fleet.b)?["connected"]?.boolValue == true)
        try waitUntil(timeout: 30, "b's metrics count the resolved erasure") {
            let text = (try? String(contentsOfFile: fleet.b.root + "/metrics.prom", encoding: .utf8)) ?? ""
            return text.contains(#"pushspool_fleet_erasures_total{result="dropped"} 1"#) && text.contains("pushspool_fleet_erasure_connected 1")
        }
        #expect(fleet.a.stop() == 0)
        #expect(fleet.b.stop() == 0)
        try Self.expectUllaErased(fleet.a, host: "a", id: id)
        try Self.expectUllaErased(fleet.b, host: "b", id: id)
    }

    @Test func aKillBetweenTheDropAndTheAckEndsErasedOnce() throws {
        let fleet = try Fleet("fleet-erase-kill",
                              environmentOfB: ["PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_TEST_ERASE_KILL_AT": "fleet-dropped"])
        defer { fleet.stop() }
        let daemon = try #require(fleet.b.process)
        let id = try fleet.erase("ulla")
        try waitUntil(timeout: 60, "host b killed after its drop") { !daemon.isRunning }
        #expect(daemon.terminationReason == .uncaughtSignal && daemon.terminationStatus == SIGKILL, "\(fleet.b.daemonStderr.suffix(2000))")
        // The request is durable on b: the drop was synced before the ack that never came. b's
        // intake may have taken it in the moment before the kill landed (its subject file, or
        // its status once done, is then there instead of the spool file).
        let name = "fleet-erase-\(id).json"
        let taken = ["subject", "status"].contains { FileManager.default.fileExists(atPath: fleet.b.state + "/erase/\(id).\($0)") }
        #expect(fleet.b.files(in: "incoming").contains(name) || fleet.b.files(in: "processing").contains(name) || taken)

        try fleet.b.start()
        try Self.waitComplete(fleet.b, id, "b")
        // b's own record of the erasure, and a's, unacknowledged before the kill and handed out
        // again after the ack wait: both found done here.
        try waitUntil(timeout: 90, "the redelivered notice seen as done") { Self.count(fleet.b, "alreadyHere") >= 2 }
        #expect(Self.count(fleet.b, "resolved") == 0)
        #expect(fleet.b.stop() == 0)
        try Self.expectUllaErased(fleet.b, host: "b", id: id)
    }

    @Test func anErasureNamingNobodyOnAHostLeavesItsJournalAsItWas() throws {
        let fleet = try Fleet("fleet-erase-none")
        defer { fleet.stop() }
        func journalBytes() throws -> [String: [UInt8]] {
            var out: [String: [UInt8]] = [:]
            for (path, bytes) in try RawFiles.everyRegularFile(under: fleet.b.state + "/journal") where !path.hasSuffix("/LOCK") {
                out[path] = bytes
            }
            return out
        }
        // Exported and quiet: nothing more will be written to b's journal on its own.
        try waitUntil(timeout: 30, "b's listener connected") { Self.fleetStatus(fleet.b)?["connected"]?.boolValue == true }
        let before = try journalBytes()
        let id = try fleet.erase("nobody-here")
        try Self.waitComplete(fleet.a, id, "a")
        try waitUntil(timeout: 60, "b found nothing for it") { Self.count(fleet.b, "nothingHere") == 1 }
        #expect(Self.count(fleet.b, "resolved") == 0)
        #expect(try journalBytes() == before)
        #expect(!FileManager.default.fileExists(atPath: fleet.b.state + "/erase/\(id).status"))
        // The event names the erasure and the hash's prefix, never the plain id.
        let events = fleet.b.daemonStderr.split(separator: "\n").filter { $0.contains("FLEET_ERASURE_RESULT=nothing_here") }
        #expect(events.count == 1 && events[0].contains(id) && !events[0].contains("nobody-here"), "\(fleet.b.daemonStderr.suffix(3000))")
        // A stop interrupts the listener's fetch (which waits up to a minute on the server):
        // the daemon does not reach the followers' stop deadline.
        #expect(fleet.b.stop() == 0)
        #expect(!fleet.b.daemonStderr.contains("still busy at the stop deadline"), "\(fleet.b.daemonStderr.suffix(3000))")
    }
}
