@preconcurrency import Glibc
import Foundation
import PushSystem
@testable import PushSpool

/// A spool under its own temp directory, removed when the test ends.
final class TempSpool {
    let root: String
    let layout: SpoolLayout

    /// `inMemory` puts it on /dev/shm when there is one: for tests that create hundreds of
    /// thousands of entries, where a busy ext4 journal makes creation take minutes and the
    /// property under test does not depend on the file system.
    init(create: Bool = true, inMemory: Bool = false) throws {
        var isDirectory: ObjCBool = false
        let base = inMemory && FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isDirectory) && isDirectory.boolValue
            ? URL(fileURLWithPath: "/dev/shm") : FileManager.default.temporaryDirectory
        root = base.appendingPathComponent("pushspool-spool-\(UUID().uuidString)").path
        layout = SpoolLayout(root: root + "/spool")
        if create { try layout.create() }
    }

    deinit {
        try? FileManager.default.removeItem(atPath: root)
    }

    func write(_ directory: String, _ name: String, _ bytes: [UInt8]) throws {
        let fd = try Posix.open(directory + "/" + name, O_WRONLY | O_CREAT | O_TRUNC)
        defer { Posix.close(fd) }
        try Posix.writeAll(fd, bytes)
    }

    func write(_ directory: String, _ name: String, _ text: String) throws {
        try write(directory, name, Array(text.utf8))
    }

    func names(_ directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory).sorted()
    }

    func read(_ path: String) throws -> [UInt8] {
        try Posix.readFile(path)
    }
}

func lstatType(_ path: String) -> mode_t? {
    var st = stat()
    guard lstat(path, &st) == 0 else { return nil }
    return st.st_mode & S_IFMT
}

func exists(_ path: String) -> Bool { lstatType(path) != nil }

/// Whether this process may create device nodes (root outside a restrictive container).
func canMakeDeviceNodes() -> Bool {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("pushspool-mknod-\(UUID().uuidString)").path
    defer { unlink(path) }
    return mknod(path, S_IFCHR | 0o600, makedev(1, 3)) == 0
}

func makedev(_ major: UInt32, _ minor: UInt32) -> dev_t {
    // glibc's gnu_dev_makedev encoding.
    let ma = UInt64(major), mi = UInt64(minor)
    return dev_t((mi & 0xff) | ((ma & 0xfff) << 8) | ((mi & ~0xff) << 12) | ((ma & ~0xfff) << 32))
}

func reasonObject(_ path: String) throws -> [String: Any] {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    return try #require(JSONSerialization.jsonObject(with: data) as? [String: Any])
}

import Testing

/// Collects watcher events until `done` says so or `seconds` pass.
func collect(_ watcher: IncomingWatcher, seconds: Double = 5, until done: ([WatchEvent]) -> Bool) throws -> [WatchEvent] {
    var events: [WatchEvent] = []
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline && !done(events) {
        events += try watcher.wait(timeoutMillis: 100)
    }
    return events
}

func fileNames(_ events: [WatchEvent]) -> [String] {
    events.compactMap { if case .file(let name) = $0 { name } else { nil } }
}
