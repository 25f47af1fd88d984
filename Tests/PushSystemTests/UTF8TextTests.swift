import PushSystem
import Testing

/// The ASCII fast path agrees with the standard library's validation on every input: plain
/// ASCII, valid multi-byte text, and the invalid sequences a hostile key or name can carry.
@Suite struct UTF8TextTests {
    static let samples: [[UInt8]] = [
        [], Array("plain-ascii:key 123".utf8), Array("é中😀 mixed".utf8), [0x7F], [0x00, 0x41],
        [0xC0, 0x80], [0x80], [0xE2, 0x82], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xFF, 0x41],
        Array("abc".utf8) + [0xC3],
    ]

    @Test(arguments: samples) func agreesWithTheStandardLibrary(_ bytes: [UInt8]) {
        let expected = String(validating: bytes, as: UTF8.self)
        #expect(UTF8Text.string(bytes) == expected)
        #expect(UTF8Text.string(bytes[...]) == expected)
        bytes.withUnsafeBytes { #expect(UTF8Text.string($0) == expected) }
    }

    @Test func agreesOnRandomBytes() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let count = Int.random(in: 0...12, using: &generator)
            // Mostly ASCII with the odd high byte, so both paths and their boundary are taken.
            let bytes = (0..<count).map { _ in
                Int.random(in: 0..<4, using: &generator) == 0 ? UInt8.random(in: 0x80...0xFF, using: &generator)
                                                              : UInt8.random(in: 0...0x7F, using: &generator)
            }
            #expect(UTF8Text.string(bytes) == String(validating: bytes, as: UTF8.self), "\(bytes)")
        }
    }
}

/// `PathText.parent` answers as `dirname(1)` does for the paths the daemons sync (a journal's
/// or a spool's parent directory), trailing slashes included.
@Suite struct PathTextTests {
    @Test(arguments: [
        ("/var/lib/pushspool/journal", "/var/lib/pushspool"), ("/var/lib/pushspool/journal/", "/var/lib/pushspool"),
        ("/journal", "/"), ("/", "/"), ("journal", "."), ("state/journal", "state"), ("a//b", "a"), ("//journal", "/"),
    ])
    func parentIsTheDirectoryThatHoldsThePath(path: String, parent: String) {
        #expect(PathText.parent(of: path) == parent)
    }
}
