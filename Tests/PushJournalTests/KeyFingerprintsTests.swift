import Testing
@testable import PushJournal

@Suite struct KeyFingerprintsTests {
    @Test func membershipAcrossGrowth() {
        var set = KeyFingerprints()
        for i in 0..<50_000 { set.insert("mindbox:key-\(i)") }
        set.insert("mindbox:key-7")  // again: no second entry
        #expect(set.count == 50_000)
        for i in stride(from: 0, to: 50_000, by: 97) { #expect(set.contains("mindbox:key-\(i)")) }
        var absent = 0
        for i in 50_000..<60_000 where !set.contains("mindbox:key-\(i)") { absent += 1 }
        #expect(absent == 10_000, "no false positives among 10,000 absent keys")
    }

    @Test func roundTripThroughTheCheckpointForm() {
        var set = KeyFingerprints()
        for i in 0..<1_000 { set.insert("infobip:\(i)") }
        let copy = KeyFingerprints(fingerprints: set.fingerprints)
        #expect(copy.count == 1_000)
        #expect((0..<1_000).allSatisfy { copy.contains("infobip:\($0)") })
        #expect(!copy.contains("infobip:1000"))
    }

    @Test func aZeroFingerprintIsStillAMember() {
        var set = KeyFingerprints()
        set.insert(fingerprint: 0)
        #expect(set.contains(fingerprint: 0))
        #expect(set.count == 1)
    }

    /// About ten bytes a key, where a `Set<String>` of such keys took over a hundred.
    @Test func staysCompact() {
        var set = KeyFingerprints()
        for i in 0..<100_000 { set.insert(fingerprint: UInt64(i) &* 0x9E37_79B9_7F4A_7C15 | 1) }
        #expect(set.fingerprints.count == 100_000)
        #expect(MemoryLayout<UInt64>.stride * capacityOf(set) <= 100_000 * 16)
    }

    private func capacityOf(_ set: KeyFingerprints) -> Int {
        Mirror(reflecting: set).children.first { $0.label == "slots" }.map { ($0.value as! [UInt64]).count } ?? .max
    }
}
