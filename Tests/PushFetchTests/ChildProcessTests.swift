@preconcurrency import Glibc
import Testing
import PushFetchClient
import PushSystem

/// `ChildProcess.reap(_:timeoutMillis:)` waits on a pidfd (issue 34: it used to look every
/// 10 ms): it answers as soon as the child ends, and nil at the timeout while it runs.
@Suite struct ChildProcessTests {
    static func spawnSleep() throws -> pid_t {
        let (mine, theirs) = try SeqPacket.pair()
        defer { Posix.close(mine); Posix.close(theirs) }
        return try ChildProcess.spawn(executable: "/bin/sleep", arguments: ["30"], socket: theirs)
    }

    @Test func timesOutWhileTheChildRunsAndReapsItOnceItEnds() throws {
        let pid = try Self.spawnSleep()
        var start = Posix.monotonicNanos()
        #expect(ChildProcess.reap(pid, timeoutMillis: 200) == nil)
        let waited = Posix.monotonicNanos() - start
        #expect(waited >= 190_000_000, "returned after \(waited / 1_000_000) ms, before its timeout")
        #expect(kill(pid, SIGTERM) == 0)
        start = Posix.monotonicNanos()
        let status = try #require(ChildProcess.reap(pid, timeoutMillis: 20_000))
        #expect(ChildProcess.describe(status: status) == "killed by signal 15 (SIGTERM)")
        #expect(Posix.monotonicNanos() - start < 10_000_000_000)
        // Reaped: no such child any more.
        #expect(ChildProcess.reap(pid, timeoutMillis: 0) == nil)
    }
}
