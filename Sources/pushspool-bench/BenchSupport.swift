@preconcurrency import Glibc
import Foundation
import PushSystem
import TestSupport

/// One line of the results table `pushspool-bench all` prints and writes into docs/performance.md.
struct BenchRow: Sendable {
    var name: String
    var value: String
    var ratio: String
    var target: String
    var met: Bool?
}

/// Rows collected by every bench in this run, in order.
final class BenchResults: Sendable {
    static let shared = BenchResults()
    private let rows = Locked<[BenchRow]>([])

    func add(_ name: String, _ value: String, ratio: String = "", target: String = "", met: Bool? = nil) {
        rows.withLock { $0.append(BenchRow(name: name, value: value, ratio: ratio, target: target, met: met)) }
    }

    var all: [BenchRow] { rows.withLock { $0 } }

    /// A Markdown table of the rows, headed by the machine they were measured on.
    func markdown(note: String) -> String {
        var text = "Measured \(Timestamp.iso8601(millis: Posix.wallClockMillis())) on \(machineDescription()).\n"
        if !note.isEmpty { text += note + "\n" }
        text += "\n| measure | result | ratio | target | met |\n|---|---|---|---|---|\n"
        for row in all {
            let met = row.met.map { $0 ? "yes" : "**no**" } ?? ""
            text += "| \(row.name) | \(row.value) | \(row.ratio) | \(row.target) | \(met) |\n"
        }
        return text
    }
}

/// nproc, CPU model, kernel and the file system of the temp directory: the figures mean
/// nothing without them.
func machineDescription() -> String {
    let cpus = sysconf(Int32(_SC_NPROCESSORS_ONLN))
    var model = "unknown CPU"
    if let info = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
       let line = info.split(separator: "\n").first(where: { $0.hasPrefix("model name") }),
       let colon = line.firstIndex(of: ":") {
        model = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    var uts = utsname()
    uname(&uts)
    let kernel = withUnsafeBytes(of: &uts.release) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
    // The file system of the temp directory: the mount in /proc/mounts with the longest
    // matching mount point.
    var fsName = "unknown fs"
    let tmp = FileManager.default.temporaryDirectory.path
    var best = -1
    if let mounts = try? String(contentsOfFile: "/proc/mounts", encoding: .utf8) {
        for line in mounts.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 3 else { continue }
            let point = String(fields[1])
            let covers = tmp == point || tmp.hasPrefix(point == "/" ? "/" : point + "/")
            if covers, point.count > best {
                best = point.count
                fsName = String(fields[2])
            }
        }
    }
    var load = [Double](repeating: 0, count: 3)
    _ = getloadavg(&load, 3)
    return "\(cpus) CPUs (\(model)), Linux \(kernel), \(fsName) at \(FileManager.default.temporaryDirectory.path), "
        + String(format: "load average %.1f at the end", load[0])
}

/// The payload every ingest bench drops: a Mindbox-style push with a unique key.
func benchPayload(_ i: Int) -> [UInt8] {
    Array("""
        {"pushspool":1,"user":"u\(i % 1000)","platform":"ios","payload":{"aps":{"alert":{"title":"Flash sale \(i)","body":"Everything −20% today only, item \(i)"},"mutable-content":1,"content-available":1},"clickUrl":"https://shop.example/p/\(i)","uniqueKey":"bench-\(i)","payload":"{\\"pushName\\":\\"sale\\",\\"pushDate\\":\\"2026-11-29T10:00:00Z\\"}"}}
        """.utf8)
}

/// `PUSHSPOOL_BENCH_CONFIG`: configuration lines appended to every daemon the benches start
/// (`\n` for a line break), to measure a setting, e.g. `[Journal]\nMaxBatchDelaySec=0`.
func benchConfigFromEnvironment() -> String {
    guard let extra = ProcessInfo.processInfo.environment["PUSHSPOOL_BENCH_CONFIG"], !extra.isEmpty else { return "" }
    return "\n" + extra.replacingOccurrences(of: "\\n", with: "\n") + "\n"
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return 0 }
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// The directory of this executable: `pushspoold` and `pushspoolctl` of the same build sit next to it.
func siblingBinary(_ name: String) -> String {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    return (exe as NSString).deletingLastPathComponent + "/" + name
}

/// A throw-away spool root with a staging directory on the same file system, for runs of
/// the real `pushspoold` binary timed from outside.
final class ExternalSpool: @unchecked Sendable {
    let root: String
    var incoming: String { root + "/spool/incoming" }
    var processing: String { root + "/spool/processing" }
    var stage: String { root + "/stage" }
    var state: String { root + "/state" }
    var config: String { root + "/pushspool.conf" }

    init(label: String) {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("pushspool-\(label)-\(UUID().uuidString.prefix(8))").path
        for dir in ["spool/tmp", "spool/incoming", "spool/processing", "spool/failed", "stage", "state"] {
            try! FileManager.default.createDirectory(atPath: root + "/" + dir, withIntermediateDirectories: true)
        }
        try! ("[Spool]\nStableAgeSec=0\n[Media]\nEnabled=no\n[Metrics]\nIntervalSec=1h\n[Inbox]\nEnabled=no\n[Outbox]\nEnabled=no\n"
              + benchConfigFromEnvironment())
            .write(toFile: config, atomically: true, encoding: .utf8)
    }

    /// Writes `count` payloads into `dir` (staging or incoming), as a producer would: no fsync.
    func write(count: Int, into dir: String, prefix: String = "b", progressLabel: String? = nil) {
        let dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        precondition(dirfd >= 0, "cannot open \(dir)")
        defer { close(dirfd) }
        let progress = Progress(label: progressLabel, total: count)
        for i in 0..<count {
            let bytes = benchPayload(i)
            let fd = openat(dirfd, "\(prefix)\(i).json", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
            precondition(fd >= 0)
            _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            close(fd)
            progress.tick(i + 1)
        }
        progress.done()
    }

    /// Renames every staged file into `incoming/`; returns how many.
    @discardableResult
    func renameStagedIntoIncoming() -> Int {
        let from = open(stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC), to = open(incoming, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { close(from); close(to) }
        var moved = 0
        for name in Self.names(in: stage) where renameat(from, name, to, name) == 0 { moved += 1 }
        return moved
    }

    static func names(in dir: String) -> [String] {
        guard let d = opendir(dir) else { return [] }
        defer { closedir(d) }
        var names: [String] = []
        while let entry = readdir(d) {
            let name = withUnsafeBytes(of: &entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            if name != ".", name != ".." { names.append(name) }
        }
        return names
    }

    /// Whether `dir` has no entry (stops at the first one found).
    static func isEmpty(_ dir: String) -> Bool {
        guard let d = opendir(dir) else { return true }
        defer { closedir(d) }
        while let entry = readdir(d) {
            let first = entry.pointee.d_name.0, second = entry.pointee.d_name.1, third = entry.pointee.d_name.2
            if first == 0x2E && (second == 0 || (second == 0x2E && third == 0)) { continue }
            return false
        }
        return true
    }

    /// Waits until `incoming/` and `processing/` are both empty, polling every `pollMillis`.
    func waitDrained(pollMillis: UInt32) {
        while !(Self.isEmpty(incoming) && Self.isEmpty(processing)) { usleep(pollMillis * 1000) }
    }

    /// Writes `bytes` into the staging directory and renames it into `incoming/` as a producer
    /// does; returns the monotonic time just before the rename (as `produceSteadily` stamps),
    /// nil when a step failed.
    func dropTimed(name: String, bytes: [UInt8]) -> UInt64? {
        let staged = stage + "/" + name
        let fd = open(staged, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return nil }
        let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
        guard written == bytes.count else { return nil }
        let at = Posix.monotonicNanos()
        return rename(staged, incoming + "/" + name) == 0 ? at : nil
    }

    func remove() { try? FileManager.default.removeItem(atPath: root) }
}

/// A `pushspoold` child with its own notification socket.
final class DaemonProcess {
    let process = Process()
    let notify: NotifySocket

    init(spool: ExternalSpool) throws {
        notify = try NotifySocket()
        process.executableURL = URL(fileURLWithPath: siblingBinary("pushspoold"))
        process.arguments = ["--spool", spool.root + "/spool", "--state-dir", spool.state, "--config", spool.config]
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = notify.path
        process.environment = environment
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    /// Waits for READY=1; false when the daemon exited or `timeout` passed first.
    func waitReady(timeout: Duration = .seconds(120)) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let message = notify.receive(timeout: .milliseconds(100)) {
                if message.split(separator: "\n").contains("READY=1") { return true }
            } else if !process.isRunning {
                return false
            }
        }
        return false
    }

    /// Peak resident set size (VmHWM) in KiB, from /proc/PID/status.
    var peakRSSKiB: Int { procStatusKiB(pid: pid, field: "VmHWM:") }

    /// SIGTERM and wait: a clean stop.
    func stop() {
        kill(pid, SIGTERM)
        process.waitUntilExit()
    }

    func kill9() {
        kill(pid, SIGKILL)
        process.waitUntilExit()
    }
}

func procStatusKiB(pid: Int32, field: String) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix(field) {
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
    }
    return 0
}

/// Progress on stderr for steps that take more than a second: staging a million files does.
final class Progress {
    private let label: String?
    private let total: Int
    private let started = Posix.monotonicNanos()
    private var lastShown: UInt64 = 0
    private var shown = false

    init(label: String?, total: Int) {
        self.label = label
        self.total = total
    }

    func tick(_ done: Int) {
        guard let label, done & 1023 == 0 else { return }
        let now = Posix.monotonicNanos()
        guard now - started > 1_000_000_000, now - lastShown > 500_000_000 else { return }
        lastShown = now
        shown = true
        FileHandle.standardError.write(Data("\r  \(label): \(done) of \(total)".utf8))
    }

    func done() {
        if shown { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }
}
