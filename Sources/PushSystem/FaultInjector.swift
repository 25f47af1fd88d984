import Synchronization

/// Lets tests make a named system call fail with a chosen errno (ENOSPC, EIO, ...), the way
/// swift-system's mocking layer does, without touching the file system.
///
/// `Sendable`: all state is behind a `Mutex`. Production code never arms it; the check in
/// `Posix.call` is one atomic load when nothing is armed.
package final class FaultInjector: Sendable {
    package static let shared = FaultInjector()

    private struct Rule: Sendable {
        var call: String
        var errno: Int32
        /// Calls to let through before failing.
        var skip: Int
        /// How many times to fail; `nil` = until disarmed.
        var remaining: Int?
    }

    private let armed = Atomic<Bool>(false)
    private let rules = Mutex<[Rule]>([])

    /// Makes the `skip+1`-th and following calls named `call` fail with `errno`, `times` times
    /// (`nil` = until `disarm`).
    package func arm(call: String, errno: Int32, skip: Int = 0, times: Int? = nil) {
        rules.withLock { $0.append(Rule(call: call, errno: errno, skip: skip, remaining: times)) }
        armed.store(true, ordering: .releasing)
    }

    package func disarm() {
        rules.withLock { $0.removeAll() }
        armed.store(false, ordering: .releasing)
    }

    func fault(for call: String) -> Int32? {
        guard armed.load(ordering: .acquiring) else { return nil }
        return rules.withLock { rules -> Int32? in
            guard let index = rules.firstIndex(where: { $0.call == call }) else { return nil }
            if rules[index].skip > 0 {
                rules[index].skip -= 1
                return nil
            }
            let code = rules[index].errno
            if let remaining = rules[index].remaining {
                if remaining <= 1 { rules.remove(at: index) } else { rules[index].remaining = remaining - 1 }
            }
            return code
        }
    }
}
