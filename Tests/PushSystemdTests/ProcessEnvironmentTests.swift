@preconcurrency import Glibc
import Foundation
import Testing
@testable import PushSystemd
import PushSystem
import TestSupport

/// Tests that change the process environment (NOTIFY_SOCKET, WATCHDOG_*, JOURNAL_STREAM) or
/// fd 2: process-global, so they run one at a time.
@Suite(.serialized) struct ProcessEnvironmentTests {
    init() {
        unsetenv("NOTIFY_SOCKET")
        unsetenv("WATCHDOG_USEC")
        unsetenv("WATCHDOG_PID")
        unsetenv("JOURNAL_STREAM")
    }

    @Test func lifecycleNotificationsArriveAsDatagrams() throws {
        let socket = try NotifySocket()
        setenv("NOTIFY_SOCKET", socket.path, 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        let notifier = SystemdNotifier()
        #expect(notifier.isSupervised)

        notifier.extendTimeout(microseconds: 30_000_000)
        #expect(Self.next("EXTEND_TIMEOUT_USEC=30000000", on: socket))
        notifier.ready(status: "ingested 0\nrefused 0")
        #expect(Self.next("READY=1\nSTATUS=ingested 0 refused 0", on: socket))

        let before = Posix.monotonicNanos() / 1000
        notifier.reloading()
        let reload = try #require(Self.next(on: socket) { $0.hasPrefix("RELOADING=1") })
        let lines = reload.split(separator: "\n")
        #expect(lines.first == "RELOADING=1")
        let monotonic = try #require(lines.first { $0.hasPrefix("MONOTONIC_USEC=") }.flatMap { UInt64($0.dropFirst("MONOTONIC_USEC=".count)) })
        #expect(monotonic >= before && monotonic <= Posix.monotonicNanos() / 1000)

        notifier.stopping(status: "Draining 3 payloads")
        #expect(Self.next("STOPPING=1\nSTATUS=Draining 3 payloads", on: socket))
        notifier.failing(errno: ENOSPC, status: "Journal: no space left")
        #expect(Self.next("STATUS=Journal: no space left\nERRNO=\(ENOSPC)", on: socket))
    }

    /// The next datagram of this test's notifier that `isOurs`, skipping others: NOTIFY_SOCKET
    /// is process-wide, so in-process daemons of suites running in parallel send their own
    /// (`STATUS=recovering journal`, `READY=1`) here while it is set. Nil when none came.
    static func next(on socket: NotifySocket, where isOurs: (String) -> Bool) -> String? {
        while let message = socket.receive() {
            if isOurs(message) { return message }
        }
        return nil
    }

    /// Whether `expected` arrives, after any foreign datagrams.
    static func next(_ expected: String, on socket: NotifySocket) -> Bool {
        next(on: socket) { $0 == expected } != nil
    }

    @Test func startupExtensionsAreRateLimited() throws {
        let socket = try NotifySocket()
        setenv("NOTIFY_SOCKET", socket.path, 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        let notifier = SystemdNotifier()
        // NOTIFY_SOCKET is process-wide: in-process servers of suites running in parallel send
        // their READY=1 here too while it is set. Only this notifier's extensions count.
        func extensions() -> [String] { socket.drain().filter { $0.hasPrefix("EXTEND_TIMEOUT_USEC=") } }
        // Generous periods: the machine may be busy compiling while this runs.
        for _ in 0..<10_000 { notifier.extendTimeoutIfDue(by: .seconds(3)) }
        #expect(extensions() == ["EXTEND_TIMEOUT_USEC=3000000"])
        Thread.sleep(forTimeInterval: 1.05) // why: the rate limit is per real second: the next one is due only after it
        notifier.extendTimeoutIfDue(by: .seconds(3))
        #expect(extensions() == ["EXTEND_TIMEOUT_USEC=3000000"])
    }

    @Test func withoutNotifySocketEverythingIsANoOp() throws {
        let socket = try NotifySocket()
        let notifier = SystemdNotifier()
        #expect(!notifier.isSupervised)
        notifier.ready(status: "x")
        notifier.status("y", force: true)
        #expect(socket.receive(timeout: .milliseconds(100)) == nil)
    }

    @Test func statusIsThrottledButTheLatestLineIsNotLost() throws {
        let socket = try NotifySocket()
        setenv("NOTIFY_SOCKET", socket.path, 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        let notifier = SystemdNotifier(statusInterval: .seconds(1))

        notifier.status("ingested 1")
        #expect(socket.receive() == "STATUS=ingested 1")
        for count in 2...50 { notifier.status("ingested \(count)") }
        notifier.flushStatus()  // still within the interval: held back
        #expect(socket.receive(timeout: .milliseconds(150)) == nil)
        Thread.sleep(forTimeInterval: 1) // why: the rate limit is per real second: the next one is due only after it
        notifier.flushStatus()
        #expect(socket.receive() == "STATUS=ingested 50")
        notifier.flushStatus()
        #expect(socket.receive(timeout: .milliseconds(100)) == nil)

        notifier.status("error: ENOSPC", force: true)
        #expect(socket.receive() == "STATUS=error: ENOSPC")
        // An unchanged line is not resent, even after the interval.
        Thread.sleep(forTimeInterval: 1.05) // why: the rate limit is per real second: the next one is due only after it
        notifier.status("error: ENOSPC")
        #expect(socket.receive(timeout: .milliseconds(100)) == nil)
    }

    @Test func watchdogIntervalIsHalfOfWatchdogUsecForThisProcessOnly() {
        #expect(SystemdNotifier().watchdogInterval == nil)

        setenv("WATCHDOG_USEC", "3000000", 1)
        defer { unsetenv("WATCHDOG_USEC"); unsetenv("WATCHDOG_PID") }
        #expect(SystemdNotifier().watchdogInterval == .milliseconds(1500))
        setenv("WATCHDOG_PID", "\(getpid())", 1)
        #expect(SystemdNotifier().watchdogInterval == .milliseconds(1500))
        // Meant for another process (e.g. inherited from a parent): not ours to ping.
        setenv("WATCHDOG_PID", "\(getpid() == 1 ? 2 : 1)", 1)
        #expect(SystemdNotifier().watchdogInterval == nil)
    }

    @Test func watchdogPingsAreRateLimitedToTheInterval() throws {
        let socket = try NotifySocket()
        setenv("NOTIFY_SOCKET", socket.path, 1)
        setenv("WATCHDOG_USEC", "2000000", 1)
        defer { unsetenv("NOTIFY_SOCKET"); unsetenv("WATCHDOG_USEC") }
        let notifier = SystemdNotifier()
        #expect(notifier.watchdogInterval == .seconds(1))

        for _ in 0..<1000 { notifier.watchdogPing() }
        #expect(socket.drain() == ["WATCHDOG=1"])
        Thread.sleep(forTimeInterval: 1.05) // why: the rate limit is per real second: the next one is due only after it
        for _ in 0..<1000 { notifier.watchdogPing() }
        #expect(socket.drain() == ["WATCHDOG=1"])
    }

    @Test func watchdogPingIsSilentWhenTheWatchdogIsOff() throws {
        let socket = try NotifySocket()
        setenv("NOTIFY_SOCKET", socket.path, 1)
        defer { unsetenv("NOTIFY_SOCKET") }
        SystemdNotifier().watchdogPing()
        #expect(socket.receive(timeout: .milliseconds(100)) == nil)
    }

    @Test func journalIsChosenOnlyWhenJournalStreamNamesStderr() throws {
        var st = stat()
        #expect(fstat(2, &st) == 0)
        #expect(!EventLog.stderrIsJournalStream())
        #expect(EventLog().destination == .lines(fd: 2))

        setenv("JOURNAL_STREAM", "\(st.st_dev):\(st.st_ino)", 1)
        defer { unsetenv("JOURNAL_STREAM") }
        #expect(EventLog.stderrIsJournalStream())
        #expect(EventLog().destination == .journal)

        // Inherited from a parent whose stderr was the journal, but ours is elsewhere now.
        setenv("JOURNAL_STREAM", "\(st.st_dev):\(st.st_ino &+ 1)", 1)
        #expect(!EventLog.stderrIsJournalStream())
        #expect(EventLog().destination == .lines(fd: 2))
    }

    @Test func withoutJournaldEventsArePlainLinesOnStderr() throws {
        let pipe = Pipe2()
        let savedStderr = dup(2)
        #expect(savedStderr >= 0)
        let identifier = "pstest\(UInt16.random(in: 0...UInt16.max))"
        let log = EventLog(identifier: identifier)
        #expect(log.destination == .lines(fd: 2))

        dup2(pipe.writeEnd, 2)
        log.log(.ingested, "Payload ingested", fields: [(EventField.pushID, "abc-1"), (EventField.spoolFile, "new file.json"), (EventField.journalSequence, "42")])
        log.log(.refused, "Spool file refused", fields: [("reason code", "json_invalid\nsecond line")])
        dup2(savedStderr, 2)
        close(savedStderr)

        let lines = pipe.available().split(separator: "\n").filter { $0.hasPrefix(identifier) }
        #expect(lines == [
            "\(identifier)[\(getpid())]: <6> Payload ingested EVENT=ingested PUSH_ID=abc-1 SPOOL_FILE=\"new file.json\" JOURNAL_SEQ=42",
            "\(identifier)[\(getpid())]: <4> Spool file refused EVENT=refused REASON_CODE=\"json_invalid\\nsecond line\"",
        ])
    }
}
