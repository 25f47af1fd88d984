/// Parses the ISO-8601 timestamps records carry (`expiresAt`, `ingestedAt`) into epoch
/// milliseconds, without Foundation and without trapping on hostile input.
package enum ISO8601 {
    /// `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM|±HHMM)`; `nil` for anything else. Years
    /// 0000-9999 only, so the result always fits an `Int64`.
    package static func millis(_ text: String) -> Int64? {
        let b = Array(text.utf8)
        guard b.count >= 20, b.count <= 40 else { return nil }
        func number(_ from: Int, _ count: Int) -> Int? {
            var value = 0
            for i in from..<(from + count) {
                guard i < b.count, b[i] >= 0x30, b[i] <= 0x39 else { return nil }
                value = value * 10 + Int(b[i] - 0x30)
            }
            return value
        }
        guard let year = number(0, 4), b[4] == 0x2d, let month = number(5, 2), b[7] == 0x2d, let day = number(8, 2),
              b[10] == 0x54 || b[10] == 0x74 || b[10] == 0x20,
              let hour = number(11, 2), b[13] == 0x3a, let minute = number(14, 2), b[16] == 0x3a, let second = number(17, 2),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var i = 19
        var fractionMillis = 0
        if i < b.count, b[i] == 0x2e {
            i += 1
            var digits = 0
            while i < b.count, b[i] >= 0x30, b[i] <= 0x39 {
                if digits < 3 { fractionMillis = fractionMillis * 10 + Int(b[i] - 0x30) }
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            for _ in min(digits, 3)..<3 { fractionMillis *= 10 }
        }
        var offsetMinutes = 0
        guard i < b.count else { return nil }
        if b[i] == 0x5a || b[i] == 0x7a {
            i += 1
        } else if b[i] == 0x2b || b[i] == 0x2d {
            let sign = b[i] == 0x2d ? -1 : 1
            guard let oh = number(i + 1, 2) else { return nil }
            var j = i + 3
            if j < b.count, b[j] == 0x3a { j += 1 }
            guard let om = number(j, 2), oh < 24, om < 60 else { return nil }
            offsetMinutes = sign * (oh * 60 + om)
            i = j + 2
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = ((days * 24 + hour) * 60 + minute) * 60 + second - offsetMinutes * 60
        let (millis, overflow) = Int64(clamping: seconds).multipliedReportingOverflow(by: 1000)
        return overflow ? nil : millis &+ Int64(clamping: fractionMillis)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
