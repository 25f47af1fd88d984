import PushSystem

/// The dedup index: a set of 64-bit fingerprints of record keys in one flat open-addressing
/// table — 8 bytes a slot, ~10 bytes a key — where a `Set<String>` spent over 100 bytes a key
/// and grew the daemon by ~130 MB per million records.
///
/// A fingerprint is the first 8 bytes of the key's SHA-256, so producers cannot aim for
/// collisions; by the birthday bound two distinct keys among a million share one with
/// probability ~3·10⁻⁸. That is the price of memory that stays flat, and it is the one place
/// the journal trades certainty for it: a collision would count a new payload as a duplicate.
///
/// `Sendable`: a value type.
struct KeyFingerprints: Sendable, Equatable {
    /// 0 marks an empty slot; a real fingerprint of 0 is stored as 1.
    private var slots: [UInt64]
    private(set) var count = 0

    init(minimumCapacity: Int = 0) {
        slots = [UInt64](repeating: 0, count: Self.capacity(for: minimumCapacity))
    }

    init(fingerprints: [UInt64]) {
        self.init(minimumCapacity: fingerprints.count)
        for fingerprint in fingerprints { insert(fingerprint: fingerprint) }
    }

    static func fingerprint(_ key: String) -> UInt64 {
        var key = key
        let digest = key.withUTF8 { SHA256.digest(of: UnsafeRawBufferPointer($0)) }
        var value: UInt64 = 0
        for byte in digest.prefix(8) { value = value << 8 | UInt64(byte) }
        return value == 0 ? 1 : value
    }

    func contains(_ key: String) -> Bool { contains(fingerprint: Self.fingerprint(key)) }

    func contains(fingerprint: UInt64) -> Bool {
        let fingerprint = fingerprint == 0 ? 1 : fingerprint
        var index = home(fingerprint)
        while true {
            let slot = slots[index]
            if slot == fingerprint { return true }
            if slot == 0 { return false }
            index = index + 1 == slots.count ? 0 : index + 1
        }
    }

    mutating func insert(_ key: String) { insert(fingerprint: Self.fingerprint(key)) }

    mutating func insert(fingerprint: UInt64) {
        let fingerprint = fingerprint == 0 ? 1 : fingerprint
        if (count + 1) * 5 > slots.count * 4 { grow() }
        var index = home(fingerprint)
        while true {
            let slot = slots[index]
            if slot == fingerprint { return }
            if slot == 0 {
                slots[index] = fingerprint
                count += 1
                return
            }
            index = index + 1 == slots.count ? 0 : index + 1
        }
    }

    mutating func formUnion(_ keys: [String]) {
        for key in keys { insert(key) }
    }

    /// Every stored fingerprint, for the checkpoint.
    var fingerprints: [UInt64] { slots.filter { $0 != 0 } }

    /// Maps a fingerprint onto the table without a power-of-two size (multiply-shift).
    private func home(_ fingerprint: UInt64) -> Int {
        Int(fingerprint.multipliedFullWidth(by: UInt64(slots.count)).high)
    }

    /// Grows by half, so the table stays within 80% load and ~1.25–1.9 slots a key.
    private mutating func grow() {
        let old = slots
        slots = [UInt64](repeating: 0, count: Self.capacity(for: max(count * 3 / 2, 16)))
        count = 0
        for fingerprint in old where fingerprint != 0 { insert(fingerprint: fingerprint) }
    }

    private static func capacity(for keys: Int) -> Int {
        max(64, keys * 5 / 4 + 1)
    }
}
