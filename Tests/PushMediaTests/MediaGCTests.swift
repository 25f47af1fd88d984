@preconcurrency import Glibc
import Foundation
import Testing
import PushMediaCore
import PushSystem
import TestSupport

/// Issue 14: a stored media file no retained record references goes, once older than the
/// grace period; referenced and young files stay, and a file replaced while being collected
/// is put back.
@Suite struct MediaGCTests {
    static func hash(_ n: Int) -> String { String(repeating: String(n % 10), count: 2) + String(repeating: "a", count: 61) + String(n % 10) }

    func store(_ dir: String, _ hash: String, ext: String = "png", ageSeconds: Int) throws -> String {
        let relative = MediaStore.relativePath(sha256: hash, fileExtension: ext)
        try Posix.mkdirs(dir + "/" + String(relative.prefix(2)))
        let path = dir + "/" + relative
        _ = FileManager.default.createFile(atPath: path, contents: Data("bytes of \(hash)".utf8))
        let then = timespec(tv_sec: time(nil) - ageSeconds, tv_nsec: 0)
        var times = [then, then]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        return relative
    }

    @Test func unreferencedOldFilesGoReferencedAndYoungOnesStay() throws {
        let temp = TempDir()
        let dir = temp.path + "/media"
        let referenced = try store(dir, Self.hash(1), ageSeconds: 7200)
        let orphan = try store(dir, Self.hash(2), ageSeconds: 7200)
        let orphanThumb = try store(dir, Self.hash(2), ext: "thumb320.jpg", ageSeconds: 7200)
        let young = try store(dir, Self.hash(3), ageSeconds: 10)
        // A record body as the daemon writes it: the absolute path of the stored file.
        let body = Array("{\"media\":[{\"path\":\"/var/lib/pushspool/media/\(referenced)\",\"status\":\"stored\"}]}".utf8)
        var references = Set<String>()
        MediaGC.collectReferences(in: body, into: &references)
        #expect(references == [Self.hash(1)])
        let cutoff = (Int64(time(nil)) - 3600) * 1_000_000_000
        let candidates = MediaGC.candidates(directory: dir, olderThanNanos: cutoff)
        #expect(Set(candidates) == [referenced, orphan, orphanThumb])
        let result = MediaGC.collect(directory: dir, candidates: candidates, referenced: references, olderThanNanos: cutoff)
        #expect(Set(result.removed) == [orphan, orphanThumb])
        for kept in [referenced, young] { #expect(access(dir + "/" + kept, F_OK) == 0, "\(kept) was removed") }
        for gone in [orphan, orphanThumb] { #expect(access(dir + "/" + gone, F_OK) != 0, "\(gone) is still there") }
        #expect(try MediaStore.listDirectory(dir + "/.tmp").isEmpty)
    }

    /// The race: a download stores the same image again after the candidates were listed
    /// (a fresh inode at the same path, which a record being written may name): it stays.
    @Test func aFileReplacedAfterListingIsKept() throws {
        let temp = TempDir()
        let dir = temp.path + "/media"
        let path = try store(dir, Self.hash(4), ageSeconds: 7200)
        let cutoff = (Int64(time(nil)) - 3600) * 1_000_000_000
        let candidates = MediaGC.candidates(directory: dir, olderThanNanos: cutoff)
        #expect(candidates == [path])
        _ = try store(dir, Self.hash(4), ageSeconds: 0)
        let result = MediaGC.collect(directory: dir, candidates: candidates, referenced: [], olderThanNanos: cutoff)
        #expect(result.removed.isEmpty)
        #expect(access(dir + "/" + path, F_OK) == 0)
    }
}
