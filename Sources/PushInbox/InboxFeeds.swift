import PushSystem

/// A named filter of the inbox (`[Feed NAME]` in the configuration): the items of a category,
/// of a vendor, with a custom payload key (and value), or every item no other feed takes.
/// The index decides an item's feeds once, when it applies the push, and keeps them on the
/// item (``InboxIndex``), so a feed's list and counts are indexed reads and stay exact.
///
/// `Sendable` value.
package struct InboxFeed: Sendable, Equatable {
    package var name: String
    /// The item's `category` is one of these (empty: any category, or none).
    package var categories: [String]
    /// The item's `vendor` is one of these (empty: any vendor).
    package var vendors: [String]
    /// The push's custom payload (an object) has this top-level member, not `null`
    /// (`nil`: no condition on the payload).
    package var payloadKey: String?
    /// With ``payloadKey``: the member's value as text (a string as it is, a number as
    /// written, `true`/`false`) equals this.
    package var payloadValue: String?
    /// "Everything else": the items that no other feed takes. Has no other condition.
    package var rest: Bool

    package init(name: String, categories: [String] = [], vendors: [String] = [], payloadKey: String? = nil,
                 payloadValue: String? = nil, rest: Bool = false) {
        self.name = name
        self.categories = categories
        self.vendors = vendors
        self.payloadKey = payloadKey
        self.payloadValue = payloadValue
        self.rest = rest
    }

    /// The most feeds an index keeps: an item's feeds are also a bit mask in one integer column.
    package static let maximum = 32

    /// The definition as one line of text, stored in the index beside the name: an index
    /// built with other definitions is rebuilt (``InboxError/Kind/feedsMismatch``), so no item
    /// keeps a membership that the configuration no longer gives it.
    package var definitionText: String {
        if rest { return "rest" }
        var parts: [String] = []
        if !categories.isEmpty { parts.append("categories=" + JSONValue.array(categories.map { .string($0) }).serializedString()) }
        if !vendors.isEmpty { parts.append("vendors=" + JSONValue.array(vendors.map { .string($0) }).serializedString()) }
        if let payloadKey { parts.append("payloadKey=" + JSONValue.string(payloadKey).serializedString()) }
        if let payloadValue { parts.append("payloadValue=" + JSONValue.string(payloadValue).serializedString()) }
        return parts.joined(separator: " ")
    }

    /// Whether an item with these fields is in this feed by its own conditions (all that are
    /// set must hold; ``rest`` is decided by ``InboxFeed/membership(_:vendor:category:customPayload:)``).
    func matches(vendor: String, category: String?, customPayload: JSONValue?) -> Bool {
        if rest { return false }
        if !categories.isEmpty {
            guard let category, categories.contains(category) else { return false }
        }
        if !vendors.isEmpty, !vendors.contains(vendor) { return false }
        if let payloadKey {
            guard case .object(let members)? = customPayload, let member = members[payloadKey], !member.isNull else { return false }
            if let payloadValue {
                let text: String? = switch member {
                case .string(let s): s
                case .number(let n): n
                case .bool(let b): b ? "true" : "false"
                default: nil
                }
                guard text == payloadValue else { return false }
            }
        }
        return true
    }

    /// The feeds an item is in, as a bit mask (bit `i` = `feeds[i]`): each feed whose
    /// conditions hold, and the "everything else" feed when none of the others does.
    static func membership(_ feeds: [InboxFeed], vendor: String, category: String?, customPayload: JSONValue?) -> Int64 {
        var mask: Int64 = 0
        for (bit, feed) in feeds.prefix(maximum).enumerated() where feed.matches(vendor: vendor, category: category, customPayload: customPayload) {
            mask |= 1 << Int64(bit)
        }
        if mask == 0, let bit = feeds.prefix(maximum).firstIndex(where: \.rest) { mask |= 1 << Int64(bit) }
        return mask
    }

    /// The bit positions set in `mask`, lowest first.
    static func bits(_ mask: Int64) -> [Int64] {
        (0..<Int64(maximum)).filter { mask & (1 << $0) != 0 }
    }
}
