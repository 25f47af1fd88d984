/// The one conversion from `Duration` to the numbers clocks and C APIs take.
///
/// `UInt64(seconds * 1e9)` and `UInt64(components.seconds) * 1_000_000_000` trap on a large
/// or negative value, and a configured interval or a header reaches them from outside (a
/// `RescanIntervalSec=99999999999` crashed pushspoold at start and after SIGHUP). These
/// saturate instead: a duration too long for the result becomes the largest value, a
/// negative one zero where the result is unsigned.
extension Duration {
    /// Whole nanoseconds (attoseconds truncated), saturating at `Int64.min`/`Int64.max`.
    package var clampedNanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        let (sum, sumOverflow) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        if sumOverflow { return seconds < 0 ? .min : .max }
        return sum
    }

    /// Whole nanoseconds for monotonic-clock arithmetic (`Posix.monotonicNanos()`): negative
    /// durations are zero, too long ones `Int64.max` (292 years; adding it to a clock reading
    /// still fits `UInt64`).
    package var clampedUInt64Nanoseconds: UInt64 {
        UInt64(Swift.max(0, clampedNanoseconds))
    }

    /// Whole milliseconds, saturating like `clampedNanoseconds` (for `timeout_ms`-style C options).
    package var clampedMilliseconds: Int64 {
        clampedNanoseconds / 1_000_000
    }

    /// Seconds as a `Double`, for APIs that take fractional seconds. Never traps; the
    /// fraction is exact to well below a microsecond for any configured value.
    package var secondsValue: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
