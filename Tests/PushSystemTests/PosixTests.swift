@preconcurrency import Glibc
import Foundation
import Testing
@testable import PushSystem

@Suite(.serialized) struct PosixTests {
    @Test func errorCarriesErrnoNameAndManPage() throws {
        #expect(throws: SystemError.self) { try Posix.open("/nonexistent/pushspool-\(getpid())", O_RDONLY) }
        do {
            _ = try Posix.open("/nonexistent/pushspool-\(getpid())", O_RDONLY)
        } catch {
            #expect(error.errno == ENOENT)
            #expect(error.errnoName == "ENOENT")
            #expect(error.description.contains("man 2 open"))
            #expect(error.shortDescription == "open: ENOENT")
        }
    }

    @Test func injectedFaultSurfacesAsThatErrno() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("posix-\(UUID())").path
        try Posix.mkdirs(dir)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FaultInjector.shared.withFault(call: "fsync", errno: EIO, times: 1) {
            #expect(throws: SystemError(call: "fsync", errno: EIO, subject: dir)) { try Posix.syncDirectory(dir) }
            try Posix.syncDirectory(dir)  // the fault fired once only
        }
    }

    @Test func atomicWriteReplacesWholeFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("posix-\(UUID())").path
        try Posix.mkdirs(dir)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try Posix.writeFileAtomically(directory: dir, name: "f", bytes: Array("one".utf8))
        try Posix.writeFileAtomically(directory: dir, name: "f", bytes: Array("two!".utf8))
        #expect(try Posix.readFile(dir + "/f") == Array("two!".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == ["f"])
        #expect(throws: SystemError.self) { try Posix.readFile(dir + "/f", limit: 3) }
    }
}

@Suite struct SHA256Tests {
    @Test(arguments: [
        ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
        ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
    ])
    func knownVectors(input: String, expected: String) {
        #expect(SHA256.hex(of: Array(input.utf8)) == expected)
    }

    @Test func millionAs() {
        #expect(SHA256.hex(of: [UInt8](repeating: 0x61, count: 1_000_000)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func incrementalEqualsOneShot() {
        let bytes = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let hasher = SHA256()
        hasher.update(Array(bytes[..<1234]))
        hasher.update(Array(bytes[1234...]))
        #expect(hasher.finalizeHex() == SHA256.hex(of: bytes))
    }
}

@Suite struct TimestampTests {
    @Test(arguments: [
        (Int64(0), "1970-01-01T00:00:00.000Z"),
        (Int64(1_796_000_975_123), "2026-11-30T01:09:35.123Z"),
        (Int64(-1), "1969-12-31T23:59:59.999Z"),
    ])
    func formatsUTCWithMillis(millis: Int64, expected: String) {
        #expect(Timestamp.iso8601(millis: millis) == expected)
    }
}

@Suite struct ReadAllTests {
    @Test(arguments: [0, 1, 4095, 4096, 4097, 200_000])
    func readsWholeFilesWhateverTheHint(size: Int) throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("readall-\(UUID())").path
        try Posix.mkdirs(dir)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try Posix.writeFileAtomically(directory: dir, name: "f", bytes: bytes)
        for hint in [0, size, max(0, size - 10), size + 10] {
            for regularFile in [false, true] {
                let fd = try Posix.open(dir + "/f", O_RDONLY)
                defer { Posix.close(fd) }
                #expect(try Posix.readAll(fd, limit: 1 << 20, sizeHint: hint, regularFile: regularFile) == bytes)
            }
        }
        let fd = try Posix.open(dir + "/f", O_RDONLY)
        defer { Posix.close(fd) }
        if size > 0 {
            #expect(throws: SystemError(call: "read", errno: EFBIG)) { try Posix.readAll(fd, limit: size - 1, sizeHint: size) }
        }
    }
}
