import Dispatch
import Synchronization

/// A coalescing wake-up for one waiting thread: any thread calls `signal()`, the owner blocks
/// in `wait(timeout:)` until a signal or the timeout. Signals that arrive while nobody waits
/// are kept as one, so a waiter never misses the last one and never wakes more than once for
/// a burst of them.
///
/// Why not a timer: a thread that learns of work by polling every few milliseconds wakes an
/// idle host hundreds of times a second; a waiter on this sleeps until there is work.
///
/// `Sendable`: a semaphore and an atomic flag.
package final class Wakeup: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    /// True while a signal is outstanding (counted in the semaphore, not yet consumed).
    private let armed = Atomic<Bool>(false)

    package init() {}

    /// Wakes the waiter, or the next `wait` at once when nobody waits now.
    package func signal() {
        if !armed.exchange(true, ordering: .acquiringAndReleasing) { semaphore.signal() }
    }

    /// Blocks until `signal()` or `timeout` (`nil` = no limit). Returns true when signalled.
    /// A signal racing a timeout may make the next call return at once: callers re-check
    /// their condition, as with any condition variable.
    @discardableResult
    package func wait(timeout: Duration?) -> Bool {
        let woken: Bool
        if let timeout {
            let nanos = Int(clamping: timeout.clampedUInt64Nanoseconds)
            woken = semaphore.wait(timeout: .now() + .nanoseconds(nanos)) == .success
        } else {
            semaphore.wait()
            woken = true
        }
        // Cleared with an exchange that acquires: a signal whose `exchange` found the flag still
        // set (and so did not count) happened before this, and its writer's state is visible
        // to the caller's re-check; a later one finds it clear and counts again.
        if woken { _ = armed.exchange(false, ordering: .acquiringAndReleasing) }
        return woken
    }
}
