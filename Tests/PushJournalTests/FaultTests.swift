@preconcurrency import Glibc
import Dispatch
import Foundation
import Testing
@testable import PushJournal
import PushSystem
import TestSupport

/// Faults go through the process-global `FaultInjector`; the writers here use their own fault
/// scope, and each test disarms only the rules it armed.
@Suite(.serialized) struct FaultTests {
    @Test func enospcOnWritePausesAcksNothingAndResumes() throws {
        let temp = TempDir()
        let events = Locked<[String]>([])
        let options = testOptions {
            $0.noSpaceRetryInterval = .milliseconds(50)
            $0.eventHandler = { event in
                events.withLock {
                    switch event {
                    case .pausedNoSpace: $0.append("paused")
                    case .resumed: $0.append("resumed")
                    default: break
                    }
                }
            }
        }
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: options)
        #expect(seq(append(writer, "before")) == 1)
        let segment = temp.journal + "/" + segmentNames(temp.journal)[0]
        let committedBytes = readBytes(segment)

        let arming = FaultInjector.shared.arm(call: options.faultScope + ".write", errno: ENOSPC, times: 1_000_000)
        defer { FaultInjector.shared.disarm(arming) }
        let acked = Locked<[AppendResult]>([])
        let done = DispatchSemaphore(value: 0)
        for i in 0..<5 {
            writer.submit(key: "during-\(i)", body: Array("x".utf8), ingestMillis: 0) { result in
                acked.withLock { $0.append(result) }
                done.signal()
            }
        }
        // The pause event is the signal that the failed write was seen; all five queued behind it.
        #expect(eventually(within: 10) { events.withLock { $0 } == ["paused"] && writer.stats.queued == 5 }, "the writer never paused")
        #expect(acked.withLock { $0.isEmpty }, "nothing may be acknowledged while the disk is full")
        #expect(writer.stats.paused)
        #expect(writer.stats.queued == 5)
        #expect(readBytes(segment) == committedBytes, "no partial frames left behind")
        #expect(events.withLock { $0 } == ["paused"])

        FaultInjector.shared.disarm(arming)
        for _ in 0..<5 { #expect(done.wait(timeout: .now() + 5) == .success) }
        #expect(acked.withLock { $0.compactMap(seq).sorted() } == [2, 3, 4, 5, 6])
        #expect(!writer.stats.paused)
        #expect(events.withLock { $0 } == ["paused", "resumed"])
        try writer.close()
        let verify = JournalVerifier.verify(directory: temp.journal)
        #expect(verify.exitCode == 0 && verify.records == 6)
    }

    @Test func eioOnFdatasyncIsFailStop() throws {
        let temp = TempDir()
        let options = testOptions()
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: options)
        #expect(seq(append(writer, "ok")) == 1)
        let arming = FaultInjector.shared.arm(call: options.faultScope + ".fdatasync", errno: EIO, times: 1)
        defer { FaultInjector.shared.disarm(arming) }
        guard case .failed(let error) = append(writer, "doomed"), case .syncFailed(let cause) = error.kind else {
            Issue.record("a failed sync must fail the record")
            return
        }
        #expect(cause.errno == EIO)
        #expect(error.description.contains("fsync failed"))
        // The fault fired once, but the writer must not trust the page cache again.
        if case .failed(let later) = append(writer, "after"), case .syncFailed = later.kind {} else {
            Issue.record("every later submit must fail")
        }
        #expect(writer.stats.failed)
        #expect(throws: JournalError.self) { try writer.close() }

        // Restart recovers from what is on disk; the unacknowledged record may or may not be there.
        let (reopened, report) = try JournalWriter.open(directory: temp.journal, options: testOptions())
        #expect(report.lastSeq >= 1)
        #expect(reopened.contains(key: "ok"))
        #expect(!reopened.contains(key: "after"))
        try reopened.close()
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 0)
    }

    @Test func eioOnWriteIsFailStopWithoutGarbage() throws {
        let temp = TempDir()
        let options = testOptions()
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: options)
        #expect(seq(append(writer, "ok")) == 1)
        let arming = FaultInjector.shared.arm(call: options.faultScope + ".write", errno: EIO, times: 1)
        defer { FaultInjector.shared.disarm(arming) }
        guard case .failed(let error) = append(writer, "doomed"), case .io = error.kind else {
            Issue.record("a failed write must fail the record")
            return
        }
        #expect(throws: JournalError.self) { try writer.close() }
        let verify = JournalVerifier.verify(directory: temp.journal)
        #expect(verify.exitCode == 0 && verify.records == 1)
    }

    /// SQLite's ioerr loop: fail the n-th call of each kind, n = 0, 1, 2, ... until the workload
    /// no longer reaches it. Every time: nothing unacknowledged is claimed, every acknowledged
    /// record survives recovery, and the recovered journal verifies clean.
    @Test(arguments: [("write", EIO), ("write", ENOSPC), ("fdatasync", EIO), ("fsync", EIO), ("openat", EIO),
                      ("renameat", EIO)])
    func ioErrorLoop(call: String, code: Int32) throws {
        var faultsSeen = 0
        for n in 0..<40 {
            let temp = TempDir("ioerr")
            let options = testOptions {
                $0.segmentBytes = 700
                $0.checkpointEvery = 3
                $0.noSpaceRetryInterval = .milliseconds(1)
                $0.lockWait = .zero
            }
            let arming = FaultInjector.shared.arm(call: options.faultScope + "." + call, errno: code, skip: n, times: 1)
            var acked: [String] = []
            var clean = false
            if let (writer, _) = try? JournalWriter.open(directory: temp.journal, options: options) {
                var failed = false
                for i in 1...8 where !failed {
                    switch append(writer, "k\(i)", body(for: i, size: 100)) {
                    case .committed: acked.append("k\(i)")
                    case .duplicate: Issue.record("no duplicates were submitted")
                    case .failed: failed = true
                    }
                }
                clean = (try? writer.close()) != nil && !failed
            }
            FaultInjector.shared.disarm(arming)
            if !clean { faultsSeen += 1 }

            let (reopened, _) = try JournalWriter.open(directory: temp.journal, options: testOptions())
            for key in acked { #expect(reopened.contains(key: key), "\(call) \(code) n=\(n): lost acknowledged \(key)") }
            try reopened.close()
            let records = try readAll(temp.journal)
            #expect(records.map(\.seq) == (0..<records.count).map { UInt64($0) + 1 }, "\(call) n=\(n)")
            #expect(Set(records.map(\.key)).count == records.count)
            #expect(records.count <= 8)
            let verify = JournalVerifier.verify(directory: temp.journal)
            #expect(verify.exitCode == 0, "\(call) \(code) n=\(n): \(verify.lines)")
        }
        if code != ENOSPC || call != "write" {
            #expect(faultsSeen > 0, "the injected \(call) fault never surfaced")
        }
    }

    @Test func enospcWhileCuttingASegmentPausesToo() throws {
        let temp = TempDir()
        let options = testOptions {
            $0.segmentBytes = 256
            $0.noSpaceRetryInterval = .milliseconds(20)
        }
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: options)
        for i in 1...3 { append(writer, "k\(i)", body(for: i, size: 100)) }
        // The next batch must cut a new segment; its header write fails first.
        let arming = FaultInjector.shared.arm(call: options.faultScope + ".write", errno: ENOSPC, times: 3)
        defer { FaultInjector.shared.disarm(arming) }
        #expect(seq(append(writer, "k4", body(for: 4, size: 100))) == 4)
        try writer.close()
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 0)
        #expect(!((try? FileManager.default.contentsOfDirectory(atPath: temp.journal)) ?? []).contains { $0.hasSuffix(".tmp") })
    }
}
