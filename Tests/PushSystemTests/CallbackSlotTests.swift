@preconcurrency import Glibc
import PushSystem
import Testing

/// A callback called many times runs at the same stack depth every time: nothing wraps it on
/// the way through the lock (see ``CallbackSlot`` for the compiler behaviour this avoids).
@Suite struct CallbackSlotTests {
    /// The address of a local of the callback: with n thunks around the closure, the n-th
    /// call runs that much deeper in the stack.
    @inline(never)
    static func stackAddress() -> UInt {
        var marker: UInt8 = 0
        return withUnsafeMutablePointer(to: &marker) { UInt(bitPattern: $0) }
    }

    @Test func manyCallsRunAtOneDepth() {
        let depths = Locked<[UInt]>([])
        let slot = CallbackSlot<Void>()
        slot.set { depths.withLock { $0.append(Self.stackAddress()) } }
        for _ in 0..<2_000 { slot() }
        let seen = depths.withLock { $0 }
        #expect(seen.count == 2_000)
        // Rewrapping adds two frames per call: 2,000 calls would be some 100 KB deeper.
        let spread = (seen.max() ?? 0) - (seen.min() ?? 0)
        #expect(spread < 512, "the callback ran \(spread) bytes deeper after 2,000 calls")
    }

    /// The measurement above sees rewrapping: a lock holding the closure itself, read and
    /// called 2,000 times, runs the callback deeper each time. If a toolchain stops doing
    /// this, this test fails and ``CallbackSlot``'s reason is gone (keep the type or drop it).
    @Test func aLockHoldingTheClosureItselfRewrapsItOnEveryRead() {
        let depths = Locked<[UInt]>([])
        let bare = Locked<(@Sendable () -> Void)?>(nil)
        bare.withLock { $0 = { depths.withLock { $0.append(Self.stackAddress()) } } }
        for _ in 0..<2_000 { bare.withLock { $0 }?() }
        let seen = depths.withLock { $0 }
        let spread = (seen.max() ?? 0) - (seen.min() ?? 0)
        #expect(spread > 50_000, "2,000 reads moved the callback only \(spread) bytes deeper")
    }

    @Test func aCallbackWithAResultAndItsReplacement() {
        let slot = CallbackSlot<UInt64?>()
        #expect(slot() == nil)
        slot.set { 7 }
        for _ in 0..<1_000 { #expect(slot() == .some(7)) }
        slot.set { nil }
        #expect(slot() == .some(nil))
        slot.set(nil)
        #expect(slot.current == nil)
    }

    /// The pattern the slot replaces, kept out of Sources: no lock holds a bare closure.
    @Test func noLockHoldsABareClosure() throws {
        let root = #filePath.split(separator: "/").dropLast(3).joined(separator: "/")
        let offenders = try Self.swiftFiles(under: "/" + root + "/Sources").filter { path in
            let text = try String(contentsOfFile: path, encoding: .utf8)
            // (Synchronization's mutex is kept out of the tree by scripts/test.sh.)
            return text.contains("Locked<(@Sendable") || text.contains("Locked<@Sendable")
        }
        #expect(offenders.isEmpty, "use CallbackSlot for a callback behind a lock: \(offenders)")
    }

    static func swiftFiles(under directory: String) throws -> [String] {
        var found: [String] = []
        guard let walker = opendir(directory) else { return [] }
        defer { closedir(walker) }
        while let entry = readdir(walker) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasPrefix(".") { continue }
            let path = directory + "/" + name
            if entry.pointee.d_type == UInt8(DT_DIR) { found += try swiftFiles(under: path) }
            else if name.hasSuffix(".swift") { found.append(path) }
        }
        return found
    }
}
