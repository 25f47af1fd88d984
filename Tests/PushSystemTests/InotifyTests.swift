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
