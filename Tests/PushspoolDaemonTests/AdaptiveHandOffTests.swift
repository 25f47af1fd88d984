@preconcurrency import Glibc
import Foundation
import Testing
import PushConfig
import PushSystem
import PushSystemd
import PushJournal
import TestSupport
@testable import PushspoolDaemon

/// The hand-off to the processing queue pays only under a burst: files arriving one by one
/// are processed on the ingest thread itself, a burst goes to the processing queue in chunks;
/// either way every file ends durable and its spool file removed.
@Suite(.serialized) struct AdaptiveHandOffTests {
    @Test func slowArrivalIsProcessedInlineAndABurstIsHandedOver() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("pushspool-adaptive-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let config = root + "/pushspool.conf"
        try "[Spool]\nStableAgeSec=0\n[Media]\nEnabled=no\n[Inbox]\nEnabled=no\n".write(toFile: config, atomically: true, encoding: .utf8)
        let store = try ConfigurationStore(mainFile: config, overrides: ConfigOverride.paths(spool: root + "/spool", stateDirectory: root + "/state"))
        let devNull = open("/dev/null", O_WRONLY | O_CLOEXEC)
        defer { close(devNull) }
        let committed = Locked<Set<String>>([])
        let seqs = Locked<[String: UInt64]>([:])
        let daemon = try Daemon(arguments: DaemonArguments(), store: store,
                                events: EventLog(identifier: "adaptive-test", destination: .lines(fd: devNull)),
                                notifier: SystemdNotifier(), metrics: Metrics(),
                                onCommitted: { name, seq in
                                    _ = committed.withLock { $0.insert(name) }
                                    seqs.withLock { $0[name] = seq }
                                })
        let returned = DispatchSemaphore(value: 0)
        Thread {
            _ = daemon.run()
            returned.signal()
        }.start()
        defer {
            daemon.requestStop()
            #expect(returned.wait(timeout: .now() + 30) == .success, "the daemon did not return within 30 s of the stop")
        }
        try waitFor("READY") { daemon.isReady }

        func drop(_ name: String, _ index: Int) throws {
            let json = "{\"pushspool\":1,\"user\":\"u\",\"platform\":\"ios\",\"payload\":{\"aps\":{\"alert\":{\"title\":\"t\",\"body\":\"b \(index)\"}},\"uniqueKey\":\"\(name)\"}}"
            try json.write(toFile: root + "/spool/tmp/" + name, atomically: false, encoding: .utf8)
            guard rename(root + "/spool/tmp/" + name, root + "/spool/incoming/" + name) == 0 else {
                throw SystemError(call: "rename", errno: errno, subject: name)
            }
        }

        // One file every 20 ms: each is alone, the processing queue idle.
        let slow = 30
        for i in 0..<slow {
            try drop("slow-\(i).json", i)
            usleep(20_000)  // why: the scenario: files arriving slowly, one at a time
        }
        try waitFor("the slow files to be durable") { committed.withLock { $0.count } == slow }
        let inlineAfterSlow = daemon.inlineProcessed.load(ordering: .relaxed)
        #expect(inlineAfterSlow >= slow * 2 / 3, "only \(inlineAfterSlow) of \(slow) slow files processed inline")

        // A burst: staged first, then renamed in as fast as possible.
        let burst = 3_000
        for i in 0..<burst {
            let name = "burst-\(i).json"
            let json = "{\"pushspool\":1,\"user\":\"u\",\"platform\":\"ios\",\"payload\":{\"aps\":{\"alert\":{\"title\":\"t\",\"body\":\"b \(i)\"}},\"uniqueKey\":\"\(name)\"}}"
            try json.write(toFile: root + "/spool/tmp/" + name, atomically: false, encoding: .utf8)
        }
        for i in 0..<burst {
            let name = "burst-\(i).json"
            #expect(rename(root + "/spool/tmp/" + name, root + "/spool/incoming/" + name) == 0)
        }
        try waitFor("the burst to be durable") { committed.withLock { $0.count } == slow + burst }
        let inlineInBurst = daemon.inlineProcessed.load(ordering: .relaxed) - inlineAfterSlow
        #expect(inlineInBurst < burst / 4, "\(inlineInBurst) of \(burst) burst files processed inline: the burst was not handed over")
        // Prepared on several lanes, journaled in claim order: inotify reports the renames in
        // the order made, so sequence numbers follow the files' indices.
        let burstSeqs = seqs.withLock { seqs in (0..<burst).map { seqs["burst-\($0).json"] ?? 0 } }
        let outOfOrder = zip(burstSeqs, burstSeqs.dropFirst()).filter { $0 >= $1 }.count
        #expect(outOfOrder == 0, "\(outOfOrder) burst files journaled before one claimed ahead of them")
        // Acknowledged means removed: nothing is left in the spool once every record is durable.
        try waitFor("the spool to empty") {
            let incoming = try FileManager.default.contentsOfDirectory(atPath: root + "/spool/incoming")
            let processing = try FileManager.default.contentsOfDirectory(atPath: root + "/spool/processing")
            return incoming.isEmpty && processing.isEmpty
        }
    }

    private func waitFor(_ what: String, timeout: Double = 60, _ condition: () throws -> Bool) throws {
        if try eventually(within: timeout, condition) { return }
        Issue.record("timed out waiting for \(what)")
        throw CancellationError()
    }
}
