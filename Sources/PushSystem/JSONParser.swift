/// A strict RFC 8259 parser over bytes.
///
/// Stricter than Foundation on purpose: duplicate member names are refused (`duplicate_keys`)
/// because `JSONSerialization` keeps the last and `JSONDecoder` the first, so two readers of
/// the same file could see different pushes. A leading UTF-8 BOM is skipped. Invalid UTF-8,
/// lone surrogate escapes, control characters in strings and trailing content are `invalid_json`.
package struct JSONParser: Sendable {
    /// Deepest allowed nesting of arrays/objects; the top-level container is depth 1.
    /// The parser recurses once per level, so values above ``depthCeiling`` are lowered to it.
    package var maxDepth: Int

    /// The hard ceiling on ``maxDepth``, keeping recursion far from the thread's stack limit.
    package static let depthCeiling = 1024

    package init(maxDepth: Int = 32) {
        self.maxDepth = min(maxDepth, JSONParser.depthCeiling)
    }

    package func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        let result: Result<JSONValue, JSONParseError> = bytes.withUnsafeBufferPointer { buffer in
            var cursor = Cursor(bytes: buffer, maxDepth: maxDepth)
            do throws(JSONParseError) {
                return .success(try cursor.parseDocument())
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Parses a `String` (e.g. an FCM data value holding JSON).
    package func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }
}

private struct Cursor {
    let bytes: UnsafeBufferPointer<UInt8>
    let maxDepth: Int
    var index = 0
    var depth = 0
    var scratch: [UInt8] = []
    /// The byte offsets of the member names of the objects being parsed, innermost last.
    var keyOffsets: [Int] = []

    init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { index = 3 }
        skipWhitespace()
        guard index < bytes.count else { throw invalid("empty input") }
        let value = try parseValue()
        skipWhitespace()
        if index < bytes.count { throw invalid("unexpected content after the top-level value") }
        return value
    }

    func invalid(_ what: String) -> JSONParseError {
        JSONParseError(.invalidJSON, "\(what) at byte \(index)", path: "@\(index)")
    }

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw invalid("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw invalid("unexpected character")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONParseError) {
        let n = literal.utf8CodeUnitCount
        guard index + n <= bytes.count else { throw invalid("truncated literal") }
        let p = literal.utf8Start
        for i in 0..<n where bytes[index + i] != p[i] { throw invalid("invalid literal") }
        index += n
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > maxDepth {
            throw JSONParseError(.tooDeep, "nesting deeper than \(maxDepth) at byte \(index)", path: "@\(index)")
        }
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enter()
        index += 1
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(JSONObject())
        }
        // Most objects in a push have a few members: one allocation for up to eight.
        var pairs: [JSONObject.Element] = []
        pairs.reserveCapacity(8)
        // Where each name starts, for the duplicate refusal's message: on the cursor's stack,
        // not in an array of this object's own.
        let offsetsBase = keyOffsets.count
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw invalid("expected a member name") }
            let keyOffset = index
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw invalid("expected ':'") }
            index += 1
            skipWhitespace()
            pairs.append((key, try parseValue()))
            keyOffsets.append(keyOffset)
            skipWhitespace()
            guard index < bytes.count else { throw invalid("unterminated object") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "}") { index += 1; break }
            throw invalid("expected ',' or '}'")
        }
        if let second = Self.firstRepeat(pairs) {
            let key = pairs[second].key
            throw JSONParseError(.duplicateKeys, "member \"\(key)\" appears twice in one object (second at byte \(keyOffsets[offsetsBase + second]))", path: key)
        }
        keyOffsets.removeSubrange(offsetsBase...)
        let members = JSONObject(uniqueMembers: pairs)
        depth -= 1
        return .object(members)
    }

    /// The position of the first member whose name an earlier member already has (names
    /// compared as `String`s, as the `Dictionary` this parser once built compared them):
    /// pairwise for the few members pushes' objects have, through a set for larger ones.
    static func firstRepeat(_ pairs: [JSONObject.Element]) -> Int? {
        if pairs.count <= JSONObject.linearLimit {
            for later in pairs.indices.dropFirst() {
                let key = pairs[later].key
                for earlier in 0..<later where pairs[earlier].key == key { return later }
            }
            return nil
        }
        var seen = Set<String>(minimumCapacity: pairs.count)
        for (at, pair) in pairs.enumerated() where !seen.insert(pair.key).inserted { return at }
        return nil
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enter()
        index += 1
        var items: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(items)
        }
        while true {
            skipWhitespace()
            items.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw invalid("unterminated array") }
            if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
            if bytes[index] == UInt8(ascii: "]") { index += 1; break }
            throw invalid("expected ',' or ']'")
        }
        depth -= 1
        return .array(items)
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count else { throw invalid("truncated number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else if isDigit(bytes[index]) {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        } else {
            throw invalid("invalid number")
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw invalid("invalid number fraction") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw invalid("invalid number exponent") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        return .number(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
    }

    @inline(__always) func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1
        let start = index
        // Fast path: no escapes, so the bytes between the quotes are the string; pure ASCII
        // needs no UTF-8 validation.
        var ascii = true
        while index < bytes.count {
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                let raw = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                return ascii ? String(decoding: raw, as: UTF8.self) : try makeString(raw)
            }
            if b >= 0x80 { ascii = false }
            if b == UInt8(ascii: "\\") { break }
            if b < 0x20 { throw invalid("control character in string") }
            index += 1
        }
        guard index < bytes.count else { throw invalid("unterminated string") }
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                index += 1
                let bytesOut = scratch
                return try bytesOut.withUnsafeBufferPointer { (buf) throws(JSONParseError) -> String in try makeString(buf) }
            }
            if b < 0x20 { throw invalid("control character in string") }
            if b != UInt8(ascii: "\\") {
                scratch.append(b)
                index += 1
                continue
            }
            index += 1
            guard index < bytes.count else { throw invalid("unterminated escape") }
            let e = bytes[index]
            index += 1
            switch e {
            case UInt8(ascii: "\""): scratch.append(0x22)
            case UInt8(ascii: "\\"): scratch.append(0x5C)
            case UInt8(ascii: "/"): scratch.append(0x2F)
            case UInt8(ascii: "b"): scratch.append(0x08)
            case UInt8(ascii: "f"): scratch.append(0x0C)
            case UInt8(ascii: "n"): scratch.append(0x0A)
            case UInt8(ascii: "r"): scratch.append(0x0D)
            case UInt8(ascii: "t"): scratch.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if scalar >= 0xD800, scalar <= 0xDBFF {
                    guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                        throw invalid("lone high surrogate escape")
                    }
                    index += 2
                    let low = try hex4()
                    guard low >= 0xDC00, low <= 0xDFFF else { throw invalid("high surrogate not followed by a low surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if scalar >= 0xDC00, scalar <= 0xDFFF {
                    throw invalid("lone low surrogate escape")
                }
                appendUTF8(scalar)
            default:
                throw invalid("invalid escape")
            }
        }
        throw invalid("unterminated string")
    }

    func makeString(_ raw: UnsafeBufferPointer<UInt8>) throws(JSONParseError) -> String {
        guard let s = UTF8Text.string(raw) else { throw invalid("invalid UTF-8 in string") }
        return s
    }

    mutating func hex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw invalid("truncated \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let d: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): d = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): d = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): d = b - UInt8(ascii: "A") + 10
            default: throw invalid("invalid \\u escape")
            }
            v = v << 4 | UInt32(d)
            index += 1
        }
        return v
    }

    mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(scalar))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | (scalar >> 6)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | (scalar >> 12)))
            scratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        default:
            scratch.append(UInt8(0xF0 | (scalar >> 18)))
            scratch.append(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
            scratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        }
    }
}

/// Why bytes are not the JSON ``JSONParser`` accepts: `invalid_json`, `duplicate_keys` or
/// `too_deep`, with a message and the byte offset (`@17`).
package struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    package var code: ReasonCode
    package var message: String
    /// The byte offset (`@17`) of the problem.
    package var path: String?

    package init(_ code: ReasonCode, _ message: String, path: String? = nil) {
        self.code = code
        self.message = message
        self.path = path
    }

    package var description: String { "\(code.rawValue): \(message)" }
}
