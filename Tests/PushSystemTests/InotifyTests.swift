@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem

@Suite struct InotifyTests {
    /// Events are decoded with their names (NUL padding gone), and several in one buffer.
    @Test func decodesNamedEvents() {
        func encode(_ watch: Int32, _ mask: UInt32, _ name: String) -> [UInt8] {
            let raw = Array(name.utf8)
            let padded = raw.isEmpty ? 0 : (raw.count / 16 + 1) * 16
            var bytes: [UInt8] = []
            for value in [UInt32(bitPattern: watch), mask, 0, UInt32(padded)] { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
            return bytes + raw + [UInt8](repeating: 0, count: padded - raw.count)
        }
        let bytes = encode(1, UInt32(IN_MODIFY), "APPLIED") + encode(1, UInt32(IN_IGNORED), "") + encode(2, UInt32(IN_CREATE), "x")
        let events = bytes.withUnsafeBytes { Inotify.decode($0) }
        #expect(events.map(\.nameText) == ["APPLIED", "", "x"])
        #expect(events.map(\.watch) == [1, 1, 2])
        #expect(events[1].watchLost && !events[0].watchLost)
        // A truncated tail is left for the next read, not misread.
        #expect(Array(bytes.dropLast(3)).withUnsafeBytes { Inotify.decode($0) }.count == 2)
    }

    /// A real watch reports a file rewritten in place; with nothing queued a read returns at
    /// once; failures carry their errno.
    @Test func watchesADirectory() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("inotify-\(UUID())").path
        try Posix.mkdirs(dir)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fd = try Inotify.initialize()
        defer { Posix.close(fd) }
        _ = try Inotify.addWatch(fd, path: dir, mask: UInt32(IN_MODIFY) | UInt32(IN_CREATE))
        #expect(try Inotify.readEvents(fd).isEmpty)
        let file = try Posix.open(dir + "/APPLIED", O_WRONLY | O_CREAT)
        try Posix.writeAll(file, Array("1\n".utf8))
        Posix.close(file)
        let events = try Inotify.readEvents(fd)
        #expect(events.contains { $0.nameText == "APPLIED" && $0.mask & UInt32(IN_CREATE) != 0 })
        #expect(events.contains { $0.nameText == "APPLIED" && $0.mask & UInt32(IN_MODIFY) != 0 })
        #expect(throws: SystemError(call: "inotify_add_watch", errno: ENOENT, subject: dir + "/none")) {
            try Inotify.addWatch(fd, path: dir + "/none", mask: UInt32(IN_MODIFY))
        }
        _ = FaultInjector.shared.withFault(call: "inotify_init1", errno: EMFILE, times: 1) {
            #expect(throws: SystemError(call: "inotify_init1", errno: EMFILE, subject: "")) { try Inotify.initialize() }
        }
    }
}

/// `pushspoolctl user erase` sleeps on a `DirectoryChangeWaiter` until the eraser renames its
/// status into `<state>/erase/`: it must wake for a directory that appears only later (the
/// daemon makes it), for a rename into it, and otherwise return at its timeout.
@Suite struct DirectoryChangeWaiterTests {
    /// A fresh directory under /tmp of the test's own.
    static func temp() -> String {
        var template = Array("/tmp/pushspool-waiter-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }

    static func elapsed(_ body: () -> Void) -> Double {
        let start = Posix.monotonicNanos()
        body()
        return Double(Posix.monotonicNanos() - start) / 1e9
    }

    @Test func wakesWhenTheDirectoryAppearsAndWhenAFileIsRenamedIntoIt() throws {
        let directory = Self.temp() + "/erase"
        let waiter = try DirectoryChangeWaiter(directory: directory)
        let maker = Thread { usleep(200_000); mkdir(directory, 0o700) }  // why: the scenario: created while the waiter blocks
        maker.start()
        #expect(Self.elapsed { waiter.wait(timeout: Duration.seconds(30)) } < 20, "the directory's creation must wake it")
        #expect(access(directory, F_OK) == 0)
        let writer = Thread {
            usleep(200_000)  // why: the scenario: renamed in while the waiter blocks
            let fd = open(directory + "/x.tmp", O_WRONLY | O_CREAT, 0o600)
            close(fd)
            rename(directory + "/x.tmp", directory + "/x.status")
        }
        writer.start()
        // The first wake may be the temp file's creation: wait until the status file is there.
        var woke = 0
        let seconds = Self.elapsed {
            while access(directory + "/x.status", F_OK) != 0, woke < 10 {
                waiter.wait(timeout: Duration.seconds(30))
                woke += 1
            }
        }
        #expect(seconds < 20 && access(directory + "/x.status", F_OK) == 0)
    }

    @Test func returnsAtItsTimeoutWhenNothingChanges() throws {
        let waiter = try DirectoryChangeWaiter(directory: Self.temp() + "/never")
        let seconds = Self.elapsed { waiter.wait(timeout: Duration.milliseconds(300)) }
        #expect(seconds >= 0.25 && seconds < 20)
    }
}
