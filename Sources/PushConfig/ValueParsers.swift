@preconcurrency import Glibc
import PushSystem

/// Parsers for the value syntaxes systemd unit files use, so an operator who knows
/// `TimeoutStartSec=` and `MemoryMax=` can write pushspool.conf without a manual.
///
/// Each parser returns the value or a message that says what was expected; the caller adds
/// the file, line, section and key.
package enum ConfigValue {
    /// A duration in systemd's syntax: `5s`, `500ms`, `1min 30s`, `2h`, `1.5s`; a plain number
    /// means seconds.
    ///
    /// Parsed exactly in integers, never through a `Double`: the result is a `Duration` of
    /// whole nanoseconds, and a value too long for `Int64` nanoseconds (292 years) is an
    /// error rather than a trap later, where a daemon multiplies it out.
    package static func duration(_ text: String) -> Result<Duration, ValueError> {
        let failure = ValueError("expected a duration like 5s, 500ms or 1min 30s, got '\(text)'")
        let tooLong = ValueError("'\(text)' is too long a duration", outOfRange: true)
        let scalars = Array(text.unicodeScalars)
        var index = 0
        var total: Int64 = 0
        var sawComponent = false
        func skipSpaces() { while index < scalars.count, scalars[index] == " " || scalars[index] == "\t" { index += 1 } }
        skipSpaces()
        while index < scalars.count {
            var number = ""
            while index < scalars.count, ("0"..."9").contains(scalars[index]) || scalars[index] == "." {
                number.unicodeScalars.append(scalars[index]); index += 1
            }
            guard let decimal = DecimalNumber(parsing: number) else { return .failure(failure) }
            skipSpaces()
            var unit = ""
            while index < scalars.count, !("0"..."9").contains(scalars[index]), scalars[index] != " ", scalars[index] != "\t" {
                unit.unicodeScalars.append(scalars[index]); index += 1
            }
            let factor: Int64
            if unit.isEmpty {
                // A bare number is seconds, but only on its own: "1min 30" is a typo, not 90s.
                guard !sawComponent else { return .failure(failure) }
                skipSpaces()
                guard index == scalars.count else { return .failure(failure) }
                factor = 1_000_000_000
            } else {
                guard let unitNanos = durationUnits[unit] else { return .failure(failure) }
                factor = unitNanos
            }
            guard let nanos = decimal.nanoseconds(unitNanos: factor) else { return .failure(tooLong) }
            let (sum, overflow) = total.addingReportingOverflow(nanos)
            guard !overflow else { return .failure(tooLong) }
            total = sum
            sawComponent = true
            skipSpaces()
        }
        return sawComponent ? .success(.nanoseconds(total)) : .failure(failure)
    }

    /// systemd's time units (systemd.time(7)), in nanoseconds.
    static let durationUnits: [String: Int64] = [
        "ns": 1, "nsec": 1,
        "us": 1000, "usec": 1000, "µs": 1000,
        "ms": 1_000_000, "msec": 1_000_000,
        "s": 1_000_000_000, "sec": 1_000_000_000, "second": 1_000_000_000, "seconds": 1_000_000_000,
        "m": 60_000_000_000, "min": 60_000_000_000, "minute": 60_000_000_000, "minutes": 60_000_000_000,
        "h": 3_600_000_000_000, "hr": 3_600_000_000_000, "hour": 3_600_000_000_000, "hours": 3_600_000_000_000,
        "d": 86_400_000_000_000, "day": 86_400_000_000_000, "days": 86_400_000_000_000,
        "w": 604_800_000_000_000, "week": 604_800_000_000_000, "weeks": 604_800_000_000_000,
    ]

    /// A non-negative decimal `12.345` as integer and fraction digits, so durations are
    /// computed without floating point.
    struct DecimalNumber {
        var integer: Int128
        /// At most 18 fraction digits are kept (attosecond precision of a second, far below
        /// the nanosecond result); further digits are truncated.
        var fraction: Int128
        var fractionDigits: Int

        init?(parsing text: String) {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count <= 2, parts.contains(where: { !$0.isEmpty }) else { return nil }
            integer = 0
            for digit in parts[0].utf8 {
                let (product, overflow) = integer.multipliedReportingOverflow(by: 10)
                let (sum, sumOverflow) = product.addingReportingOverflow(Int128(digit - UInt8(ascii: "0")))
                // Int128 holds 38 digits; a longer integer part is out of any range:
                // saturate, and the caller's nanosecond check refuses it.
                if overflow || sumOverflow { integer = .max; break }
                integer = sum
            }
            fraction = 0
            fractionDigits = 0
            if parts.count == 2 {
                for digit in parts[1].utf8.prefix(18) {
                    fraction = fraction * 10 + Int128(digit - UInt8(ascii: "0"))
                    fractionDigits += 1
                }
            }
        }

        /// The value times `unitNanos`, truncated to whole nanoseconds; `nil` past `Int64.max`.
        func nanoseconds(unitNanos: Int64) -> Int64? {
            let unit = Int128(unitNanos)
            let (whole, overflow) = integer.multipliedReportingOverflow(by: unit)
            guard !overflow else { return nil }
            var scale: Int128 = 1
            for _ in 0..<fractionDigits { scale *= 10 }
            // fraction < 10^18 and unit < 10^15: the product fits Int128 (10^38).
            let (total, sumOverflow) = whole.addingReportingOverflow(fraction * unit / scale)
            guard !sumOverflow, total <= Int128(Int64.max) else { return nil }
            return Int64(total)
        }
    }

    /// A byte size in systemd's syntax: `4096`, `512K`, `10M`, `64MiB`, `1G` (base 1024).
    package static func size(_ text: String) -> Result<Int, ValueError> {
        let failure = ValueError("expected a size like 4096, 512K, 10M or 64MiB, got '\(text)'")
        let trimmed = text.trimmingSpaces
        let digits = trimmed.prefix { ("0"..."9").contains($0) || $0 == "." }
        var suffix = String(trimmed.dropFirst(digits.count)).trimmingSpaces
        guard !digits.isEmpty, let value = Double(digits), value.isFinite else { return .failure(failure) }
        if suffix.count == 3, suffix.hasSuffix("iB") { suffix.removeLast(2) } else if suffix == "B" { suffix = "" }
        let factors: [String: Double] = ["": 1, "K": 0x1p10, "M": 0x1p20, "G": 0x1p30, "T": 0x1p40]
        guard let factor = factors[suffix] else { return .failure(failure) }
        let bytes = value * factor
        guard bytes == bytes.rounded(.down) else { return .failure(failure) }
        guard bytes < Double(Int.max) else { return .failure(ValueError("'\(text)' is too large a size", outOfRange: true)) }
        return .success(Int(bytes))
    }

    /// A boolean: yes/no, true/false, on/off, 1/0 (case-insensitive), as in systemd.
    package static func boolean(_ text: String) -> Result<Bool, ValueError> {
        switch text.lowercased() {
        case "yes", "true", "on", "1", "y", "t": return .success(true)
        case "no", "false", "off", "0", "n", "f": return .success(false)
        default: return .failure(ValueError("expected a boolean (yes/no, true/false, on/off, 1/0), got '\(text)'"))
        }
    }

    /// A non-negative decimal integer within `range`.
    package static func integer(_ text: String, in range: ClosedRange<Int>) -> Result<Int, ValueError> {
        guard let value = Int(text), range.contains(value) else {
            return .failure(ValueError("expected an integer from \(range.lowerBound) to \(range.upperBound), got '\(text)'"))
        }
        return .success(value)
    }

    /// An IPv4 or IPv6 network in CIDR notation (`10.0.0.0/8`, `fd00::/8`); a bare address is a
    /// single host. Returns the canonical `address/prefix` text.
    package static func cidr(_ text: String) -> Result<String, ValueError> {
        let failure = ValueError("expected a network like 10.0.0.0/8, 127.0.0.1 or fd00::/8, got '\(text)'")
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let address = parts.first.map(String.init) else { return .failure(failure) }
        var buffer = [UInt8](repeating: 0, count: 16)
        let family: Int32
        let maxPrefix: Int
        if inet_pton(AF_INET, address, &buffer) == 1 {
            family = AF_INET; maxPrefix = 32
        } else if inet_pton(AF_INET6, address, &buffer) == 1 {
            family = AF_INET6; maxPrefix = 128
        } else {
            return .failure(failure)
        }
        var prefix = maxPrefix
        if parts.count == 2 {
            guard let parsed = Int(parts[1]), (0...maxPrefix).contains(parsed) else { return .failure(failure) }
            prefix = parsed
        }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(family, buffer, &text, socklen_t(text.count)) != nil else { return .failure(failure) }
        let canonical = text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        return .success("\(canonical)/\(prefix)")
    }

    /// Formats a duration the way `duration` reads it back: `500ms`, `5s`, `1min 30s`.
    package static func formatDuration(_ duration: Duration) -> String {
        var nanos = duration.clampedNanoseconds
        if nanos <= 0 { return "0" }
        var parts: [String] = []
        for (unit, size) in [("d", Int64(86_400_000_000_000)), ("h", 3_600_000_000_000), ("min", 60_000_000_000),
                             ("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1000), ("ns", 1)] where nanos >= size {
            parts.append("\(nanos / size)\(unit)")
            nanos %= size
        }
        return parts.joined(separator: " ")
    }

    /// Formats a byte count the way `size` reads it back, using the largest exact unit.
    package static func formatSize(_ bytes: Int) -> String {
        for (unit, size) in [("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)] where bytes >= size && bytes % size == 0 {
            return "\(bytes / size)\(unit)"
        }
        return "\(bytes)"
    }
}

/// Why a single value did not parse; becomes a `ConfigError` once the location is known.
package struct ValueError: Error, Sendable, Equatable {
    package var message: String
    /// Well-formed but too large for any range (the caller reports the key's range instead).
    package var outOfRange: Bool
    package init(_ message: String, outOfRange: Bool = false) {
        self.message = message
        self.outOfRange = outOfRange
    }
}

extension String {
    var trimmingSpaces: String {
        var scalars = Substring(self)
        while let first = scalars.first, first == " " || first == "\t" { scalars.removeFirst() }
        while let last = scalars.last, last == " " || last == "\t" { scalars.removeLast() }
        return String(scalars)
    }
}
