@preconcurrency import Glibc
import Dispatch
import Foundation
import Testing
@testable import PushJournal
import PushSystem
import TestSupport

/// A real full disk: the journal on a tiny tmpfs (needs root for mount(2); skipped otherwise).
/// Unlike an injected errno, tmpfs accepts part of a write before ENOSPC, so this checks that the
/// partial frame is cut back and nothing of it is acknowledged.
@Suite struct RealENOSPCTests {
    static var canMount: Bool { getuid() == 0 }

    @Test(.enabled(if: canMount, "needs root to mount a tmpfs"))
    func fullTmpfsPausesWithoutLossAndResumesWhenSpaceReturns() throws {
        let temp = TempDir()
        let mountPoint = temp.path + "/mnt"
        try Posix.mkdirs(mountPoint)
        guard mount("tmpfs", mountPoint, "tmpfs", 0, "size=64k") == 0 else {
            Issue.record("mount tmpfs failed: errno \(errno)")
            return
        }
        defer { umount2(mountPoint, Int32(MNT_DETACH)) }
        let dir = mountPoint + "/journal"
        let paused = Locked(0)
        let pausedEvent = DispatchSemaphore(value: 0)
        let options = testOptions {
            $0.noSpaceRetryInterval = .milliseconds(20)
            $0.checkpointEvery = 0
            $0.eventHandler = { event in
                if case .pausedNoSpace = event {
                    paused.withLock { $0 += 1 }
                    pausedEvent.signal()
                }
            }
        }
        let (writer, _) = try JournalWriter.open(directory: dir, options: options)
        let count = 60
        let committed = Locked<[UInt64]>([])
        let group = DispatchGroup()
        for i in 1...count {
            group.enter()
            writer.submit(key: "big-\(i)", body: Array(body(for: i, size: 2000).utf8), ingestMillis: 0) { result in
                if case .committed(let seq) = result { committed.withLock { $0.append(seq) } }
                group.leave()
            }
        }
        // The writer sets `stats.paused` before it reports the pause.
        #expect(pausedEvent.wait(timeout: .now() + 5) == .success, "no pause reported within 5 s")
        #expect(writer.stats.paused, "64 KiB cannot hold 60 records of 2 KiB")
        let ackedWhileFull = committed.withLock { $0.count }
        #expect(ackedWhileFull < count)
        let whileFull = JournalVerifier.verify(directory: dir)
        #expect(whileFull.exitCode == 0, "no partial frame may stay behind: \(whileFull.lines)")
        #expect(whileFull.records == ackedWhileFull, "exactly the acknowledged records are on disk")

        #expect(mount("tmpfs", mountPoint, "tmpfs", UInt(MS_REMOUNT), "size=1m") == 0)
        #expect(group.wait(timeout: .now() + 10) == .success)
        #expect(committed.withLock { $0.sorted() } == Array(1...UInt64(count)))
        #expect(!writer.stats.paused)
        #expect(paused.withLock { $0 } == 1)
        try writer.close()
        let after = JournalVerifier.verify(directory: dir)
        #expect(after.exitCode == 0 && after.records == count)
    }
}
