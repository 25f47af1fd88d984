/// Epoch times that senders write as a whole number: seconds, or milliseconds as JavaScript's
/// `Date.now()` and Java's `currentTimeMillis()` give them.
///
/// One rule tells them apart without guessing: a value of at least 10^12 is milliseconds
/// (2001-09-09 onward), anything less is seconds. No valid seconds value reaches 10^12 (that
/// is past the year 9999, which is refused), and no push was sent before 2001, so the two
/// ranges cannot be confused.
package enum EpochNumber {
    /// 9999-12-31T23:59:59.999Z, the last instant an ISO-8601 year of four digits can name.
    package static let maxMillis: Int64 = 253_402_300_799_999
    /// The least value read as milliseconds.
    package static let millisecondsFrom: Int64 = 1_000_000_000_000

    /// Epoch milliseconds for `digits` (ASCII digits only: no sign, fraction or exponent);
    /// `nil` for anything else and for instants past ``maxMillis``. Never traps: at most 15
    /// significant digits are accumulated, far below `Int64.max`.
    package static func millis(digits: some Collection<UInt8>) -> Int64? {
        guard !digits.isEmpty, digits.count <= 32 else { return nil }
        var value: Int64 = 0
        var significant = 0
        for digit in digits {
            guard digit >= 48 && digit <= 57 else { return nil }
            if significant == 0 && digit == 48 { continue }
            significant += 1
            guard significant <= 15 else { return nil }
            value = value * 10 + Int64(digit - 48)
        }
        let millis = value >= millisecondsFrom ? value : value * 1000
        return millis <= maxMillis ? millis : nil
    }
}
