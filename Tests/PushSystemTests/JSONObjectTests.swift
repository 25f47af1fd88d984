import Testing
@testable import PushSystem

/// ``JSONObject`` keeps the semantics the `[String: JSONValue]` it replaced had: one member a
/// name, lookups by `String` equality, equality regardless of order. Sizes on both sides of
/// ``JSONObject/linearLimit`` run, since larger objects look names up through an index.
@Suite struct JSONObjectTests {
    static let sizes = [0, 1, 3, JSONObject.linearLimit, JSONObject.linearLimit + 1, 200]

    func parse(_ text: String) throws(JSONParseError) -> JSONValue { try JSONParser().parse(Array(text.utf8)) }

    func objectText(_ names: [String]) -> String {
        "{" + names.enumerated().map { "\"\($0.element)\":\($0.offset)" }.joined(separator: ",") + "}"
    }

    @Test(arguments: sizes)
    func aRepeatedNameIsRefusedAtItsSecondOccurrence(count: Int) {
        guard count > 0 else { return }
        var names = (0..<count).map { "k\($0)" }
        names.append("k\(count / 2)")
        let text = objectText(names)
        do throws(JSONParseError) {
            _ = try parse(text)
            Issue.record("accepted \(text.prefix(60))")
        } catch {
            #expect(error.code == .duplicateKeys)
            #expect(error.path == "k\(count / 2)")
            // The offset named is the repeat's, not the first occurrence's.
            let second = text.utf8.count - "\"k\(count / 2)\":\(count)}".utf8.count
            #expect(error.message.hasSuffix("(second at byte \(second))"))
        }
    }

    @Test func canonicallyEquivalentNamesAreOneName() throws {
        // "é" precomposed and decomposed: equal Strings, so a repeat, as in a Dictionary.
        #expect(throws: JSONParseError.self) { try parse("{\"\u{E9}\":1,\"e\u{301}\":2}") }
        let object = try #require(try parse("{\"\u{E9}\":1}").objectValue)
        #expect(object["e\u{301}"] == .number("1"))
    }

    @Test(arguments: sizes)
    func lookupsFindEveryMemberAndNoOther(count: Int) throws {
        let object = try #require(try parse(objectText((0..<count).map { "k\($0)" })).objectValue)
        #expect(object.count == count)
        #expect(object.isEmpty == (count == 0))
        #expect(object.keys == (0..<count).map { "k\($0)" })
        for i in 0..<count { #expect(object["k\(i)"] == .number(String(i))) }
        #expect(object["k\(count)"] == nil)
        #expect(object["K0"] == nil)
    }

    @Test(arguments: sizes)
    func equalityIgnoresOrder(count: Int) throws {
        let names = (0..<count).map { "k\($0)" }
        let forward = try #require(try parse(objectText(names)).objectValue)
        var shuffled = JSONObject()
        for (i, name) in names.enumerated().reversed() { shuffled[name] = .number(String(i)) }
        #expect(forward == shuffled)
        #expect(JSONValue.object(forward).serialized() == JSONValue.object(shuffled).serialized())
        if count > 0 {
            shuffled["k0"] = .null
            #expect(forward != shuffled)
            shuffled["k0"] = nil
            #expect(forward != shuffled)
            shuffled["extra"] = .number("0")
            #expect(forward != shuffled)
        }
    }

    @Test(arguments: sizes)
    func assignmentReplacesInPlaceAppendsAndRemoves(count: Int) {
        var object = JSONObject()
        for i in 0..<count { object["k\(i)"] = .number(String(i)) }
        object["new"] = .bool(true)
        #expect(object.updateValue(.bool(false), forKey: "new") == .bool(true))
        #expect(object.count == count + 1)
        #expect(object.keys.last == "new")
        if count > 1 {
            #expect(object.removeValue(forKey: "k0") == .number("0"))
            #expect(object["k0"] == nil)
            // Positions after the removed member still resolve.
            for i in 1..<count { #expect(object["k\(i)"] == .number(String(i))) }
            #expect(object["new"] == .bool(false))
            #expect(object.keys == (1..<count).map { "k\($0)" } + ["new"])
        }
        #expect(object.removeValue(forKey: "absent") == nil)
    }

    @Test func dictionaryShapedHelpersKeepTheirMeaning() {
        let object: JSONObject = ["a": .number("1"), "b": .string("x")]
        #expect(object.merging(["b": .null, "c": .bool(true)]) { old, _ in old } == ["a": .number("1"), "b": .string("x"), "c": .bool(true)])
        #expect(object.filter { $0.key == "a" } == ["a": .number("1")])
        #expect(object.compactMapValues(\.stringValue) == ["b": "x"])
        #expect(JSONObject([("a", .null), ("a", .bool(true))], uniquingKeysWith: { _, new in new }) == ["a": .bool(true)])
        #expect(JSONObject(["a": JSONValue.null]) == ["a": .null])
    }
}
