import PushSystem

/// Rules for names of entries in the spool directories.
///
/// `Sendable`: case-less namespace.
package enum SpoolName {
    /// The kernel's NAME_MAX on every Linux file system the spool supports.
    package static let maxLength = 255

    /// Suffix of a quarantine reason file next to `failed/NAME`.
    package static let reasonSuffix = ".reason.json"

    /// Whether the daemon ignores `name` in `incoming/`: dotfiles (editors, rsync temporaries)
    /// and `*.tmp` (writers still staging) are never taken.
    package static func isIgnored(_ name: String) -> Bool {
        name.hasPrefix(".") || name.hasSuffix(".tmp")
    }

    /// Checks a name that came from outside (command line, producer): one path component,
    /// not `.`/`..`, at most 255 bytes, no NUL, valid for the daemon to take.
    package static func validate(_ name: String) throws(SpoolError) {
        if name.isEmpty {
            throw SpoolError(.invalidName, "empty file name; give a plain file name such as 1700000000.json")
        }
        if name == "." || name == ".." {
            throw SpoolError(.invalidName, "\"\(name)\" is not a file name; give a plain file name")
        }
        if name.utf8.contains(UInt8(ascii: "/")) {
            throw SpoolError(.invalidName, "\"\(name)\" contains '/'; give a file name, not a path")
        }
        if name.utf8.contains(0) {
            throw SpoolError(.invalidName, "file name contains a NUL byte; give a plain file name")
        }
        if name.utf8.count > maxLength {
            throw SpoolError(.invalidName, "file name is \(name.utf8.count) bytes; the limit is \(maxLength)")
        }
    }

    /// Like `validate`, and also refuses names the daemon would ignore in `incoming/`, so a
    /// drop never lands where nothing will pick it up.
    package static func validateForIncoming(_ name: String) throws(SpoolError) {
        try validate(name)
        if isIgnored(name) {
            throw SpoolError(.invalidName, "\"\(name)\" would be ignored by pushspoold (dotfiles and *.tmp are skipped); choose another name")
        }
    }

    /// Turns the raw bytes of a directory entry into a valid UTF-8 name: valid UTF-8 passes
    /// unchanged, every byte of an invalid sequence becomes `%XX`, so names that cannot be
    /// represented as a Swift `String` can still be renamed into something the daemon can open.
    package static func escape(raw: [UInt8]) -> String {
        if let valid = UTF8Text.string(raw) { return valid }
        var out = ""
        var index = 0
        while index < raw.count {
            // Decode the longest valid scalar at `index`, else escape one byte.
            var decoded: String?
            for length in 1...4 where index + length <= raw.count {
                if let s = String(validating: raw[index..<(index + length)], as: UTF8.self) {
                    decoded = s
                    index += length
                    break
                }
            }
            if let decoded {
                out += decoded
            } else {
                let hex = Array("0123456789ABCDEF")
                out += "%" + String(hex[Int(raw[index] >> 4)]) + String(hex[Int(raw[index] & 0xF)])
                index += 1
            }
        }
        return out
    }

    /// Makes `name` fit in `limit` bytes by cutting whole characters off its end.
    static func truncate(_ name: String, toBytes limit: Int) -> String {
        if name.utf8.count <= limit { return name }
        var result = ""
        var bytes = 0
        for character in name {
            let size = character.utf8.count
            if bytes + size > limit { break }
            result.append(character)
            bytes += size
        }
        return result
    }

    /// The `attempt`-th alternative for `name` when it is taken: `name`, `name~1`, `name~2`, …
    /// cut so that the result plus `reserve` bytes (e.g. `.reason.json`) stays within NAME_MAX.
    static func candidate(_ name: String, attempt: Int, reserve: Int = 0) -> String {
        let suffix = attempt == 0 ? "" : "~\(attempt)"
        return truncate(name, toBytes: maxLength - reserve - suffix.utf8.count) + suffix
    }
}
