@preconcurrency import Glibc

/// ISO-8601 UTC timestamps without Foundation's formatter (hot path: one per record).
package enum Timestamp {
    /// `2026-11-29T16:49:35.123Z` for milliseconds since the epoch.
    package static func iso8601(millis: Int64) -> String {
        var seconds = time_t(millis / 1000)
        var fraction = Int(millis % 1000)
        if fraction < 0 {
            fraction += 1000
            seconds -= 1
        }
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))"
            + "T\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(fraction), 3))Z"
    }

    /// The current wall-clock time as ISO-8601 UTC.
    package static func now() -> String { iso8601(millis: Posix.wallClockMillis()) }
}
