@preconcurrency import Glibc
import PushSystem
import PushPayload

/// What to do with the files a previous run left in `processing/`, decided from how that run
/// ended. Pure: `CrashGuard` reads and writes the evidence, this decides.
///
/// A payload that crashes the daemon would crash it at every start, since it stays in
/// `processing/`. The evidence kept across runs: whether the last run ended deliberately, whether
/// it died of a crash signal (SIGSEGV, SIGILL, SIGABRT, … — not SIGKILL), which file was being
/// processed alone when it died, and how many unclean ends each leftover has been through.
/// The rules:
/// - After a deliberate exit, leftovers are processed as usual and the counts are forgotten.
/// - A leftover is processed *alone* (nothing else in flight, intake not yet running) once it
///   has been through a crash signal, or through `isolateAfterUncleanEnds` unclean ends of any
///   kind (an out-of-memory kill leaves no crash signal).
/// - A file that was being processed alone when the process died is the proven cause: it is
///   quarantined as `crashed_daemon`. Innocent neighbours are never quarantined, because a file
///   is only blamed when it was the only one in flight.
/// So a poison payload stops the daemon at most twice after a crash signal, three times
/// otherwise, and never again after that.
struct CrashTriage: Equatable, Sendable {
    /// Unclean ends (crash or kill) a leftover may go through before it is processed alone.
    static let isolateAfterUncleanEnds = 2

    /// How the previous run ended, as its marker file tells.
    enum PreviousEnd: Equatable, Sendable {
        /// Deliberately (exit 0 after a drain, or a fatal error it reported), or never ran.
        case clean
        /// Killed without a chance to say so (SIGKILL, OOM killer, power loss while running).
        case killed
        /// A crash signal; `isolated` names the file being processed alone at that moment.
        case crashed(isolated: String?)
    }

    /// Each leftover's unclean ends so far (names compared as bytes).
    var uncleanEnds: [[UInt8]: Int] = [:]

    struct Plan: Equatable, Sendable {
        /// Proven causes of a crash: quarantine, do not process.
        var quarantine: [String] = []
        /// Process one at a time before intake starts.
        var isolate: [String] = []
        /// Process as usual.
        var normal: [String] = []
        /// The counts to persist before processing anything.
        var next = CrashTriage()
    }

    /// Sorts `leftovers` by the evidence. A file alone in flight when a run was killed without
    /// a crash signal is counted, not blamed: the kill may have come from anywhere.
    func plan(previous: PreviousEnd, leftovers: [String]) -> Plan {
        var plan = Plan()
        guard previous != .clean else {
            plan.normal = leftovers
            return plan
        }
        var blamed: [UInt8]?
        if case .crashed(let isolated?) = previous { blamed = Array(isolated.utf8) }
        let crashed = if case .crashed = previous { true } else { false }
        for name in leftovers {
            let key = Array(name.utf8)
            if key == blamed {
                plan.quarantine.append(name)
                continue
            }
            let ends = (uncleanEnds[key] ?? 0) + 1
            plan.next.uncleanEnds[key] = ends
            if crashed || ends >= Self.isolateAfterUncleanEnds {
                plan.isolate.append(name)
            } else {
                plan.normal.append(name)
            }
        }
        return plan
    }
}

/// Followers that crashed pushspoold: a crash signal on a follower's thread (its crash tag,
/// `follower NAME`) is counted across the unclean restarts that follow. A follower whose step
/// crashes the process (a damaged file it reads, a bug) would crash it again at every start,
/// taking ingest down with it; after ``parkAfterCrashes`` crashes it is parked instead: not
/// started, named in STATUS= and a `followerParked` event, its records kept by retention, while
/// ingest and the other followers run. A deliberate exit forgets the counts, so the restart an
/// operator makes after fixing the cause tries the follower again.
///
/// `Sendable`: a value.
struct FollowerCrashCounts: Equatable, Sendable {
    static let parkAfterCrashes = 2
    static let tagPrefix = "follower "

    var crashes: [String: Int] = [:]

    /// The counts after a start that found `previous` (with the crashing thread's tag).
    func next(previous: CrashTriage.PreviousEnd, crashedThread: String?) -> FollowerCrashCounts {
        guard previous != .clean else { return FollowerCrashCounts() }
        var next = self
        if case .crashed = previous, let tag = crashedThread, tag.hasPrefix(Self.tagPrefix) {
            let name = String(tag.dropFirst(Self.tagPrefix.count))
            next.crashes[name, default: 0] += 1
        }
        return next
    }

    /// The followers not to start, by name.
    var parked: Set<String> { Set(crashes.filter { $0.value >= Self.parkAfterCrashes }.keys) }

    func encoded() -> [UInt8] {
        JSONValue.object(["crashes": .object(JSONObject(crashes.mapValues { JSONValue.number(String($0)) }))]).serialized()
    }

    /// Anything malformed counts as no history (never a trap).
    static func decode(_ bytes: [UInt8]) -> FollowerCrashCounts {
        var counts = FollowerCrashCounts()
        guard let value = try? JSONParser().parse(bytes), let entries = value["crashes"]?.objectValue else { return counts }
        for (name, count) in entries {
            guard let lexeme = count.numberLexeme, let crashes = Int(lexeme), crashes > 0, crashes < 1_000_000 else { continue }
            counts.crashes[name] = crashes
        }
        return counts
    }
}

/// Keeps the evidence `CrashTriage` decides from, in the state directory:
/// - `pushspoold.run`: byte 0 is `R` while the daemon runs and `C` once a crash signal hit it
///   (written by a signal handler with pwrite(2)); the rest names the file being processed
///   alone, if any. Removed at a deliberate exit. Not fsynced: it must survive a process
///   crash, which leaves the page cache intact; after a power loss it is simply absent.
/// - `crash-suspects.json`: the unclean-end counts, replaced durably at an unclean start.
/// - `intake-inflight` (``InFlightRecord``): the names of the last chunks handed to the
///   parser, which stay in `incoming/` while in flight; read at start-up for the suspects.
///
/// Not `Sendable`: used by the ingest thread during start-up and at exit.
final class CrashGuard {
    static let runFileName = "pushspoold.run"
    static let suspectsFileName = "crash-suspects.json"
    static let followerCrashesFileName = "follower-crashes.json"
    private static let running = UInt8(ascii: "R")
    private static let crashed = UInt8(ascii: "C")

    private let directory: String
    private var runFD: Int32 = -1
    private let inFlightSlots: Int
    private var recorder: InFlightRecorder?
    /// Set once recording failed: reported once, not per chunk.
    private(set) var recordingFailed = false

    init(stateDirectory: String, inFlightSlots: Int = InFlightRecord.slots(capacityLimit: 4096)) {
        directory = stateDirectory
        self.inFlightSlots = inFlightSlots
    }

    deinit {
        if runFD >= 0 { Posix.close(runFD) }
    }

    /// The tag of the thread a crash signal hit in the previous run (`follower erase`), read
    /// by ``begin()``; `nil` when it ended otherwise or on an untagged thread.
    private(set) var previousCrashedThread: String?
    private var previousEnd = CrashTriage.PreviousEnd.clean
    /// The names the previous run's ``InFlightRecord`` held, read by ``begin()`` after an
    /// unclean end (empty after a clean one: nothing was in flight). Some may be long gone.
    private(set) var previousInFlight: [String] = []

    /// Reads what the previous run left, then marks this run as running and arms the crash mark.
    func begin() throws(SystemError) -> (previous: CrashTriage.PreviousEnd, triage: CrashTriage) {
        let runFile = try? Posix.readFile(directory + "/" + Self.runFileName, limit: 8192)
        let previous = Self.previousEnd(runFile: runFile)
        previousEnd = previous
        previousCrashedThread = Self.crashedThread(runFile: runFile)
        var triage = CrashTriage()
        if previous != .clean, let bytes = try? Posix.readFile(directory + "/" + Self.suspectsFileName, limit: 16 << 20) {
            triage = Self.decodeSuspects(bytes)
        }
        previousInFlight = previous == .clean ? [] : InFlightRecorder.previous(stateDirectory: directory)
        // Afresh: start-up records the suspects it keeps before it processes any of them.
        recorder = try InFlightRecorder(stateDirectory: directory, slots: inFlightSlots)
        runFD = try Posix.open(directory + "/" + Self.runFileName, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, mode: 0o640)
        try Posix.writeAll(runFD, [Self.running], subject: Self.runFileName)
        try Posix.installCrashMark(fd: runFD, offset: 0, mark: Self.crashed)
        return (previous, triage)
    }

    /// Persists the counts of this start (durably: they must outlive a power loss too).
    func save(_ triage: CrashTriage) throws(SystemError) {
        if triage.uncleanEnds.isEmpty {
            _ = unlink(directory + "/" + Self.suspectsFileName)
            return
        }
        try Posix.writeFileAtomically(directory: directory, name: Self.suspectsFileName, bytes: Self.encodeSuspects(triage))
    }

    /// The follower crash counts after this start, persisted durably (removed when empty).
    /// Call after ``begin()``.
    func followerCrashes() -> FollowerCrashCounts {
        let path = directory + "/" + Self.followerCrashesFileName
        let stored = (try? Posix.readFile(path, limit: 1 << 20)).map(FollowerCrashCounts.decode) ?? FollowerCrashCounts()
        let next = stored.next(previous: previousEnd, crashedThread: previousCrashedThread)
        if next.crashes.isEmpty {
            _ = unlink(path)
        } else {
            // Best effort: without the file the next start counts from zero, which only delays parking.
            try? Posix.writeFileAtomically(directory: directory, name: Self.followerCrashesFileName, bytes: next.encoded())
        }
        return next
    }

    /// Names the file now processed alone (nil: none). A plain pwrite: see the type's note.
    func isolating(_ name: String?) {
        guard runFD >= 0 else { return }
        let bytes = [Self.running] + Array((name ?? "").utf8)
        _ = ftruncate(runFD, 1)
        _ = bytes.withUnsafeBytes { pwrite(runFD, $0.baseAddress, $0.count, 0) }
    }

    /// Names `names` in flight before they are read (``InFlightRecord``): one `pwrite(2)` per
    /// chunk. A failure (a full or read-only state directory) is returned once and then
    /// ignored: the files are still journaled, only a poison one among them would be found
    /// one crash later.
    func recordInFlight(_ names: [String]) -> SystemError? {
        guard let recorder, !recordingFailed else { return nil }
        do {
            try recorder.record(names)
            return nil
        } catch {
            recordingFailed = true
            return error
        }
    }

    /// A deliberate exit: the next start finds no marker and trusts its leftovers.
    func end() {
        guard runFD >= 0 else { return }
        recorder = nil
        _ = unlink(directory + "/" + InFlightRecord.fileName)
        _ = unlink(directory + "/" + Self.runFileName)
        _ = unlink(directory + "/" + Self.suspectsFileName)
        _ = unlink(directory + "/" + Self.followerCrashesFileName)
    }

    static func previousEnd(runFile: [UInt8]?) -> CrashTriage.PreviousEnd {
        guard let runFile, let state = runFile.first else { return runFile == nil ? .clean : .killed }
        guard state == crashed else { return .killed }
        // The isolated file's name, before the crash tag's offset (the hole up to it reads as
        // zeros once a tag was written).
        var name = runFile.dropFirst().prefix(Posix.crashTagOffset - 1)
        while name.last == 0 { name.removeLast() }
        return .crashed(isolated: name.isEmpty ? nil : String(decoding: name, as: UTF8.self))
    }

    /// The crashing thread's tag the crash handler wrote at ``Posix/crashTagOffset``.
    static func crashedThread(runFile: [UInt8]?) -> String? {
        guard let runFile, runFile.first == crashed, runFile.count > Posix.crashTagOffset else { return nil }
        let tag = runFile[Posix.crashTagOffset...].prefix { $0 != 0 }.prefix(Posix.crashTagMax)
        return tag.isEmpty ? nil : String(decoding: tag, as: UTF8.self)
    }

    static func encodeSuspects(_ triage: CrashTriage) -> [UInt8] {
        let entries = triage.uncleanEnds.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map { key, ends in
            JSONValue.object(["name": .string(String(decoding: key, as: UTF8.self)), "uncleanEnds": .number(String(ends))])
        }
        return JSONValue.object(["suspects": .array(entries)]).serialized()
    }

    /// Reads the counts back; anything malformed counts as no history (never a trap).
    static func decodeSuspects(_ bytes: [UInt8]) -> CrashTriage {
        var triage = CrashTriage()
        guard let value = try? JSONParser().parse(bytes), let entries = value["suspects"]?.arrayValue else { return triage }
        for entry in entries {
            guard let name = entry["name"]?.stringValue, let lexeme = entry["uncleanEnds"]?.numberLexeme,
                  let ends = Int(lexeme), ends > 0, ends < 1_000 else { continue }
            triage.uncleanEnds[Array(name.utf8)] = ends
        }
        return triage
    }
}

/// The names in flight under the pickup protocol (files read, journaled and unlinked straight
/// from `incoming/`, no claim rename): the crash guard's suspects, which `processing/` held
/// while files were claimed into it. `intake-inflight` in the state directory is a ring of
/// fixed-size slots; before a chunk of names is handed to the parser, the next slot is
/// overwritten with them in one `pwrite(2)`: one system call per chunk, not per file. A slot
/// is reused only after `slots - 1` later chunks (``slots(capacityLimit:)``: four times the
/// intake's in-flight bound in full chunks), so under a burst every file in flight at a crash
/// is still named. Files a quiet spool takes one by one use a slot each; one that waits for
/// its media longer than the ring lasts is past parsing and no longer named.
///
/// Not fsynced, like `pushspoold.run`: the guarantee is about a process that crashes, which
/// leaves the page cache intact; after a power loss the run marker is gone too and the start
/// counts as clean (every file still in `incoming/` is read again, duplicates dropped by the
/// journal's index). The ring names files long gone too: start-up keeps only names still in
/// `incoming/`.
///
/// Slot layout: a 4-byte little-endian length, then that many bytes of names, each ended by
/// NUL (a spool name never holds NUL or `/`). Anything malformed reads as no names.
///
/// `Sendable`: a namespace of pure functions.
enum InFlightRecord {
    static let fileName = "intake-inflight"
    /// Names per slot: a chunk (`IngestLoop.claimChunk`) of names of at most 255 bytes.
    static let namesPerSlot = 32
    static let slotSize = 4 + namesPerSlot * 256

    /// Slots for four times `capacityLimit` names in full chunks: the files in flight and the
    /// suspects recorded at start-up never wrap onto a slot still in flight.
    static func slots(capacityLimit: Int) -> Int {
        max(8, min(4096, 4 * max(1, capacityLimit) / namesPerSlot + 2))
    }

    /// The bytes of one slot for `names` (at most `namesPerSlot`; more are cut, never trapped).
    static func slot(_ names: some Sequence<String>) -> [UInt8] {
        var body: [UInt8] = []
        for name in names.prefix(namesPerSlot) {
            let bytes = name.utf8.prefix(255)
            guard !bytes.contains(0) else { continue }
            body.append(contentsOf: bytes)
            body.append(0)
        }
        let count = UInt32(body.count)
        return [UInt8(truncatingIfNeeded: count), UInt8(truncatingIfNeeded: count >> 8),
                UInt8(truncatingIfNeeded: count >> 16), UInt8(truncatingIfNeeded: count >> 24)] + body
    }

    /// Every name in every slot of a record file, in slot order, without repeats.
    static func names(in file: [UInt8]) -> [String] {
        var names: [String] = []
        var seen: Set<[UInt8]> = []
        var offset = 0
        while offset + 4 <= file.count {
            let length = Int(file[offset]) | Int(file[offset + 1]) << 8 | Int(file[offset + 2]) << 16 | Int(file[offset + 3]) << 24
            let start = offset + 4
            if length <= slotSize - 4, start + length <= file.count {
                for name in file[start..<(start + length)].split(separator: 0) where !name.isEmpty {
                    if seen.insert(Array(name)).inserted { names.append(String(decoding: name, as: UTF8.self)) }
                }
            }
            offset += slotSize
        }
        return names
    }
}

/// Writes the ``InFlightRecord`` ring. Not `Sendable`: the ingest thread alone records, as it
/// alone hands chunks to the parser.
final class InFlightRecorder {
    private let fd: Int32
    private let slots: Int
    private var next = 0
    private let fileSystem = RealFileSystem()

    /// Creates the record afresh in `stateDirectory`: read the last run's first (``previous(stateDirectory:)``).
    init(stateDirectory: String, slots: Int) throws(SystemError) {
        self.slots = max(1, slots)
        fd = try Posix.open(stateDirectory + "/" + InFlightRecord.fileName, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, mode: 0o640)
    }

    deinit { Posix.close(fd) }

    /// Names `names` in flight: one `pwrite(2)` per `namesPerSlot` names, into the ring's next slots.
    func record(_ names: [String]) throws(SystemError) {
        var start = 0
        repeat {
            let end = min(names.count, start + InFlightRecord.namesPerSlot)
            try fileSystem.pwriteAll(fd, InFlightRecord.slot(names[start..<end]), offset: Int64(next * InFlightRecord.slotSize),
                                     subject: InFlightRecord.fileName)
            next = (next + 1) % slots
            start = end
        } while start < names.count
    }

    /// The names a previous run left in flight; empty when there is no record.
    static func previous(stateDirectory: String) -> [String] {
        guard let bytes = try? Posix.readFile(stateDirectory + "/" + InFlightRecord.fileName, limit: 4096 * InFlightRecord.slotSize)
        else { return [] }
        return InFlightRecord.names(in: bytes)
    }
}
