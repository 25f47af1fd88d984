@preconcurrency import Glibc
import PushSystem

/// Media store garbage collection: a stored file (and its thumbnails) that no retained journal
/// record references is removed once it is older than a grace period.
///
/// The race with a record being written that references a file, and why this is safe:
/// - A record names a file only after the fetcher stored it: a fresh download is renamed into
///   place as a new inode with a fresh mtime, and a reuse (`[Media] DedupWindowSec=`) hands out
///   a path stored at most that window ago, within `PayloadDeadlineSec=` of the record being
///   journaled. So a file whose mtime is older than `grace` (the daemon passes at least
///   `DedupWindowSec + PayloadDeadlineSec` plus a margin) can gain no new reference.
/// - The referenced set is collected from the committed records *after* the candidate list is
///   fixed, so a record committed before the collection started is seen.
/// - A candidate is first renamed into `.tmp/` and its mtime checked again on the inode
///   actually moved: if a new download had replaced the path meanwhile (fresh inode), it is
///   renamed back. The store is content-addressed, so whatever sits at a path has the same
///   bytes, and putting it back is harmless even if another download landed in between.
/// `Sendable`: case-less namespace.
package enum MediaGC {
    /// What a collection did.
    package struct Result: Sendable, Equatable {
        package var removed: [String] = []
        package var bytesFreed: Int64 = 0
        package var kept = 0
        package init() {}
    }

    /// Stored files (relative `ab/cdef….ext`, thumbnails too) last modified before
    /// `olderThanNanos` (wall clock): the candidates.
    package static func candidates(directory: String, olderThanNanos: Int64) -> [String] {
        var out: [String] = []
        for prefix in (try? MediaStore.listDirectory(directory)) ?? [] where prefix.count == 2 && prefix.allSatisfy(\.isHexDigit) {
            for name in (try? MediaStore.listDirectory(directory + "/" + prefix)) ?? [] {
                guard let st = try? Posix.lstatat(AT_FDCWD, directory + "/" + prefix + "/" + name),
                      st.st_mode & S_IFMT == S_IFREG, nanos(st.st_mtim) < olderThanNanos else { continue }
                out.append(prefix + "/" + name)
            }
        }
        return out.sorted()
    }

    /// The content hash a stored file is named by: `ab` + `cdef…` (64 hex digits).
    package static func hash(ofRelativePath path: String) -> String? {
        let parts = path.split(separator: "/")
        guard parts.count == 2, parts[0].count == 2 else { return nil }
        let rest = parts[1].prefix { $0 != "." }
        guard rest.count == 62 else { return nil }
        let hash = String(parts[0] + rest)
        return hash.allSatisfy(\.isHexDigit) ? hash : nil
    }

    /// Adds to `hashes` every store path a record body names: two hex digits, `/`, 62 hex
    /// digits (how `MediaStore.relativePath` spells a SHA-256), wherever it appears.
    package static func collectReferences(in body: [UInt8], into hashes: inout Set<String>) {
        func isHex(_ byte: UInt8) -> Bool { (48...57).contains(byte) || (97...102).contains(byte) || (65...70).contains(byte) }
        var index = 2
        while index + 62 < body.count {
            if body[index] == UInt8(ascii: "/"), isHex(body[index - 1]), isHex(body[index - 2]),
               index < 3 || !isHex(body[index - 3]) {
                var end = index + 1
                while end < body.count, end - index - 1 < 63, isHex(body[end]) { end += 1 }
                if end - index - 1 == 62 {
                    hashes.insert(String(decoding: body[(index - 2)..<index] + body[(index + 1)..<end], as: UTF8.self).lowercased())
                    index = end
                    continue
                }
            }
            index += 1
        }
    }

    /// Removes the candidates whose hash `referenced` does not hold, re-checking each moved
    /// inode's mtime against `olderThanNanos`. Blocking: the daemon's retention thread.
    package static func collect(directory: String, candidates: [String], referenced: Set<String>,
                                olderThanNanos: Int64) -> Result {
        var result = Result()
        let temp = directory + "/" + MediaStore.tempDirectoryName
        _ = try? Posix.mkdirIfMissing(temp)
        for path in candidates {
            guard let hash = hash(ofRelativePath: path), !referenced.contains(hash) else {
                result.kept += 1
                continue
            }
            let aside = temp + "/gc-" + path.replacingSlashes()
            guard (try? Posix.renameat(AT_FDCWD, directory + "/" + path, AT_FDCWD, aside)) != nil else { continue }
            guard let st = try? Posix.lstatat(AT_FDCWD, aside), nanos(st.st_mtim) < olderThanNanos else {
                // A download replaced it after the candidates were listed: it may be named by a
                // record being written, so it goes back.
                _ = try? Posix.renameat(AT_FDCWD, aside, AT_FDCWD, directory + "/" + path)
                result.kept += 1
                continue
            }
            if (try? Posix.unlinkat(AT_FDCWD, aside)) != nil {
                result.removed.append(path)
                result.bytesFreed = MediaStore.saturatingSum(result.bytesFreed, Int64(st.st_size))
            }
        }
        return result
    }

    static func nanos(_ ts: timespec) -> Int64 { Int64(ts.tv_sec) &* 1_000_000_000 &+ Int64(ts.tv_nsec) }
}

extension String {
    fileprivate func replacingSlashes() -> String { String(map { $0 == "/" ? "_" : $0 }) }
}
