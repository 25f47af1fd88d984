/// The members of a JSON object, in the order they were added (document order for parsed
/// objects), each name at most once.
///
/// A contiguous array scanned linearly, not a `Dictionary`: pushes' objects hold a handful of
/// members, and the burst profile (issue 36) put hashing (per-dictionary seeding, `Hasher`
/// over every key) and the dictionaries' allocations among the largest costs of a file.
/// Objects larger than ``linearLimit`` also keep a name → position index, so that a sender's
/// object with thousands of members costs no more to build and read than a `Dictionary` did.
///
/// Names compare as `String`s do (canonical equivalence), as `Dictionary` keys did. Equality
/// ignores order, as `Dictionary`'s did. Writers that need a canonical order sort
/// (``JSONValue/serialized()``); iteration order is otherwise insertion order.
///
/// `Sendable`: a value.
package struct JSONObject: Sendable {
    package typealias Element = (key: String, value: JSONValue)

    /// Above this many members, lookups go through ``index``.
    package static let linearLimit = 16

    private var members: [Element]
    /// Name → position in ``members``; only when there are more than ``linearLimit``.
    private var index: [String: Int]?

    package init() {
        members = []
        index = nil
    }

    package init(minimumCapacity: Int) {
        members = []
        members.reserveCapacity(minimumCapacity)
        index = nil
    }

    /// Members whose names the caller knows to be distinct (the parser, after its duplicate check).
    package init(uniqueMembers: [Element]) {
        members = uniqueMembers
        index = nil
        if members.count > Self.linearLimit { rebuildIndex() }
    }

    /// Like `Dictionary(uniqueKeysWithValues:)`: a repeated name is a programming error.
    package init(uniqueKeysWithValues pairs: some Sequence<(String, JSONValue)>) {
        self.init()
        for (key, value) in pairs {
            precondition(position(of: key) == nil, "JSONObject: duplicate member \"\(key)\"")
            append(key, value)
        }
    }

    /// Like `Dictionary(_:uniquingKeysWith:)`: a repeated name keeps the position of its first
    /// occurrence and the value `combine` makes.
    package init(_ pairs: some Sequence<(String, JSONValue)>,
                 uniquingKeysWith combine: (JSONValue, JSONValue) throws -> JSONValue) rethrows {
        self.init()
        for (key, value) in pairs {
            if let at = position(of: key) {
                members[at].value = try combine(members[at].value, value)
            } else {
                append(key, value)
            }
        }
    }

    /// A dictionary's members, in its iteration order.
    package init(_ dictionary: [String: JSONValue]) {
        self.init(uniqueMembers: dictionary.map { (key: $0.key, value: $0.value) })
    }

    package var count: Int { members.count }
    package var isEmpty: Bool { members.isEmpty }
    /// The names, in member order.
    package var keys: [String] { members.map(\.key) }
    /// The values, in member order.
    package var values: [JSONValue] { members.map(\.value) }

    /// The member named `key`; assigning `nil` removes it, assigning to a new name appends it.
    package subscript(key: String) -> JSONValue? {
        get {
            guard let at = position(of: key) else { return nil }
            return members[at].value
        }
        set {
            if let newValue { updateValue(newValue, forKey: key) } else { removeValue(forKey: key) }
        }
    }

    package subscript(key: String, default fallback: @autoclosure () -> JSONValue) -> JSONValue {
        get { self[key] ?? fallback() }
        set { self[key] = newValue }
    }

    /// Sets member `key` (in place when present, else appended); returns the value it replaced.
    @discardableResult
    package mutating func updateValue(_ value: JSONValue, forKey key: String) -> JSONValue? {
        if let at = position(of: key) {
            let old = members[at].value
            members[at].value = value
            return old
        }
        append(key, value)
        return nil
    }

    /// Removes member `key`, keeping the others' order; returns its value.
    @discardableResult
    package mutating func removeValue(forKey key: String) -> JSONValue? {
        guard let at = position(of: key) else { return nil }
        let old = members.remove(at: at).value
        if index != nil {
            if members.count > Self.linearLimit { rebuildIndex() } else { index = nil }
        }
        return old
    }

    /// Like `Dictionary.merge(_:uniquingKeysWith:)`; new names are appended in `other`'s order.
    package mutating func merge(_ other: JSONObject, uniquingKeysWith combine: (JSONValue, JSONValue) throws -> JSONValue) rethrows {
        for (key, value) in other {
            if let at = position(of: key) {
                members[at].value = try combine(members[at].value, value)
            } else {
                append(key, value)
            }
        }
    }

    package func merging(_ other: JSONObject, uniquingKeysWith combine: (JSONValue, JSONValue) throws -> JSONValue) rethrows -> JSONObject {
        var merged = self
        try merged.merge(other, uniquingKeysWith: combine)
        return merged
    }

    package func mapValues(_ transform: (JSONValue) throws -> JSONValue) rethrows -> JSONObject {
        JSONObject(uniqueMembers: try members.map { (key: $0.key, value: try transform($0.value)) })
    }

    package func compactMapValues(_ transform: (JSONValue) throws -> JSONValue?) rethrows -> JSONObject {
        JSONObject(uniqueMembers: try members.compactMap { member in try transform(member.value).map { (key: member.key, value: $0) } })
    }

    /// Like `Dictionary.mapValues` to another type: a dictionary, as member order then has no use.
    package func mapValues<T>(_ transform: (JSONValue) throws -> T) rethrows -> [String: T] {
        var mapped = [String: T](minimumCapacity: members.count)
        for member in members { mapped[member.key] = try transform(member.value) }
        return mapped
    }

    package func compactMapValues<T>(_ transform: (JSONValue) throws -> T?) rethrows -> [String: T] {
        var mapped = [String: T](minimumCapacity: members.count)
        for member in members { mapped[member.key] = try transform(member.value) }
        return mapped
    }

    /// The members `isIncluded` keeps, as an object (as `Dictionary.filter` returns a dictionary).
    package func filter(_ isIncluded: (Element) throws -> Bool) rethrows -> JSONObject {
        JSONObject(uniqueMembers: try members.filter(isIncluded))
    }

    private mutating func append(_ key: String, _ value: JSONValue) {
        members.append((key: key, value: value))
        if index != nil {
            index![key] = members.count - 1
        } else if members.count > Self.linearLimit {
            rebuildIndex()
        }
    }

    private mutating func rebuildIndex() {
        var built = [String: Int](minimumCapacity: members.count)
        for (at, member) in members.enumerated() { built[member.key] = at }
        index = built
    }

    private func position(of key: String) -> Int? {
        if let index { return index[key] }
        for at in members.indices where members[at].key == key { return at }
        return nil
    }

    /// The member at `position` (0 ..< ``count``), in member order.
    package func member(at position: Int) -> Element { members[position] }
}

extension JSONObject: Sequence {
    package func makeIterator() -> IndexingIterator<[Element]> { members.makeIterator() }
    package var underestimatedCount: Int { members.count }
}

extension JSONObject: Equatable {
    /// The same names with equal values, in any order (as two `Dictionary`s compared).
    package static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.count == rhs.count else { return false }
        for (key, value) in lhs {
            guard let other = rhs[key], other == value else { return false }
        }
        return true
    }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    /// A repeated name traps, as it does in a `Dictionary` literal.
    package init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(uniqueKeysWithValues: elements)
    }
}
