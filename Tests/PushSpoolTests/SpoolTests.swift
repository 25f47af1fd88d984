@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem
@testable import PushSpool

@Suite struct LayoutTests {
    @Test func createMakesAllDirectoriesWithModesAndIsIdempotent() throws {
        let spool = try TempSpool(create: false)
        #expect(!exists(spool.layout.root))
        try spool.layout.create()
        let expected: [(String, mode_t)] = [(spool.layout.tmp, 0o770), (spool.layout.incoming, 0o770),
                                            (spool.layout.processing, 0o750), (spool.layout.failed, 0o750)]
        for (path, mode) in expected {
            var st = stat()
            #expect(lstat(path, &st) == 0)
            #expect(st.st_mode & S_IFMT == S_IFDIR)
            // Exact even under the usual 022 umask, which would clear the group write bit.
            #expect(st.st_mode & 0o7777 == mode, "\(path) has mode \(String(st.st_mode & 0o7777, radix: 8))")
        }
        try spool.write(spool.layout.incoming, "keep.json", "{}")
        try spool.layout.create()
        #expect(try spool.names(spool.layout.incoming) == ["keep.json"])
    }

    @Test func aFileWhereADirectoryBelongsIsAnError() throws {
        let spool = try TempSpool(create: false)
        try Posix.mkdirs(spool.layout.root)
        try spool.write(spool.layout.root, "failed", "not a dir")
        #expect(throws: SpoolError.self) { try spool.layout.create() }
    }

    @Test func aRemovedOrReplacedDirectoryIsNoticed() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 10)
        #expect(spool.layoutIsIntact())
        #expect(rename(t.layout.incoming, t.root + "/moved") == 0)
        #expect(!spool.layoutIsIntact())
        try t.layout.create()
        #expect(!spool.layoutIsIntact(), "a new incoming/ is not the one the spool holds open")
        #expect(try Spool(layout: t.layout, maxFileBytes: 10).layoutIsIntact())
    }

    @Test func reopenIfReplacedFollowsANewIncomingDirectory() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 10)
        #expect(try !spool.reopenIfReplaced())
        #expect(rmdir(t.layout.incoming) == 0)
        #expect(try spool.reopenIfReplaced())
        #expect(spool.layoutIsIntact())
        try t.write(t.layout.incoming, "a.json", "{}")
        #expect(try spool.claim("a.json"))
        #expect(try !spool.reopenIfReplaced())
    }

    @Test func trailingSlashesAreTrimmed() {
        #expect(SpoolLayout(root: "/var/spool/pushspool//").incoming == "/var/spool/pushspool/incoming")
    }
}

@Suite struct ClaimTests {
    @Test func claimMovesIncomingToProcessing() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        try t.write(t.layout.incoming, "a.json", "{}")
        #expect(try spool.claim("a.json"))
        #expect(!exists(t.layout.incoming + "/a.json"))
        #expect(try t.read(t.layout.processing + "/a.json") == Array("{}".utf8))
        #expect(try spool.claimOutcome("a.json") == .vanished)
        #expect(try !spool.claim("never-there.json"))
    }

    @Test func claimNeverReplacesAFileInProcessing() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        try t.write(t.layout.processing, "same.json", "first")
        try t.write(t.layout.incoming, "same.json", "second")
        #expect(try spool.claimOutcome("same.json") == .busy)
        #expect(try t.read(t.layout.processing + "/same.json") == Array("first".utf8))
        #expect(try t.read(t.layout.incoming + "/same.json") == Array("second".utf8))
    }

    @Test func ignoredAndInvalidNamesAreNotClaimed() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        try t.write(t.layout.incoming, ".hidden", "x")
        try t.write(t.layout.incoming, "w.tmp", "x")
        #expect(try spool.claimOutcome(".hidden") == .ignored)
        #expect(try spool.claimOutcome("w.tmp") == .ignored)
        #expect(exists(t.layout.incoming + "/.hidden") && exists(t.layout.incoming + "/w.tmp"))
        #expect(throws: SpoolError.self) { try spool.claim("../incoming/x") }
        #expect(throws: SpoolError.self) { try spool.claim("..") }
    }

    @Test func twoClaimersRaceAndExactlyOneWinsEachFile() throws {
        let t = try TempSpool()
        let count = 400
        for i in 0..<count { try t.write(t.layout.incoming, "f\(i).json", "\(i)") }
        // Two Spools, as two daemons (or a daemon and a restarted one) would have.
        let spools = [try Spool(layout: t.layout, maxFileBytes: 1 << 20), try Spool(layout: t.layout, maxFileBytes: 1 << 20)]
        let wins = Locked([Int](repeating: 0, count: count))
        DispatchQueue.concurrentPerform(iterations: 2) { claimer in
            for i in 0..<count {
                // Each claimer walks the names in its own order so the races are real.
                let index = claimer == 0 ? i : count - 1 - i
                if (try? spools[claimer].claim("f\(index).json")) == true { wins.withLock { $0[index] += 1 } }
            }
        }
        let claimed = wins.withLock { $0 }
        for i in 0..<count {
            #expect(claimed[i] == 1, "f\(i).json claimed \(claimed[i]) times")
        }
        #expect(try t.names(t.layout.incoming).isEmpty)
        #expect(try t.names(t.layout.processing).count == count)
    }

    @Test func oneSpoolIsSharedByWorkerThreadsWhileItReopens() throws {
        let t = try TempSpool()
        let count = 800
        for i in 0..<count { try t.write(t.layout.incoming, "s\(i).json", "{}") }
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        // A replaced failed/ makes the spool reopen while the workers run.
        #expect(rename(t.layout.failed, t.root + "/failed.old") == 0)
        let done = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 5) { worker in
            if worker == 4 {
                #expect((try? spool.reopenIfReplaced()) == true)
                return
            }
            for i in stride(from: worker, to: count, by: 4) {
                guard (try? spool.claim("s\(i).json")) == true, case .contents? = try? spool.read(processing: "s\(i).json"),
                      (try? spool.complete(processing: "s\(i).json")) == true else { continue }
                done.withLock { $0 += 1 }
            }
        }
        #expect(done.withLock { $0 } == count / 4 * 4)
        #expect(spool.layoutIsIntact())
        try t.write(t.layout.processing, "bad.json", "x")
        try spool.quarantine(processing: "bad.json", reason: QuarantineReason(code: "c", message: "m", stage: .parse, daemonVersion: "v", file: "bad.json"))
        #expect(exists(t.layout.failed + "/bad.json"))
    }

    @Test func processingIsListedForStartupRecovery() throws {
        let t = try TempSpool()
        do {
            let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
            for name in ["a.json", "b.json"] {
                try t.write(t.layout.incoming, name, "{}")
                #expect(try spool.claim(name))
            }
        }
        let restarted = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        #expect(try restarted.processingNames().sorted() == ["a.json", "b.json"])
    }
}

@Suite struct ReadTests {
    @Test func readsARegularFileWhole() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try t.write(t.layout.processing, "big.json", bytes)
        guard case .contents(let file) = try spool.read(processing: "big.json") else {
            Issue.record("refused a regular file")
            return
        }
        #expect(file.bytes == bytes)
        #expect(file.size == 100_000)
        #expect(abs(file.modifiedNanos / 1_000_000_000 - Int64(time(nil))) < 60)
    }

    @Test func symlinkIsRefusedAndQuarantinedAsTheLinkItself() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        let target = t.root + "/secret"
        try t.write(t.root, "secret", "do not read me")
        #expect(symlink(target, t.layout.incoming + "/link.json") == 0)
        #expect(try spool.claim("link.json"))
        guard case .refused(let code, let message) = try spool.read(processing: "link.json") else {
            Issue.record("followed a symlink")
            return
        }
        #expect(code == "symlink")
        #expect(message.contains("link.json"))
        let reason = QuarantineReason(code: code, message: message, stage: .read, daemonVersion: "test", file: "link.json")
        #expect(try spool.quarantine(processing: "link.json", reason: reason) == "link.json")
        #expect(lstatType(t.layout.failed + "/link.json") == S_IFLNK)
        #expect(try t.read(target) == Array("do not read me".utf8))
        #expect(try reasonObject(t.layout.failed + "/link.json.reason.json")["code"] as? String == "symlink")
        #expect(try t.names(t.layout.processing).isEmpty)
    }

    @Test func fifoIsRefusedWithoutBlocking() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        #expect(mkfifo(t.layout.incoming + "/pipe.json", 0o600) == 0)
        #expect(try spool.claim("pipe.json"))
        let started = Date()
        guard case .refused(let code, _) = try spool.read(processing: "pipe.json") else {
            Issue.record("read a FIFO")
            return
        }
        #expect(code == "not_regular_file")
        #expect(Date().timeIntervalSince(started) < 2)
        try spool.quarantine(processing: "pipe.json", reason: QuarantineReason(code: code, message: "fifo", stage: .read, daemonVersion: "test", file: "pipe.json"))
        #expect(lstatType(t.layout.failed + "/pipe.json") == S_IFIFO)
    }

    @Test(.enabled(if: canMakeDeviceNodes(), "needs CAP_MKNOD"))
    func characterDeviceIsRefusedUnread() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        #expect(mknod(t.layout.processing + "/dev.json", S_IFCHR | 0o600, makedev(1, 5)) == 0)  // /dev/zero: would read forever
        guard case .refused(let code, let message) = try spool.read(processing: "dev.json") else {
            Issue.record("read a device")
            return
        }
        #expect(code == "not_regular_file")
        #expect(message.contains("character device"))
        try spool.quarantine(processing: "dev.json", reason: QuarantineReason(code: code, message: message, stage: .read, daemonVersion: "test", file: "dev.json"))
        #expect(lstatType(t.layout.failed + "/dev.json") == S_IFCHR)
    }

    @Test func directoryIsRefused() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        try Posix.mkdirs(t.layout.incoming + "/dir.json")
        #expect(try spool.claim("dir.json"))
        guard case .refused(let code, _) = try spool.read(processing: "dir.json") else {
            Issue.record("read a directory")
            return
        }
        #expect(code == "not_regular_file")
    }

    @Test func oversizeIsRefusedAndTheLimitItselfIsAccepted() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 100)
        try t.write(t.layout.processing, "ok.json", [UInt8](repeating: 0x20, count: 100))
        try t.write(t.layout.processing, "big.json", [UInt8](repeating: 0x20, count: 101))
        guard case .contents(let file) = try spool.read(processing: "ok.json") else {
            Issue.record("refused a file at the limit")
            return
        }
        #expect(file.size == 100)
        guard case .refused(let code, let message) = try spool.read(processing: "big.json") else {
            Issue.record("read an oversize file")
            return
        }
        #expect(code == "file_too_large")
        #expect(message.contains("101"))
    }

    @Test func vanishedFileThrowsNotFound() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 100)
        do {
            _ = try spool.read(processing: "gone.json")
            Issue.record("read a missing file")
        } catch {
            #expect(error.code == .notFound)
        }
    }
}

@Suite struct QuarantineTests {
    @Test func reasonFileHasEveryFieldAndThePayloadIsKeptByteForByte() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        let payload = Array("{\"aps\": broken".utf8)
        try t.write(t.layout.incoming, "bad.json", payload)
        #expect(try spool.claim("bad.json"))
        let reason = QuarantineReason(code: "invalid_json", message: "unexpected end of input at byte 14", stage: .parse,
                                      daemonVersion: "1.2.3", file: "bad.json", contents: payload, detail: ["offset": "14"])
        #expect(try spool.quarantine(processing: "bad.json", reason: reason) == "bad.json")
        #expect(try t.read(t.layout.failed + "/bad.json") == payload)
        let object = try reasonObject(t.layout.failed + "/bad.json.reason.json")
        #expect(object["code"] as? String == "invalid_json")
        #expect(object["message"] as? String == "unexpected end of input at byte 14")
        #expect(object["stage"] as? String == "parse")
        #expect(object["daemonVersion"] as? String == "1.2.3")
        #expect(object["file"] as? String == "bad.json")
        #expect((object["size"] as? NSNumber)?.intValue == payload.count)
        #expect(object["sha256"] as? String == SHA256.hex(of: payload))
        #expect((object["detail"] as? [String: String]) == ["offset": "14"])
        let at = try #require(object["at"] as? String)
        #expect(at.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil, "at = \(at)")
        let text = String(decoding: try t.read(t.layout.failed + "/bad.json.reason.json"), as: UTF8.self)
        #expect(text.hasSuffix("}\n"))
        #expect(try QuarantineReason.decode(Array(text.utf8)) == reason)
        #expect(try t.names(t.layout.processing).isEmpty)
        #expect(try t.names(t.layout.tmp).isEmpty)
    }

    @Test func sizeIsFilledInWhenTheCallerHadNone() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 4)
        try t.write(t.layout.processing, "big.json", "123456")
        try spool.quarantine(processing: "big.json", reason: QuarantineReason(code: "file_too_large", message: "m", stage: .read, daemonVersion: "v", file: "big.json"))
        #expect((try reasonObject(t.layout.failed + "/big.json.reason.json")["size"] as? NSNumber)?.intValue == 6)
    }

    @Test func collidingNamesGetASuffixAndNothingIsReplaced() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        var failedNames: [String] = []
        for round in 0..<3 {
            try t.write(t.layout.processing, "dup.json", "round \(round)")
            failedNames.append(try spool.quarantine(processing: "dup.json",
                                                    reason: QuarantineReason(code: "c", message: "m", stage: .parse, daemonVersion: "v", file: "dup.json")))
        }
        #expect(failedNames == ["dup.json", "dup.json~1", "dup.json~2"])
        for (round, name) in failedNames.enumerated() {
            #expect(try t.read(t.layout.failed + "/" + name) == Array("round \(round)".utf8))
            #expect(exists(t.layout.failed + "/" + name + ".reason.json"))
        }
        #expect(try reasonObject(t.layout.failed + "/dup.json~1.reason.json")["detail"] as? [String: String] == ["failedName": "dup.json~1"])
    }

    @Test func aPayloadNamedLikeAReasonFileIsRenamed() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        try t.write(t.layout.processing, "x.reason.json", "{}")
        let name = try spool.quarantine(processing: "x.reason.json", reason: QuarantineReason(code: "c", message: "m", stage: .parse, daemonVersion: "v", file: "x"))
        #expect(name == "x.reason.json~1")
        #expect(try FailedQueue.list(layout: t.layout).map(\.name) == ["x.reason.json~1"])
    }

    @Test func longNamesStillFitWithTheirReasonFile() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        let long = String(repeating: "n", count: 250)
        try t.write(t.layout.processing, long, "{}")
        let name = try spool.quarantine(processing: long, reason: QuarantineReason(code: "c", message: "m", stage: .parse, daemonVersion: "v", file: long))
        #expect((name + ".reason.json").utf8.count <= 255)
        #expect(exists(t.layout.failed + "/" + name))
        #expect(exists(t.layout.failed + "/" + name + ".reason.json"))
    }

    @Test func aQuarantineThatCannotWriteItsReasonLeavesThePayloadInProcessing() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        try t.write(t.layout.processing, "keep.json", "{bad")
        // The spool holds tmp/ open; once removed, nothing can be created in it (ENOENT).
        #expect(rmdir(t.layout.tmp) == 0)
        do {
            try spool.quarantine(processing: "keep.json", reason: QuarantineReason(code: "c", message: "m", stage: .parse, daemonVersion: "v", file: "keep.json"))
            Issue.record("quarantined without a reason file")
        } catch {
            #expect(error.errno == ENOENT)
            #expect(error.description.contains("keep.json"))
        }
        #expect(try t.read(t.layout.processing + "/keep.json") == Array("{bad".utf8))
        #expect(try t.names(t.layout.failed).isEmpty)
        // Once the layout is back, the same call succeeds.
        #expect(try spool.reopenIfReplaced())
        try spool.quarantine(processing: "keep.json", reason: QuarantineReason(code: "c", message: "m", stage: .parse, daemonVersion: "v", file: "keep.json"))
        #expect(try t.names(t.layout.failed) == ["keep.json", "keep.json.reason.json"])
    }

    @Test func quarantiningAVanishedFileLeavesNoOrphanReason() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        #expect(throws: SpoolError.self) {
            try spool.quarantine(processing: "gone.json", reason: QuarantineReason(code: "c", message: "m", stage: .parse, daemonVersion: "v", file: "gone.json"))
        }
        #expect(try t.names(t.layout.failed).isEmpty)
        #expect(try t.names(t.layout.tmp).isEmpty)
    }
}

@Suite struct TmpCleanupTests {
    @Test func staleStagingFilesAreRemovedAndFreshOnesKept() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 10)
        try t.write(t.layout.tmp, "stale.tmp", "x")
        try t.write(t.layout.tmp, "fresh.tmp", "x")
        let old = timeval(tv_sec: time(nil) - 40 * 3600, tv_usec: 0)
        #expect(utimes(t.layout.tmp + "/stale.tmp", [old, old]) == 0)
        #expect(try spool.cleanTmp() == 1)
        #expect(try t.names(t.layout.tmp) == ["fresh.tmp"])
    }
}

@Suite struct CompleteAndRollbackTests {
    @Test func completeRemovesTheClaimedFile() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        try t.write(t.layout.incoming, "a.json", "{}")
        #expect(try spool.claim("a.json"))
        #expect(try spool.complete(processing: "a.json"))
        #expect(try !spool.complete(processing: "a.json"))
        #expect(try t.names(t.layout.processing).isEmpty)
        try spool.syncProcessing()
    }

    @Test func rollbackReturnsTheFileToIncomingWithoutReplacingANewOne() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        try t.write(t.layout.incoming, "a.json", "old")
        #expect(try spool.claim("a.json"))
        #expect(try spool.rollback(processing: "a.json") == "a.json")
        #expect(try t.read(t.layout.incoming + "/a.json") == Array("old".utf8))
        #expect(try spool.claim("a.json"))
        try t.write(t.layout.incoming, "a.json", "new")
        #expect(try spool.rollback(processing: "a.json") == "a.json~1")
        #expect(try t.read(t.layout.incoming + "/a.json") == Array("new".utf8))
        #expect(try t.read(t.layout.incoming + "/a.json~1") == Array("old".utf8))
        #expect(try t.names(t.layout.processing).isEmpty)
    }
}
