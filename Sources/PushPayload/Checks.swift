import PushSystem

/// URL and time helpers for the contract's R6 and R12; pure, no Foundation.
package enum URLCheck {
    package enum Verdict: Equatable, Sendable {
        case valid(scheme: String)
        case invalid(String)
    }

    /// R6: valid = has a scheme (`[A-Za-z][A-Za-z0-9+.-]*:`), no whitespace or control
    /// characters, `http`/`https` with a non-empty host, and not `javascript:`/`data:`/
    /// `vbscript:`. Never re-encodes: `%XX` stays as sent.
    package static func check(_ url: String) -> Verdict {
        let bytes = Array(url.utf8)
        guard let first = bytes.first, isAlpha(first) else { return .invalid("no scheme") }
        var i = 1
        while i < bytes.count, isAlpha(bytes[i]) || isDigit(bytes[i]) || bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") || bytes[i] == UInt8(ascii: ".") {
            i += 1
        }
        guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return .invalid("no scheme") }
        if bytes.contains(where: { $0 <= 0x20 || $0 == 0x7F }) { return .invalid("whitespace or control character") }
        let scheme = String(decoding: bytes[0..<i], as: UTF8.self).lowercased()
        if scheme == "javascript" || scheme == "data" || scheme == "vbscript" { return .invalid("scheme \(scheme): is not allowed") }
        if scheme == "http" || scheme == "https" {
            let rest = bytes[(i + 1)...]
            guard rest.starts(with: "//".utf8) else { return .invalid("no host") }
            var host = rest.dropFirst(2).prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
            if let at = host.lastIndex(of: UInt8(ascii: "@")) { host = host[(at + 1)...] }
            let name = host.prefix { $0 != UInt8(ascii: ":") || host.first == UInt8(ascii: "[") }
            if name.isEmpty { return .invalid("no host") }
        } else if i + 1 == bytes.count {
            return .invalid("nothing after the scheme")
        }
        return .valid(scheme: scheme)
    }

    @inline(__always) static func isAlpha(_ b: UInt8) -> Bool { (b | 0x20) >= UInt8(ascii: "a") && (b | 0x20) <= UInt8(ascii: "z") }
    @inline(__always) static func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
}

package enum EpochTime {
    /// Epoch milliseconds as ISO-8601 UTC with milliseconds, e.g. `2023-11-14T22:13:20.000Z`.
    /// `nil` outside years 1970...9999, which no real send or expiry time is.
    package static func iso8601(milliseconds ms: Int64) -> String? {
        guard ms >= 0, ms < 253_402_300_800_000 else { return nil }
        return Timestamp.iso8601(millis: ms)
    }
}

/// Control characters in names that become part of a dedup key or name an inbox.
package enum ControlCharacters {
    /// The first control character of `text` (U+0000–U+001F, U+007F) and its byte offset,
    /// or `nil`. JSON lets them into a string only as escapes (`\u0000`, `\r`).
    package static func first(in text: String) -> (scalar: Unicode.Scalar, offset: Int)? {
        var offset = 0
        for scalar in text.unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7F { return (scalar, offset) }
            offset += UTF8.width(scalar)
        }
        return nil
    }

    /// `control_character` for envelope member or id `what` when `text` holds one.
    ///
    /// Why refuse instead of store: a user, device or id is shown by `pushspoolctl` on a
    /// terminal (ESC would drive it), names an inbox in the HTTP API, and goes into header
    /// values (NATS `Nats-Msg-Id`) where CR, LF and NUL do not survive. No vendor or app
    /// issues such names, so one is a producer bug, not a push to keep.
    static func check(_ text: String?, _ what: String, path: String?, vendor: Vendor? = nil, platform: Platform? = nil) throws(PayloadRefusal) {
        guard let text, let (scalar, offset) = first(in: text) else { return }
        let hex = String(scalar.value, radix: 16, uppercase: true)
        let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        throw PayloadRefusal(.controlCharacter, "\(what) holds the control character \(code) at byte \(offset); user, device and id may not hold U+0000-U+001F or U+007F",
                             vendor: vendor, platform: platform, path: path)
    }
}
