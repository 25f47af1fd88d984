@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem
import PushJournal
import TestSupport
import Synchronization
import Dispatch

/// The daemon binary under the failures the journal design plans for (docs/design/journal.md:
/// "fsync failures", "Disk full", "Recovery"): a really full file system, an `fdatasync` that
/// fails, a journal damaged in the middle.
@Suite struct FailureTests {
    /// Whether this process may mount a tmpfs (root with CAP_SYS_ADMIN), tried for real.
    static let mountAllowed: Bool = {
        let probe = "/tmp/pushspool-mount-probe-\(getpid())"
        mkdir(probe, 0o700)
        defer { rmdir(probe) }
        guard mount("tmpfs", probe, "tmpfs", 0, "size=64k") == 0 else { return false }
        umount2(probe, Int32(MNT_DETACH))
        return true
    }()

    // MARK: - ENOSPC

    /// The state directory on a 2 MiB tmpfs, the spool on the normal disk: the journal fills
    /// up, intake pauses and says so, nothing is lost or quarantined, the daemon stays up; once
    /// the tmpfs grows every payload is journaled exactly once and the spool drains.
    @Test(.enabled(if: FailureTests.mountAllowed,
                   "mount(2) of a tmpfs is not permitted here (needs root with CAP_SYS_ADMIN): real ENOSPC cannot be produced"))
    func fullStateDirectoryPausesIntakeLosesNothingAndResumes() throws {
        // Small segments, so segment cuts (temp file, rename, directory fsync) also meet the full disk.
        let harness = try DaemonHarness(name: "enospc",
                                        config: "[Media]\nEnabled=no\n[Limits]\nMaxPayloadSize=64K\n[Journal]\nSegmentSize=128K\n")
        try FileManager.default.createDirectory(atPath: harness.state, withIntermediateDirectories: true)
        try #require(mount("tmpfs", harness.state, "tmpfs", 0, "size=2m") == 0, "mount tmpfs: errno \(errno)")
        defer {
            harness.stop(signal: SIGKILL)
            umount2(harness.state, Int32(MNT_DETACH))
        }
        let notify = try NotifySocket()
        try harness.start(extraEnvironment: ["NOTIFY_SOCKET": notify.path])

        // ~4 KB payloads; 700 of them need far more than 2 MiB of journal.
        let total = 700
        let names = (0..<total).map { "full-\($0).json" }
        for (index, name) in names.enumerated() {
            try harness.drop(bigPayload(index: index, tag: "full"), name: name)
        }
        try waitUntil(timeout: 60, "the daemon to report the journal full") { harness.daemonStderr.contains("EVENT=noSpace") }
        #expect(harness.process?.isRunning == true, "a full disk must not stop the daemon")

        // Paused means paused: nothing more becomes durable, nothing new is claimed. The daemon
        // says PAUSED in STATUS= once the intake has stopped (the signal that replaces a settle).
        try waitUntil(timeout: 30, "STATUS= saying the intake is paused") {
            notify.messages.contains { $0.contains("PAUSED: journal disk full") }
        }
        let durableA = try committedKeys(harness)
        let processingA = harness.files(in: "processing")
        // why: the window under test: a paused intake takes nothing in and a paused writer
        // reports no retry, so no later event can prove the absence; 2.5 s spans two retries.
        usleep(2_500_000)
        let durableB = try committedKeys(harness)
        #expect(durableA == durableB, "records were still being committed while paused")
        #expect(Set(harness.files(in: "processing")).isSubset(of: Set(processingA)), "files were claimed while paused")
        #expect(durableA.count < total)
        #expect(!durableA.isEmpty, "some payloads fit before the disk filled")

        // Nothing lost: every payload is durable or still in the spool; none quarantined.
        let waiting = Set(harness.files(in: "incoming") + harness.files(in: "processing"))
        for (index, name) in names.enumerated() where !waiting.contains(name) {
            #expect(durableA.contains(generatedKey(index: index, tag: "full")), "\(name) left the spool without a durable record")
        }
        #expect(waiting.count + durableA.count == total)
        #expect(harness.files(in: "failed").isEmpty)
        // The writer retries every second, and a retry briefly holds a partial write (possibly in
        // a segment it has just cut) until it is cut back. verify knows the live writer's synced
        // end from COMMITTED and reports such bytes as in flight, so one run must be clean.
        let (verifyStatus, verifyOutput, _) = try harness.ctl(["journal", "verify"])
        #expect(verifyStatus == 0, "no partial frame may stay behind while full: \(verifyOutput)")

        let stderrWhileFull = harness.daemonStderr
        #expect(stderrWhileFull.contains("journal disk full: intake paused"))
        #expect(stderrWhileFull.components(separatedBy: "EVENT=noSpace").count - 1 == 1, "one pause event, not one per retry")
        let statuses = notify.messages.filter { $0.contains("STATUS=") }
        #expect(statuses.contains { $0.contains("PAUSED: journal disk full") }, "status line while full: \(statuses.suffix(2))")

        // Space comes back: everything drains, each payload exactly once.
        #expect(mount("tmpfs", harness.state, "tmpfs", UInt(MS_REMOUNT), "size=64m") == 0, "remount: errno \(errno)")
        try waitUntil(timeout: 120, "the spool to drain after space returned") {
            harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty
        }
        try waitUntil(timeout: 10, "the resume event") { harness.daemonStderr.contains("intake resumed") }
        #expect(harness.stop() == 0)
        let keys = try harness.records().map(\.key)
        #expect(keys.count == total)
        #expect(Set(keys) == Set((0..<total).map { generatedKey(index: $0, tag: "full") }))
        #expect(harness.files(in: "failed").isEmpty)
        let stderr = harness.daemonStderr
        #expect(stderr.components(separatedBy: "EVENT=noSpace").count - 1 == 2, "one pause and one resume event")
        #expect(!stderr.contains("EVENT=fatal"))
        let (status, output, _) = try harness.ctl(["journal", "verify"])
        #expect(status == 0, "journal verify after resume: \(output)")
    }

    /// SIGTERM while the journal is full: a clean, prompt exit (not the 30 s drain timeout),
    /// the unwritten files stay in the spool. A restart on the still-full disk (what systemd
    /// does) recovers read-only, starts and pauses again; when space returns it drains.
    @Test(.enabled(if: FailureTests.mountAllowed,
                   "mount(2) of a tmpfs is not permitted here (needs root with CAP_SYS_ADMIN): real ENOSPC cannot be produced"))
    func stopWhileFullKeepsFilesAndExitsPromptly() throws {
        let harness = try DaemonHarness(name: "enospc-stop",
                                        config: "[Media]\nEnabled=no\n[Limits]\nMaxPayloadSize=64K\n[Journal]\nSegmentSize=128K\n")
        try FileManager.default.createDirectory(atPath: harness.state, withIntermediateDirectories: true)
        try #require(mount("tmpfs", harness.state, "tmpfs", 0, "size=1m") == 0, "mount tmpfs: errno \(errno)")
        defer {
            harness.stop(signal: SIGKILL)
            umount2(harness.state, Int32(MNT_DETACH))
        }
        try harness.start()
        let total = 400
        for index in 0..<total { try harness.drop(bigPayload(index: index, tag: "stop"), name: "stop-\(index).json") }
        try waitUntil(timeout: 60, "the daemon to report the journal full") { harness.daemonStderr.contains("EVENT=noSpace") }

        let started = Date()
        #expect(harness.stop() == 0)
        #expect(Date().timeIntervalSince(started) < 10, "stopping while full took \(Date().timeIntervalSince(started)) s")
        let left = harness.files(in: "incoming").count + harness.files(in: "processing").count
        let durable = try harness.records().count
        #expect(left > 0)
        #expect(left + durable == total, "every payload is durable or still in the spool")
        // The last failed write was cut back: nothing but acknowledged records on disk.
        let onDisk = Array(try JournalReader(directory: harness.state + "/journal", committedOnly: false).records(fromSeq: 1))
        #expect(onDisk.count == durable)
        let (verifyStatus, verifyOutput, _) = try harness.ctl(["journal", "verify"])
        #expect(verifyStatus == 0, "journal after stopping while full: \(verifyOutput)")

        try harness.start()
        try waitUntil(timeout: 60, "the restarted daemon to pause on the full disk") { harness.daemonStderr.contains("EVENT=noSpace") }
        #expect(harness.process?.isRunning == true)
        #expect(!harness.daemonStderr.contains("EVENT=fatal"))

        #expect(mount("tmpfs", harness.state, "tmpfs", UInt(MS_REMOUNT), "size=64m") == 0)
        try waitUntil(timeout: 120, "the spool to drain after space returned") {
            harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty
        }
        #expect(harness.stop() == 0)
        let keys = try harness.records().map(\.key)
        #expect(keys.count == total && Set(keys).count == total)
        #expect(harness.files(in: "failed").isEmpty)
    }

    // MARK: - fsync failure

    /// A sync fails in the real daemon (`fdatasync` of a batch with EIO or ENOSPC — ENOSPC from
    /// a sync is as fatal as EIO, not a pause — or the directory `fsync` of a segment cut): it
    /// exits with status 1 at once, acknowledges (unlinks) nothing that was not synced, appends
    /// nothing after the failure; restarted without the fault it journals every payload
    /// exactly once.
    @Test(arguments: SyncFault.allCases)
    func syncFailureStopsTheDaemonAndLosesNothing(_ fault: SyncFault) throws {
        // One record per batch, so "nothing written after the failure" is exactly countable;
        // 64 KiB segments, so the directory-fsync case reaches a segment cut.
        // StableAgeSec=0: the backlog was dropped a moment before the start; with the default
        // 1 s stable age the start-up scan would defer those fresh files and READY would come
        // before they are processed, so the fault would not hit the start-up scan at all.
        let harness = try DaemonHarness(name: "fsync",
                                        config: "[Media]\nEnabled=no\n[Spool]\nStableAgeSec=0\n[Journal]\nMaxBatchRecords=1\nSegmentSize=64K\n")
        let environment = ["PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_FAULT_INJECT": fault.rule]
        let total = fault.dropBeforeStart ? 2000 : 200
        let names = (0..<total).map { "fs-\($0).json" }
        if fault.dropBeforeStart {
            // The backlog is found by the start-up scan: the failure hits before READY.
            for directory in ["tmp", "incoming"] {
                try FileManager.default.createDirectory(atPath: harness.spool + "/" + directory, withIntermediateDirectories: true)
            }
            for (index, name) in names.enumerated() { try harness.drop(generatedPayload(index: index, tag: "fsync"), name: name) }
            try harness.start(extraEnvironment: environment)
        } else {
            try harness.start(extraEnvironment: environment)
            for (index, name) in names.enumerated() { try harness.drop(generatedPayload(index: index, tag: "fsync"), name: name) }
        }
        let process = try #require(harness.process)
        try waitUntil(timeout: 15, "the daemon to exit after the sync failure") { !process.isRunning }
        #expect(process.terminationReason == .exit && process.terminationStatus == 1,
                "fail-stop is a clean exit 1, not a crash: \(process.terminationReason) \(process.terminationStatus)")
        let stderr = harness.daemonStderr
        #expect(stderr.contains("TEST FAULT INJECTION ARMED"))
        #expect(stderr.contains("EVENT=fatal") && stderr.contains("fsync failed"), "fatal event: \(stderr.suffix(600))")
        #expect(!stderr.contains("EVENT=noSpace"), "a failed sync is not a pause")
        if fault.dropBeforeStart {
            // READY comes once intake is armed, not after the backlog: the failure hits the
            // start-up backlog after READY, and still nothing unsynced is acknowledged.
            let ready = stderr.range(of: "EVENT=ready"), fatal = stderr.range(of: "EVENT=fatal")
            #expect(ready != nil && fatal != nil && ready!.lowerBound < fatal!.lowerBound, "READY before the failure: \(stderr.suffix(600))")
        }

        let journal = harness.state + "/journal"
        let durable = try JournalReader(directory: journal).records(fromSeq: 1).map(\.key)
        let onDisk = try JournalReader(directory: journal, committedOnly: false).records(fromSeq: 1).map(\.key)
        let waiting = Set(harness.files(in: "incoming") + harness.files(in: "processing"))
        let gone = (0..<total).filter { !waiting.contains(names[$0]) }.map { generatedKey(index: $0, tag: "fsync") }
        #expect(durable.count >= fault.minimumSynced, "batches synced before the fault: \(durable.count)")
        #expect(Set(gone) == Set(durable), "exactly the synced records' files left the spool")
        // A failed fdatasync follows the batch's write; a failed cut comes before it. Either
        // way nothing is appended after the failure although payloads were still waiting.
        #expect(onDisk.count == durable.count + fault.unsyncedRecordsOnDisk, "on disk: \(onDisk.count), synced: \(durable.count)")
        if fault.unsyncedRecordsOnDisk == 1, let unsynced = onDisk.last, let index = unsynced.split(separator: "-").last {
            #expect(waiting.contains("fs-\(index).json"), "the unsynced record's file must stay in the spool")
        }
        #expect(harness.files(in: "failed").isEmpty)
        #expect(waiting.count == total - durable.count)

        try harness.start()
        try waitUntil(timeout: 60, "the spool to drain after the restart") {
            harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty
        }
        #expect(harness.stop() == 0)
        let keys = try harness.records().map(\.key)
        #expect(keys.count == total)
        #expect(Set(keys) == Set((0..<total).map { generatedKey(index: $0, tag: "fsync") }))
        #expect(harness.files(in: "failed").isEmpty)
        let (status, output, _) = try harness.ctl(["journal", "verify"])
        #expect(status == 0, "journal verify: \(output)")
    }

    enum SyncFault: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case batchFdatasyncEIO
        case batchFdatasyncENOSPC
        case batchFdatasyncBeforeReady
        case segmentCutDirectoryFsync

        var testDescription: String { rawValue }

        /// The first `fdatasync` of a new journal is the first segment's header, so `after=6`
        /// lets five one-record batches through; the first directory `fsync` is that segment's
        /// cut, so `after=1` fails the cut of the second segment.
        var rule: String {
            switch self {
            case .batchFdatasyncEIO: "fdatasync:EIO:after=6"
            // The first batch fails while the scan of 2,000 files is still claiming.
            case .batchFdatasyncBeforeReady: "fdatasync:EIO:after=1"
            case .batchFdatasyncENOSPC: "fdatasync:ENOSPC:after=6"
            case .segmentCutDirectoryFsync: "fsync:EIO:after=1"
            }
        }

        var dropBeforeStart: Bool { self == .batchFdatasyncBeforeReady }
        var unsyncedRecordsOnDisk: Int { self == .segmentCutDirectoryFsync ? 0 : 1 }
        /// 64 KiB hold about 120 of these records.
        var minimumSynced: Int {
            switch self {
            case .segmentCutDirectoryFsync: 100
            case .batchFdatasyncBeforeReady: 0
            case .batchFdatasyncEIO, .batchFdatasyncENOSPC: 5
            }
        }
    }

    /// The hook is inert unless explicitly allowed, and a malformed rule stops start-up rather
    /// than letting a test run without its fault.
    @Test func faultHookNeedsTheAllowVariableAndAValidRule() throws {
        let harness = try DaemonHarness(name: "hook")
        try harness.start(extraEnvironment: ["PUSHSPOOL_FAULT_INJECT": "fdatasync:EIO"])
        for index in 0..<5 { try harness.drop(generatedPayload(index: index, tag: "hook"), name: "h-\(index).json") }
        try waitUntil(timeout: 30, "the spool to drain") {
            harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty
        }
        #expect(harness.stop() == 0)
        #expect(harness.daemonStderr.contains("ignoring PUSHSPOOL_FAULT_INJECT"))
        #expect(!harness.daemonStderr.contains("ARMED"))
        #expect(try harness.records().count == 5)

        let (status, stderr) = try harness.runExpectingExit(extraEnvironment: [
            "PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_FAULT_INJECT": "fdatasync:ENOTANERRNO",
        ])
        #expect(status == 64)
        #expect(stderr.contains("unknown errno"))
    }

    // MARK: - Corruption

    /// A byte flipped inside an earlier record of a segment that has later valid records:
    /// start-up refuses with the segment and offset; `--quarantine-corrupt-segment` starts
    /// and moves the segment to `journal/quarantine/`.
    @Test(arguments: [CorruptionCase.sealedSegmentAfterCrash, .activeSegmentAfterCleanStop])
    func midFileCorruptionRefusesStartOrQuarantines(_ scenario: CorruptionCase) throws {
        let harness = try DaemonHarness(name: "corrupt", config: "[Media]\nEnabled=no\n[Journal]\nSegmentSize=64K\n")
        try harness.start()
        let total = 400
        for index in 0..<total { try harness.drop(generatedPayload(index: index, tag: "bad"), name: "b-\(index).json") }
        try waitUntil(timeout: 60, "the spool to drain") {
            harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty
        }
        // SIGKILL leaves no dedup checkpoint, so start-up scans every segment; a clean stop
        // writes one, after which only the checkpoint's (active) segment is scanned.
        switch scenario {
        case .sealedSegmentAfterCrash: harness.stop(signal: SIGKILL)
        case .activeSegmentAfterCleanStop: #expect(harness.stop() == 0)
        }

        let journal = harness.state + "/journal"
        let records = try JournalReader(directory: journal, committedOnly: false).records(fromSeq: 1)
        let bySegment = Dictionary(grouping: records, by: \.segment)
        let segments = bySegment.keys.sorted()
        try #require(segments.count >= 3, "64 KiB segments should give several: \(segments)")
        let segment = scenario == .sealedSegmentAfterCrash ? segments[1] : segments.last!
        let inSegment = bySegment[segment]!.sorted { $0.offset < $1.offset }
        try #require(inSegment.count >= 3, "segment \(segment) holds \(inSegment.count) records")
        let victim = inSegment[inSegment.count / 2 - 1]
        // A byte inside the JSON body: header checks pass, the body CRC does not.
        try flipByte(path: journal + "/" + segment, at: victim.offset + 40 + Int64(victim.key.utf8.count) + 7)

        let (status, stderr) = try harness.runExpectingExit()
        #expect(status != 0, "must refuse to start on a damaged journal")
        #expect(stderr.contains("\(segment):\(victim.offset)"), "error names segment and offset: \(stderr)")
        #expect(stderr.contains("--quarantine-corrupt-segment"))
        let quarantineBefore = (try? FileManager.default.contentsOfDirectory(atPath: journal + "/quarantine")) ?? []
        #expect(!quarantineBefore.contains { $0.hasPrefix(segment + ".") }, "refusing must not move anything")
        #expect(FileManager.default.fileExists(atPath: journal + "/" + segment))

        let daemon = try harness.launch(arguments: ["--quarantine-corrupt-segment"])
        defer { if daemon.isRunning { kill(daemon.processIdentifier, SIGKILL); daemon.waitUntilExit() } }
        try waitUntil(timeout: 30, "the daemon to start with the quarantine flag") {
            guard daemon.isRunning else { throw TimeoutError(description: "exited with \(daemon.terminationStatus)") }
            return harness.daemonStderr.contains("EVENT=ready")
        }
        let quarantined = (try? FileManager.default.contentsOfDirectory(atPath: journal + "/quarantine")) ?? []
        #expect(quarantined.contains { $0.hasPrefix(segment + ".") }, "quarantine/: \(quarantined)")
        #expect(!FileManager.default.fileExists(atPath: journal + "/" + segment))
        // The journal works on: a new payload is ingested.
        try harness.drop(generatedPayload(index: 10_000, tag: "bad"), name: "after.json")
        try waitUntil(timeout: 30, "the new payload to be journaled") { harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty }
        kill(daemon.processIdentifier, SIGTERM)
        daemon.waitUntilExit()
        #expect(daemon.terminationStatus == 0)
        #expect(try harness.records().contains { $0.key == generatedKey(index: 10_000, tag: "bad") })
    }

    enum CorruptionCase: String, CustomTestStringConvertible, Sendable {
        case sealedSegmentAfterCrash
        case activeSegmentAfterCleanStop
        var testDescription: String { rawValue }
    }
}

// MARK: - Helpers

/// A Mindbox payload of about 4 KB with a unique id.
private func bigPayload(index: Int, tag: String) -> [UInt8] {
    let filler = String(repeating: "x", count: 3500)
    let json = """
        {"pushspool":1,"user":"user-\(index % 97)","platform":"ios","payload":{"aps":{"alert":{"title":"Sale \(index)","body":"Body \(index) \(filler)"},"mutable-content":1},"clickUrl":"https://shop.example/p/\(index)","uniqueKey":"\(tag)-\(index)","payload":"{}"}}
        """
    return Array(json.utf8)
}

/// Keys of the records at or below `COMMITTED` (what the daemon has acknowledged).
private func committedKeys(_ harness: DaemonHarness) throws -> Set<String> {
    Set(try harness.records().map(\.key))
}

private func flipByte(path: String, at offset: Int64) throws {
    let fd = open(path, O_RDWR)
    guard fd >= 0 else { throw SystemError(call: "open", errno: errno, subject: path) }
    defer { close(fd) }
    var byte: UInt8 = 0
    guard pread(fd, &byte, 1, off_t(offset)) == 1 else { throw SystemError(call: "pread", errno: errno, subject: path) }
    byte ^= 0x20
    guard pwrite(fd, &byte, 1, off_t(offset)) == 1 else { throw SystemError(call: "pwrite", errno: errno, subject: path) }
}
