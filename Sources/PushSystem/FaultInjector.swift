import Synchronization

/// Lets tests make a named system call fail with a chosen errno (ENOSPC, EIO, ...), the way
/// swift-system's mocking layer does, without touching the file system.
///
/// The injector is process-global (every `Posix.call` consults it), but rules are not: each
/// `arm` returns an `Arming` handle, and `disarm(_:)` removes that handle's rules and no one
/// else's, so suites running in parallel in one test process cannot clear each other's
/// faults. `withFault` also confines its rule to the task (or thread) that runs the body, for
/// calls whose name other tests use too (`fsync`); the journal's calls carry a per-writer
/// prefix instead (`JournalOptions.faultScope`), because its writer thread is not the arming
/// task.
///
/// `Sendable`: all state is behind a lock. Production code arms it only through the
/// daemon's test hook (`PUSHSPOOL_FAULT_INJECT`); the check in `Posix.call` is one atomic
/// load when nothing is armed.
package final class FaultInjector: Sendable {
    package static let shared = FaultInjector()

    /// The rules one `arm` call added; pass it to `disarm(_:)`.
    package struct Arming: Sendable, Hashable {
        fileprivate let id: UInt64
    }

    private struct Rule: Sendable {
        var owner: UInt64
        var call: String
        var errno: Int32
        /// Calls to let through before failing.
        var skip: Int
        /// How many times to fail; `nil` = until disarmed.
        var remaining: Int?
        /// Fires only for calls made inside the owner's `withFault` body (task-local).
        var confined: Bool
    }

    private struct State: ~Copyable {
        var rules: [Rule] = []
        var nextOwner: UInt64 = 1
    }

    /// The `withFault` scopes the current task (or thread) runs in, innermost last.
    @TaskLocal private static var scopes: [UInt64] = []

    private let armed = Atomic<Bool>(false)
    private let state = Locked(State())

    /// Makes the `skip+1`-th and following calls named `call` fail with `errno`, `times` times
    /// (`nil` = until disarmed), whichever thread makes them.
    @discardableResult
    package func arm(call: String, errno: Int32, skip: Int = 0, times: Int? = nil) -> Arming {
        add(call: call, errno: errno, skip: skip, times: times, confined: false)
    }

    /// Removes the rules of `arming` (those not used up yet); other armings stay.
    package func disarm(_ arming: Arming) {
        state.withLock { state in
            state.rules.removeAll { $0.owner == arming.id }
            armed.store(!state.rules.isEmpty, ordering: .releasing)
        }
    }

    /// Runs `body` with a rule that fails calls named `call` made by this task (or thread)
    /// inside `body`, not by others, and removes the rule when `body` returns or throws.
    package func withFault<R, E: Error>(
        call: String, errno: Int32, skip: Int = 0, times: Int? = nil, _ body: () throws(E) -> R
    ) throws(E) -> R {
        let arming = add(call: call, errno: errno, skip: skip, times: times, confined: true)
        defer { disarm(arming) }
        let result: Result<R, E> = Self.$scopes.withValue(Self.scopes + [arming.id]) {
            do throws(E) { return .success(try body()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    private func add(call: String, errno: Int32, skip: Int, times: Int?, confined: Bool) -> Arming {
        state.withLock { state in
            let owner = state.nextOwner
            state.nextOwner += 1
            state.rules.append(Rule(owner: owner, call: call, errno: errno, skip: skip, remaining: times, confined: confined))
            armed.store(true, ordering: .releasing)
            return Arming(id: owner)
        }
    }

    /// The errno to fail `call` with, if an armed rule says so; counts the rule down.
    func fault(for call: String) -> Int32? {
        guard armed.load(ordering: .acquiring) else { return nil }
        let scopes = Self.scopes
        return state.withLock { state -> Int32? in
            guard let index = state.rules.firstIndex(where: {
                $0.call == call && (!$0.confined || scopes.contains($0.owner))
            }) else { return nil }
            if state.rules[index].skip > 0 {
                state.rules[index].skip -= 1
                return nil
            }
            let code = state.rules[index].errno
            if let remaining = state.rules[index].remaining {
                if remaining <= 1 { state.rules.remove(at: index) } else { state.rules[index].remaining = remaining - 1 }
            }
            armed.store(!state.rules.isEmpty, ordering: .releasing)
            return code
        }
    }
}
