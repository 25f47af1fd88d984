@preconcurrency import Glibc
import Testing
import PushFollow
import PushSystem
import PushErasure
import TestSupport

/// The eraser's thread keeps its nice value and lowers its I/O priority while it rewrites.
@Suite struct EraserPriorityTests {
    @Test func theRewriteRunsAtTheLowestBestEffortIOPriority() async throws {
        let temp = TempDir("eraser-ioprio")
        let seq = try await EraserWaitTests().makeJournal(temp, before: 3)
        let erase = temp.appending("state") + "/erase"
        try Posix.mkdirs(erase)
        try Posix.writeFileAtomically(directory: erase, name: EraserWaitTests.erasureID + ".subject",
                                      bytes: Array(#"{"scope":"user","id":"alice"}"#.utf8), mode: 0o600)
        let held = EraserWaitTests.Held()
        held.seq.withLock { $0 = seq }
        let seen = Locked<[String: (IOPriority?, Int32?)]>([:])
        let group = try EraserWaitTests().makeGroup(temp, held: held, lastSeq: seq) { step in
            let now = (try? PosixThread.currentIOPriority(), try? PosixThread.currentNiceness())
            seen.withLock { $0[step] = $0[step] ?? now }
        }
        try group.start()
        #expect(waitFor { seen.withLock { $0["started"] != nil } })
        _ = group.stop(deadline: Posix.monotonicNanos() + 5_000_000_000)
        let started = try #require(seen.withLock { $0["started"] })
        #expect(started.0 == EraserFollower.rewriteIOPriority)
        #expect(EraserFollower.rewriteIOPriority == .bestEffort(level: 7))
        #expect(started.1 == 10)
    }
}
