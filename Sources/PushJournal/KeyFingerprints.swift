import PushSystem

/// The dedup index: 64-bit fingerprints of record keys in open-addressing tables, each with
/// where its record is (seq and frame offset) — 16 bytes a slot, 20–25 bytes a key — where a
/// `Set<String>` spent over 100 bytes a key and grew the daemon by ~130 MB per million records.
///
/// A fingerprint is the first 8 bytes of the key's SHA-256, so producers cannot aim for
/// collisions; by the birthday bound two distinct keys among a million share one with
/// probability ~3·10⁻⁸. A hit is only a candidate: the writer reads the key stored in the
/// journal record the slot points to (or in retention's key file for a retired segment) and
/// counts a duplicate only when the bytes are equal, so a collision never drops a payload.
/// Two keys that collide both get slots (same fingerprint, different seqs).
///
/// The table is split into `shardCount` shards by the fingerprint's top byte, each growing on
/// its own: a growth step holds the old and new copy of one shard, not of the whole index, and
/// the checkpoint reads one shard at a time (`snapshot(shard:)`), so the writer copies at most
/// the shard being encoded. A whole-table snapshot, copied by the writer's next inserts, and
/// whole-table growth were the bulk of the daemon's peak RSS through a million-file backlog.
///
/// Seqs are kept as 32-bit offsets from `seqBase`; a dedup window of more than ~4.29 billion
/// records drops its oldest records from the index (`rebase`), which a million-key table at
/// ~25 MB per million could never hold in memory anyway.
///
/// `Sendable`: a value type.
struct KeyFingerprints: Sendable, Equatable {
    static let shardCount = 256

    /// One shard: parallel arrays, so a probe touches only the fingerprints.
    struct Shard: Sendable, Equatable {
        /// 0 marks an empty slot; a real fingerprint of 0 is stored as 1.
        var slots: [UInt64]
        /// 0 = location unknown (a slot from a caller that has none; such a hit is trusted as a
        /// duplicate), else `seq - seqBase + 1`.
        var seqCodes: [UInt32]
        /// The frame offset / 8 (frames are 8-aligned, so 32 bits reach 32 GiB, past the largest
        /// segment).
        var offsets8: [UInt32]
        var count = 0

        init(capacity: Int) {
            slots = [UInt64](repeating: 0, count: capacity)
            seqCodes = [UInt32](repeating: 0, count: capacity)
            offsets8 = [UInt32](repeating: 0, count: capacity)
        }

        /// The slot a fingerprint starts probing at: multiply-shift of the bits below the shard
        /// byte, so the table needs no power-of-two size.
        func home(_ fingerprint: UInt64) -> Int {
            Int((fingerprint &<< 8).multipliedFullWidth(by: UInt64(slots.count)).high)
        }

        func next(_ index: Int) -> Int { index + 1 == slots.count ? 0 : index + 1 }

        /// Adds a slot unless this fingerprint already has one with this code (or the code is
        /// unknown). Grows by a quarter past 80 % load, so 1.25–1.56 slots a key: by half it
        /// was up to 1.9, which put a million keys' table at 30 MB right after a growth wave
        /// (all shards fill evenly, so they grow at about the same count).
        mutating func insert(_ fingerprint: UInt64, code: UInt32, offset8: UInt32) {
            if (count + 1) * 5 > slots.count * 4 { grow() }
            var index = home(fingerprint)
            while true {
                let slot = slots[index]
                if slot == fingerprint && (seqCodes[index] == code || code == 0) { return }
                if slot == 0 {
                    slots[index] = fingerprint
                    seqCodes[index] = code
                    offsets8[index] = offset8
                    count += 1
                    return
                }
                index = next(index)
            }
        }

        private mutating func grow() {
            var bigger = Shard(capacity: KeyFingerprints.capacity(forShardKeys: max(count * 5 / 4, 8)))
            for index in slots.indices where slots[index] != 0 {
                bigger.insert(slots[index], code: seqCodes[index], offset8: offsets8[index])
            }
            self = bigger
        }
    }

    /// What one slot costs: fingerprint, seq code, offset.
    static let slotBytes = 16

    /// Bytes of slot arrays freed by growth steps so far, counted up forever: a caller that
    /// sees it move by a megabyte or more returns the freed pages (`MemoryPolicy`).
    private(set) var freedBytes = 0

    private var shards: [Shard]
    /// The seq a code of 1 stands for; set by the first located insert.
    private var seqBase: UInt64 = 0
    private(set) var count = 0

    init(minimumCapacity: Int = 0) {
        let perShard = Self.capacity(forShardKeys: max(0, minimumCapacity) / Self.shardCount + 1)
        shards = [Shard](repeating: Shard(capacity: perShard), count: Self.shardCount)
    }

    /// An empty table whose seq codes start at `seqBase` (0 = at the first located insert), so
    /// entries loaded in any seq order from `seqBase` up never need a rebase.
    init(minimumCapacity: Int, seqBase: UInt64) {
        self.init(minimumCapacity: minimumCapacity)
        self.seqBase = seqBase
    }

    init(fingerprints: [UInt64]) {
        self.init(minimumCapacity: fingerprints.count)
        for fingerprint in fingerprints { insert(fingerprint: fingerprint) }
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

    private static func stored(_ fingerprint: UInt64) -> UInt64 { fingerprint == 0 ? 1 : fingerprint }
    private static func shardIndex(_ fingerprint: UInt64) -> Int { Int(truncatingIfNeeded: fingerprint >> 56) }

    func contains(_ key: String) -> Bool { contains(fingerprint: Self.fingerprint(key)) }

    func contains(fingerprint: UInt64) -> Bool {
        let fingerprint = Self.stored(fingerprint)
        let shard = shards[Self.shardIndex(fingerprint)]
        var index = shard.home(fingerprint)
        while true {
            let slot = shard.slots[index]
            if slot == fingerprint { return true }
            if slot == 0 { return false }
            index = shard.next(index)
        }
    }

    mutating func insert(_ key: String) { insert(fingerprint: Self.fingerprint(key)) }

    mutating func insert(fingerprint: UInt64) { insert(fingerprint: fingerprint, seq: 0, offset: 0) }

    /// Adds a slot for the record at `seq`/`offset`. The same fingerprint with another seq gets
    /// a slot of its own (a collision, or one key journaled twice after its dedup window).
    mutating func insert(fingerprint: UInt64, seq: UInt64, offset: Int64) {
        let fingerprint = Self.stored(fingerprint)
        var code: UInt32 = 0
        if seq != 0 {
            if seqBase == 0 { seqBase = seq }
            if seq < seqBase || seq - seqBase >= UInt64(UInt32.max) { rebase(including: seq) }
            guard seq >= seqBase else { return }  // older than the window the codes can reach
            code = UInt32(truncatingIfNeeded: seq - seqBase + 1)
        }
        let offset8 = UInt32(truncatingIfNeeded: max(0, offset) >> 3)
        let shard = Self.shardIndex(fingerprint)
        let (before, capacity) = (shards[shard].count, shards[shard].slots.count)
        shards[shard].insert(fingerprint, code: code, offset8: offset8)
        count += shards[shard].count - before
        if shards[shard].slots.count != capacity { freedBytes += capacity * Self.slotBytes }
    }

    /// Where the records whose key has this fingerprint are: candidates to confirm.
    func locations(fingerprint: UInt64) -> [(seq: UInt64, offset: Int64)] {
        let fingerprint = Self.stored(fingerprint)
        let shard = shards[Self.shardIndex(fingerprint)]
        var found: [(seq: UInt64, offset: Int64)] = []
        var index = shard.home(fingerprint)
        while true {
            let slot = shard.slots[index]
            if slot == 0 { return found }
            if slot == fingerprint { found.append((Self.seq(shard.seqCodes[index], base: seqBase), Int64(shard.offsets8[index]) << 3)) }
            index = shard.next(index)
        }
    }

    /// The seq a slot's code stands for (0 = location unknown).
    fileprivate static func seq(_ code: UInt32, base: UInt64) -> UInt64 { code == 0 ? 0 : base + UInt64(code) - 1 }

    mutating func formUnion(_ keys: [String]) {
        for key in keys { insert(key) }
    }

    /// Every stored fingerprint.
    var fingerprints: [UInt64] {
        var all: [UInt64] = []
        all.reserveCapacity(count)
        forEachEntry { fingerprint, _, _ in all.append(fingerprint) }
        return all
    }

    /// Calls `body` with every occupied slot, shard by shard in slot order (the order of
    /// `entries`), without building an array.
    func forEachEntry(_ body: (_ fingerprint: UInt64, _ seq: UInt64, _ offset: Int64) -> Void) {
        for shard in shards.indices { snapshot(shard: shard).forEachEntry(body) }
    }

    /// One shard as it is now, with what its seq codes mean: O(1) (it shares the table's
    /// buffers until the table writes to that shard, which then copies this one shard).
    struct ShardSnapshot: Sendable {
        fileprivate let shard: Shard
        fileprivate let seqBase: UInt64
        /// Which table state the codes belong to: a rebase changes it.
        let generation: Int

        func forEachEntry(_ body: (_ fingerprint: UInt64, _ seq: UInt64, _ offset: Int64) -> Void) {
            for slot in shard.slots.indices where shard.slots[slot] != 0 {
                body(shard.slots[slot], KeyFingerprints.seq(shard.seqCodes[slot], base: seqBase), Int64(shard.offsets8[slot]) << 3)
            }
        }
    }

    func snapshot(shard index: Int) -> ShardSnapshot {
        ShardSnapshot(shard: shards[index], seqBase: seqBase, generation: generation)
    }

    /// Counts rebases: a checkpoint taken shard by shard notices one happening under it.
    private(set) var generation = 0

    var entries: [Entry] {
        var all: [Entry] = []
        all.reserveCapacity(count)
        forEachEntry { all.append(Entry(fingerprint: $0, seq: $1, offset: $2)) }
        return all
    }

    /// Slots allocated over all shards (for the memory tests and the figures in docs/performance.md).
    var slotCapacity: Int { shards.reduce(0) { $0 + $1.slots.count } }

    /// The index without the records below `seq` (`[Journal] DedupWindowSec=`): rebuilt, as
    /// open addressing cannot delete in place without tombstones.
    func keeping(fromSeq seq: UInt64) -> KeyFingerprints {
        var kept = KeyFingerprints(minimumCapacity: count)
        kept.seqBase = max(seqBase, seq)
        kept.generation = generation + 1
        kept.freedBytes = freedBytes + slotCapacity * Self.slotBytes
        forEachEntry { fingerprint, entrySeq, offset in
            if entrySeq >= seq || entrySeq == 0 { kept.insert(fingerprint: fingerprint, seq: entrySeq, offset: offset) }
        }
        return kept
    }

    /// The index with the slots of the records in `fingerprints` (by seq) holding the new
    /// fingerprint given: an erasure's tombstone keys in place of the keys they replaced.
    /// Rebuilt, like ``keeping(fromSeq:)``, as open addressing cannot move a slot in place.
    func replacing(_ fingerprints: [UInt64: UInt64]) -> KeyFingerprints {
        var rebuilt = KeyFingerprints(minimumCapacity: count)
        rebuilt.seqBase = seqBase
        rebuilt.generation = generation + 1
        rebuilt.freedBytes = freedBytes + slotCapacity * Self.slotBytes
        forEachEntry { fingerprint, entrySeq, offset in
            rebuilt.insert(fingerprint: entrySeq == 0 ? fingerprint : fingerprints[entrySeq] ?? fingerprint, seq: entrySeq, offset: offset)
        }
        return rebuilt
    }

    /// Makes `seq` representable: the base moves down to it, or, when the seqs would then span
    /// more than 32 bits, up to the newest ~4.29 billion records, dropping older ones.
    private mutating func rebase(including seq: UInt64) {
        var lowest = seq
        var highest = seq
        forEachEntry { _, entrySeq, _ in
            guard entrySeq != 0 else { return }
            lowest = min(lowest, entrySeq)
            highest = max(highest, entrySeq)
        }
        let span = UInt64(UInt32.max) - 1
        let base = highest - lowest > span ? highest - span : lowest
        var rebuilt = KeyFingerprints(minimumCapacity: count)
        rebuilt.seqBase = base
        rebuilt.generation = generation + 1
        rebuilt.freedBytes = freedBytes + slotCapacity * Self.slotBytes
        forEachEntry { fingerprint, entrySeq, offset in
            if entrySeq == 0 || entrySeq >= base { rebuilt.insert(fingerprint: fingerprint, seq: entrySeq, offset: offset) }
        }
        self = rebuilt
    }

    fileprivate static func capacity(forShardKeys keys: Int) -> Int {
        max(8, keys * 5 / 4 + 1)
    }
}
