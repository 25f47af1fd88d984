/// Takes credentials out of text a vendor sent back before it is kept: an error body may echo
/// the request, `Authorization` header included, and what is kept ends up in
/// `outbox/parked/*.json`, `pushspoolctl outbox show`, journald and `lastError`.
///
/// Two layers, both over the whole captured body before it is cut to what is kept (cutting
/// first would leave the front of a key that straddles the cut, which no longer matches):
/// 1. Every occurrence of a key is replaced by `<redacted>`, also when the echo encoded some
///    or all of its characters: JSON escapes (`\/`, `\u002F`), percent-encoding (`%2F`),
///    HTML character references (`&#47;`, `&amp;`), and the key's base64 (standard and
///    URL-safe, at each of the three alignments it can have inside a longer encoded text) and
///    hex forms.
/// 2. If the text that would be kept still holds any 8-byte run of a key in one of those forms
///    (a partial echo, an encoding layer 1 does not undo), the body is not kept at all.
///
/// `Sendable`: a plain value.
package struct Redactor: Sendable {
    package static let placeholder = "<redacted>"
    package static let withheld = "<response withheld: it echoed part of a credential>"
    /// Shorter runs would match ordinary text too often to be telling.
    static let run = 8

    private let secrets: [[UInt8]]
    /// Base64 and hex renderings of each secret, replaced exactly.
    private let encodedForms: [[UInt8]]
    /// Every 8-byte run of the secrets and their encoded forms, packed into a UInt64.
    private let runs: Set<UInt64>
    /// Secrets shorter than a run: looked for whole.
    private let shortSecrets: [[UInt8]]

    package init(secrets: [String]) {
        let keys = secrets.filter { !$0.isEmpty }.map { Array($0.utf8) }
        self.secrets = keys
        var forms: [[UInt8]] = []
        for key in keys where key.count >= Self.run {
            for alphabet in [Self.base64Standard, Self.base64URLSafe] {
                for offset in 0..<3 {
                    let form = Self.base64Run(of: key, offset: offset, alphabet: alphabet)
                    if form.count >= Self.run, !forms.contains(form) { forms.append(form) }
                }
            }
            for digits in [Array("0123456789abcdef".utf8), Array("0123456789ABCDEF".utf8)] {
                forms.append(key.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] })
            }
        }
        encodedForms = forms
        var runs: Set<UInt64> = []
        for form in keys + forms where form.count >= Self.run {
            for start in 0...(form.count - Self.run) { runs.insert(Self.pack(form, at: start)) }
        }
        self.runs = runs
        shortSecrets = keys.filter { $0.count < Self.run }
    }

    /// Redacts `bytes`, then keeps at most `limit` bytes of the result (never half a UTF-8
    /// character); `withheld` when what would be kept still holds part of a key.
    package func clean(_ bytes: [UInt8], limit: Int) -> String {
        guard !secrets.isEmpty else { return String(decoding: Self.cut(bytes, limit: limit), as: UTF8.self) }
        let kept = Self.cut(redact(bytes), limit: limit)
        if leaks(kept) { return Self.withheld }
        return String(decoding: kept, as: UTF8.self)
    }

    /// `clean` for a text without a length limit of its own (curl's error message).
    package func clean(_ text: String, limit: Int = 1024) -> String {
        clean(Array(text.utf8), limit: limit)
    }

    /// Layer 1: each key occurrence, plain or encoded, becomes `<redacted>`.
    func redact(_ bytes: [UInt8]) -> [UInt8] {
        let placeholder = Array(Self.placeholder.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        scan: while index < bytes.count {
            for key in secrets {
                if let length = Self.matchDecoding(key, in: bytes, at: index) {
                    out += placeholder
                    index += length
                    continue scan
                }
            }
            for form in encodedForms where Self.matchExactly(form, in: bytes, at: index) {
                out += placeholder
                index += form.count
                continue scan
            }
            out.append(bytes[index])
            index += 1
        }
        return out
    }

    /// Layer 2: whether `bytes`, as sent or with its escapes decoded, holds a run of a key.
    func leaks(_ bytes: [UInt8]) -> Bool {
        for text in [bytes, Self.decodeAll(bytes)] {
            if text.count >= Self.run {
                for start in 0...(text.count - Self.run) where runs.contains(Self.pack(text, at: start)) { return true }
            }
            for key in shortSecrets where Self.find(key, in: text) { return true }
        }
        return false
    }

    // MARK: - Matching

    /// The length of the text at `index` that spells `key`, each character either as itself
    /// or in one of the escapes `decodeUnit` knows; nil when it does not.
    static func matchDecoding(_ key: [UInt8], in bytes: [UInt8], at index: Int) -> Int? {
        var position = index
        for expected in key {
            guard position < bytes.count else { return nil }
            if let (value, length) = decodeUnit(bytes, at: position), value == expected {
                position += length
            } else if bytes[position] == expected {
                position += 1
            } else {
                return nil
            }
        }
        return position - index
    }

    static func matchExactly(_ form: [UInt8], in bytes: [UInt8], at index: Int) -> Bool {
        guard index + form.count <= bytes.count else { return false }
        for offset in 0..<form.count where bytes[index + offset] != form[offset] { return false }
        return true
    }

    static func find(_ needle: [UInt8], in bytes: [UInt8]) -> Bool {
        guard !needle.isEmpty, bytes.count >= needle.count else { return false }
        for start in 0...(bytes.count - needle.count) where matchExactly(needle, in: bytes, at: start) { return true }
        return false
    }

    /// Every escape in `bytes` decoded (one level), for the leak check.
    static func decodeAll(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            if let (value, length) = decodeUnit(bytes, at: index) {
                out.append(value)
                index += length
            } else {
                out.append(bytes[index])
                index += 1
            }
        }
        return out
    }

    /// One escaped ASCII character at `index` — JSON `\/ \\ \" \'` and `\uXXXX`, percent
    /// `%XX`, HTML `&#NN; &#xHH; &amp; &lt; &gt; &quot; &apos;` — as (character, length of the
    /// escape); nil when no escape starts there. Keys are printable ASCII, so escapes of other
    /// characters are not decoded.
    static func decodeUnit(_ bytes: [UInt8], at index: Int) -> (UInt8, Int)? {
        let first = bytes[index]
        func hex(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[from..<from + count] {
                guard let digit = hexDigit(byte) else { return nil }
                value = value << 4 | digit
            }
            return value
        }
        switch first {
        case UInt8(ascii: "\\"):
            guard index + 1 < bytes.count else { return nil }
            switch bytes[index + 1] {
            case UInt8(ascii: "/"), UInt8(ascii: "\\"), UInt8(ascii: "\""), UInt8(ascii: "'"): return (bytes[index + 1], 2)
            case UInt8(ascii: "u"), UInt8(ascii: "U"):
                guard let value = hex(index + 2, 4), value < 0x80 else { return nil }
                return (UInt8(value), 6)
            case UInt8(ascii: "x"):
                guard let value = hex(index + 2, 2), value < 0x80 else { return nil }
                return (UInt8(value), 4)
            default: return nil
            }
        case UInt8(ascii: "%"):
            guard let value = hex(index + 1, 2), value < 0x80 else { return nil }
            return (UInt8(value), 3)
        case UInt8(ascii: "&"):
            // The longest reference decoded: `&#x0000007E;` (12 bytes).
            guard let end = bytes[index..<min(bytes.count, index + 12)].firstIndex(of: UInt8(ascii: ";")) else { return nil }
            let name = Array(bytes[(index + 1)..<end])
            let length = end - index + 1
            switch name {
            case Array("amp".utf8): return (UInt8(ascii: "&"), length)
            case Array("lt".utf8): return (UInt8(ascii: "<"), length)
            case Array("gt".utf8): return (UInt8(ascii: ">"), length)
            case Array("quot".utf8): return (UInt8(ascii: "\""), length)
            case Array("apos".utf8): return (UInt8(ascii: "'"), length)
            default: break
            }
            guard name.count >= 2, name[0] == UInt8(ascii: "#") else { return nil }
            var value = 0
            if name[1] == UInt8(ascii: "x") || name[1] == UInt8(ascii: "X") {
                guard name.count > 2 else { return nil }
                for byte in name[2...] {
                    guard let digit = hexDigit(byte) else { return nil }
                    value = value << 4 | digit
                }
            } else {
                for byte in name[1...] {
                    guard byte >= 48 && byte <= 57 else { return nil }
                    value = value * 10 + Int(byte - 48)
                }
            }
            // At most 9 digits: no overflow above; only ASCII is a key character.
            guard value < 0x80 else { return nil }
            return (UInt8(value), length)
        default:
            return nil
        }
    }

    static func hexDigit(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(byte - 48)
        case UInt8(ascii: "a")...UInt8(ascii: "f"): Int(byte - 87)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): Int(byte - 55)
        default: nil
        }
    }

    static func pack(_ bytes: [UInt8], at start: Int) -> UInt64 {
        var value: UInt64 = 0
        for offset in 0..<run { value = value << 8 | UInt64(bytes[start + offset]) }
        return value
    }

    /// Cuts to at most `limit` bytes without splitting a UTF-8 sequence.
    static func cut(_ bytes: [UInt8], limit: Int) -> [UInt8] {
        guard bytes.count > limit else { return bytes }
        var end = max(0, limit)
        while end > 0, bytes[end] & 0xC0 == 0x80 { end -= 1 }
        return Array(bytes[..<end])
    }

    // MARK: - Base64

    static let base64Standard = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    static let base64URLSafe = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// The base64 characters that depend on `key` alone when it starts `offset` bytes into a
    /// 3-byte group of a longer encoded text (an echoed `Authorization: App <key>` line, say):
    /// whatever surrounds the key, these characters appear in the encoding as they are here.
    static func base64Run(of key: [UInt8], offset: Int, alphabet: [UInt8]) -> [UInt8] {
        var data = [UInt8](repeating: 0, count: offset) + key
        while data.count % 3 != 0 { data.append(0) }
        var encoded: [UInt8] = []
        var group = 0
        while group < data.count {
            let value = UInt32(data[group]) << 16 | UInt32(data[group + 1]) << 8 | UInt32(data[group + 2])
            for shift in [18, 12, 6, 0] { encoded.append(alphabet[Int((value >> UInt32(shift)) & 0x3F)]) }
            group += 3
        }
        // Character c carries bits 6c ..< 6c+6, so bytes 6c/8 through (6c+5)/8.
        let pure = encoded.indices.filter { c in (6 * c) / 8 >= offset && (6 * c + 5) / 8 < offset + key.count }
        guard let first = pure.first, let last = pure.last else { return [] }
        return Array(encoded[first...last])
    }
}
