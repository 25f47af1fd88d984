@preconcurrency import Glibc
import Foundation
import Synchronization
import Testing
import PushFetchClient
import PushMedia
import PushMediaCore
import PushSystem
import TestSupport
import PushConfig
import PushModuleOptions
import PushDaemonOptions

/// The supervisor against the real `pushspool-fetch` binary and real HTTP servers on
/// 127.0.0.1: stores, survives SIGKILL, SIGSEGV and hangs, restarts, and cancels on shutdown.
@Suite struct SupervisorTests {
    /// A 1×1 RGBA PNG.
    static let png: [UInt8] = Array(Data(base64Encoded:
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")!)

    static let executable = ProcessRunner.executable("pushspool-fetch")

    static func options(_ dir: TempDir) -> MediaOptions {
        var options = MediaOptions(settings: Configuration().media, storeDirectory: dir.appending("media"))
        options.allowHTTP = true
        options.allowNetworks = ["127.0.0.0/8"]
        options.attempts = 1
        options.connectTimeout = .seconds(1)
        options.transferDeadline = .seconds(20)
        options.payloadDeadline = .seconds(20)
        return options
    }

    /// Collects events and waits for outcomes.
    final class Recorder: Sendable {
        let events = Locked<[FetchSupervisor.Event]>([])
        func record(_ event: FetchSupervisor.Event) { events.withLock { $0.append(event) } }
        var started: Int { events.withLock { $0.filter { if case .started = $0 { true } else { false } }.count } }
    }

    static func fetch(_ supervisor: FetchSupervisor, _ url: String, timeout: Double = 30) throws -> MediaOutcome {
        let result = Locked<MediaOutcome?>(nil)
        let done = DispatchSemaphore(value: 0)
        supervisor.fetch(url: url) { outcome in
            result.withLock { $0 = outcome }
            done.signal()
        }
        if done.wait(timeout: .now() + timeout) == .success, let outcome = result.withLock({ $0 }) { return outcome }
        throw TimeoutError(description: "no outcome for \(url) within \(timeout) s")
    }

    struct TimeoutError: Error, CustomStringConvertible { var description: String }

    static func waitFor(_ what: String, timeout: Double = 20, _ condition: () -> Bool) throws {
        if eventually(within: timeout, condition) { return }
        throw TimeoutError(description: "timed out waiting for \(what)")
    }

    @Test func storesThroughTheFetcherProcess() throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/a.png", .ok(Self.png, contentType: "image/png"))
        let recorder = Recorder()
        let supervisor = try FetchSupervisor(options: Self.options(dir), launch: .spawn(executable: Self.executable, arguments: []),
                                             requestDeadline: .seconds(30), onEvent: recorder.record)
        defer { supervisor.shutdown() }
        let outcome = try Self.fetch(supervisor, server.url("/a.png"))
        #expect(outcome.status == .stored, "\(outcome.encodeJSON())")
        let sha = PushSystem.SHA256.hex(of: Self.png)
        #expect(outcome.sha256 == sha)
        let path = try #require(outcome.path)
        #expect(path.hasPrefix(dir.appending("media") + "/"))
        #expect(FileManager.default.contents(atPath: path).map(Array.init) == Self.png)
        if let thumbnail = outcome.thumbnail {
            #expect(FileManager.default.fileExists(atPath: thumbnail.path), "\(thumbnail.path)")
        }
        // The download ran in another process, not in this one.
        let pid = try #require(supervisor.fetcherPID)
        #expect(pid != getpid())
        #expect(supervisor.stats.stored == 1)
        #expect(recorder.started == 1)

        // A failure keeps its code and HTTP status across the boundary.
        let missing = try Self.fetch(supervisor, server.url("/missing.png"))
        #expect(missing.status == .failed)
        #expect(missing.error?.code == .httpStatus)
        #expect(missing.error?.httpStatus == 404)
    }

    /// The fetcher dies mid-download (SIGKILL from outside, or a real SIGSEGV inside): the
    /// request it had fails, it is restarted, and the next request is served.
    @Test(arguments: ["kill", "segv", "exit"])
    func crashMidDownloadFailsThatRequestAndRestarts(_ kind: String) throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/slow.png", .trickle(headers: [("Content-Type", "image/png")], body: Self.png, interval: 0.5))
        server.route("/crash.png", .ok(Self.png, contentType: "image/png"))
        server.route("/after.png", .ok(Self.png, contentType: "image/png"))
        let recorder = Recorder()
        let launch = FetchSupervisor.Launch.spawn(executable: Self.executable, arguments: [], environment: [
            "PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_FETCH_FAULT": "\(kind):/crash",
        ])
        let supervisor = try FetchSupervisor(options: Self.options(dir), launch: launch, requestDeadline: .seconds(30),
                                             onEvent: recorder.record)
        defer { supervisor.shutdown() }
        try Self.waitFor("the first fetcher") { supervisor.fetcherPID != nil }
        let slow = Locked<MediaOutcome?>(nil)
        supervisor.fetch(url: server.url("/slow.png")) { outcome in slow.withLock { $0 = outcome } }
        try Self.waitFor("the slow download to start") { server.hits("/slow.png") == 1 }
        let crashing = try Self.fetch(supervisor, server.url("/crash.png"))
        #expect(crashing.status == .failed)
        #expect(crashing.error?.code == .io, "\(crashing.encodeJSON())")
        try Self.waitFor("the slow download's outcome") { slow.withLock { $0 } != nil }
        let cut = try #require(slow.withLock { $0 })
        #expect(cut.status == .failed && cut.error?.code == .io, "\(cut.encodeJSON())")
        let expected = kind == "kill" ? "SIGKILL" : kind == "segv" ? "SIGSEGV" : "exit status 70"
        #expect(recorder.events.withLock { $0 }.contains {
            if case .lost(let reason, let failed, _) = $0 { reason.contains(expected) && failed == 2 } else { false }
        }, "\(recorder.events.withLock { $0 })")

        let after = try Self.fetch(supervisor, server.url("/after.png"))
        #expect(after.status == .stored, "\(after.encodeJSON())")
        #expect(supervisor.restarts == 1)
        #expect(recorder.started == 2)
    }

    @Test func hungFetcherIsKilledAtTheDeadlineAndReplaced() throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/hang.png", .ok(Self.png, contentType: "image/png"))
        server.route("/after.png", .ok(Self.png, contentType: "image/png"))
        let recorder = Recorder()
        let launch = FetchSupervisor.Launch.spawn(executable: Self.executable, arguments: [], environment: [
            "PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_FETCH_FAULT": "hang:/hang",
        ])
        let supervisor = try FetchSupervisor(options: Self.options(dir), launch: launch, requestDeadline: .seconds(2),
                                             onEvent: recorder.record)
        defer { supervisor.shutdown() }
        try Self.waitFor("the first fetcher") { supervisor.fetcherPID != nil }
        let hungPID = try #require(supervisor.fetcherPID)
        let started = Date()
        let hung = try Self.fetch(supervisor, server.url("/hang.png"))
        #expect(hung.status == .failed)
        #expect(hung.error?.code == .timeout, "\(hung.encodeJSON())")
        #expect(Date().timeIntervalSince(started) >= 1.9)
        // Killed and reaped: no such process any more.
        #expect(kill(hungPID, 0) == -1 && errno == ESRCH)
        let after = try Self.fetch(supervisor, server.url("/after.png"))
        #expect(after.status == .stored, "\(after.encodeJSON())")
        #expect(supervisor.restarts == 1)
    }

    /// A fetcher killed from outside (the OOM killer) while idle is replaced with backoff.
    @Test func killedWhileIdleIsReplaced() throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/a.png", .ok(Self.png, contentType: "image/png"))
        let supervisor = try FetchSupervisor(options: Self.options(dir), launch: .spawn(executable: Self.executable, arguments: []),
                                             requestDeadline: .seconds(30))
        defer { supervisor.shutdown() }
        try Self.waitFor("the first fetcher") { supervisor.fetcherPID != nil }
        let first = try #require(supervisor.fetcherPID)
        kill(first, SIGKILL)
        try Self.waitFor("a new fetcher") { supervisor.fetcherPID.map { $0 != first } ?? false }
        #expect(try Self.fetch(supervisor, server.url("/a.png")).status == .stored)
        #expect(supervisor.restarts == 1)
    }

    /// No fetcher can start: requests wait for one up to their deadline, then fail; the
    /// supervisor keeps trying with backoff instead of spinning.
    @Test func missingExecutableFailsRequestsAtTheirDeadline() throws {
        let dir = TempDir()
        let recorder = Recorder()
        let supervisor = try FetchSupervisor(options: Self.options(dir),
                                             launch: .spawn(executable: dir.appending("no-such-fetcher"), arguments: []),
                                             requestDeadline: .seconds(1), onEvent: recorder.record)
        defer { supervisor.shutdown() }
        let outcome = try Self.fetch(supervisor, "http://127.0.0.1:9/x.png")
        #expect(outcome.status == .failed && outcome.error?.code == .io, "\(outcome.encodeJSON())")
        let failures = recorder.events.withLock { $0 }.filter { if case .startFailed = $0 { true } else { false } }
        // 1 s at 100, 200, 400 ms backoff: a handful of attempts, not thousands.
        #expect((2...6).contains(failures.count), "\(failures)")
    }

    /// The fetcher refuses limits it cannot use and says why; pushspoold hears it.
    @Test func refusedConfigurationIsReported() throws {
        let dir = TempDir()
        // The store's parent is a file: MediaStore.prepare fails inside the fetcher.
        _ = FileManager.default.createFile(atPath: dir.appending("file"), contents: Data())
        let recorder = Recorder()
        let supervisor = try FetchSupervisor(options: MediaOptions(settings: Configuration().media, storeDirectory: dir.appending("file/media")),
                                             launch: .spawn(executable: Self.executable, arguments: []),
                                             requestDeadline: .seconds(30), onEvent: recorder.record)
        defer { supervisor.shutdown() }
        try Self.waitFor("the refusal") {
            recorder.events.withLock { $0 }.contains { if case .startFailed(let reason, _) = $0 { reason.contains("refused") } else { false } }
        }
    }

    @Test func shutdownCancelsWaitingRequests() throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/silent.png", .silent)
        let supervisor = try FetchSupervisor(options: Self.options(dir), launch: .spawn(executable: Self.executable, arguments: []),
                                             requestDeadline: .seconds(30))
        let outcome = Locked<MediaOutcome?>(nil)
        supervisor.fetch(url: server.url("/silent.png")) { result in outcome.withLock { $0 = result } }
        try Self.waitFor("the request to reach the server") { server.hits("/silent.png") == 1 }
        let pid = try #require(supervisor.fetcherPID)
        supervisor.shutdown()
        let cancelled = try #require(outcome.withLock { $0 })
        #expect(cancelled.wasCancelled)
        #expect(kill(pid, 0) == -1 && errno == ESRCH)
    }

    /// systemd's way: connect to a listening socket; each connection is one fetcher (here a
    /// test-owned listener that spawns one per accept, like Accept=yes).
    @Test func connectsToASocketLikeSystemdAcceptYes() throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/a.png", .ok(Self.png, contentType: "image/png"))
        let socketPath = dir.appending("fetch.sock")
        let listener = try AcceptSpawner(path: socketPath, executable: Self.executable)
        defer { listener.stop() }
        let supervisor = try FetchSupervisor(options: Self.options(dir), launch: .connect(path: socketPath),
                                             requestDeadline: .seconds(30))
        defer { supervisor.shutdown() }
        #expect(try Self.fetch(supervisor, server.url("/a.png")).status == .stored)
        #expect(supervisor.fetcherPID == nil)
        #expect(listener.accepted == 1)
    }
}

/// What systemd does for a socket with `Accept=yes`: accept, start one process with the
/// connection as fd 3 and LISTEN_FDS=1.
final class AcceptSpawner: Sendable {
    let fd: Int32
    let executable: String
    let count = Atomic<Int>(0)
    let children = Locked<[pid_t]>([])

    init(path: String, executable: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        self.fd = fd
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(fd, 4) == 0 else { throw SystemError(call: "bind", errno: errno, subject: path) }
        self.executable = executable
        let thread = Thread { [self] in
            while true {
                let connection = accept(fd, nil, nil)
                if connection < 0 { return }
                count.add(1, ordering: .relaxed)
                if let pid = try? ChildProcess.spawn(executable: executable, arguments: [], environment: ["LISTEN_FDS": "1"],
                                                     socket: connection) {
                    children.withLock { $0.append(pid) }
                }
                close(connection)
            }
        }
        thread.start()
    }

    var accepted: Int { count.load(ordering: .relaxed) }

    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        close(fd)
        for pid in children.withLock({ $0 }) {
            kill(pid, SIGKILL)
            _ = ChildProcess.reap(pid)
        }
    }
}
