@preconcurrency import Glibc
import Foundation
import Testing
import PushExport
import PushSystem
import TestSupport
import TestTraits

/// Issue 26, the export stream, end to end: pushspoold exports alice's and bob's pushes to a
/// real nats-server; `pushspoolctl user erase alice` (daemon stopped, `[Export] Enabled=yes`)
/// first meets NATS down — exit 1, the erasure incomplete — then, run again with NATS up,
/// erases alice's messages, so the server's store directory keeps no byte of them while all
/// of bob's stay; a third run is a no-op.
@Suite(.tags(.nats)) struct UserEraseStreamTests {
    static func config(nats: String) -> String {
        """
        [Spool]
        StableAgeSec=0
        [Metrics]
        IntervalSec=3600
        [Media]
        Enabled=no
        [Journal]
        MaxBatchDelaySec=0
        [Export]
        Enabled=yes
        URL=\(nats)
        HostId=host-a
        Stream=PUSHSPOOL
        AckTimeoutSec=2s

        """
    }

    static func storeHolding(_ needle: String, under root: String) throws -> [String] {
        var out: [String] = []
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let relative = enumerator?.nextObject() as? String {
            let path = root + "/" + relative
            var st = stat()
            guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { continue }
            if Data(try Posix.readFile(path, limit: 1 << 30)).range(of: Data(needle.utf8)) != nil { out.append(path) }
        }
        return out
    }

    @Test func anErasedUsersExportedMessagesLeaveTheStreamsStore() throws {
        let harness = try DaemonHarness(name: "user-erase-stream", config: "")
        let nats = try NatsServer(storeDirectory: harness.state + "-nats")
        try Self.config(nats: nats.url).write(toFile: harness.config, atomically: true, encoding: .utf8)
        try nats.start()
        defer { nats.stop() }
        try harness.start()
        for user in ["alice", "bob"] {
            for index in 0..<3 {
                try harness.drop(UserExportTests.push(user: user, device: "dev-\(user)", tag: "\(user)-exported-\(index)"),
                                 name: "\(user)-\(index).json")
            }
        }
        func streamBodies() throws -> [String] {
            let client = try NatsClient(urls: [nats.url], reconnects: false)
            defer { client.close() }
            return try client.readStream("PUSHSPOOL").map { String(decoding: $0.body, as: UTF8.self) }
        }
        try waitUntil(timeout: 60, "six records in the stream") { (try? streamBodies().count) == 6 }
        #expect(harness.stop() == 0)

        // NATS down: the local stores are erased, the stream is owed, the command says so.
        nats.stop()
        try #require(!(try Self.storeHolding("alice-exported-0", under: nats.storeDirectory)).isEmpty)
        let (failed, _, failedErr) = try harness.ctl(["user", "erase", "alice"])
        #expect(failed == 1, "\(failedErr)")
        #expect(failedErr.contains("export stream") && failedErr.contains("run the command again"), "\(failedErr)")

        try nats.start()
        let (status, out, err) = try harness.ctl(["user", "erase", "alice", "--json"])
        #expect(status == 0, "\(err)")
        let summary = try JSONParser().parse(out)
        #expect(summary["complete"]?.boolValue == true)
        #expect(summary["counts"]?["streamMessages"]?.intValue == 3, "\(out)")
        let left = try streamBodies()
        #expect(left.count == 3 && left.allSatisfy { $0.contains("bob-exported-") }, "\(left)")

        // A rerun finds nothing more.
        let (again, againOut, againErr) = try harness.ctl(["user", "erase", "alice", "--json"])
        #expect(again == 0, "\(againErr)")
        #expect(try JSONParser().parse(againOut)["counts"]?["streamMessages"]?.intValue == 0, "\(againOut)")

        nats.stop()
        for index in 0..<3 {
            let alice = try Self.storeHolding("alice-exported-\(index)", under: nats.storeDirectory)
            #expect(alice.isEmpty, "alice's push \(index) is still in \(alice)")
            #expect(!(try Self.storeHolding("bob-exported-\(index)", under: nats.storeDirectory)).isEmpty, "bob's push \(index) is gone")
        }
        #expect(try Self.storeHolding("u:alice", under: nats.storeDirectory).isEmpty)
        #expect(try Self.storeHolding(":alice:", under: nats.storeDirectory).isEmpty)
    }
}
