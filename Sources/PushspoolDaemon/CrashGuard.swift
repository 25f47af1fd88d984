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
        JSONValue.object(["crashes": .object(crashes.mapValues { .number(String($0)) })]).serialized()
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

    init(stateDirectory: String) {
        directory = stateDirectory
    }

    deinit {
        if runFD >= 0 { Posix.close(runFD) }
    }

    /// The tag of the thread a crash signal hit in the previous run (`follower erase`), read
    /// by ``begin()``; `nil` when it ended otherwise or on an untagged thread.
    private(set) var previousCrashedThread: String?
    private var previousEnd = CrashTriage.PreviousEnd.clean

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

    /// A deliberate exit: the next start finds no marker and trusts its leftovers.
    func end() {
        guard runFD >= 0 else { return }
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
