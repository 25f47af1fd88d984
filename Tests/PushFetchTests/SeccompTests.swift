@preconcurrency import Glibc
import Foundation
import Testing
import PushFetchClient
import PushFetchServer
import PushMedia
import PushMediaCore
import PushSystem
import TestSupport

/// The fetcher's own seccomp filter, on the real `pushspool-fetch` binary: in force on every
/// thread once it is ready, forbidden calls kill it (SIGSYS) or fail with EPERM, and
/// downloads with JPEG/PNG/WebP decoding and thumbnails still work under it.
@Suite struct SeccompTests {
    static let executable = SupervisorTests.executable

    /// A fetcher spawned the way pushspoold spawns it, configured, with its end of the pair.
    struct Fetcher {
        let pid: pid_t
        let fd: Int32

        /// `wrapper`: a program and its arguments that exec the fetcher (its path appended).
        init(_ dir: TempDir, arguments: [String] = [], environment: [String: String] = [:], wrapper: [String] = []) throws {
            let (mine, theirs) = try SeqPacket.pair()
            defer { close(theirs) }
            let command = wrapper + [SeccompTests.executable] + arguments
            pid = try ChildProcess.spawn(executable: command[0], arguments: Array(command.dropFirst()),
                                         environment: environment, socket: theirs)
            fd = mine
            let configuration = FetchConfiguration(SupervisorTests.options(dir))
            try SeqPacket.send(fd, FetchMessage.configure(configuration).encoded(), wait: true)
        }

        /// The fetcher's first answer (nil when it closed the connection without one).
        func firstAnswer() throws -> FetchMessage? {
            #expect(SeqPacket.readable(fd, timeoutMillis: 20_000), "no answer from pushspool-fetch within 20 s")
            guard case .message(let bytes) = try SeqPacket.receive(fd) else { return nil }
            return try FetchMessage.decode(bytes)
        }

        /// Closes the connection (the fetcher exits 0) and reaps it; the raw wait status.
        /// Whether the first answer is `ready`; if not, records an issue and finishes the fetcher.
        func isReady() throws -> Bool {
            let answer = try firstAnswer()
            guard case .ready = answer else {
                Issue.record("expected ready, got \(String(describing: answer))")
                _ = finish()
                return false
            }
            return true
        }

        func finish() -> Int32? {
            close(fd)
            if let status = ChildProcess.reap(pid, timeoutMillis: 10_000) { return status }
            kill(pid, SIGKILL)
            return ChildProcess.reap(pid)
        }
    }

    /// "Seccomp:" and friends from /proc/PID[/task/TID]/status.
    static func statusField(_ path: String, _ name: String) -> String? {
        guard let text = try? String(contentsOfFile: path + "/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(name + ":") {
            return line.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces)
        }
        return nil
    }

    static func filterCount(_ path: String) -> Int? {
        statusField(path, "Seccomp_filters").flatMap { Int($0) }
    }

    @Test func filterIsInForceOnEveryThreadOnceReady() throws {
        let dir = TempDir()
        let fetcher = try Fetcher(dir)
        guard try fetcher.isReady() else { return }
        let proc = "/proc/\(fetcher.pid)"
        #expect(Self.statusField(proc, "Seccomp") == "2")
        #expect(Self.statusField(proc, "NoNewPrivs") == "1")
        // One filter more than this test process has (a container may have its own).
        let inherited = try #require(Self.filterCount("/proc/self"))
        #expect(Self.filterCount(proc) == inherited + 1)
        // TSYNC: libcurl's network thread and the finishing threads, started before the
        // filter was loaded, are under it too.
        let tasks = try FileManager.default.contentsOfDirectory(atPath: proc + "/task")
        #expect(tasks.count > 1, "the fetcher runs threads before its first request")
        for task in tasks {
            #expect(Self.statusField("\(proc)/task/\(task)", "Seccomp") == "2", "thread \(task)")
        }
        let status = try #require(fetcher.finish())
        #expect(ChildProcess.describe(status: status) == "exit status 0")
    }

    /// The documented switch for debugging: no filter of its own (the rest of the hardening stays).
    @Test func noSeccompOptionLeavesTheFilterOff() throws {
        let dir = TempDir()
        let fetcher = try Fetcher(dir, arguments: ["--no-seccomp"])
        guard try fetcher.isReady() else { return }
        let inherited = try #require(Self.filterCount("/proc/self"))
        #expect(Self.filterCount("/proc/\(fetcher.pid)") == inherited)
        #expect(Self.statusField("/proc/\(fetcher.pid)", "NoNewPrivs") == "1")
        _ = fetcher.finish()
    }

    /// What systemd does for a unit's `SystemCallFilter=`, done by python3 with libseccomp
    /// before it execs the fetcher: a filter that fails ptrace (like `~@debug`) and, unless
    /// `allowSeccomp`, seccomp(2) too (as `@system-service` alone does) with EPERM.
    static func outerFilter(allowSeccomp: Bool) -> [String] {
        let script = """
            import ctypes, os, sys
            lib = ctypes.CDLL("libseccomp.so.2")
            lib.seccomp_init.restype = ctypes.c_void_p
            ctx = ctypes.c_void_p(lib.seccomp_init(ctypes.c_uint32(0x7fff0000)))
            names = [b"ptrace"] + ([] if sys.argv[1] == "1" else [b"seccomp"])
            for name in names:
                assert lib.seccomp_rule_add_array(ctx, ctypes.c_uint32(0x00050001), lib.seccomp_syscall_resolve_name(name), 0, None) == 0
            assert lib.seccomp_attr_set(ctx, 3, 1) == 0 and lib.seccomp_load(ctx) == 0
            os.execv(sys.argv[2], sys.argv[2:])
            """
        return ["/usr/bin/python3", "-c", script, allowSeccomp ? "1" : "0"]
    }

    /// Under the shipped units (`SystemCallFilter=seccomp` added to @system-service) the
    /// fetcher's filter stacks on the unit's. Where a unit refuses seccomp(2) the fetcher
    /// cannot sync its filter to every thread: it says so and runs under the outer filter
    /// rather than fetching nothing.
    @Test(arguments: [true, false])
    func stacksOnAnOuterFilterLikeSystemds(allowSeccomp: Bool) throws {
        let dir = TempDir()
        let fetcher = try Fetcher(dir, wrapper: Self.outerFilter(allowSeccomp: allowSeccomp))
        guard try fetcher.isReady() else { return }
        let inherited = try #require(Self.filterCount("/proc/self"))
        #expect(Self.filterCount("/proc/\(fetcher.pid)") == inherited + (allowSeccomp ? 2 : 1))
        #expect(Self.statusField("/proc/\(fetcher.pid)", "Seccomp") == "2")
        _ = fetcher.finish()
    }

    static func probe(_ call: String, arguments: [String] = [], in dir: TempDir = TempDir()) throws -> Int32 {
        let fetcher = try Fetcher(dir, arguments: arguments, environment: [
            "PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_FETCH_TEST_SYSCALL": call,
        ])
        // The probe runs before the ready message: the connection just closes.
        _ = try fetcher.firstAnswer()
        return try #require(fetcher.finish())
    }

    /// Hostile calls end the process inside the kernel, before they do anything.
    @Test(arguments: ["execve", "ptrace", "mount", "unshare"])
    func hostileCallKillsTheFetcher(_ call: String) throws {
        let status = try Self.probe(call)
        #expect(ChildProcess.describe(status: status) == "killed by signal 31 (SIGSYS)", "\(call)")
    }

    /// Calls outside the allow-list that are not on the kill list fail with EPERM (exit 101
    /// from the hook); a new user namespace by clone(2) and a netlink socket among them.
    @Test(arguments: ["chdir", "socket-netlink", "clone-newuser"])
    func otherCallFailsWithEPERM(_ call: String) throws {
        let status = try Self.probe(call)
        #expect(ChildProcess.describe(status: status) == "exit status \(100 + EPERM)", "\(call)")
    }

    /// The control: the same calls without the filter are not refused by it (chdir succeeds,
    /// exit 99; execve runs /bin/true, exit 0), so the two tests above measure the filter.
    @Test func withoutTheFilterTheProbesAreNotRefused() throws {
        #expect(ChildProcess.describe(status: try Self.probe("chdir", arguments: ["--no-seccomp"])) == "exit status 99")
        #expect(ChildProcess.describe(status: try Self.probe("execve", arguments: ["--no-seccomp"])) == "exit status 0")
    }

    /// Downloads, the type sniffer and libvips decoding + thumbnails of JPEG, PNG and WebP
    /// under the filter (an allow-list that is too tight fails here, or kills the fetcher).
    @Test func decodesAndThumbnailsUnderTheFilter() throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        let images: [(String, [UInt8], String)] = [
            ("/a.jpg", ImageFixtures.jpeg, "image/jpeg"), ("/a.png", SupervisorTests.png, "image/png"),
            ("/a.webp", ImageFixtures.webp, "image/webp"),
        ]
        for (path, bytes, type) in images { server.route(path, .ok(bytes, contentType: type)) }
        let recorder = SupervisorTests.Recorder()
        let supervisor = try FetchSupervisor(options: SupervisorTests.options(dir),
                                             launch: .spawn(executable: Self.executable, arguments: []),
                                             requestDeadline: .seconds(30), onEvent: recorder.record)
        defer { supervisor.shutdown() }
        try SupervisorTests.waitFor("the fetcher") { supervisor.fetcherPID != nil }
        let pid = try #require(supervisor.fetcherPID)
        #expect(Self.statusField("/proc/\(pid)", "Seccomp") == "2")
        for (path, bytes, type) in images {
            let outcome = try SupervisorTests.fetch(supervisor, server.url(path))
            #expect(outcome.status == .stored, "\(path): \(outcome.encodeJSON())")
            #expect(outcome.contentType == type, "\(path)")
            #expect(outcome.sha256 == PushSystem.SHA256.hex(of: bytes), "\(path)")
            #expect(outcome.decodable == true, "\(path): \(outcome.encodeJSON())")
            let thumbnail = try #require(outcome.thumbnail, "\(path): \(outcome.encodeJSON())")
            #expect(FileManager.default.fileExists(atPath: thumbnail.path), "\(thumbnail.path)")
        }
        // A name, not an address: getaddrinfo (glibc's resolver, /etc/hosts, nsswitch) under the filter.
        let named = try SupervisorTests.fetch(supervisor, server.url("/a.png").replacingOccurrences(of: "127.0.0.1", with: "localhost"))
        #expect(named.status == .stored, "\(named.encodeJSON())")
        // Same process throughout: nothing killed it.
        #expect(supervisor.fetcherPID == pid)
        #expect(supervisor.restarts == 0, "\(recorder.events.withLock { $0 })")
    }

    /// https under the filter: OpenSSL reads the CA file, handshakes and verifies against
    /// `openssl s_server -WWW` on 127.0.0.1 with a certificate made for the test.
    @Test func httpsUnderTheFilter() throws {
        let dir = TempDir()
        let server = try TLSFileServer(dir, files: ["a.jpg": ImageFixtures.jpeg])
        var options = SupervisorTests.options(dir)
        options.allowHTTP = false
        options.caFile = server.certificate
        let supervisor = try FetchSupervisor(options: options, launch: .spawn(executable: Self.executable, arguments: []),
                                             requestDeadline: .seconds(30))
        defer { supervisor.shutdown() }
        try SupervisorTests.waitFor("the fetcher") { supervisor.fetcherPID != nil }
        let pid = try #require(supervisor.fetcherPID)
        #expect(Self.statusField("/proc/\(pid)", "Seccomp") == "2")
        let outcome = try SupervisorTests.fetch(supervisor, server.url("a.jpg"))
        #expect(outcome.status == .stored, "\(outcome.encodeJSON())")
        #expect(outcome.sha256 == PushSystem.SHA256.hex(of: ImageFixtures.jpeg))
        #expect(supervisor.restarts == 0)
    }
}

/// The filter's lists as data: a name in two lists would leave its action to libseccomp's
/// rule order, and a misspelt name would be skipped silently as "not on this architecture".
@Suite struct SyscallFilterPolicyTests {
    @Test func listsAreDisjoint() {
        let allowed = Set(SyscallFilter.allowed.map(\.name))
        let killed = Set(SyscallFilter.killed)
        let unsupported = Set(SyscallFilter.unsupported)
        #expect(allowed.intersection(killed).isEmpty, "\(allowed.intersection(killed))")
        #expect(allowed.intersection(unsupported).isEmpty)
        #expect(killed.intersection(unsupported).isEmpty)
        #expect(allowed.count == SyscallFilter.allowed.count, "a call is listed twice")
    }

    #if arch(x86_64)
    /// Every name is a real x86_64 system call (this is the architecture CI and the .deb build on).
    @Test func everyNameResolvesOnX86_64() {
        for name in SyscallFilter.allowed.map(\.name) + SyscallFilter.killed + SyscallFilter.unsupported {
            #expect(SyscallFilter.resolve(name) != nil, "\(name)")
        }
        #expect(SyscallFilter.resolve("no_such_call") == nil)
    }
    #endif

    /// The first steps of a container escape or of code injection are not merely refused:
    /// they end the process.
    @Test(arguments: ["execve", "execveat", "ptrace", "process_vm_writev", "mount", "unshare", "setns", "bpf",
                      "init_module", "finit_module", "kexec_load", "keyctl"])
    func hostileCallsAreOnTheKillList(_ name: String) {
        #expect(SyscallFilter.killed.contains(name))
    }
}

/// The fetcher's Landlock self-restriction, by behaviour (/proc/PID/status does not show
/// Landlock): the debug-only probe writes a file after the fetcher has confined itself.
/// It runs as the daemon's user, so only Landlock stands between it and the daemon's
/// state directory next to the media store.
@Suite struct LandlockTests {
    /// The probe's exit status for a write the kernel refused with `errno`, or for success.
    static func refused(_ errno: Int32) -> String { "exit status \(100 + errno)" }
    static let written = "exit status 99"

    /// `dir/state` with a journal segment in it, as pushspoold keeps next to `dir/media`.
    static func stateDirectory(_ dir: TempDir) throws -> (directory: String, segment: String) {
        let state = dir.appending("state")
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let segment = state + "/journal-0000000001.seg"
        try Data("records".utf8).write(to: URL(fileURLWithPath: segment))
        return (state, segment)
    }

    @Test func cannotCreateOrWriteFilesBesideTheMediaStore() throws {
        let dir = TempDir()
        let (state, segment) = try Self.stateDirectory(dir)
        let created = state + "/planted"
        var status = try SeccompTests.probe("write-file:" + created, in: dir)
        #expect(ChildProcess.describe(status: status) == Self.refused(EACCES))
        #expect(!FileManager.default.fileExists(atPath: created))
        status = try SeccompTests.probe("write-file:" + segment, in: dir)
        #expect(ChildProcess.describe(status: status) == Self.refused(EACCES))
        #expect(FileManager.default.contents(atPath: segment) == Data("records".utf8))
        // The store's parent directory (the daemon's state directory itself) is out of reach too.
        status = try SeccompTests.probe("write-file:" + dir.appending("media-sibling"), in: dir)
        #expect(ChildProcess.describe(status: status) == Self.refused(EACCES))
        #expect(!FileManager.default.fileExists(atPath: dir.appending("media-sibling")))
    }

    /// The rule is not a blanket refusal: beneath the media store the same probe writes.
    @Test func writesBeneathTheMediaStore() throws {
        let dir = TempDir()
        let path = dir.appending("media") + "/" + MediaStore.tempDirectoryName + "/probe.part"
        let status = try SeccompTests.probe("write-file:" + path, in: dir)
        #expect(ChildProcess.describe(status: status) == Self.written)
        #expect(FileManager.default.fileExists(atPath: path))
    }

    /// The documented switch for debugging; also the control for the refusals above.
    @Test func noLandlockOptionLeavesFileAccessToTheUnit() throws {
        let dir = TempDir()
        let (state, _) = try Self.stateDirectory(dir)
        let created = state + "/planted"
        let status = try SeccompTests.probe("write-file:" + created, arguments: ["--no-landlock"], in: dir)
        #expect(ChildProcess.describe(status: status) == Self.written)
        #expect(FileManager.default.fileExists(atPath: created))
    }

    /// A kernel without Landlock (ENOSYS), one with it disabled at boot (EOPNOTSUPP) or a unit
    /// filter that refuses the calls (EPERM): python3 makes landlock_create_ruleset fail so
    /// and sends the fetcher's stderr to a file before exec'ing it. The fetcher warns once and
    /// serves, unconfined (the probe's write succeeds), rather than refusing to work.
    @Test(arguments: [ENOSYS, EOPNOTSUPP, EPERM])
    func unavailableLandlockIsOneWarning(_ code: Int32) throws {
        let dir = TempDir()
        let (state, _) = try Self.stateDirectory(dir)
        let log = dir.appending("stderr.log")
        let script = """
            import ctypes, os, sys
            lib = ctypes.CDLL("libseccomp.so.2")
            lib.seccomp_init.restype = ctypes.c_void_p
            ctx = ctypes.c_void_p(lib.seccomp_init(ctypes.c_uint32(0x7fff0000)))
            action = ctypes.c_uint32(0x00050000 | int(sys.argv[1]))
            number = lib.seccomp_syscall_resolve_name(b"landlock_create_ruleset")
            assert lib.seccomp_rule_add_array(ctx, action, number, 0, None) == 0
            assert lib.seccomp_attr_set(ctx, 3, 1) == 0 and lib.seccomp_load(ctx) == 0
            fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.dup2(fd, 2)
            os.execv(sys.argv[3], sys.argv[3:])
            """
        let created = state + "/planted"
        let fetcher = try SeccompTests.Fetcher(dir, environment: [
            "PUSHSPOOL_ALLOW_FAULT_INJECTION": "1", "PUSHSPOOL_FETCH_TEST_SYSCALL": "write-file:" + created,
        ], wrapper: ["/usr/bin/python3", "-c", script, String(code), log])
        _ = try fetcher.firstAnswer()
        let status = try #require(fetcher.finish())
        #expect(ChildProcess.describe(status: status) == Self.written)
        let name = SystemError(call: "landlock_create_ruleset", errno: code).errnoName
        let lines = (try String(contentsOfFile: log, encoding: .utf8)).split(separator: "\n").filter { $0.contains("landlock") }
        #expect(lines == ["pushspool-fetch: warning: landlock unavailable (\(name)); file access is confined only by the unit's settings"])
    }

    /// The rules as data: writing rights beneath the store only, and only rights a store needs.
    @Test func onlyTheStoreIsWritable() {
        let rules = Landlock.fetcherRules(storeDirectory: "/var/lib/pushspool/media", caFile: "/etc/pushspool/ca.pem")
        let writing: Landlock.Access = [.writeFile, .truncate, .removeFile, .removeDir, .makeDir, .makeReg, .refer,
                                        .makeChar, .makeBlock, .makeSock, .makeFifo, .makeSym]
        let writable = rules.filter { !$0.access.isDisjoint(with: writing) }.map(\.path)
        #expect(writable == ["/dev/null", "/var/lib/pushspool/media"])
        let store = rules.first { $0.path == "/var/lib/pushspool/media" }
        #expect(store?.access.isDisjoint(with: [.execute, .makeChar, .makeBlock, .makeSock, .makeFifo, .makeSym, .ioctlDev]) == true)
        #expect(rules.contains(Landlock.Rule(path: "/etc/pushspool/ca.pem", access: .readFile)))
    }

    /// Every filesystem right of the running kernel's ABI is handled: a right left unhandled
    /// would be allowed everywhere.
    @Test func handlesEveryFilesystemRightOfTheABI() {
        #expect(Landlock.Access.handled(abi: 1).rawValue == (1 << 13) - 1)
        #expect(Landlock.Access.handled(abi: 3).contains([.refer, .truncate]))
        #expect(Landlock.Access.handled(abi: 7).rawValue == (1 << 16) - 1)
    }
}
