import PushSystem

/// The dedup index: 64-bit fingerprints of record keys in one flat open-addressing table,
/// each with where its record is (seq and frame offset) — 20 bytes a slot, ~25–38 bytes a key —
/// where a `Set<String>` spent over 100 bytes a key and grew the daemon by ~130 MB per million
/// records.
///
/// A fingerprint is the first 8 bytes of the key's SHA-256, so producers cannot aim for
/// collisions; by the birthday bound two distinct keys among a million share one with
/// probability ~3·10⁻⁸. A hit is only a candidate: the writer reads the key stored in the
/// journal record the slot points to (or in retention's key file for a retired segment) and
/// counts a duplicate only when the bytes are equal, so a collision never drops a payload.
/// Two keys that collide both get slots (same fingerprint, different seqs).
///
/// `Sendable`: a value type.
struct KeyFingerprints: Sendable, Equatable {
    /// 0 marks an empty slot; a real fingerprint of 0 is stored as 1.
    private var slots: [UInt64]
    /// The record of each slot: its seq (0 = unknown, a slot from a caller that has no
    /// location; such a hit is trusted as a duplicate) and its frame offset / 8 (frames are
    /// 8-aligned, so 32 bits reach 32 GiB, past the largest segment).
    private var seqs: [UInt64]
    private var offsets8: [UInt32]
    private(set) var count = 0

    init(minimumCapacity: Int = 0) {
        let capacity = Self.capacity(for: minimumCapacity)
        slots = [UInt64](repeating: 0, count: capacity)
        seqs = [UInt64](repeating: 0, count: capacity)
        offsets8 = [UInt32](repeating: 0, count: capacity)
    }

    init(fingerprints: [UInt64]) {
        self.init(minimumCapacity: fingerprints.count)
        for fingerprint in fingerprints { insert(fingerprint: fingerprint) }
    }

    /// A table from checkpoint entries (`entries`).
    init(entries: [Entry]) {
        self.init(minimumCapacity: entries.count)
        for entry in entries { insert(fingerprint: entry.fingerprint, seq: entry.seq, offset: entry.offset) }
    }

    /// One slot: a fingerprint and where its record is.
    struct Entry: Sendable, Equatable {
        var fingerprint: UInt64
        var seq: UInt64
        var offset: Int64
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

    mutating func insert(fingerprint: UInt64) { insert(fingerprint: fingerprint, seq: 0, offset: 0) }

    /// Adds a slot for the record at `seq`/`offset`. The same fingerprint with another seq gets
    /// a slot of its own (a collision, or one key journaled twice after its dedup window).
    mutating func insert(fingerprint: UInt64, seq: UInt64, offset: Int64) {
        let fingerprint = fingerprint == 0 ? 1 : fingerprint
        if (count + 1) * 5 > slots.count * 4 { grow() }
        var index = home(fingerprint)
        while true {
            let slot = slots[index]
            if slot == fingerprint && (seqs[index] == seq || seq == 0) { return }
            if slot == 0 {
                slots[index] = fingerprint
                seqs[index] = seq
                offsets8[index] = UInt32(truncatingIfNeeded: max(0, offset) >> 3)
                count += 1
                return
            }
            index = index + 1 == slots.count ? 0 : index + 1
        }
    }

    /// Where the records whose key has this fingerprint are: candidates to confirm.
    func locations(fingerprint: UInt64) -> [(seq: UInt64, offset: Int64)] {
        let fingerprint = fingerprint == 0 ? 1 : fingerprint
        var found: [(seq: UInt64, offset: Int64)] = []
        var index = home(fingerprint)
        while true {
            let slot = slots[index]
            if slot == 0 { return found }
            if slot == fingerprint { found.append((seqs[index], Int64(offsets8[index]) << 3)) }
            index = index + 1 == slots.count ? 0 : index + 1
        }
    }

    mutating func formUnion(_ keys: [String]) {
        for key in keys { insert(key) }
    }

    /// Every stored fingerprint, for the checkpoint.
    var fingerprints: [UInt64] { slots.filter { $0 != 0 } }

    /// Every slot, for the checkpoint.
    /// Calls `body` with every occupied slot, in slot order (the order of `entries`), without
    /// building the array: a checkpoint of a million keys encodes straight from the table.
    func forEachEntry(_ body: (_ fingerprint: UInt64, _ seq: UInt64, _ offset: Int64) -> Void) {
        for index in slots.indices where slots[index] != 0 {
            body(slots[index], seqs[index], Int64(offsets8[index]) << 3)
        }
    }

    var entries: [Entry] {
        slots.indices.compactMap { slots[$0] == 0 ? nil : Entry(fingerprint: slots[$0], seq: seqs[$0], offset: Int64(offsets8[$0]) << 3) }
    }

    /// The index without the records below `seq` (`[Journal] DedupWindowSec=`): rebuilt, as
    /// open addressing cannot delete in place without tombstones.
    func keeping(fromSeq seq: UInt64) -> KeyFingerprints {
        var kept = KeyFingerprints(minimumCapacity: count)
        for index in slots.indices where slots[index] != 0 && (seqs[index] >= seq || seqs[index] == 0) {
            kept.insert(fingerprint: slots[index], seq: seqs[index], offset: Int64(offsets8[index]) << 3)
        }
        return kept
    }

    /// Maps a fingerprint onto the table without a power-of-two size (multiply-shift).
    private func home(_ fingerprint: UInt64) -> Int {
        Int(fingerprint.multipliedFullWidth(by: UInt64(slots.count)).high)
    }

    /// Grows by half, so the table stays within 80% load and ~1.25–1.9 slots a key.
    private mutating func grow() {
        let old = (slots, seqs, offsets8)
        let capacity = Self.capacity(for: max(count * 3 / 2, 16))
        slots = [UInt64](repeating: 0, count: capacity)
        seqs = [UInt64](repeating: 0, count: capacity)
        offsets8 = [UInt32](repeating: 0, count: capacity)
        count = 0
        for index in old.0.indices where old.0[index] != 0 {
            insert(fingerprint: old.0[index], seq: old.1[index], offset: Int64(old.2[index]) << 3)
        }
    }

    private static func capacity(for keys: Int) -> Int {
        max(64, keys * 5 / 4 + 1)
    }
}
