@preconcurrency import Glibc
import PushSystem

/// The content-addressed media store: `<dir>/ab/cdef…<ext>` named by the SHA-256 of the
/// bytes, so the same image referenced by many payloads is kept once. Downloads land in
/// `<dir>/.tmp/` and are renamed into place only when complete and verified; a crash leaves
/// only temp files, which `prepare` removes.
package enum MediaStore {
    package static let tempDirectoryName = ".tmp"

    /// Files and bytes in a store (for `pushspoolctl media stats` without a running daemon).
    ///
    /// `Sendable`: a plain value.
    package struct Stats: Sendable, Equatable {
        /// Stored media files (thumbnails not counted).
        package var files = 0
        package var bytes: Int64 = 0
        package var thumbnails = 0
        package var thumbnailBytes: Int64 = 0
        /// Leftovers of interrupted downloads in `.tmp/`.
        package var tempFiles = 0

        /// Empty by default.
        package init(files: Int = 0, bytes: Int64 = 0, thumbnails: Int = 0, thumbnailBytes: Int64 = 0, tempFiles: Int = 0) {
            self.files = files
            self.bytes = bytes
            self.thumbnails = thumbnails
            self.thumbnailBytes = thumbnailBytes
            self.tempFiles = tempFiles
        }

        /// Aligned `key: value` lines for `pushspoolctl media stats`.
        package func renderText() -> String {
            var text = "files:           \(files)\n"
            text += "bytes:           \(bytes)\n"
            text += "thumbnails:      \(thumbnails)\n"
            text += "thumbnail bytes: \(thumbnailBytes)\n"
            text += "temp files:      \(tempFiles)\n"
            return text
        }

        /// The store's counts as a JSON object, for `pushspoolctl media stats --json`.
        package var jsonValue: JSONValue {
            .object(["files": .integer(files), "bytes": .integer(bytes), "thumbnails": .integer(thumbnails),
                     "thumbnailBytes": .integer(thumbnailBytes), "tempFiles": .integer(tempFiles)])
        }

        /// ``jsonValue`` as one compact line, keys sorted.
        package func encodeJSON() -> String {
            jsonValue.serializedString()
        }
    }

    /// Creates the store and its temp directory and removes stale temp files. Call before
    /// any download (the fetcher does).
    package static func prepare(directory: String) throws(SystemError) {
        try Posix.mkdirs(directory)
        let temp = directory + "/" + tempDirectoryName
        try Posix.mkdirIfMissing(temp)
        for name in try listDirectory(temp) {
            try? Posix.unlinkat(AT_FDCWD, temp + "/" + name)
        }
    }

    /// Relative path of a stored file: `ab/cdef….ext`.
    package static func relativePath(sha256: String, fileExtension: String) -> String {
        let split = sha256.index(sha256.startIndex, offsetBy: 2)
        return "\(sha256[..<split])/\(sha256[split...]).\(fileExtension)"
    }

    /// Relative path of the thumbnail of the image with hash `sha256`.
    package static func thumbnailRelativePath(sha256: String, maxEdge: Int, fileExtension: String) -> String {
        let split = sha256.index(sha256.startIndex, offsetBy: 2)
        return "\(sha256[..<split])/\(sha256[split...]).thumb\(maxEdge).\(fileExtension)"
    }

    /// Counts stored files and bytes by walking the two-level layout.
    package static func stats(directory: String) throws(SystemError) -> Stats {
        var stats = Stats()
        for name in try listDirectory(directory) {
            let path = directory + "/" + name
            guard let st = try? Posix.lstatat(AT_FDCWD, path), st.st_mode & S_IFMT == S_IFDIR else { continue }
            let isTemp = name == tempDirectoryName
            for entry in (try? listDirectory(path)) ?? [] {
                guard let file = try? Posix.lstatat(AT_FDCWD, path + "/" + entry), file.st_mode & S_IFMT == S_IFREG else { continue }
                if isTemp {
                    stats.tempFiles += 1
                } else if entry.contains(".thumb") {
                    stats.thumbnails += 1
                    stats.thumbnailBytes = saturatingSum(stats.thumbnailBytes, Int64(file.st_size))
                } else {
                    stats.files += 1
                    stats.bytes = saturatingSum(stats.bytes, Int64(file.st_size))
                }
            }
        }
        return stats
    }

    /// `a + b` saturating at `Int64.max`: a sparse file may claim any size, and a sum of
    /// sizes read from the file system must not trap.
    static func saturatingSum(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? .max : sum
    }

    /// Names in a directory, without `.` and `..`. Wraps `opendir(3)`/`readdir(3)`.
    package static func listDirectory(_ path: String) throws(SystemError) -> [String] {
        guard let dir = opendir(path) else { throw SystemError(call: "opendir", errno: errno, subject: path) }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }
}
