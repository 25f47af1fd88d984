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
