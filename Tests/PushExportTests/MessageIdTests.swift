import Testing
import PushExport

/// `Nats-Msg-Id` is the stream's only duplicate test: two journal records with one id are one
/// message in the stream, the second dropped while the exporter counts it acknowledged. So
/// distinct keys must give distinct ids, made only of bytes a header carries unchanged.
@Suite struct MessageIdTests {
    /// Keys that collided when the raw key was the id: libnats turns CR and LF into spaces
    /// and a NUL ends the header value.
    static let colliding: [[String]] = [
        ["mindbox@7:a\r\nX: 1:p1", "mindbox@7:a  X: 1:p1"],
        ["mindbox@8:z\u{0}one:p1", "mindbox@8:z\u{0}two:p1", "mindbox@8:z"],
        ["apns:id ", "apns:id"],
        ["apns:a%0Ab", "apns:a\nb", "apns:a b"],
        ["apns:\u{7F}", "apns:%7F", "apns:"],
    ]

    @Test(arguments: colliding)
    func keysThatOnceSharedAnIdNoLongerDo(_ keys: [String]) {
        let ids = keys.map { ExportMessage.messageId(hostId: "h", key: $0) }
        #expect(Set(ids).count == keys.count, "\(ids)")
        for id in ids { #expect(Self.isHeaderSafe(id), "\(id)") }
    }

    @Test func headerSafeKeysKeepTheirOldId() {
        // Replaying records exported by an earlier version still deduplicates against them.
        for key in ["mindbox@3:bob:abc", "event:e-1.x", "sfmc@10:John Smith:c 1", "fcm:0:1@a/b?c=d&e~f"] {
            #expect(ExportMessage.messageId(hostId: "h1", key: key) == "h1:" + key)
        }
    }

    @Test func escapesAreUpperCaseHexOfTheUTF8Bytes() {
        #expect(ExportMessage.headerSafe("a\r\nb") == "a%0D%0Ab")
        #expect(ExportMessage.headerSafe("z\u{0}one") == "z%00one")
        #expect(ExportMessage.headerSafe("100%") == "100%25")
        #expect(ExportMessage.headerSafe("é") == "%C3%A9")
        #expect(ExportMessage.headerSafe(" a b ") == " a b%20")
    }

    /// Property: over random keys drawn from the troublesome bytes, decoding the encoding
    /// gives back the key's bytes (so the encoding is injective), and the result is
    /// header-safe. Seeded, so a failure names a reproducible key.
    @Test func theEncodingIsInjectiveAndHeaderSafe() {
        let alphabet: [Unicode.Scalar] = ["\r", "\n", "\u{0}", "\t", "\u{7F}", "\u{1B}", "%", " ", ":", "@", "a", "Z", "0", "F",
                                          "é", "日", "\u{301}", "😀", "\u{FFFD}"]
        var rng = SplitMix64(seed: 0x5EED_0002)
        var ids: [String: String] = [:]
        for _ in 0..<20_000 {
            var key = String.UnicodeScalarView()
            for _ in 0..<Int(rng.next() % 9) { key.append(alphabet[Int(rng.next() % UInt64(alphabet.count))]) }
            let text = String(key)
            let encoded = ExportMessage.headerSafe(text)
            let other = ids.updateValue(text, forKey: encoded)
            guard Self.decode(encoded) == Array(text.utf8), Self.isHeaderSafe(encoded), other == nil || other == text else {
                // The first counterexample is enough (20 000 would bury it).
                Issue.record("key \(Array(text.utf8)) -> \(Array(encoded.utf8)) (also made by \(other.map { Array($0.utf8) } ?? []))")
                return
            }
        }
        #expect(ids.count > 5_000)
    }

    /// Printable ASCII, not ending in a space (header parsers trim it).
    static func isHeaderSafe(_ id: String) -> Bool {
        id.utf8.allSatisfy { $0 >= 0x20 && $0 <= 0x7E } && id.utf8.last != UInt8(ascii: " ")
    }

    /// The inverse of `headerSafe`: `%XX` is the byte XX, anything else itself.
    static func decode(_ text: String) -> [UInt8]? {
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, let byte = UInt8(String(decoding: bytes[(i + 1)...(i + 2)], as: UTF8.self), radix: 16) else { return nil }
                out.append(byte)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return out
    }
}

/// A small seeded generator (SplitMix64), so a property test's keys are the same every run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
