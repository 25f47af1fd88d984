@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem
import PushJournal
import TestSupport
import TestTraits

/// The real `pushspoold` binary under real faults (issue 13, item 4): a really full ext4 and
/// tmpfs, an ext4 that turns itself read-only under the daemon, and SIGKILL at the named points
/// of the write path (`PUSHSPOOL_TEST_STOP_AT`), each followed by the same invariants: every file
/// that left the spool is journaled, nothing is journaled twice, nothing is quarantined, and
/// `pushspoolctl journal verify` is clean once the daemon has drained.
///
/// Mounting needs root (CI runs as root); the tests skip with a reason otherwise. Every mount is
/// detached in a `defer`, so a failing expectation or a thrown error leaves none behind
/// (`scripts/real-faults.sh` also sweeps leftovers of a test process that died). Serialized:
/// each test loads both cores with a daemon and they would only slow one another.
/// `PUSHSPOOL_REAL_FAULT_ROUNDS` (default 3) sets the kills per named point,
/// `PUSHSPOOL_KILL_SOAK_CYCLES` (default 40) the cycles of the kill soak.
@Suite(.serialized, .tags(.root)) struct RealFaultTests {
    static let isRoot = geteuid() == 0

    /// Whether a tmpfs can be mounted here, tried for real.
    static let tmpfsAllowed: Bool = {
        let probe = "/tmp/pushspool-realfault-probe-\(getpid())"
        mkdir(probe, 0o700)
        defer { rmdir(probe) }
        guard mount("tmpfs", probe, "tmpfs", 0, "size=64k") == 0 else { return false }
        umount2(probe, Int32(MNT_DETACH))
        return true
    }()

    /// Whether a loop-mounted ext4 works here (mkfs.ext4, a loop device, mount(8)), tried for real.
    static let ext4Allowed: Bool = {
        guard isRoot, FileManager.default.isExecutableFile(atPath: "/usr/sbin/mkfs.ext4"),
              FileManager.default.fileExists(atPath: "/dev/loop-control") else { return false }
        guard let root = try? RealFaultMount.makeRoot(name: "probe") else { return false }
        defer { try? FileManager.default.removeItem(atPath: root) }
        guard let mounted = try? RealFaultMount.ext4(image: root + "/img", at: root + "/m", megabytes: 4) else { return false }
        mounted.detach()
        return true
    }()

    enum FileSystemKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case tmpfs, ext4
        var testDescription: String { rawValue }
        var available: Bool { self == .tmpfs ? RealFaultTests.tmpfsAllowed : RealFaultTests.ext4Allowed }
    }

    static let config = "[Media]\nEnabled=no\n[Limits]\nMaxPayloadSize=64K\n[Journal]\nSegmentSize=64K\nCheckpointIntervalSec=1s\n"

    // MARK: - ENOSPC

    /// The state directory on a small file system that a ballast file has filled all but
    /// ~400 KB of; payloads keep arriving. Documented behaviour (docs/architecture.md, "Disk full pauses
    /// intake"): on ENOSPC nothing is acknowledged, intake pauses and says so, the daemon stays
    /// up; when the ballast goes, intake resumes. Then every payload is journaled exactly once.
    @Test(arguments: FileSystemKind.allCases)
    func fullFileSystemPausesAndResumesLosingNothing(_ kind: FileSystemKind) throws {
        guard kind.available else {
            print("RealFaultTests: skipping \(kind) ENOSPC: needs root and a mountable \(kind) (loop devices and mkfs.ext4 for ext4)")
            return
        }
        let harness = try DaemonHarness(name: "realfault-enospc-\(kind)", config: Self.config)
        let mounted: RealFaultMount = switch kind {
        case .tmpfs: try RealFaultMount.tmpfs(at: harness.state, size: "16m")
        case .ext4: try RealFaultMount.ext4(image: harness.root + "/state.img", at: harness.state, megabytes: 16)
        }
        defer {
            harness.stop(signal: SIGKILL)
            mounted.detach()
        }
        let ballast = harness.state + "/ballast"
        try fillLeaving(bytes: 400 << 10, path: ballast, fileSystem: harness.state)

        let notify = try NotifySocket()
        try harness.start(extraEnvironment: ["NOTIFY_SOCKET": notify.path])
        let total = 300
        var dropped = 0
        // Payloads arrive while the daemon runs: half before the disk fills, the rest after.
        for index in 0..<(total / 2) { try harness.drop(bigPayload(index, tag: "full"), name: "full-\(index).json") }
        dropped = total / 2
        try waitUntil(timeout: 60, "the daemon to report the journal full") { harness.daemonStderr.contains("EVENT=noSpace") }
        for index in dropped..<total { try harness.drop(bigPayload(index, tag: "full"), name: "full-\(index).json") }
        dropped = total
        #expect(harness.process?.isRunning == true, "a full disk must not stop the daemon: \(harness.daemonStderr.suffix(2000))")

        // Paused: nothing more becomes durable while the disk is full. STATUS= says PAUSED once
        // the intake has stopped (the signal that replaces a settle).
        try waitUntil(timeout: 30, "STATUS= saying the intake is paused") {
            notify.messages.contains { $0.contains("PAUSED: journal disk full") }
        }
        let durableA = Set(try harness.records().map(\.key))
        // why: the window under test: a paused intake takes nothing in and a paused writer
        // reports no retry, so no later event can prove the absence; 2 s spans two retries.
        usleep(2_000_000)
        let durableB = Set(try harness.records().map(\.key))
        #expect(durableA == durableB, "records were committed while paused")
        #expect(!durableA.isEmpty && durableA.count < total, "\(durableA.count) of \(total) fit: the test did not fill the disk")
        try expectNothingLost(harness, names: (0..<dropped).map { ("full-\($0).json", generatedKey(index: $0, tag: "full")) },
                              "while full on \(kind)")
        let (fullStatus, fullOutput, _) = try harness.ctl(["journal", "verify"])
        #expect(fullStatus == 0, "journal verify while full on \(kind): \(fullOutput)")
        #expect(harness.daemonStderr.contains("journal disk full: intake paused"))

        // Space comes back: intake resumes by itself and the spool drains.
        #expect(unlink(ballast) == 0)
        try waitUntil(timeout: 120, "the spool to drain after space returned on \(kind)") {
            harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty
        }
        try waitUntil(timeout: 10, "the resume event") { harness.daemonStderr.contains("intake resumed") }
        #expect(harness.stop() == 0)
        try expectExactlyOnce(harness, keys: (0..<total).map { generatedKey(index: $0, tag: "full") }, "after ENOSPC on \(kind)")
        #expect(!harness.daemonStderr.contains("EVENT=fatal"))
    }

    // MARK: - Read-only state directory

    /// The state directory's ext4 turns read-only under the running daemon. `mount -o
    /// remount,ro` itself is refused with EBUSY while the daemon holds its segment open for
    /// writing (the kernel will not remount a file system with writers read-only), so the test
    /// does what a failing disk does: the file system is mounted `errors=remount-ro` and an
    /// ext4 error is raised through `/sys/fs/ext4/<dev>/trigger_fs_error`; ext4 aborts its
    /// journal and remounts itself read-only. The daemon must stop by itself with a clear
    /// message and a non-zero exit (not a crash), having acknowledged nothing it could not
    /// write; after fsck and a read-write mount, a restart recovers and loses nothing.
    @Test func readOnlyStateDirectoryStopsCleanlyAndRecovers() throws {
        guard Self.ext4Allowed else {
            print("RealFaultTests: skipping read-only remount: needs root, loop devices and mkfs.ext4")
            return
        }
        let harness = try DaemonHarness(name: "realfault-rofs", config: Self.config)
        let image = harness.root + "/state.img"
        var mounted = try RealFaultMount.ext4(image: image, at: harness.state, megabytes: 32, options: "errors=remount-ro")
        defer {
            harness.stop(signal: SIGKILL)
            mounted.detach()
        }
        try harness.start()
        let total = 400
        for index in 0..<150 { try harness.drop(generatedPayload(index: index, tag: "ro"), name: "ro-\(index).json") }
        try waitUntil(timeout: 60, "some records to be durable") { try harness.records().count >= 20 }

        // The plain remount: refused while the daemon writes (documented above), or, should a
        // kernel allow it, the very fault under test.
        let remount = try DaemonHarness.run("/usr/bin/mount", ["-o", "remount,ro", harness.state])
        if remount.0 != 0 {
            let device = try #require(mounted.device.split(separator: "/").last.map(String.init))
            let trigger = "/sys/fs/ext4/\(device)/trigger_fs_error"
            try #require(FileManager.default.fileExists(atPath: trigger), "no \(trigger): cannot make ext4 read-only under the daemon")
            try "pushspool real-fault test\n".write(toFile: trigger, atomically: false, encoding: .utf8)
        }
        // Payloads keep arriving; the next write meets EROFS.
        for index in 150..<total { try harness.drop(generatedPayload(index: index, tag: "ro"), name: "ro-\(index).json") }
        let process = try #require(harness.process)
        try waitUntil(timeout: 60, "the daemon to stop on the read-only file system") { !process.isRunning }
        #expect(process.terminationReason == .exit, "the daemon must exit, not crash: signal \(process.terminationStatus)")
        #expect(process.terminationStatus != 0)
        let stderr = harness.daemonStderr
        #expect(stderr.contains("EVENT=fatal"), "no fatal event: \(stderr.suffix(2000))")
        // Which call meets the fault depends on timing: the next write fails with EROFS, or an
        // fdatasync already under way when ext4 aborted its journal fails with EIO. Both are
        // fatal (an fsync error is never retried) and both messages name the cause.
        let fatalLine = stderr.split(separator: "\n").first { $0.contains("EVENT=fatal") }.map(String.init) ?? ""
        #expect(fatalLine.contains("Read-only file system (EROFS)") || fatalLine.contains("fsync failed (journal.fdatasync"),
                "the message must name the cause: \(fatalLine)")
        print("read-only state directory: exit status \(process.terminationStatus); \(fatalLine)")
        harness.stop(signal: SIGKILL)
        let names = (0..<total).map { ("ro-\($0).json", generatedKey(index: $0, tag: "ro")) }
        try expectNothingLost(harness, names: names, "after the read-only stop")

        // The operator's way back: unmount, fsck, mount read-write, restart.
        mounted.detach()
        let fsck = try DaemonHarness.run("/usr/sbin/e2fsck", ["-f", "-y", image])
        #expect(fsck.0 <= 1, "e2fsck: \(fsck.0) \(fsck.1) \(fsck.2)")
        mounted = try RealFaultMount.ext4(existingImage: image, at: harness.state, options: "errors=remount-ro")
        try harness.start()
        try waitUntil(timeout: 120, "the spool to drain after the read-write mount") {
            harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty
        }
        #expect(harness.stop() == 0)
        try expectExactlyOnce(harness, keys: names.map(\.1), "after the read-only stop and restart")
    }

    // MARK: - SIGKILL at named points

    /// SIGKILL at the N-th pass of each named point (`PUSHSPOOL_TEST_STOP_AT`), several rounds
    /// with random N, more payloads arriving between rounds. After every kill: the process died
    /// of SIGKILL (the point was reached), the state the point promises is on disk (e.g. written
    /// but unsynced records after `after-write`, a journaled file still in `incoming/` after
    /// `after-sync`), nothing that left the spool is missing, nothing is journaled twice. At the
    /// end a normal run drains the spool and `journal verify` is clean.
    @Test(arguments: StopPoint.allCases)
    func sigkillAtNamedPointLosesAndDoublesNothing(_ point: StopPoint) throws {
        let rounds = max(1, Int(ProcessInfo.processInfo.environment["PUSHSPOOL_REAL_FAULT_ROUNDS"] ?? "") ?? 3)
        // At most 16 records a batch, so one round's 150 files make at least 10 writes and syncs
        // whatever the timing: with two processing lanes a round could go in three batches, and
        // `after-write:4` was then never reached.
        let harness = try DaemonHarness(name: "realfault-stop-\(point.name)", config: Self.config + "MaxBatchRecords=16\n")
        defer { harness.stop(signal: SIGKILL) }
        let tag = "sp\(point.rawValue)"
        var names: [(String, String)] = []
        var generator = SystemRandomNumberGenerator()
        for round in 0..<rounds {
            // Enough new work in every round for several batches and two segment rolls
            // (~1 KB records, 64K segments).
            for _ in 0..<150 {
                let index = names.count
                try harness.dropCreatingSpool(generatedPayload(index: index, tag: tag), name: "\(tag)-\(index).json")
                names.append(("\(tag)-\(index).json", generatedKey(index: index, tag: tag)))
            }
            let pass: Int = switch point {
            case .beforeWrite, .afterWrite: Int.random(in: 1...4, using: &generator)
            case .afterSync: Int.random(in: 1...20, using: &generator)
            // One round's 150 new records (~600 bytes each) fill one 64K segment for sure, not two.
            case .rollTemp, .rollRenamed, .checkpoint, .recovery: 1
            }
            let context = "\(point.name):\(pass) round \(round)"
            let process = try harness.launch(extraEnvironment: [
                "PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_TEST_STOP_AT": "\(point.name):\(pass)",
            ])
            try? waitUntil(timeout: 60, "the stop point") { !process.isRunning }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                Issue.record("\(context): the point was not reached within 60 s")
                return
            }
            #expect(process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL,
                    "\(context): expected death by SIGKILL, got \(process.terminationReason == .exit ? "exit" : "signal") \(process.terminationStatus): \(harness.daemonStderr.suffix(1500))")
            try expectPointState(point, harness, names: names, context)
            try expectNothingLost(harness, names: names, context)
        }
        try harness.start()
        try waitUntil(timeout: 120, "the spool to drain after the \(point.name) kills") {
            harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty
        }
        #expect(harness.stop() == 0)
        try expectExactlyOnce(harness, keys: names.map(\.1), "after \(rounds) kills at \(point.name)")
    }

    /// What a kill at `point` leaves behind, checked before anything recovers it.
    private func expectPointState(_ point: StopPoint, _ harness: DaemonHarness, names: [(String, String)], _ context: String) throws {
        let journal = harness.state + "/journal"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: journal)) ?? []
        switch point {
        case .beforeWrite:
            let onDisk = try JournalReader(directory: journal, committedOnly: false).records(fromSeq: 1).map(\.key)
            #expect(onDisk.count == (try harness.records().count), "\(context): records written past COMMITTED before the write")
        case .afterWrite:
            let onDisk = Array(try JournalReader(directory: journal, committedOnly: false).records(fromSeq: 1))
            #expect(onDisk.count > (try harness.records().count), "\(context): no written-but-unsynced record on disk")
        case .afterSync:
            let committed = Set(try harness.records().map(\.key))
            // Read in place (no claim rename): the journaled file is still in incoming/.
            let waiting = Set(harness.files(in: "incoming"))
            #expect(names.contains { waiting.contains($0.0) && committed.contains($0.1) },
                    "\(context): no journaled file left in incoming/ (killed between sync and unlink)")
        case .rollTemp:
            #expect(entries.contains { $0.hasSuffix(JournalFiles.segmentSuffix + ".tmp") }, "\(context): no segment temp file: \(entries)")
        case .rollRenamed:
            let sizes = entries.filter { JournalFiles.firstSeq(ofSegment: $0) != nil }.sorted().compactMap { name -> Int? in
                (try? FileManager.default.attributesOfItem(atPath: journal + "/" + name)[.size] as? Int) ?? nil
            }
            #expect(sizes.last == SegmentHeader.size, "\(context): the newest segment is not a fresh one: \(sizes)")
        case .checkpoint:
            #expect(entries.contains(JournalFiles.checkpoint + ".tmp"), "\(context): no checkpoint temp file: \(entries)")
        case .recovery:
            #expect(!harness.daemonStderr.contains("payload ingested"), "\(context): intake ran before the recovery kill")
        }
    }

    // MARK: - Kill soak

    /// `scripts/kill-soak.sh`: cycles of start, SIGKILL, check — half of them at a random moment,
    /// half at a random named point with a random pass count — while payloads keep arriving.
    /// Checked after every cycle, incrementally so 10,000 cycles stay fast: every file that left
    /// the spool is journaled, no key twice. At the end the spool drains and `verify` is clean.
    /// `PUSHSPOOL_KILL_SOAK_LANES` runs that many daemons side by side, each on its own spool
    /// and state directory, sharing the cycle count: a cycle mostly waits for its kill, so lanes
    /// multiply the cycles an hour buys. Prints cycles per minute for docs/development.md.
    @Test func killSoakLosesAndDoublesNothing() throws {
        let environment = ProcessInfo.processInfo.environment
        let cycles = max(1, Int(environment["PUSHSPOOL_KILL_SOAK_CYCLES"] ?? "") ?? 40)
        let lanes = min(16, max(1, Int(environment["PUSHSPOOL_KILL_SOAK_LANES"] ?? "") ?? 1))
        let started = Date()
        let progress = KillSoakProgress(total: cycles, started: started)
        let results = Locked([KillSoakLane.Result?](repeating: nil, count: lanes))
        // Threads of their own: concurrentPerform would run only as many lanes as there are
        // cores, and a lane spends most of its time waiting.
        let group = DispatchGroup()
        for lane in 0..<lanes {
            group.enter()
            let share = cycles / lanes + (lane < cycles % lanes ? 1 : 0)
            let thread = Thread {
                let result = Result { try KillSoakLane(lane: lane, cycles: share, progress: progress).run() }
                results.withLock { $0[lane] = try? result.get() }
                if case .failure(let error) = result { Issue.record("lane \(lane): \(error)") }
                group.leave()
            }
            thread.start()
        }
        group.wait()
        let finished = results.withLock { $0 }.compactMap { $0 }
        guard finished.count == lanes else { return }
        let seconds = Date().timeIntervalSince(started)
        let perMinute = Double(cycles) / seconds * 60
        print("kill soak: \(cycles) cycles in \(lanes) lane(s) (\(finished.map(\.pointKills).reduce(0, +)) at named points, "
              + "\(finished.map(\.timerKills).reduce(0, +)) at random moments) in \(Int(seconds)) s = \(Int(perMinute)) cycles/min; "
              + "\(finished.map(\.dropped).reduce(0, +)) files; \(finished.map(\.lost).reduce(0, +)) lost, "
              + "\(finished.map(\.doubled).reduce(0, +)) doubled")
    }
}

/// Cycles done over all lanes of the kill soak, for its progress line every 500.
final class KillSoakProgress: Sendable {
    private let done = Locked((cycles: 0, lost: 0, doubled: 0))
    private let total: Int
    private let started: Date

    init(total: Int, started: Date) {
        self.total = total
        self.started = started
    }

    func cycleEnded(lost: Int, doubled: Int) {
        let now = done.withLock { state -> (cycles: Int, lost: Int, doubled: Int) in
            state.cycles += 1
            state.lost += lost
            state.doubled += doubled
            return state
        }
        guard now.cycles % 500 == 0 else { return }
        let minutes = Date().timeIntervalSince(started) / 60
        // stderr, unbuffered: a long soak shows its progress as it goes.
        let line = "kill soak: \(now.cycles) of \(total) cycles, \(Int(Double(now.cycles) / minutes)) cycles/min, "
            + "\(now.lost) lost, \(now.doubled) doubled\n"
        FileHandle.standardError.write(Data(line.utf8))
    }
}

/// One daemon of the kill soak, on its own spool and state directory.
struct KillSoakLane {
    struct Result: Sendable {
        var cycles = 0
        var pointKills = 0
        var timerKills = 0
        var dropped = 0
        var lost = 0
        var doubled = 0
    }

    let lane: Int
    let cycles: Int
    let progress: KillSoakProgress

    /// Cycles on one spool before the lane checks it to the end and starts a fresh one: every
    /// start reads the whole segment list and checkpoint, so an ever-growing journal (400
    /// records a cycle with a release build) made each cycle slower than the last.
    static let cyclesPerSpool = 250

    func run() throws -> Result {
        var result = Result()
        var round = 0
        while result.cycles < cycles && result.lost + result.doubled == 0 {
            try runSpool(round: round, cycles: min(Self.cyclesPerSpool, cycles - result.cycles), into: &result)
            round += 1
        }
        return result
    }

    private func runSpool(round: Int, cycles: Int, into result: inout Result) throws {
        let harness = try DaemonHarness(name: "realfault-soak-\(lane)-\(round)", config: RealFaultTests.config)
        defer { harness.stop(signal: SIGKILL) }
        var outstanding: [String: String] = [:]
        var journaled = Set<String>()
        var nextSeq: UInt64 = 1
        var dropped = 0
        var generator = SystemRandomNumberGenerator()
        let tag = "soak\(lane).\(round)"
        for cycle in 0..<cycles {
            result.cycles += 1
            if outstanding.count < 200 {
                for _ in 0..<400 {
                    let name = "soak-\(dropped).json"
                    try harness.dropCreatingSpool(generatedPayload(index: dropped, tag: tag), name: name)
                    outstanding[name] = generatedKey(index: dropped, tag: tag)
                    dropped += 1
                    result.dropped += 1
                }
            }
            var extra: [String: String] = [:]
            let point = Bool.random(using: &generator) ? StopPoint.allCases.randomElement(using: &generator) : nil
            if let point {
                // Passes every run reaches, so no cycle waits for a point that never comes:
                // recovery and the checkpoint (after CheckpointIntervalSec=1s) pass once per run.
                let pass = switch point {
                case .afterSync: Int.random(in: 1...30, using: &generator)
                case .beforeWrite, .afterWrite: Int.random(in: 1...3, using: &generator)
                case .rollTemp, .rollRenamed, .checkpoint, .recovery: 1
                }
                extra = ["PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_TEST_STOP_AT": "\(point.name):\(pass)"]
            }
            let process = try harness.launch(extraEnvironment: extra)
            // A point the run may never reach (a second checkpoint) ends like a timer kill.
            let limit = Date().addingTimeInterval(point == nil ? Double.random(in: 0.01...0.4, using: &generator) : 3)
            while process.isRunning && Date() < limit { usleep(2_000) } // why: the kill comes at a random moment; the wait is the fault
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                result.timerKills += 1
            } else {
                result.pointKills += 1
            }
            process.waitUntilExit()
            if process.terminationReason == .exit {
                Issue.record("lane \(lane) cycle \(cycle): the daemon exited by itself with \(process.terminationStatus): \(harness.daemonStderr.suffix(2000))")
                result.lost += 1
                return
            }
            var lost = 0
            var doubled = 0
            // A kill in the first milliseconds of the first run can come before the journal
            // directory exists; then nothing can have left the spool, as the check below sees.
            let journalDirectory = harness.state + "/journal"
            if FileManager.default.fileExists(atPath: journalDirectory) {
                let reader = try JournalReader(directory: journalDirectory)
                for record in reader.records(fromSeq: nextSeq) {
                    if !journaled.insert(record.key).inserted {
                        doubled += 1
                        Issue.record("lane \(lane) cycle \(cycle): \(record.key) journaled twice (seq \(record.seq))")
                    }
                    nextSeq = record.seq + 1
                }
                #expect(reader.lastError == nil, "lane \(lane) cycle \(cycle): \(String(describing: reader.lastError))")
            }
            let present = Set(harness.files(in: "incoming") + harness.files(in: "processing"))
            for (name, key) in outstanding where !present.contains(name) {
                outstanding[name] = nil
                if !journaled.contains(key) {
                    lost += 1
                    Issue.record("lane \(lane) cycle \(cycle): \(name) left the spool but is not in the journal")
                }
            }
            result.lost += lost
            result.doubled += doubled
            progress.cycleEnded(lost: lost, doubled: doubled)
            if result.lost + result.doubled > 0 { break }
        }
        try harness.start()
        try waitUntil(timeout: 300, "lane \(lane): the spool to drain after the soak") {
            harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty
        }
        #expect(harness.stop() == 0)
        try expectExactlyOnce(harness, keys: (0..<dropped).map { generatedKey(index: $0, tag: tag) }, "lane \(lane) spool \(round) after the kill soak")
        // A long soak makes hundreds of spools; one that failed stays for inspection.
        if result.lost + result.doubled == 0 { try? FileManager.default.removeItem(atPath: harness.root) }
    }
}

// MARK: - Mounts

/// One file system mounted for a test; `detach()` (lazy unmount, so a file still open cannot
/// keep it) is idempotent and called from a `defer`. A loop mount is made by mount(8), which
/// sets the loop device to clear itself when the file system goes.
struct RealFaultMount {
    let path: String
    let device: String

    static func makeRoot(name: String) throws -> String {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("pushspool-it-realfault-\(name)-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: root + "/m", withIntermediateDirectories: true)
        return root
    }

    static func tmpfs(at path: String, size: String) throws -> RealFaultMount {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        guard mount("tmpfs", path, "tmpfs", 0, "size=\(size)") == 0 else {
            throw SystemError(call: "mount", errno: errno, subject: path)
        }
        return RealFaultMount(path: path, device: "tmpfs")
    }

    /// A fresh ext4 (no reserved blocks: root must not get space the daemon would not) of
    /// `megabytes` in `image`, loop-mounted at `path`.
    static func ext4(image: String, at path: String, megabytes: Int, options: String? = nil) throws -> RealFaultMount {
        guard FileManager.default.createFile(atPath: image, contents: nil), truncate(image, off_t(megabytes) << 20) == 0 else {
            throw SystemError(call: "truncate", errno: errno, subject: image)
        }
        let mkfs = try DaemonHarness.run("/usr/sbin/mkfs.ext4", ["-q", "-F", "-m", "0", image])
        guard mkfs.0 == 0 else { throw TimeoutError(description: "mkfs.ext4 \(image): \(mkfs.2)") }
        return try ext4(existingImage: image, at: path, options: options)
    }

    static func ext4(existingImage image: String, at path: String, options: String? = nil) throws -> RealFaultMount {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let result = try DaemonHarness.run("/usr/bin/mount", ["-o", ["loop", options].compactMap { $0 }.joined(separator: ","), image, path])
        guard result.0 == 0 else { throw TimeoutError(description: "mount -o loop \(image): \(result.2)") }
        let source = try DaemonHarness.run("/usr/bin/findmnt", ["-n", "-o", "SOURCE", path])
        return RealFaultMount(path: path, device: source.1.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    func detach() {
        umount2(path, Int32(MNT_DETACH))
    }
}

/// Fills the file system holding `fileSystem` with `path` (allocated, not sparse) until about
/// `bytes` are left.
private func fillLeaving(bytes: Int, path: String, fileSystem: String) throws {
    var info = statvfs()
    guard statvfs(fileSystem, &info) == 0 else { throw SystemError(call: "statvfs", errno: errno, subject: fileSystem) }
    let free = Int(clamping: info.f_bavail) * Int(clamping: info.f_frsize)
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    guard fd >= 0 else { throw SystemError(call: "open", errno: errno, subject: path) }
    defer { close(fd) }
    let code = posix_fallocate(fd, 0, off_t(max(free - bytes, 0)))
    guard code == 0 else { throw SystemError(call: "posix_fallocate", errno: code, subject: path) }
    fsync(fd)
}

// MARK: - Invariants

/// Every file of `names` (spool name, journal key) that left the spool is journaled
/// (acknowledged: at or below COMMITTED); no key is on disk twice; nothing was quarantined.
private func expectNothingLost(_ harness: DaemonHarness, names: [(String, String)], _ context: String) throws {
    let committed = try harness.records().map(\.key)
    let committedSet = Set(committed)
    #expect(committedSet.count == committed.count, "\(context): a key is journaled twice")
    let onDisk = try JournalReader(directory: harness.state + "/journal", committedOnly: false).records(fromSeq: 1).map(\.key)
    #expect(Set(onDisk).count == onDisk.count, "\(context): a key is on disk twice")
    let waiting = Set(harness.files(in: "incoming") + harness.files(in: "processing"))
    let missing = names.filter { !waiting.contains($0.0) && !committedSet.contains($0.1) }
    #expect(missing.isEmpty, "\(context): \(missing.count) files left the spool without a record, e.g. \(missing.prefix(3).map(\.0))")
    #expect(harness.files(in: "failed").isEmpty, "\(context): quarantined \(harness.files(in: "failed").prefix(4))")
}

/// After a drain: exactly `keys`, each once, and `journal verify` clean.
private func expectExactlyOnce(_ harness: DaemonHarness, keys: [String], _ context: String) throws {
    let journaled = try harness.records().map(\.key)
    #expect(journaled.count == keys.count, "\(context): \(journaled.count) records for \(keys.count) payloads")
    #expect(Set(journaled) == Set(keys), "\(context): the journaled keys differ from those dropped")
    #expect(harness.files(in: "failed").isEmpty)
    let (status, output, _) = try harness.ctl(["journal", "verify"])
    #expect(status == 0, "\(context): journal verify: \(output)")
}

/// A Mindbox payload of about 4 KB with a unique id (the ENOSPC tests need bulk).
private func bigPayload(_ index: Int, tag: String) -> [UInt8] {
    let filler = String(repeating: "x", count: 3500)
    let json = """
        {"pushspool":1,"user":"user-\(index % 97)","platform":"ios","payload":{"aps":{"alert":{"title":"Sale \(index)","body":"Body \(index) \(filler)"},"mutable-content":1},"clickUrl":"https://shop.example/p/\(index)","uniqueKey":"\(tag)-\(index)","payload":"{}"}}
        """
    return Array(json.utf8)
}

extension DaemonHarness {
    /// `drop` before the daemon has ever run: creates the spool's `tmp/` and `incoming/` first.
    func dropCreatingSpool(_ bytes: [UInt8], name: String) throws {
        for directory in ["tmp", "incoming"] where !FileManager.default.fileExists(atPath: spool + "/" + directory) {
            try FileManager.default.createDirectory(atPath: spool + "/" + directory, withIntermediateDirectories: true)
        }
        try drop(bytes, name: name)
    }
}
