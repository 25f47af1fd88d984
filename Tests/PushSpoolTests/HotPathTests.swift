@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem
@testable import PushSpool

/// The per-file work the ingest hot path saves: no `lstat` a rule does not need, no path
/// lookup before the open, and no inode update from reading a file that is about to be unlinked.
@Suite struct HotPathTests {
    /// `UTIME_OMIT` from <sys/stat.h>, a macro Swift does not import: leave that time alone.
    let utimeOmit = (1 << 30) - 2

    /// With no stable age the feed takes a scanned name without looking at it, so not even a
    /// file stamped in the future (a producer's skewed clock) waits a round.
    @Test func withNoStableAgeAScannedNameIsTakenInTheFirstBatch() throws {
        let t = try TempSpool()
        try t.write(t.layout.incoming, "future.json", "{}")
        var times = [timespec(tv_sec: 0, tv_nsec: utimeOmit), timespec(tv_sec: time(nil) + 3600, tv_nsec: 0)]
        #expect(utimensat(AT_FDCWD, t.layout.incoming + "/future.json", &times, 0) == 0)
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        let feed = IncomingFeed(spool: spool, watcher: try IncomingWatcher(layout: t.layout), stableAgeNanos: 0)
        let first = try feed.next(timeoutMillis: 0)
        #expect(first.names == ["future.json"])
    }

    /// Reading a claimed file leaves its access time alone (`O_NOATIME`): under relatime the
    /// first read of a new file would dirty its inode, one more journaled metadata update per
    /// payload. A control file read with a plain `open` shows the mount does update atimes.
    @Test func readingAClaimedFileDoesNotTouchItsAccessTime() throws {
        let t = try TempSpool()
        let dayAgo = timespec(tv_sec: time(nil) - 2 * 86_400, tv_nsec: 0)
        for name in ["control.json", "claimed.json"] {
            try t.write(t.layout.processing, name, #"{"a":1}"#)
            var times = [dayAgo, timespec(tv_sec: 0, tv_nsec: utimeOmit)]
            #expect(utimensat(AT_FDCWD, t.layout.processing + "/" + name, &times, 0) == 0)
        }
        let control = try Posix.readFile(t.layout.processing + "/control.json")
        #expect(!control.isEmpty)
        var st = stat()
        #expect(stat(t.layout.processing + "/control.json", &st) == 0)
        // A mount with noatime updates nothing: there is nothing to compare then.
        guard st.st_atim.tv_sec != dayAgo.tv_sec else { return }

        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        guard case .contents(let file) = try spool.read(processing: "claimed.json") else {
            Issue.record("claimed.json was refused")
            return
        }
        #expect(file.bytes == Array(#"{"a":1}"#.utf8))
        #expect(stat(t.layout.processing + "/claimed.json", &st) == 0)
        #expect(st.st_atim.tv_sec == dayAgo.tv_sec)
    }

    /// A file is judged by what its descriptor says (`fstat` after an `O_NOFOLLOW|O_NONBLOCK`
    /// open), not looked up by name first: with every `fstatat` failing, it is still read.
    @Test func readingAFileMakesNoPathLookupBeforeItsOpen() throws {
        let t = try TempSpool()
        try t.write(t.layout.incoming, "a.json", #"{"a":1}"#)
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        try FaultInjector.shared.withFault(call: "fstatat", errno: EIO) {
            guard case .contents(let file) = try spool.read("a.json", in: .incoming) else {
                Issue.record("a.json was refused")
                return
            }
            #expect(file.bytes == Array(#"{"a":1}"#.utf8))
        }
    }
}
