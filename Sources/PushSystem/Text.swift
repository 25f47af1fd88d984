/// Text helpers shared by every module, so each rule exists once.
package extension StringProtocol {
    /// Without leading and trailing ASCII whitespace (space, tab, CR, LF). Works on the UTF-8
    /// bytes: Unicode spaces inside a payload or a header are data, not padding.
    var trimmingSpaces: String {
        let bytes = Array(utf8)
        var start = 0
        var end = bytes.count
        while start < end, Self.isASCIIWhitespace(bytes[start]) { start += 1 }
        while end > start, Self.isASCIIWhitespace(bytes[end - 1]) { end -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    private static func isASCIIWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }
}

/// Path arithmetic on strings, so no module needs Foundation's `NSString` for it (linking
/// Foundation maps about 8 MB of libraries into a daemon that needs none of them).
package enum PathText {
    /// The directory that holds `path`: `"/a/b"` → `"/a"`, `"/a"` → `"/"`, `"a"` → `"."`.
    /// Trailing slashes do not count (`"/a/b/"` → `"/a"`).
    package static func parent(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.last == "/" { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/") else { return "." }
        var parent = trimmed[..<slash]
        while parent.last == "/" { parent = parent.dropLast() }
        return parent.isEmpty ? "/" : String(parent)
    }
}

/// UTF-8 bytes to `String`, validated, fast for ASCII.
///
/// `String(validating:as:)` reaches callers unspecialised: every call looked up generic
/// metadata in the runtime's cache, which was 15 % of `pushspoolctl journal verify` (one key
/// per record) and showed in the daemon's JSON parser too. Keys, spool names and nearly every
/// JSON string are ASCII, and ASCII is valid UTF-8: one pass for a high bit, then a copy.
/// Anything else takes the full validation.
package enum UTF8Text {
    package static func string(_ bytes: UnsafeRawBufferPointer) -> String? {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return "" }
        return string(UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self), count: bytes.count))
    }

    package static func string(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        if isASCII(bytes) { return String(decoding: bytes, as: UTF8.self) }
        return String(validating: bytes, as: UTF8.self)
    }

    package static func string(_ bytes: [UInt8]) -> String? {
        bytes.withUnsafeBufferPointer { string($0) }
    }

    package static func string(_ bytes: ArraySlice<UInt8>) -> String? {
        bytes.withUnsafeBufferPointer { string($0) }
    }

    private static func isASCII(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var high: UInt8 = 0
        for byte in bytes { high |= byte }
        return high < 0x80
    }
}
