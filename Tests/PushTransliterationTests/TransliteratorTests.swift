@preconcurrency import Glibc
import Testing
import PushTransliteration

/// ICU's transforms through the CICU shim: the default scheme, hostile sizes, bad input,
/// bad ids and concurrent use.
@Suite struct TransliteratorTests {
    static let defaultScheme = "Any-Latin; Latin-ASCII"

    @Test func cyrillicBecomesASCIILatin() throws {
        let transliterator = try Transliterator(id: Self.defaultScheme)
        #expect(try transliterator.apply("Весенняя распродажа") == "Vesennaa rasprodaza")
        #expect(try transliterator.apply("Spring sale") == "Spring sale")
        #expect(try transliterator.apply("") == "")
        // Another ICU scheme the setting may name: BGN/PCGN romanisation of Russian first.
        let bgn = try Transliterator(id: "Russian-Latin/BGN; Any-Latin; Latin-ASCII")
        #expect(try bgn.apply("Весенняя распродажа") == "Vesennyaya rasprodazha")
    }

    /// CJK grows several times longer in Latin: past the first buffer ICU says how much it
    /// needs and the second call fits.
    @Test func aResultLongerThanTheFirstBufferIsComplete() throws {
        let transliterator = try Transliterator(id: Self.defaultScheme)
        let text = String(repeating: "北京", count: 500)
        let latin = try transliterator.apply(text)
        #expect(latin.utf16.count > text.utf16.count * 2 + 16, "\(latin.utf16.count)")
        #expect(latin.unicodeScalars.allSatisfy { $0.isASCII })
        #expect(latin.hasPrefix("bei jing"))
    }

    @Test func hugeTextIsTransliteratedOrRefusedWithoutTrapping() throws {
        let transliterator = try Transliterator(id: Self.defaultScheme)
        let big = String(repeating: "Ж", count: 50_000)
        let latin = try transliterator.apply(big)
        #expect(latin == String(repeating: "Z", count: 50_000))
        let tooBig = String(repeating: "a", count: Transliterator.maxInputUnits + 1)
        #expect(throws: TransliterationError.self) { try transliterator.apply(tooBig) }
        do {
            _ = try transliterator.apply(tooBig)
        } catch {
            #expect(error.code == .tooLong)
        }
    }

    /// Bytes that were not UTF-8 arrive as U+FFFD (Swift strings are valid Unicode); the rest
    /// of the text is transliterated around them.
    @Test func invalidUTF8IsReplacedNotFatal() throws {
        let transliterator = try Transliterator(id: Self.defaultScheme)
        let bytes: [UInt8] = Array("Весна ".utf8) + [0xFF, 0xC3, 0x28, 0xED, 0xA0, 0x80] + Array(" распродажа".utf8)
        let text = String(decoding: bytes, as: UTF8.self)
        let latin = try transliterator.apply(text)
        #expect(latin.hasPrefix("Vesna "))
        #expect(latin.hasSuffix(" rasprodaza"))
        #expect(latin.unicodeScalars.filter { !$0.isASCII }.allSatisfy { $0 == "\u{FFFD}" })
    }

    @Test(arguments: ["Cyrillic-Klingon", "Any-Latin; Nonsense", "::", String(repeating: "x", count: 600), ""])
    func anUnknownIdIsRefusedWithICUsReason(id: String) {
        let error = Transliterator.check(id: id)
        #expect(error?.code == .invalidId, "\(id)")
        if id.utf8.count <= Transliterator.maxIdBytes, !id.isEmpty {
            #expect(error?.message.contains("'\(id)'") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("U_") == true, "ICU's error name: \(error?.message ?? "")")
        }
        #expect(Transliterator.check(id: Self.defaultScheme) == nil)
    }

    /// One transliterator used from many threads at once gives every thread its own answer.
    @Test func concurrentUseIsSerialised() async throws {
        let transliterator = try Transliterator(id: Self.defaultScheme)
        let results = await withTaskGroup(of: Bool.self) { group in
            for index in 0..<16 {
                group.addTask {
                    for _ in 0..<50 {
                        guard (try? transliterator.apply("Распродажа \(index)")) == "Rasprodaza \(index)" else { return false }
                    }
                    return true
                }
            }
            var all: [Bool] = []
            for await result in group { all.append(result) }
            return all
        }
        #expect(results.count == 16 && results.allSatisfy { $0 })
    }
}
