@preconcurrency import Glibc
import Synchronization

/// Maildir-style unique names: `<unix-ms>.<pid>_<counter>.<hostname><suffix>`. Unique across
/// processes (pid), within a process (counter) and across hosts sharing a spool (hostname).
package enum UniqueName {
    private static let counter = Atomic<Int>(0)

    /// The host name with `/` and `:` escaped the way Maildir does (`\057`, `\072`), so it can
    /// sit inside a file name.
    package static let hostname: String = {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if name.isEmpty { return "localhost" }
        return name.replacingOccurrences(of: "/", with: "\\057").replacingOccurrences(of: ":", with: "\\072")
    }()

    /// A fresh unique name ending in `suffix` (e.g. `".json"`, `".tmp"`).
    package static func next(suffix: String) -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let millis = Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
        let n = counter.add(1, ordering: .relaxed).newValue
        return SpoolName.truncate("\(millis).\(getpid())_\(n).\(hostname)", toBytes: SpoolName.maxLength - suffix.utf8.count) + suffix
    }
}

extension String {
    fileprivate func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: Character(target), omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
