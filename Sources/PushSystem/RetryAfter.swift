@preconcurrency import Glibc

/// `Retry-After` (RFC 9110 §10.2.3): delay-seconds, or an HTTP-date in any of the three forms
/// a recipient must accept (IMF-fixdate, RFC 850, asctime). The value is the vendor's, so
/// every field is range-checked before it meets a fixed-width type and the delay saturates:
/// a `Retry-After` date once crashed pushspoold through a trapping conversion. The one parser
/// for the outbox's vendors and the media fetcher's servers.
package enum RetryAfter {
    /// The longest delay returned, a day; the follower bounds it further by `RetryCeilingSec=`.
    package static let ceilingMillis: Int64 = 86_400_000

    package static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// The delay the header asks for, in milliseconds from `nowMillis` (epoch ms): 0 for a date
    /// in the past, at most `ceiling` (a day by default); nil when the value is malformed.
    package static func delayMillis(_ value: String, nowMillis: Int64, ceiling ceilingMillis: Int64 = ceilingMillis) -> Int64? {
        let text = value.trimmingSpaces
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty else { return nil }
        if bytes.allSatisfy(isDigit) {
            // 1*DIGIT: any length is valid; past 12 digits it is past any ceiling anyway.
            guard bytes.count <= 12, let seconds = Int64(text) else { return ceilingMillis }
            return min(seconds * 1000, ceilingMillis)
        }
        guard bytes.count <= 64 else { return nil }
        guard let epochSeconds = parseDate(text, nowMillis: nowMillis) else { return nil }
        // Both values are bounded (years 1900...9999, a wall clock): no overflow.
        let delay = epochSeconds * 1000 - nowMillis
        return min(max(0, delay), ceilingMillis)
    }

    /// An HTTP-date → epoch seconds; nil for anything else.
    package static func parseDate(_ text: String, nowMillis: Int64) -> Int64? {
        let fields = text.split(separator: " ")
        var day = 0, month = 0, year = 0
        let clock: Substring
        if fields.count == 6, fields[0].hasSuffix(","), fields[5] == "GMT" {
            // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT".
            guard let d = number(fields[1], digits: 2...2, in: 1...31), let m = months.firstIndex(of: String(fields[2])),
                  let y = number(fields[3], digits: 4...4, in: 1900...9999) else { return nil }
            (day, month, year, clock) = (d, m, y, fields[4])
        } else if fields.count == 4, fields[0].hasSuffix(","), fields[3] == "GMT" {
            // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"; a two-digit year more than 50 years
            // ahead is the most recent past year with those digits.
            let parts = fields[1].split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 3, let d = number(parts[0], digits: 2...2, in: 1...31),
                  let m = months.firstIndex(of: String(parts[1])), let yy = number(parts[2], digits: 2...2, in: 0...99) else { return nil }
            let current = Int(nowMillis / 1000 / 31_556_952) + 1970
            var y = current / 100 * 100 + yy
            if y > current + 50 { y -= 100 }
            (day, month, year, clock) = (d, m, y, fields[2])
        } else if fields.count == 5 {
            // asctime: "Sun Nov  6 08:49:37 1994" (the day may be padded with a space).
            guard let m = months.firstIndex(of: String(fields[1])), let d = number(fields[2], digits: 1...2, in: 1...31),
                  let y = number(fields[4], digits: 4...4, in: 1900...9999) else { return nil }
            (day, month, year, clock) = (d, m, y, fields[3])
        } else {
            return nil
        }
        let parts = clock.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, let hour = number(parts[0], digits: 2...2, in: 0...23),
              let minute = number(parts[1], digits: 2...2, in: 0...59),
              let second = number(parts[2], digits: 2...2, in: 0...60) else { return nil }
        var fieldsTM = tm()
        fieldsTM.tm_year = Int32(clamping: year - 1900)
        fieldsTM.tm_mon = Int32(clamping: month)
        fieldsTM.tm_mday = Int32(clamping: day)
        fieldsTM.tm_hour = Int32(clamping: hour)
        fieldsTM.tm_min = Int32(clamping: minute)
        fieldsTM.tm_sec = Int32(clamping: second)
        let epoch = timegm(&fieldsTM)
        return epoch == -1 ? nil : Int64(epoch)
    }

    package static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    /// A decimal field of `digits` length within `range`; nil otherwise.
    package static func number(_ text: Substring, digits: ClosedRange<Int>, in range: ClosedRange<Int>) -> Int? {
        guard digits.contains(text.utf8.count), text.utf8.allSatisfy(isDigit), let value = Int(text), range.contains(value) else { return nil }
        return value
    }
}
