@preconcurrency import Glibc
import Foundation
import Testing
import PushExport
import PushFollow
import PushJournal
import PushSystem
import TestSupport
import TestTraits

/// What a record's way from commit to PubAck may not wait for: libnats' flusher, a niced
/// thread while ingest is steady, a cursor write. Serialized like ``ExporterLiveTests``: each
/// test runs its own nats-server.
@Suite(.serialized, .tags(.nats)) struct ExportLatencyLiveTests {
    @Test func aPublishIsOnTheWireWhenTheCallReturns() throws {
        // libnats' flusher thread would write it up to a millisecond later (it waits for
        // company), and every record's PubAck with it.
        let f = try ExportFixture()
        try f.server.start()
        let sink = AckSink(acknowledged: 0)
        let client = try NatsClient(urls: [f.server.url], sink: sink)
        defer { client.close() }
        try client.ensureStream(name: "PUSHTEST", subjects: ["pushspool.*.*"], replicas: 1, duplicateWindow: .seconds(60))
        for n in 1...5 {
            let record = JournalRecord(seq: UInt64(n), ingestMillis: 1, key: "mindbox:wire-\(n)", body: Array(#"{"platform":"ios"}"#.utf8), segment: "", offset: 0)
            sink.window.withLock { $0.published(UInt64(n)) }
            try client.publishAsync(ExportMessage(record: record, hostId: "testhost", template: #require(SubjectTemplate("pushspool.{vendor}.{platform}"))))
            #expect(client.bufferedBytes == 0)
        }
        try waitFor("five PubAcks") { sink.window.withLock { $0.acknowledged } == 5 }
    }

    @Test func theExporterRunsAtNiceZeroWhileIngestIsSteadyAndYieldsInABurst() async throws {
        let f = try ExportFixture()
        try f.server.start()
        var options = f.options()
        // 32 records in 100 ms: a burst this machine's disk makes whatever its load; the
        // steady records below come 20 ms apart or more.
        options.burstRecords = 32
        let exporter = try Exporter(options: options)
        // As in pushspoold: a group whose followers run at nice 10.
        let group = FollowerGroup([exporter], commits: f.writer.commits, niceness: 10)
        try group.start()
        defer { group.stop() }
        for n in 1...5 {
            try await f.append(1)
            try waitFor("record \(n) acknowledged") { exporter.acknowledgedInMemory == UInt64(n) }
            usleep(20_000)  // why: the scenario: steady ingest, records well apart (not a burst)
        }
        #expect(exporter.currentNiceness == 0)

        guard PosixThread.mayLowerNiceness(to: 0) else {
            // Without LimitNICE=+0 or CAP_SYS_NICE the thread could not come back down after
            // a burst: it stays at the burst niceness from the start.
            Issue.record("this test needs RLIMIT_NICE >= 20 or CAP_SYS_NICE to check a burst")
            return
        }
        // A burst: 3,000 records appended by 300 tasks at once (the writer groups them, so
        // even a slow fdatasync commits hundreds at a time).
        let writer = f.writer
        let burst = Task {
            await withTaskGroup(of: Void.self) { tasks in
                for task in 0..<300 {
                    tasks.addTask {
                        for n in 0..<10 {
                            _ = await writer.append(key: "mindbox:burst-\(task)-\(n)", body: Array(#"{"platform":"ios"}"#.utf8), ingestMillis: 1)
                        }
                    }
                }
            }
        }
        var sawNiced = false
        let deadline = Posix.monotonicNanos() + 30_000_000_000
        while exporter.acknowledgedInMemory < 3_005, Posix.monotonicNanos() < deadline {
            if exporter.currentNiceness == 10 { sawNiced = true }
            usleep(1_000)  // why: the sampling of the niceness during the burst: no event says when it changes
        }
        await burst.value
        #expect(sawNiced)
        try waitFor("burst exported") { exporter.acknowledgedInMemory == 3_005 }
        // Steady again: back at 0 within a few commits.
        for n in 1...10 {
            try await f.append(1)
            try waitFor("record \(n) after the burst") { exporter.acknowledgedInMemory == 3_005 + UInt64(n) }
            usleep(30_000)  // why: the scenario: steady ingest again, records well apart
        }
        #expect(exporter.currentNiceness == 0)
    }

    /// Whether a thread of this process named `name` is blocked opening a FIFO that has no
    /// reader yet: the kernel names that wait `wait_for_partner` (fs/pipe.c) in its `wchan`.
    static func threadWaitsForAFIFOPartner(named name: String) -> Bool {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.contains { task in
            let directory = "/proc/self/task/" + task
            let comm = (try? String(contentsOfFile: directory + "/comm", encoding: .utf8)) ?? ""
            guard comm.trimmingCharacters(in: .whitespacesAndNewlines) == name else { return false }
            return ((try? String(contentsOfFile: directory + "/wchan", encoding: .utf8)) ?? "") == "wait_for_partner"
        }
    }

    @Test func aSlowCursorWriteDoesNotHoldUpPublishing() async throws {
        let f = try ExportFixture()
        try f.server.start()
        // The cursor's temp file as a FIFO: opening it for writing blocks until someone reads,
        // like an fsync that does not return. Publishing must go on meanwhile.
        let exportDirectory = f.stateDirectory + "/export"
        try Posix.mkdirs(exportDirectory)
        let fifo = exportDirectory + "/.cursor.\(getpid()).tmp"
        #expect(mkfifo(fifo, 0o600) == 0)
        var options = f.options()
        options.checkpointInterval = .milliseconds(50)
        let exporter = try Exporter(options: options)
        let exporterRunner = FollowerRunner(exporter, commits: f.writer.commits)
        try exporterRunner.start()
        try await f.append(1)
        try waitFor("first record acknowledged") { exporter.acknowledgedInMemory == 1 }
        // A checkpoint of seq 1 is due and under way: the exporter's writes thread blocked in
        // open(2) of the FIFO.
        try waitFor("the cursor write blocked in open(2)", timeout: 10) { Self.threadWaitsForAFIFOPartner(named: "export-writes") }
        for n in 2...6 {
            try await f.append(1)
            try waitFor("record \(n) acknowledged while the cursor write hangs", timeout: 5) { exporter.acknowledgedInMemory == UInt64(n) }
        }
        #expect(exporter.acknowledgedSeq() == 0)
        // Let the write through (it then fails on the FIFO and removes it); the stop writes the cursor.
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        #expect(reader >= 0)
        try waitFor("the blocked write gave up") { access(fifo, F_OK) != 0 }
        close(reader)
        exporterRunner.stop()
        #expect(try ExportCursor.read(stateDirectory: f.stateDirectory) == 6)
    }
}
