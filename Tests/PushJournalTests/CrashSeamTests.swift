@preconcurrency import Glibc
import Foundation
import Testing
@testable import PushJournal
import PushSystem
import SimulatedFS
import TestSupport

/// The file-system seam itself: the simulated file system answers like the real one while
/// nothing crashes, and models what a power cut keeps and loses.
@Suite struct CrashSeamTests {
    /// One script of calls, its observable results as text.
    func script(_ fs: any FileSystem, root: String) throws -> [String] {
        var out: [String] = []
        try fs.mkdirs(root + "/d/q")
        let dir = try fs.openDirectory(root + "/d")
        defer { fs.close(dir) }
        let fd = try fs.openat(dir, "a.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, mode: 0o640)
        try fs.writeAll(fd, Array("hello world".utf8), subject: "a")
        try fs.pwriteAll(fd, Array("HELLO".utf8), offset: 0, subject: "a")  // O_APPEND: Linux appends it
        try fs.writeAll(fd, Array("!".utf8), subject: "a")
        try fs.fdatasync(fd, subject: "a")
        out.append("size \(try fs.fileSize(fd, subject: "a"))")
        try fs.ftruncate(fd, 8, subject: "a")
        fs.close(fd)
        try fs.renameat(dir, "a.tmp", dir, "a")
        try fs.renameat(dir, "a", dir, "q/a2")
        try fs.fsync(dir, subject: "d")
        out.append("list \(try fs.listDirectory(root + "/d").sorted())")
        out.append("list q \(try fs.listDirectory(root + "/d/q").sorted())")
        out.append("read \(String(decoding: try fs.readFile(root + "/d/q/a2", limit: 100), as: UTF8.self))")
        let lock1 = try fs.openat(dir, "LOCK", O_RDWR | O_CREAT, mode: 0o640)
        let lock2 = try fs.open(root + "/d/LOCK", O_RDONLY, mode: 0)
        out.append("lock \(try fs.tryLock(lock1, subject: "LOCK")) \(try fs.tryLock(lock2, subject: "LOCK"))")
        fs.close(lock1)
        fs.close(lock2)
        try fs.unlinkat(dir, "LOCK", flags: 0)
        out.append("exists \(fs.exists(root + "/d/LOCK")) \(fs.exists(root + "/d/q/a2"))")
        do { _ = try fs.open(root + "/d/missing", O_RDONLY, mode: 0) } catch { out.append("open missing \(error.errno == ENOENT)") }
        do { try fs.mkdir(root + "/d/q", mode: 0o750) } catch { out.append("mkdir twice \(error.errno == EEXIST)") }
        return out
    }

    @Test func simulatedAnswersLikeReal() throws {
        let temp = TempDir()
        let real = try script(RealFileSystem(), root: temp.path)
        let simulated = try script(SimulatedFileSystem(), root: "/sim")
        #expect(real == simulated)
        #expect(real.contains("read hello wo"))
    }

    @Test func unsyncedDataAndEntriesFollowTheDamageModel() throws {
        let fs = SimulatedFileSystem()
        try fs.mkdirs("/d")
        try fs.syncDirectory("/")
        let dir = try fs.openDirectory("/d")
        let fd = try fs.openat(dir, "f", O_WRONLY | O_CREAT, mode: 0o640)
        try fs.writeAll(fd, Array("synced".utf8), subject: "f")
        try fs.fdatasync(fd, subject: "f")
        try fs.fsync(dir, subject: "d")
        try fs.writeAll(fd, Array("+unsynced".utf8), subject: "f")
        // A rename without a directory fsync.
        try fs.renameat(dir, "f", dir, "g")
        let image = fs.image

        let dropped = SimulatedFileSystem(crashed: image, model: .drop, seed: 1)
        #expect(dropped.contents("/d/f") == Array("synced".utf8))
        #expect(!dropped.exists("/d/g"), "a rename not followed by a directory fsync is lost")

        let kept = SimulatedFileSystem(crashed: image, model: .keep, seed: 1)
        #expect(kept.contents("/d/g") == Array("synced+unsynced".utf8))
        #expect(!kept.exists("/d/f"))

        var zeroedSome = false
        var scrambledSome = false
        for seed in 0..<20 {
            let zeroed = SimulatedFileSystem(crashed: image, model: .zero, seed: UInt64(seed))
            let bytes = try #require(zeroed.contents("/d/f") ?? zeroed.contents("/d/g"))
            #expect(bytes.count == 15 && bytes.prefix(6).elementsEqual("synced".utf8))
            zeroedSome = zeroedSome || bytes.suffix(9).allSatisfy { $0 == 0 }
            let scrambled = SimulatedFileSystem(crashed: image, model: .scramble, seed: UInt64(seed))
            let other = try #require(scrambled.contents("/d/f") ?? scrambled.contents("/d/g"))
            #expect(other.prefix(6).elementsEqual("synced".utf8))
            scrambledSome = scrambledSome || (other.count > 6 && other != Array("synced+unsynced".utf8))
        }
        #expect(zeroedSome && scrambledSome)
    }

    @Test func newFileNeedsItsDirectorySynced() throws {
        let fs = SimulatedFileSystem()
        try fs.mkdirs("/d")
        try fs.syncDirectory("/")
        let fd = try fs.open("/d/new", O_WRONLY | O_CREAT, mode: 0o640)
        try fs.writeAll(fd, [1, 2, 3], subject: "new")
        try fs.fsync(fd, subject: "new")
        #expect(!SimulatedFileSystem(crashed: fs.image, model: .drop, seed: 0).exists("/d/new"))
        try fs.syncDirectory("/d")
        #expect(SimulatedFileSystem(crashed: fs.image, model: .drop, seed: 0).contents("/d/new") == [1, 2, 3])
    }

    @Test func faultsFireAtTheNthCallOnceOrPersistently() throws {
        let fs = SimulatedFileSystem()
        try fs.mkdirs("/d")
        let fd = try fs.open("/d/f", O_WRONLY | O_CREAT, mode: 0o640)
        fs.setFaults([.init(calls: ["write"], nth: 1, errno: ENOSPC)])
        try fs.writeAll(fd, [1], subject: "f")
        #expect(throws: SystemError(call: "write", errno: ENOSPC, subject: "f")) {
            try fs.writeAll(fd, [2], subject: "f")
        }
        try fs.writeAll(fd, [3], subject: "f")
        fs.setFaults([.init(calls: ["fdatasync"], nth: 0, errno: EIO, persistent: true)])
        for _ in 0..<3 { #expect(throws: SystemError.self) { try fs.fdatasync(fd, subject: "f") } }
        fs.setFaults([.init(calls: ["write"], nth: 0, short: true)])
        let bytes: [UInt8] = [4, 5, 6, 7]
        #expect(bytes.withUnsafeBytes { raw in (try? fs.write(fd, raw, subject: "f")) ?? -1 } == 2)
        fs.close(fd)
        #expect(fs.contents("/d/f") == [1, 3, 4, 5])
        #expect(fs.openFileCount == 0)
    }

    /// The cost of the seam on the real file system: an `any FileSystem` call against the
    /// direct `Posix` wrapper, on `fstat` (the cheapest call the journal makes). Printed, not
    /// asserted beyond a loose bound, since the machine is shared.
    @Test func seamOverheadIsSmall() throws {
        let temp = TempDir()
        let fd = try Posix.open(temp.path + "/f", O_RDWR | O_CREAT)
        defer { Posix.close(fd) }
        let fs: any FileSystem = RealFileSystem(faultScope: "journal")
        let count = 200_000
        var sink: Int64 = 0
        func measure(_ body: () throws -> Void) rethrows -> Double {
            let start = Posix.monotonicNanos()
            try body()
            return Double(Posix.monotonicNanos() - start) / Double(count)
        }
        let direct = try measure { for _ in 0..<count { sink &+= Int64(try Posix.fstat(fd, subject: "f").st_size) } }
        let seam = try measure { for _ in 0..<count { sink &+= try fs.fileSize(fd, subject: "f") } }
        print("seam-overhead: fstat direct \(String(format: "%.0f", direct)) ns/call, through any FileSystem \(String(format: "%.0f", seam)) ns/call")
        #expect(sink == 0)
        #expect(seam < direct * 3 + 500)
    }
}
