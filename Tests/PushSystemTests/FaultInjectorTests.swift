@preconcurrency import Glibc
import Foundation
import Testing
@testable import PushSystem

/// Each test uses an injector of its own (not `shared`), so these run in parallel with
/// everything; `injectedFaultSurfacesAsThatErrno` covers the shared one through `Posix.call`.
@Suite struct FaultInjectorTests {
    /// Two suites arm rules that overlap in time; when the first disarms, the second's rule
    /// must still fire. (The old `disarm()` removed every rule of the process.)
    @Test func disarmRemovesOnlyItsOwnRules() {
        let injector = FaultInjector()
        let first = injector.arm(call: "a.write", errno: ENOSPC)
        let second = injector.arm(call: "b.write", errno: EIO)
        let sameCall = injector.arm(call: "b.fsync", errno: EROFS, times: 2)
        #expect(injector.fault(for: "a.write") == ENOSPC)
        injector.disarm(first)
        #expect(injector.fault(for: "a.write") == nil)
        #expect(injector.fault(for: "b.write") == EIO)
        #expect(injector.fault(for: "b.write") == EIO, "times: nil fires until disarmed")
        #expect(injector.fault(for: "b.fsync") == EROFS)
        injector.disarm(second)
        #expect(injector.fault(for: "b.write") == nil)
        #expect(injector.fault(for: "b.fsync") == EROFS)
        #expect(injector.fault(for: "b.fsync") == nil, "used up after two")
        injector.disarm(sameCall)  // already used up: a no-op
        injector.disarm(first)  // twice: a no-op
    }

    /// Overlapping `withFault` scopes on the same call name, one on a thread of its own: each
    /// sees its own rule only, a thread outside both sees none, and leaving one scope keeps
    /// the other.
    @Test func overlappingScopesOnOneCallStayApart() {
        let injector = FaultInjector()
        let aInside = DispatchSemaphore(value: 0), bDone = DispatchSemaphore(value: 0)
        let seenByA = Thread.runAndWaitLater {
            injector.withFault(call: "fsync", errno: EIO) { () -> [Int32?] in
                let before = injector.fault(for: "fsync")
                aInside.signal()
                bDone.wait()  // B's scope has come and gone meanwhile
                return [before, injector.fault(for: "fsync")]
            }
        }
        aInside.wait()
        let seenByB = injector.withFault(call: "fsync", errno: ENOSPC, skip: 1) { () -> [Int32?] in
            let first = injector.fault(for: "fsync")  // skipped
            let second = injector.fault(for: "fsync")
            // Nested: the outer rule (no limit) is older, so it still answers first.
            let nested = injector.withFault(call: "fsync", errno: EROFS) { injector.fault(for: "fsync") }
            let outside = Thread.runAndWaitLater { injector.fault(for: "fsync") }()
            return [first, second, nested, outside]
        }
        bDone.signal()
        #expect(seenByA() == [EIO, EIO])
        #expect(seenByB == [nil, ENOSPC, ENOSPC, nil])
        #expect(injector.fault(for: "fsync") == nil, "both scopes ended: nothing armed")
    }

    @Test func scopeEndsWhenTheBodyThrows() {
        let injector = FaultInjector()
        #expect(throws: SystemError.self) {
            try injector.withFault(call: "x", errno: EIO) { () throws(SystemError) in
                throw SystemError(call: "x", errno: EIO)
            }
        }
        #expect(injector.withFault(call: "y", errno: EIO) { injector.fault(for: "x") } == nil)
    }
}

extension Thread {
    /// Starts `body` on a new thread (outside any task); the returned function waits for
    /// its result.
    fileprivate static func runAndWaitLater<R: Sendable>(_ body: @escaping @Sendable () -> R) -> () -> R {
        let box = LockedBox<R>()
        let done = DispatchSemaphore(value: 0)
        Thread {
            box.value = body()
            done.signal()
        }.start()
        return {
            done.wait()
            return box.value!
        }
    }
}

private final class LockedBox<R: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: R?
    var value: R? {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}
