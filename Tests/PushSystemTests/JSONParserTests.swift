import Testing
import PushSystem

@Suite struct JSONParserTests {
    func parse(_ text: String, maxDepth: Int = 32) throws(JSONParseError) -> JSONValue {
        try JSONParser(maxDepth: maxDepth).parse(Array(text.utf8))
    }

    func refusal(_ bytes: [UInt8], maxDepth: Int = 32) -> ReasonCode? {
        do throws(JSONParseError) {
            _ = try JSONParser(maxDepth: maxDepth).parse(bytes)
            return nil
        } catch {
            return error.code
        }
    }

    @Test func parsesEveryValueKind() throws {
        let v = try parse(#" { "a" : [1, -2.5e3, true, false, null, "x"], "b": {}, "c": [] } "#)
        #expect(v == .object([
            "a": .array([.number("1"), .number("-2.5e3"), .bool(true), .bool(false), .null, .string("x")]),
            "b": .object([:]), "c": .array([]),
        ]))
    }

    @Test func keepsNumberLexemesExactly() throws {
        let v = try parse(#"{"id": 123456789012345678901, "f": 1.10}"#)
        #expect(v["id"] == .number("123456789012345678901"))
        #expect(v["f"]?.numberLexeme == "1.10")
        #expect(JSONValue.number("1.0").intValue == 1)
        #expect(JSONValue.number("1.5").intValue == nil)
    }

    @Test func decodesEscapesAndSurrogatePairs() throws {
        let v = try parse(#"["a\"b\\c\/d\b\f\n\r\t", "\u00e9\ud83d\ude00", "Привет 🎉"]"#)
        #expect(v == .array([.string("a\"b\\c/d\u{8}\u{c}\n\r\t"), .string("é😀"), .string("Привет 🎉")]))
    }

    @Test func toleratesByteOrderMark() throws {
        let v = try JSONParser().parse([0xEF, 0xBB, 0xBF] + Array(#"{"a":1}"#.utf8))
        #expect(v == .object(["a": .number("1")]))
    }

    @Test(arguments: [
        "", "   ", "{", "}", #"{"a":}"#, #"{"a" 1}"#, #"{"a":1,}"#, "[1,]", "[1 2]", "01", "1.", "-", "1e", ".5", "+1",
        "tru", "nul", #"{"a":1} x"#, #"{a:1}"#, "'x'", #""\x""#, #""\u12G4""#, #""\ud83d""#, #""\ude00""#,
        #""\ud83d\u0041""#, "\"tab\there\"", "\"unterminated", "NaN", "[1] [2]",
    ])
    func refusesInvalidJSON(_ text: String) {
        #expect(refusal(Array(text.utf8)) == .invalidJSON)
    }

    @Test(arguments: [
        [0x22, 0xC3, 0x28, 0x22],  // bad continuation byte
        [0x22, 0xED, 0xA0, 0x80, 0x22],  // UTF-8-encoded surrogate
        [0x22, 0xC0, 0xAF, 0x22],  // overlong "/"
        [0x22, 0xFF, 0x22],
    ] as [[UInt8]])
    func refusesInvalidUTF8(_ bytes: [UInt8]) {
        #expect(refusal(bytes) == .invalidJSON)
    }

    @Test(arguments: [
        #"{"a":1,"a":2}"#,
        #"{"x":{"b":1,"c":2,"b":3}}"#,
        #"[{"k":null,"k":null}]"#,
        #"{"\u0061":1,"a":2}"#,
    ])
    func refusesDuplicateKeys(_ text: String) {
        #expect(refusal(Array(text.utf8)) == .duplicateKeys)
    }

    @Test func depthBoundIsInclusiveAndConfigurable() {
        let depth32 = String(repeating: "[", count: 32) + String(repeating: "]", count: 32)
        let depth33 = "[" + depth32 + "]"
        #expect(refusal(Array(depth32.utf8)) == nil)
        #expect(refusal(Array(depth33.utf8)) == .tooDeep)
        #expect(refusal(Array(#"{"a":{"b":{}}}"#.utf8), maxDepth: 2) == .tooDeep)
        #expect(refusal(Array(#"{"a":{"b":1}}"#.utf8), maxDepth: 2) == nil)
    }

    @Test func depthIsCappedSoRecursionStaysBounded() {
        let deep = String(repeating: "[", count: 5000) + String(repeating: "]", count: 5000)
        #expect(refusal(Array(deep.utf8), maxDepth: 1_000_000) == .tooDeep)
    }

    @Test func serializesCompactSortedWithoutEscapingSlashes() throws {
        let v = try parse(#"{"z": "https:\/\/x.example\/a", "a": [1, {"é": "\u0001\n"}], "m": null}"#)
        let text = v.serializedString()
        #expect(text == #"{"a":[1,{"é":"\u0001\n"}],"m":null,"z":"https://x.example/a"}"#)
        #expect(try JSONParser().parse(v.serialized()) == v)
    }

    @Test(arguments: [
        #"{"a":"x\"y","b":[true,false,null,1.5e-3],"c":{"\t":"\u001f"}}"#,
        #"["Привет 🎉", {}, [], "", "\\"]"#,
    ])
    func serializedCountMatchesSerializedBytes(_ text: String) throws {
        let v = try parse(text)
        #expect(v.serializedCount == v.serialized().count)
    }

    /// Keys are ordered by their UTF-8 bytes (code point order) — not by Swift's `String <`
    /// — including prefixes, the empty key and characters outside the BMP; the memcmp sort
    /// agrees with a plain byte-array sort on random keys.
    @Test func keysSortByUTF8BytesWhateverTheirScript() throws {
        var generator = SystemRandomNumberGenerator()
        let alphabet: [String] = ["a", "b", "A", "Z", "_", "0", "é", "ſ", "Я", "中", "😀", "\u{FFFF}", "~", " "]
        // Keys alike in their first 8 bytes, which the sort tells apart only by the full comparison.
        var keys: Set<String> = ["", "a", "aa", "ab", "a\u{0}", "abcdefgh", "abcdefghi", "abcdefgh\u{0}", "abcdefgg~", "abcdefg",
                                 "abcdefgha", "ingestedAtX", "ingestedAt", "😀😀", "😀😀a", "😀😀\u{0}"]
        while keys.count < 300 {
            keys.insert((0..<Int.random(in: 1...6, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }.joined())
        }
        let object = JSONValue.object(JSONObject(uniqueKeysWithValues: keys.map { ($0, JSONValue.null) }))
        guard case .object(let reparsed) = try JSONParser(maxDepth: 4).parse(object.serialized()) else {
            Issue.record("not an object"); return
        }
        #expect(reparsed.count == keys.count)
        // The order written: keys in the order their members appear in the output.
        let text = object.serializedString()
        let expected = keys.map { Array($0.utf8) }.sorted { $0.lexicographicallyPrecedes($1) }
        let rebuilt = "{" + expected.map { "\(JSONValue.string(String(decoding: $0, as: UTF8.self)).serializedString()):null" }
            .joined(separator: ",") + "}"
        #expect(text == rebuilt)
    }
}
