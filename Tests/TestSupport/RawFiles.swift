import Foundation
import PushJournal
import PushSystem

/// The raw bytes an erasure test searches: every regular file under a directory.
package enum RawFiles {
    /// Every regular file under `root` (symlinks are not followed), and each zstd archive of
    /// the journal decompressed as well, so a search sees what `journal cat --archive` would.
    package static func everyRegularFile(under root: String) throws -> [(path: String, bytes: [UInt8])] {
        var out: [(String, [UInt8])] = []
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let relative = enumerator?.nextObject() as? String {
            let path = root + "/" + relative
            var st = stat()
            guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { continue }
            let bytes = try Posix.readFile(path, limit: 1 << 30)
            out.append((path, bytes))
            if path.hasSuffix(".seg.zst") {
                let journal = (path as NSString).deletingLastPathComponent.replacingOccurrences(of: "/archive", with: "")
                out.append((path + " (decompressed)",
                            try JournalArchive.segmentBytes(directory: journal, archiveName: (path as NSString).lastPathComponent)))
            }
        }
        return out
    }
}
