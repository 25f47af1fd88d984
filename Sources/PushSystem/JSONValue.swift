@preconcurrency import Glibc

/// Any JSON value, as parsed by ``JSONParser``.
///
/// Numbers keep their raw lexeme so that ids and epoch milliseconds past 2^53 survive a
/// round trip unchanged; use ``doubleValue`` / ``intValue`` when a number is meant.
package enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// The number exactly as written in the input (already checked against the JSON grammar).
    case number(String)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// Member `key` of an object; `nil` for other values and for absent members.
    package subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The first of `keys` this object holds with a value (not null, not an empty string):
    /// for members a sender may spell more than one way (Mindbox's `pushName` / `push_name`).
    package func first(of keys: String...) -> JSONValue? {
        for key in keys {
            guard let value = self[key], !value.isNull, value.stringValue?.isEmpty != true else { continue }
            return value
        }
        return nil
    }

    package var isNull: Bool { if case .null = self { return true } else { return false } }
    package var stringValue: String? { if case .string(let s) = self { return s } else { return nil } }
    package var boolValue: Bool? { if case .bool(let b) = self { return b } else { return nil } }
    package var objectValue: JSONObject? { if case .object(let o) = self { return o } else { return nil } }
    package var arrayValue: [JSONValue]? { if case .array(let a) = self { return a } else { return nil } }
    package var numberLexeme: String? { if case .number(let n) = self { return n } else { return nil } }

    /// The number as a `Double`, or `nil` when this is not a number.
    package var doubleValue: Double? { numberLexeme.flatMap(Double.init) }

    /// The number as an `Int` when it is integral (`1.0` counts, `1.5` does not), like `JSONDecoder`.
    package var intValue: Int? {
        guard let lexeme = numberLexeme else { return nil }
        if let exact = Int(lexeme) { return exact }
        guard let d = Double(lexeme), d.rounded() == d, abs(d) < 9.2e18 else { return nil }
        return Int(d)
    }

    /// A short name of the JSON type, for refusal and warning messages.
    package var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

extension JSONValue {
    /// A JSON number from an integer (its decimal lexeme, exact at any width).
    package static func integer(_ value: some BinaryInteger) -> JSONValue {
        .number(String(value))
    }

    /// Compact JSON: sorted keys (by UTF-8 bytes, so the output is canonical across
    /// platforms), slashes not escaped, non-ASCII kept as UTF-8, numbers as their lexeme.
    package func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(into: &out)
        return out
    }

    /// ``serialized()`` as a `String`.
    package func serializedString() -> String {
        String(decoding: serialized(), as: UTF8.self)
    }

    /// The length of ``serialized()`` without building it.
    package var serializedCount: Int {
        switch self {
        case .null: return 4
        case .bool(let b): return b ? 4 : 5
        case .number(let n): return n.utf8.count
        case .string(let s): return JSONValue.escapedCount(s)
        case .array(let items):
            var n = 2 + max(0, items.count - 1)
            for item in items { n += item.serializedCount }
            return n
        case .object(let members):
            var n = 2 + max(0, members.count - 1)
            for (key, value) in members { n += JSONValue.escapedCount(key) + 1 + value.serializedCount }
            return n
        }
    }

    package func write(into out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let n): out.append(contentsOf: n.utf8)
        case .string(let s): JSONValue.writeString(s, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.write(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            // Bytewise key order. Sorted as (first 8 key bytes, index) pairs — plain integers,
            // where sorting the (key, value) members themselves moved reference-counted
            // strings and enums with every swap, which the burst profile put at two thirds of
            // record serialisation. Equal prefixes fall back to the full comparison.
            var order: [(prefix: UInt64, index: Int)] = []
            order.reserveCapacity(members.count)
            for (index, member) in members.enumerated() {
                order.append((JSONValue.keyPrefix(member.key), index))
            }
            if order.count > 1 {
                order.sort { a, b in
                    a.prefix != b.prefix ? a.prefix < b.prefix
                        : JSONValue.utf8Precedes(members.member(at: a.index).key, members.member(at: b.index).key)
                }
            }
            for (i, entry) in order.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                let member = members.member(at: entry.index)
                JSONValue.writeString(member.key, into: &out)
                out.append(UInt8(ascii: ":"))
                member.value.write(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    /// The first 8 UTF-8 bytes of `key`, big-endian, zero-padded: comparing two prefixes orders
    /// keys as `utf8Precedes` does, except that equal prefixes need the full comparison.
    static func keyPrefix(_ key: String) -> UInt64 {
        var prefix: UInt64 = 0
        var taken = 0
        for byte in key.utf8 {
            prefix = prefix << 8 | UInt64(byte)
            taken += 1
            if taken == 8 { break }
        }
        return taken == 8 ? prefix : prefix << UInt64(8 * (8 - taken))
    }

    /// Whether `a` sorts before `b` by their UTF-8 bytes (code point order), the canonical key
    /// order. memcmp on native strings; the generic comparison for bridged ones.
    static func utf8Precedes(_ a: String, _ b: String) -> Bool {
        let fast = a.utf8.withContiguousStorageIfAvailable { left in
            b.utf8.withContiguousStorageIfAvailable { right -> Bool in
                let common = min(left.count, right.count)
                if common > 0, let l = left.baseAddress, let r = right.baseAddress {
                    let order = memcmp(l, r, common)
                    if order != 0 { return order < 0 }
                }
                return left.count < right.count
            }
        }
        if let fast, let result = fast { return result }
        return a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    static func writeString(_ s: String, into out: inout [UInt8]) {
        var s = s
        s.withUTF8 { writeString(utf8: $0, into: &out) }
    }

    static func writeString(utf8: UnsafeBufferPointer<UInt8>, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        // Most strings need no escaping: copy them in one go.
        if !utf8.contains(where: { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }) {
            out.append(contentsOf: utf8)
            out.append(UInt8(ascii: "\""))
            return
        }
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "\""): out.append(UInt8(ascii: "\\")); out.append(byte)
            case UInt8(ascii: "\\"): out.append(UInt8(ascii: "\\")); out.append(byte)
            case 0x0A: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "n"))
            case 0x0D: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "r"))
            case 0x09: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "t"))
            case 0x08: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "b"))
            case 0x0C: out.append(UInt8(ascii: "\\")); out.append(UInt8(ascii: "f"))
            case 0..<0x20:
                out.append(contentsOf: "\\u00".utf8)
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            default: out.append(byte)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    static func escapedCount(_ s: String) -> Int {
        var s = s
        return s.withUTF8 { escapedCount(utf8: $0) }
    }

    static func escapedCount(utf8: UnsafeBufferPointer<UInt8>) -> Int {
        var n = 2
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), 0x0A, 0x0D, 0x09, 0x08, 0x0C: n += 2
            case 0..<0x20: n += 6
            default: n += 1
            }
        }
        return n
    }
}
