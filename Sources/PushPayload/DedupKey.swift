import PushSystem

/// The journal's de-duplication key of a push or an event, and its one size limit.
///
/// Three forms, all valid UTF-8 (the journal stores keys as UTF-8 and compares their bytes):
///
/// - `vendor:id` when the envelope names no user (absent or empty `user`). Every record
///   journaled before users were part of the key has this form, so old and new records of
///   user-less pushes still de-duplicate against each other.
/// - `vendor@N:user:id` when it names one, `N` being the byte count of `user` in decimal
///   (no leading zeros). The same push to two users is two records; an SFMC `_m` (which
///   names a campaign, not a recipient) no longer collapses all of its recipients into one.
/// - `event:eventId` for a Notification Center event (``event(_:)``): the `vendor:id` form
///   with the word `event`, which no ``Vendor`` uses, and an id of `[A-Za-z0-9._:-]` only.
///
/// Why a length prefix rather than a separator: ids and users are arbitrary JSON strings
/// (`:`, `@`, even U+0000 are all legal), so no separator character is safe without refusing
/// some of them, and a byte that never occurs in UTF-8 would make a key the journal refuses.
/// The encoding is injective: vendor ids are lower-case letters only, so the byte after them
/// (`:` or `@`) says which form a key has and the two forms never meet; in the user form `N`
/// fixes where the user ends, and the id is the rest.
package enum DedupKey {
    /// The most bytes a key may have: the journal's record frame holds keys of 1...255 bytes.
    /// The normaliser refuses a payload whose key would be longer (`id_too_long`);
    /// `KeyLimitAgreementTests` checks the journal accepts a key of exactly this length.
    package static let maxBytes = 255

    /// The key of a push from `vendor` with `id`, for the envelope's `user` (if any).
    package static func make(vendor: Vendor, id: String, user: String?) -> String {
        guard let user, !user.isEmpty else { return "\(vendor.rawValue):\(id)" }
        return "\(vendor.rawValue)@\(user.utf8.count):\(user):\(id)"
    }

    /// The key of a Notification Center event: `event:<eventId>`. It has the `vendor:id` form
    /// with the reserved vendor word `event` (no ``Vendor`` is called that), so it never meets
    /// a push's key and ``parse(_:)`` reads it as vendor `event`, no user.
    package static func event(_ eventId: String) -> String { "\(eventPrefix)\(eventId)" }

    static let eventPrefix = "event:"

    /// The event id of a key made by ``event(_:)``, or `nil` for a push's key.
    package static func eventId(of key: String) -> String? {
        guard key.hasPrefix(eventPrefix) else { return nil }
        let id = String(key.dropFirst(eventPrefix.count))
        return PushEvent.isValidEventId(id) ? id : nil
    }

    /// Splits a key made by ``make(vendor:id:user:)``, for tools that show keys; `nil` for a
    /// string that is not such a key. `vendor` is returned as written, so keys of vendors this
    /// build does not know still parse.
    package static func parse(_ key: String) -> (vendor: String, id: String, user: String?)? {
        let bytes = Array(key.utf8)
        var i = 0
        while i < bytes.count, bytes[i] >= UInt8(ascii: "a"), bytes[i] <= UInt8(ascii: "z") { i += 1 }
        guard i > 0, i < bytes.count else { return nil }
        let vendor = String(decoding: bytes[..<i], as: UTF8.self)
        if bytes[i] == UInt8(ascii: ":") {
            return (vendor, String(decoding: bytes[(i + 1)...], as: UTF8.self), nil)
        }
        guard bytes[i] == UInt8(ascii: "@") else { return nil }
        i += 1
        var length = 0
        let digitsStart = i
        // At most 3 digits: a user longer than the whole key limit cannot occur, and the bound
        // keeps the arithmetic from overflowing on a hostile string.
        while i < bytes.count, i - digitsStart < 4, bytes[i] >= UInt8(ascii: "0"), bytes[i] <= UInt8(ascii: "9") {
            length = length * 10 + Int(bytes[i] - UInt8(ascii: "0"))
            i += 1
        }
        guard i > digitsStart, i - digitsStart <= 3, bytes[digitsStart] != UInt8(ascii: "0"), i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return nil }
        let userStart = i + 1
        let userEnd = userStart + length
        guard userEnd < bytes.count, bytes[userEnd] == UInt8(ascii: ":") else { return nil }
        guard let user = UTF8Text.string(bytes[userStart..<userEnd]) else { return nil }
        return (vendor, String(decoding: bytes[(userEnd + 1)...], as: UTF8.self), user)
    }
}
