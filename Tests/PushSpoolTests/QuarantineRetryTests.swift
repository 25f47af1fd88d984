@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem
@testable import PushSpool

/// A quarantine that fails must not wedge the file or its name (issue 8, defect 5): a failure
/// of the file system is typed as retryable and leaves nothing behind, a pre-created staging
/// name or a full set of `NAME~N` names is worked around instead of failing.
@Suite struct QuarantineRetryTests {
    static func reason(_ name: String) -> QuarantineReason {
        QuarantineReason(code: "invalid_json", message: "m", stage: .parse, daemonVersion: "v", file: name)
    }

    /// `failed/` replaced by a plain file: ENOENT through the held fd, retryable; once the
    /// directory is back (`reopenIfReplaced`), the same call succeeds.
    @Test func failedBeingAFileIsRetryableAndLeavesNothingBehind() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        try t.write(t.layout.processing, "keep.json", "{bad")
        #expect(rmdir(t.layout.failed) == 0)
        try t.write(t.layout.root, "failed", "not a directory")
        do {
            try spool.quarantine(processing: "keep.json", reason: Self.reason("keep.json"))
            Issue.record("quarantined into a failed/ that is a file")
        } catch {
            #expect(error.isRetryable, "\(error)")
            #expect(error.errno == ENOENT)
        }
        #expect(try t.read(t.layout.processing + "/keep.json") == Array("{bad".utf8))
        #expect(try t.names(t.layout.tmp).isEmpty)
        // The operator fixes it; the daemon's retry then succeeds.
        #expect(unlink(t.layout.failed) == 0)
        #expect(try spool.reopenIfReplaced())
        #expect(try spool.quarantine(processing: "keep.json", reason: Self.reason("keep.json")) == "keep.json")
        #expect(try t.names(t.layout.failed) == ["keep.json", "keep.json.reason.json"])
    }

    /// `failed/` immutable (`chattr +i`; root ignores modes, not this flag): EPERM, retryable.
    @Test(.enabled(if: Immutable.supported())) func immutableFailedIsRetryable() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        try t.write(t.layout.processing, "keep.json", "{bad")
        try Immutable.set(t.layout.failed, true)
        defer { try? Immutable.set(t.layout.failed, false) }
        do {
            try spool.quarantine(processing: "keep.json", reason: Self.reason("keep.json"))
            Issue.record("quarantined into an immutable failed/")
        } catch {
            #expect(error.isRetryable, "\(error)")
            #expect(error.errno == EPERM)
        }
        #expect(try t.read(t.layout.processing + "/keep.json") == Array("{bad".utf8))
        #expect(try t.names(t.layout.tmp).isEmpty)
        #expect(try t.names(t.layout.failed).isEmpty)
        try Immutable.set(t.layout.failed, false)
        #expect(try spool.quarantine(processing: "keep.json", reason: Self.reason("keep.json")) == "keep.json")
    }

    /// A full file system (a tiny tmpfs, when this process may mount one): ENOSPC, retryable.
    @Test(.enabled(if: TinyTmpfs.supported())) func fullDiskIsRetryable() throws {
        let fs = try TinyTmpfs()
        let layout = SpoolLayout(root: fs.path + "/spool")
        try layout.create()
        let spool = try Spool(layout: layout, maxFileBytes: 1 << 20)
        let payload = try Posix.open(layout.processing + "/keep.json", O_WRONLY | O_CREAT, mode: 0o640)
        try Posix.writeAll(payload, Array("{bad".utf8))
        Posix.close(payload)
        fs.fill()
        do {
            try spool.quarantine(processing: "keep.json", reason: Self.reason("keep.json"))
            Issue.record("quarantined on a full file system")
        } catch {
            #expect(error.isRetryable, "\(error)")
            #expect(error.errno == ENOSPC)
        }
        #expect(try Posix.readFile(layout.processing + "/keep.json") == Array("{bad".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: layout.tmp).isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: layout.failed).isEmpty)
        fs.unfill()
        #expect(try spool.quarantine(processing: "keep.json", reason: Self.reason("keep.json")) == "keep.json")
    }

    /// A producer that pre-creates the staging name gets its file kept, and the stage uses
    /// another name instead of failing with EEXIST.
    @Test func aPreCreatedStagingNameIsSteppedAround() throws {
        let t = try TempSpool()
        try t.write(t.layout.tmp, "predicted.tmp", "producer's")
        let tmpFD = try Posix.openDirectory(t.layout.tmp)
        defer { Posix.close(tmpFD) }
        let failedFD = try Posix.openDirectory(t.layout.failed)
        defer { Posix.close(failedFD) }
        var names = ["predicted.tmp", "fresh.tmp"]
        let staged = try Spool.stage(Array("reason".utf8), tmpFD: tmpFD, into: failedFD, as: "x.reason.json") { names.removeFirst() }
        #expect(staged)
        #expect(try t.read(t.layout.failed + "/x.reason.json") == Array("reason".utf8))
        #expect(try t.names(t.layout.tmp) == ["predicted.tmp"])
        #expect(try t.read(t.layout.tmp + "/predicted.tmp") == Array("producer's".utf8))
    }

    /// Staging names carry 64 random bits: not predictable from time, pid and counter.
    @Test func stagingNamesAreNotPredictable() {
        let a = Spool.stagingName(), b = Spool.stagingName()
        #expect(a.hasSuffix(".tmp") && b.hasSuffix(".tmp"))
        let randomA = a.dropLast(4).suffix(16), randomB = b.dropLast(4).suffix(16)
        #expect(randomA != randomB)
        let allHex = randomA.allSatisfy { $0.isHexDigit }
        #expect(allHex)
    }

    /// 10,000 existing `NAME~N` entries once made every quarantine of NAME fail with
    /// `name_taken`; now the file gets a time-and-random suffix.
    @Test func tenThousandTakenNamesDoNotWedgeTheQuarantine() throws {
        let t = try TempSpool(inMemory: true)
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        let failedFD = try Posix.openDirectory(t.layout.failed)
        defer { Posix.close(failedFD) }
        for n in 0..<10_000 {
            Posix.close(try Posix.openat(failedFD, n == 0 ? "dup.json" : "dup.json~\(n)", O_WRONLY | O_CREAT | O_EXCL, mode: 0o640))
        }
        try t.write(t.layout.processing, "dup.json", "{bad")
        let name = try spool.quarantine(processing: "dup.json", reason: Self.reason("dup.json"))
        #expect(name.hasPrefix("dup.json~"))
        #expect(!exists(t.layout.processing + "/dup.json"))
        #expect(try t.read(t.layout.failed + "/" + name) == Array("{bad".utf8))
        #expect(exists(t.layout.failed + "/" + name + SpoolName.reasonSuffix))
    }

    /// `purge ALL` skips a non-empty quarantined directory (never recursing into it) and goes
    /// on with the rest; it once stopped at the directory.
    @Test func purgeAllSkipsANonEmptyDirectoryAndGoesOn() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        try Posix.mkdirs(t.layout.processing + "/d.json")
        try t.write(t.layout.processing + "/d.json", "inner", "x")
        for name in ["a.json", "d.json", "z.json"] {
            if name != "d.json" { try t.write(t.layout.processing, name, "{bad") }
            try spool.quarantine(processing: name, reason: Self.reason(name))
        }
        var skipped: [String] = []
        let removed = try FailedQueue.purge(layout: t.layout, .all) { name, why in
            skipped.append(name)
            #expect(why.errno == ENOTEMPTY || why.errno == EEXIST)
        }
        #expect(removed.sorted() == ["a.json", "z.json"])
        #expect(skipped == ["d.json"])
        #expect(exists(t.layout.failed + "/d.json/inner"))
        #expect(try t.names(t.layout.failed) == ["d.json", "d.json.reason.json"])
    }
}

/// `chattr +i` through `FS_IOC_SETFLAGS`, for a directory even root cannot write into.
enum Immutable {
    private static let getFlags: UInt = 0x8008_6601, setFlags: UInt = 0x4008_6602, immutable: Int32 = 0x10

    static func set(_ path: String, _ on: Bool) throws {
        let fd = try Posix.open(path, O_RDONLY | O_DIRECTORY)
        defer { Posix.close(fd) }
        var flags: Int32 = 0
        guard ioctl(fd, getFlags, &flags) == 0 else { throw SystemError(call: "ioctl", errno: errno, subject: path) }
        flags = on ? flags | immutable : flags & ~immutable
        guard ioctl(fd, setFlags, &flags) == 0 else { throw SystemError(call: "ioctl", errno: errno, subject: path) }
    }

    /// Whether this process may set the flag here (CAP_LINUX_IMMUTABLE and a file system with it).
    static func supported() -> Bool {
        guard let t = try? TempSpool(create: false) else { return false }
        try? Posix.mkdirs(t.root)
        guard (try? set(t.root, true)) != nil else { return false }
        try? set(t.root, false)
        return true
    }
}

/// A 256 KiB tmpfs mounted for one test (needs CAP_SYS_ADMIN), unmounted at deinit.
final class TinyTmpfs {
    let path: String
    private var filler: String { path + "/filler" }

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("pushspool-tmpfs-\(UUID().uuidString)").path
        try Posix.mkdirs(path)
        guard mount("tmpfs", path, "tmpfs", 0, "size=256k,nr_inodes=64") == 0 else {
            let code = errno
            rmdir(path)
            throw SystemError(call: "mount", errno: code, subject: path)
        }
    }

    deinit {
        umount2(path, Int32(MNT_DETACH))
        rmdir(path)
    }

    /// Writes until the file system is full.
    func fill() {
        let fd = Glibc.open(filler, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return }
        defer { Glibc.close(fd) }
        let chunk = [UInt8](repeating: 0, count: 4096)
        while chunk.withUnsafeBytes({ Glibc.write(fd, $0.baseAddress, $0.count) }) > 0 {}
    }

    func unfill() { unlink(filler) }

    static func supported() -> Bool { (try? TinyTmpfs()) != nil }
}

@Suite struct RetryNameTests {
    /// `failed retry` into an `incoming/` holding 1000 taken `NAME~N` names falls back to a
    /// time-and-random suffix instead of walking 10,000 names and failing.
    @Test func retryPastTheSequentialNamesUsesARandomSuffix() throws {
        let t = try TempSpool(inMemory: true)
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        try t.write(t.layout.processing, "r.json", "{bad")
        try spool.quarantine(processing: "r.json", reason: QuarantineRetryTests.reason("r.json"))
        let incomingFD = try Posix.openDirectory(t.layout.incoming)
        defer { Posix.close(incomingFD) }
        for n in 0..<Spool.sequentialNames {
            Posix.close(try Posix.openat(incomingFD, n == 0 ? "r.json" : "r.json~\(n)", O_WRONLY | O_CREAT | O_EXCL, mode: 0o640))
        }
        let moved = try FailedQueue.retry(layout: t.layout, .name("r.json"))
        let target = try #require(moved.first?.incomingName)
        #expect(target.hasPrefix("r.json~") && target.contains("-"))
        #expect(try t.read(t.layout.incoming + "/" + target) == Array("{bad".utf8))
    }

    /// A rollback (shutdown with a download in flight) into an `incoming/` holding 10,000 taken
    /// `NAME~N` names used to fail with `name_taken` and leave the file in `processing/`.
    @Test func rollbackPastTheSequentialNamesUsesARandomSuffix() throws {
        let t = try TempSpool(inMemory: true)
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        let incomingFD = try Posix.openDirectory(t.layout.incoming)
        defer { Posix.close(incomingFD) }
        for n in 0..<10_000 {
            Posix.close(try Posix.openat(incomingFD, n == 0 ? "b.json" : "b.json~\(n)", O_WRONLY | O_CREAT | O_EXCL, mode: 0o640))
        }
        try t.write(t.layout.processing, "b.json", "{}")
        let target = try spool.rollback(processing: "b.json")
        #expect(target.hasPrefix("b.json~") && target.contains("-"))
        #expect(try t.read(t.layout.incoming + "/" + target) == Array("{}".utf8))
    }
}
