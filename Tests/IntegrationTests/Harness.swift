@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushSystem
import PushJournal
import PushPayload

/// Runs the built `pushspoold`/`pushspoolctl` binaries against a spool and state directory
/// that belong to one test.
final class DaemonHarness: @unchecked Sendable {
    static let binDirectory = ProcessRunner.binDirectory

    static let packageRoot: String = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

    let root: String
    var spool: String { root + "/spool" }
    var state: String { root + "/state" }
    var config: String { root + "/pushspool.conf" }
    private(set) var process: Process?
    private var stderrFile: String { root + "/daemon.stderr" }

    init(name: String, config configText: String = "[Media]\nEnabled=no\n") throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("pushspool-it-\(name)-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try configText.write(toFile: config, atomically: true, encoding: .utf8)
    }

    deinit {
        if let process, process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Launches `pushspoold` on this harness's directories with `--config` (the harness's
    /// file unless `config` names another), extra arguments and environment; stderr goes to
    /// the file `daemonStderr` reads, emptied first. Does not wait for anything.
    /// Runs the daemon with the test hook that SIGKILLs it right after its first journal sync
    /// (`PUSHSPOOL_TEST_STOP_AT=after-sync:1`): a crash between an event's journaling and its
    /// application by the followers. Waits up to 60 s and kills a process still running then.
    /// Returns whether it died by SIGKILL, as the hook makes it.
    func crashAfterFirstSync() throws -> Bool {
        let process = try launch(extraEnvironment: ["PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_TEST_STOP_AT": "after-sync:1"])
        try? waitUntil(timeout: 60, "the stop point") { !process.isRunning }
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
        return process.terminationReason == .uncaughtSignal && process.terminationStatus == SIGKILL
    }

    func launch(arguments: [String] = [], config: String? = nil, extraEnvironment: [String: String] = [:]) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binDirectory + "/pushspoold")
        process.arguments = ["--spool", spool, "--state-dir", state, "--config", config ?? self.config] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "NOTIFY_SOCKET")
        environment.removeValue(forKey: "JOURNAL_STREAM")
        for (key, value) in extraEnvironment { environment[key] = value }
        process.environment = environment
        _ = FileManager.default.createFile(atPath: stderrFile, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: stderrFile)
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// Starts the daemon and waits until its spool layout exists (READY may come later).
    func start(arguments: [String] = [], extraEnvironment: [String: String] = [:]) throws {
        let process = try launch(arguments: arguments, extraEnvironment: extraEnvironment)
        self.process = process
        try waitUntil(timeout: 60, "pushspoold to create its spool") {
            if !process.isRunning {
                throw TimeoutError(description: "pushspoold exited with \(process.terminationStatus) at start: \(self.daemonStderr)")
            }
            return FileManager.default.fileExists(atPath: self.spool + "/failed")
        }
    }

    /// Runs `pushspoold` expected to exit by itself (a refused start, a fail-stop). One still
    /// running after `timeout` seconds is killed and reported as status -1, so a regression
    /// fails the test instead of hanging it. Returns the exit status and stderr.
    func runExpectingExit(arguments: [String] = [], config: String? = nil, extraEnvironment: [String: String] = [:],
                          timeout: Double = 30) throws -> (status: Int32, stderr: String) {
        let process = try launch(arguments: arguments, config: config, extraEnvironment: extraEnvironment)
        try? waitUntil(timeout: timeout, "pushspoold to exit") { !process.isRunning }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return (-1, daemonStderr)
        }
        return (process.terminationStatus, daemonStderr)
    }

    /// SIGTERM and wait; returns the exit status.
    /// The running daemon's pid.
    var pid: Int32? { process?.processIdentifier }

    @discardableResult
    func stop(signal: Int32 = SIGTERM) -> Int32 {
        guard let process else { return -1 }
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
        self.process = nil
        return process.terminationStatus
    }

    var daemonStderr: String { (try? String(contentsOfFile: stderrFile, encoding: .utf8)) ?? "" }

    /// Writes `bytes` the way a producer should: a temp name in `tmp/`, then `rename(2)` into `incoming/`.
    func drop(_ bytes: [UInt8], name: String) throws {
        let temp = spool + "/tmp/" + name + ".tmp"
        try Data(bytes).write(to: URL(fileURLWithPath: temp))
        guard rename(temp, spool + "/incoming/" + name) == 0 else { throw SystemError(call: "rename", errno: errno, subject: name) }
    }

    func files(in subdirectory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: spool + "/" + subdirectory)) ?? []).sorted()
    }

    /// All journal records, read with the library the CLI uses.
    func records() throws -> [JournalRecord] {
        let reader = try JournalReader(directory: state + "/journal")
        return Array(reader.records(fromSeq: 1))
    }

    /// Runs `pushspoolctl` with this harness's directories; returns (status, stdout, stderr).
    func ctl(_ arguments: [String], stdin: [UInt8]? = nil) throws -> (Int32, String, String) {
        try Self.run(Self.binDirectory + "/pushspoolctl",
                     ["--spool", spool, "--state-dir", state, "--config", config] + arguments, stdin: stdin)
    }

    static func run(_ executable: String, _ arguments: [String], stdin: [UInt8]? = nil) throws -> (Int32, String, String) {
        let result = try ProcessRunner.run(executable, arguments, stdin: stdin)
        return (result.status, result.stdout, result.stderr)
    }
}

struct TimeoutError: Error, CustomStringConvertible {
    var description: String
}

/// Waits until `condition` holds (TestSupport's one bounded wait) or throws after `timeout` seconds.
func waitUntil(timeout: Double, _ what: String = "condition", _ condition: () throws -> Bool) throws {
    if try eventually(within: timeout, condition) { return }
    throw TimeoutError(description: "timed out after \(timeout) s waiting for \(what)")
}

/// The journal key of `generatedPayload(index:tag:)` (and FailureTests' `bigPayload`): the
/// envelope names a user, so the key is (vendor, id, user).
func generatedKey(index: Int, tag: String) -> String {
    DedupKey.make(vendor: .mindbox, id: "\(tag)-\(index)", user: "user-\(index % 97)")
}

/// The payload id inside a journal key, whichever form the key has.
func payloadId(ofKey key: String) -> String? {
    DedupKey.parse(key)?.id
}

/// A generated Mindbox iOS payload with a unique id, inside an envelope.
func generatedPayload(index: Int, tag: String) -> [UInt8] {
    let json = """
        {"pushspool":1,"user":"user-\(index % 97)","platform":"ios","payload":{"aps":{"alert":{"title":"Sale \(index)","body":"Body \(index) \(tag)"},"mutable-content":1,"content-available":1},"clickUrl":"https://shop.example/p/\(index)","uniqueKey":"\(tag)-\(index)","payload":"{\\"pushName\\":\\"n\\",\\"pushDate\\":\\"2026-11-29T10:00:00Z\\"}"}}
        """
    return Array(json.utf8)
}
