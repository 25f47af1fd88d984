@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushSystem

/// The README's first command, `scripts/demo.sh`, run from the tree on the binaries built for
/// the tests (`--bin-dir`: no packages installed, nothing rebuilt; the same script otherwise):
/// what it prints — records, refusals, an inbox, the NCPushOpen request the stand-in vendor
/// received, the inbox page's address — and that it leaves no process behind, with `--keep`
/// until `--stop`. Run the way a person captures it, `out=$(scripts/demo.sh)`: stdout is a
/// pipe read to its end, so a process left holding it would hang the capture. Every process
/// the demo starts inherits a marker in its environment, which /proc shows.
@Suite(.serialized) struct DemoScriptTests {
    static let script = DaemonHarness.packageRoot + "/scripts/demo.sh"
    static let markerVariable = "PUSHSPOOL_DEMO_TEST_MARK"

    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
        /// The capture or the exit was not seen in time: a process of the demo kept stdout or
        /// another inherited descriptor open (everything was killed).
        var hung: Bool
    }

    /// Runs the demo with `arguments`, stdout into a pipe read to end of file. After `timeout`
    /// seconds every process carrying `marker` is killed, so a leak fails the test instead of
    /// hanging it.
    static func runDemo(_ arguments: [String], marker: String, tmp: TempDir, timeout: Double = 300) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [script] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment[markerVariable] = marker
        environment["TMPDIR"] = tmp.path
        process.environment = environment
        let out = Pipe()
        let errPath = tmp.appending("demo-\(UUID().uuidString).stderr")
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        process.standardOutput = out
        process.standardError = FileHandle(forWritingAtPath: errPath)
        process.standardInput = FileHandle.nullDevice
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        let data = Locked(Data())
        let done = DispatchSemaphore(value: 0)
        let reader = out.fileHandleForReading
        Thread {
            let bytes = reader.readDataToEndOfFile()
            data.withLock { $0 = bytes }
            done.signal()
        }.start()
        let deadline = DispatchTime.now() + timeout
        let readToEnd = done.wait(timeout: deadline) == .success
        // Foundation learns that its child exited when a socket the child inherited closes,
        // so a service that kept the demo's inherited descriptors would hide the exit too.
        let hung = !readToEnd || exited.wait(timeout: deadline) != .success
        if hung {
            kill(process.processIdentifier, SIGKILL)
            for pid in processes(carrying: marker) { kill(pid, SIGKILL) }
            if !readToEnd { done.wait() }
        }
        process.waitUntilExit()
        let stderr = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
        return Run(status: process.terminationStatus, stdout: String(decoding: data.withLock { $0 }, as: UTF8.self),
                   stderr: stderr, hung: hung)
    }

    /// Live processes (not zombies) whose environment holds `markerVariable=marker`.
    static func processes(carrying marker: String) -> [pid_t] {
        let needle = Array("\(markerVariable)=\(marker)".utf8)
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry), pid != getpid(),
                  let environ = try? Posix.readFile("/proc/\(pid)/environ", limit: 1 << 20) else { return nil }
            guard environ.split(separator: 0).contains(where: { Array($0) == needle }) else { return nil }
            // A zombie has exited already; its parent just has not reaped it yet.
            if let stat = try? Posix.readFile("/proc/\(pid)/stat", limit: 4096),
               let close = stat.lastIndex(of: UInt8(ascii: ")")), close + 2 < stat.count, stat[close + 2] == UInt8(ascii: "Z") {
                return nil
            }
            return pid
        }
    }

    /// Accepted (or event) and refused examples, from spool-examples/README.md's table.
    static func exampleCounts() throws -> (journaled: Int, refused: Int) {
        let expectations = try DaemonEndToEndTests.exampleExpectations()
        return (expectations.values.filter { $0 }.count, expectations.values.filter { !$0 }.count)
    }

    /// The lines of the section of `output` that starts with a line beginning `== title`.
    static func section(_ title: String, of output: String) -> [String] {
        let lines = output.components(separatedBy: "\n")
        guard let start = lines.firstIndex(where: { $0.hasPrefix("== " + title) }) else { return [] }
        return Array(lines[(start + 1)...].prefix { !$0.hasPrefix("== ") })
    }

    static func firstMatch(_ pattern: String, in text: String) -> String? {
        text.range(of: pattern, options: .regularExpression).map { String(text[$0]) }
    }

    /// What every run prints, checked against the examples and the vendor's request.
    static func checkTheStory(_ output: String) throws {
        let counts = try exampleCounts()
        #expect(counts.journaled >= 30 && counts.refused >= 15, "the examples table: \(counts)")
        // 1. Every example dropped as a producer would: records and refusals.
        #expect(output.contains("== journal records (\(counts.journaled))"), "records")
        let records = section("journal records", of: output).filter { $0.hasPrefix(#"{"seq":"#) }
        #expect(records.count == counts.journaled)
        #expect(records.contains { $0.contains(#""sourceFile":"mindbox-ios-current.json""#) })
        #expect(output.contains("== refused payloads (\(counts.refused))"), "refusals")
        let refusals = section("refused payloads", of: output).joined(separator: "\n")
        for code in ["invalid_json", "unsupported_vendor", "duplicate_keys"] {
            #expect(refusals.contains(code), "failed list shows \(code)")
        }
        // 2. Alice's inbox.
        let inbox = section("alice's inbox", of: output)
        #expect(inbox.contains { $0.range(of: #"^[0-9]+  (unseen|seen|read|archived)  20[0-9-]+T[0-9:.]+Z  [a-z]+"#, options: .regularExpression) != nil },
                "an inbox listing: \(inbox)")
        #expect(inbox.contains { $0.hasPrefix("    title: ") })
        // 3. The open, as the stand-in vendor received it.
        let request = section("the NCPushOpen request", of: output).filter { !$0.isEmpty }
        try #require(request.count >= 2, "the request: \(request)")
        #expect(request[0].range(of: #"^POST /v3/operations/async\?endpointId=pushspool-demo&operation=mobileapp\.NCPushOpen&deviceUUID=demo-iphone(&[^ ]*)? HTTP/1\.1$"#,
                                  options: .regularExpression) != nil, "request line: \(request[0])")
        let body = try JSONParser().parse(Array(request[1].utf8))
        #expect(body["customerAction"]?["customFields"]?["mobPushTranslateName"]?.stringValue == "Spring sale", "body: \(request[1])")
        #expect(body["customerAction"]?["customFields"]?["mobPushSendDateTime"]?.stringValue == "2026-03-01T10:00:00.000Z", "NCPushOpen sends its date in the one form the outbox normalises to")
        #expect(section("alice's item", of: output).contains { $0.contains("read=true") }, "the opened item is read")
        #expect(output.contains("== journal verify"))
        // 4. The page's address with a token.
        #expect(pageAddress(output) != nil, "the inbox page's address")
    }

    static func pageAddress(_ output: String) -> String? {
        firstMatch(#"http://127\.0\.0\.1:[0-9]+/#user=alice&token=[0-9a-f]{64}"#, in: output)
    }

    @Test func theDemoShowsTheWholeProductAndStopsEverything() throws {
        let tmp = TempDir("demo")
        let marker = UUID().uuidString
        defer { for pid in Self.processes(carrying: marker) { kill(pid, SIGKILL) } }
        let run = try Self.runDemo(["--bin-dir", ProcessRunner.binDirectory], marker: marker, tmp: tmp)
        try #require(!run.hung, "the demo never ended: a process kept stdout or another descriptor open\n\(run.stdout.suffix(3000))")
        #expect(run.status == 0, "exit \(run.status)\n\(run.stderr.suffix(3000))\n\(run.stdout.suffix(3000))")
        try Self.checkTheStory(run.stdout)
        let stopping = Self.section("stopping", of: run.stdout)
        for name in ["pushspool-inbox", "pushspoold", "vendor"] {
            #expect(stopping.contains("\(name) exited 0"), "\(name) stopped cleanly: \(stopping)")
        }
        #expect(Self.processes(carrying: marker).isEmpty, "processes of the demo left running")
    }

    @Test func keptRunningThePageShowsAlicesInboxUntilStopped() throws {
        let tmp = TempDir("demokeep")
        let marker = UUID().uuidString
        defer { for pid in Self.processes(carrying: marker) { kill(pid, SIGKILL) } }
        let run = try Self.runDemo(["--keep", "--bin-dir", ProcessRunner.binDirectory], marker: marker, tmp: tmp)
        // The capture ended while the three services run on: none of them holds stdout.
        try #require(!run.hung, "the demo never ended: a process kept stdout or another descriptor open")
        #expect(run.status == 0, "exit \(run.status)\n\(run.stderr.suffix(3000))\n\(run.stdout.suffix(3000))")
        try Self.checkTheStory(run.stdout)
        #expect(Self.processes(carrying: marker).count == 3, "pushspoold, pushspool-inbox and the stand-in vendor run on")
        let stop = try #require(Self.firstMatch(#"scripts/demo.sh --stop \S+"#, in: run.stdout), "how to stop it")
        let directory = String(stop.dropFirst("scripts/demo.sh --stop ".count))
        #expect(directory.hasPrefix(tmp.path + "/pushspool-demo."))
        let address = try #require(Self.pageAddress(run.stdout))

        if FileManager.default.isExecutableFile(atPath: InboxPageTests.chromium) {
            // `live=0`: no event stream, so the virtual-time budget can run out (see InboxPage).
            let dom = try InboxPageTests.run(["--dump-dom", address + "&live=0"], profile: tmp.appending("chromium"))
            #expect(dom.contains("data-ready=\"1\""), "\(dom.prefix(2000))")
            let rows = dom.components(separatedBy: "<li class=\"item").dropFirst()
            #expect(rows.count >= 5, "alice's items on the page: \(rows.count)")
            let newest = try #require(Self.section("alice's inbox", of: run.stdout).first { $0.hasPrefix("    title: ") })
            let title = String(newest.dropFirst("    title: ".count))
            #expect(dom.contains(">\(title)</div>"), "the newest item, \(title), is on the page")
        }

        let stopped = try ProcessRunner.run("/bin/bash", [Self.script, "--stop", directory])
        #expect(stopped.status == 0, "\(stopped.stdout)\n\(stopped.stderr)")
        for name in ["pushspool-inbox", "pushspoold", "vendor"] {
            #expect(stopped.stdout.contains("\(name) (pid "), "\(name) stopped: \(stopped.stdout)")
        }
        #expect(Self.processes(carrying: marker).isEmpty, "processes of the demo left running after --stop")
    }
}
