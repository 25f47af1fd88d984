@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem
@testable import PushSpool

/// `[Spool] FailedRetainSec=`: quarantined files older than the limit leave `failed/` with
/// their reason files; younger ones stay.
@Suite struct FailedRetentionTests {
    func quarantine(_ t: TempSpool, _ names: [String]) throws {
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        for name in names {
            try t.write(t.layout.incoming, name, "{bad \(name)")
            #expect(try spool.claim(name))
            try spool.quarantine(processing: name, reason: QuarantineReason(code: "invalid_json", message: "broken", stage: .parse,
                                                                            daemonVersion: "v", file: name))
        }
    }

    /// Moves the quarantine time (the reason file's mtime) `seconds` into the past.
    func age(_ path: String, seconds: Int) {
        let then = timespec(tv_sec: time(nil) - seconds, tv_nsec: 0)
        var times = [then, then]
        #expect(utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) == 0)
    }

    @Test func entriesOlderThanTheLimitGoWithTheirReasonsYoungOnesStay() throws {
        let t = try TempSpool()
        try quarantine(t, ["old.json", "young.json"])
        age(t.layout.failed + "/old.json", seconds: 3 * 86_400)
        age(t.layout.failed + "/old.json" + SpoolName.reasonSuffix, seconds: 3 * 86_400)
        let removed = try FailedQueue.expire(layout: t.layout, retain: .seconds(86_400))
        #expect(removed == ["old.json"])
        #expect(try t.names(t.layout.failed) == ["young.json", "young.json" + SpoolName.reasonSuffix])
        // Nothing is old enough now: a second pass removes nothing.
        #expect(try FailedQueue.expire(layout: t.layout, retain: .seconds(86_400)).isEmpty)
    }

    @Test func anOrphanReasonFileExpiresToo() throws {
        let t = try TempSpool()
        try quarantine(t, ["gone.json"])
        #expect(unlink(t.layout.failed + "/gone.json") == 0)
        age(t.layout.failed + "/gone.json" + SpoolName.reasonSuffix, seconds: 7200)
        #expect(try FailedQueue.expire(layout: t.layout, retain: .seconds(3600)) == ["gone.json"])
        #expect(try t.names(t.layout.failed).isEmpty)
    }
}
