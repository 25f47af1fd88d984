@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport

/// `pushspoolctl journal tail -f` sleeps on inotify (the writer's in-place rewrite of
/// COMMITTED, new segments), not on a 200 ms timer (issue 34): it prints each record once it
/// is committed and does not wake while nothing is.
@Suite struct JournalTailFollowTests {
    @Test func followWakesOnCommitsAndSleepsBetweenThem() throws {
        let harness = try DaemonHarness(name: "tail-follow")
        try harness.start()
        defer { harness.stop() }
        try harness.drop(FetcherTests.plain(0), name: "plain-0.json")
        try waitUntil(timeout: 30, "the first record") { try harness.records().count == 1 }

        let output = harness.root + "/tail.out"
        _ = FileManager.default.createFile(atPath: output, contents: nil)
        let tail = Process()
        tail.executableURL = URL(fileURLWithPath: DaemonHarness.binDirectory + "/pushspoolctl")
        tail.arguments = ["--spool", harness.spool, "--state-dir", harness.state, "--config", harness.config,
                          "journal", "tail", "-f", "--json"]
        tail.standardOutput = FileHandle(forWritingAtPath: output)
        tail.standardError = FileHandle.nullDevice
        try tail.run()
        defer { kill(tail.processIdentifier, SIGKILL); tail.waitUntilExit() }
        func lines() -> Int {
            ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").split(separator: "\n").count
        }
        try waitUntil(timeout: 30, "the existing record on the tail's output") { lines() == 1 }

        // Idle: the old loop woke 5 times a second, 15 in this window.
        let before = IdleWakeupTests.contextSwitches(tail.processIdentifier)
        usleep(3_000_000)  // why: the measuring window, not a settle
        let woke = IdleWakeupTests.contextSwitches(tail.processIdentifier) - before
        #expect(woke < 5, "pushspoolctl journal tail -f woke \(woke) times in 3 s with nothing committed")

        try harness.drop(FetcherTests.plain(1), name: "plain-1.json")
        try waitUntil(timeout: 30, "the new record on the tail's output") { lines() == 2 }
        #expect(tail.isRunning)
    }
}
