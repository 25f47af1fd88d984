/// Conversions for numbers that come from outside (a header, a curl info value, a file size,
/// the configuration) into the fixed-width types the fetcher computes with. None of them can
/// trap: a value out of range saturates at the nearest bound, because a remote server or a
/// mistyped `*Sec=` value must never be able to end the process (issue 8, defect 1).
enum Bounded {
    /// Longest span any media timer is set to, nanoseconds: 100 years. Far beyond every
    /// deadline the fetcher honours, and small enough that `now + span` cannot overflow a
    /// `UInt64` monotonic clock (2^64 ns is about 584 years).
    static let maxSpanNanos: UInt64 = 100 * 365 * 86_400 * 1_000_000_000

    /// `seconds` as nanoseconds; `0` for negative or NaN, `maxSpanNanos` for huge or infinite.
    /// For delays computed in `Double` (a `Retry-After` value, jittered backoff); configured
    /// spans are `Duration`s and use `clampedUInt64Nanoseconds`.
    static func nanos(seconds: Double) -> UInt64 {
        guard seconds > 0 else { return 0 }
        let nanos = seconds * 1e9
        guard nanos < Double(maxSpanNanos) else { return maxSpanNanos }
        return UInt64(nanos)
    }

    /// `span` as whole milliseconds in `1...Int32.max` (curl's `long` timeouts; a day is
    /// 86,400,000, so the cap only bites on absurd configurations).
    static func millis(_ span: Duration) -> Int {
        Int(clamping: min(max(1, span.clampedMilliseconds), Int64(Int32.max)))
    }

    /// `span` rounded up to whole seconds in `1...Int32.max`.
    static func wholeSeconds(_ span: Duration) -> Int {
        let (seconds, attoseconds) = span.components
        let whole = attoseconds > 0 && seconds < .max ? seconds + 1 : seconds
        return Int(min(max(1, whole), Int64(Int32.max)))
    }

    /// `base + span` on the monotonic clock, saturating at `UInt64.max`.
    static func deadline(_ base: UInt64, plus span: UInt64) -> UInt64 {
        let (sum, overflow) = base.addingReportingOverflow(span)
        return overflow ? .max : sum
    }

    /// `a + b`, saturating at `Int64.max` (sums of file sizes: a sparse file can claim any size).
    static func sum(_ a: Int64, _ b: Int64) -> Int64 {
        let (sum, overflow) = a.addingReportingOverflow(b)
        return overflow ? (b > 0 ? .max : .min) : sum
    }
}
