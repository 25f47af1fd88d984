internal import CIsal

/// CRC-32C (Castagnoli) through ISA-L's `crc32_iscsi`, the fastest implementation measured on
/// this platform (docs/design/journal.md, "Checksums").
///
/// ISA-L returns the un-inverted register when seeded with `0xFFFFFFFF`; the standard CRC-32C is
/// its bitwise NOT. Keeping the raw register in `State` lets callers chain pieces (id, then JSON)
/// without copying them together.
package enum CRC32C {
    package typealias State = UInt32

    package static let initial: State = 0xFFFF_FFFF

    package static func update(_ state: State, _ bytes: UnsafeRawBufferPointer) -> State {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return state }
        var state = state
        var start = base.assumingMemoryBound(to: UInt8.self)
        var left = bytes.count
        // ISA-L takes an `int`, so more than 2 GiB go in pieces (records are far smaller).
        while left > 0 {
            let piece = min(left, Int(Int32.max))
            state = crc32iscsiWideLength(UnsafeMutablePointer(mutating: start), UInt64(piece), state)
            start += piece
            left -= piece
        }
        return state
    }

    /// `crc32_iscsi(unsigned char *, int len, unsigned int)`, called with `len` in a full 64-bit
    /// register. The C ABI leaves the upper half of an `int` argument's register undefined,
    /// and the optimiser does pass garbage there; ISA-L's AVX-512 path (`crc32_iscsi_by16_10`
    /// in libisal 2.30) reads the whole register as the length, so a release build ran the CRC
    /// past the buffer: the segfault in reading archived segments. A zero-extended 64-bit value
    /// occupies the same register (rsi) with a clean upper half.
    private static let crc32iscsiWideLength = unsafeBitCast(
        crc32_iscsi as @convention(c) (UnsafeMutablePointer<UInt8>?, Int32, UInt32) -> UInt32,
        to: (@convention(c) (UnsafeMutablePointer<UInt8>?, UInt64, UInt32) -> UInt32).self)

    package static func update(_ state: State, _ bytes: [UInt8]) -> State {
        bytes.withUnsafeBytes { update(state, $0) }
    }

    package static func update(_ state: State, _ bytes: ArraySlice<UInt8>) -> State {
        bytes.withUnsafeBytes { update(state, $0) }
    }

    package static func finalize(_ state: State) -> UInt32 { ~state }

    /// The standard CRC-32C of `bytes` (check value of "123456789" is `0xE3069283`).
    package static func checksum(_ bytes: [UInt8]) -> UInt32 { finalize(update(initial, bytes)) }

    package static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 { finalize(update(initial, bytes)) }

    /// LevelDB's masking: a CRC stored next to data that itself contains CRCs (a record holding a
    /// frame, a checkpoint holding the journal) would otherwise make accidental matches likelier.
    package static func mask(_ crc: UInt32) -> UInt32 {
        ((crc >> 15) | (crc << 17)) &+ 0xA282_EAD8
    }

    package static func unmask(_ masked: UInt32) -> UInt32 {
        let rot = masked &- 0xA282_EAD8
        return (rot >> 17) | (rot << 15)
    }
}
