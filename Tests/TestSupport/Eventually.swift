@preconcurrency import Glibc
import PushSystem

/// Checks `condition` until it holds or `seconds` pass, and says whether it held. The one
/// bounded wait for a condition that no signal reports (an HTTP answer, a file another process
/// writes, a counter): it returns as soon as the condition is true, so it is not a settle-sleep.
/// Where a signal exists (a semaphore, the notify socket, a runner's `waiting`), wait on that.
package func eventually(within seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = Posix.monotonicNanos() &+ UInt64(seconds * 1e9)
    while true {
        if try condition() { return true }
        if Posix.monotonicNanos() >= deadline { return false }
        // why: the poll interval. 20 ms, as the suites polled before: with 2 ms, a condition
        // that opens the inbox index and asks nats-server 500 times a second ran beside a node
        // that did not rebuild its index within 90 s in a full parallel run on two cores
        // (FleetStreamIdentityTests; 3 s alone). Not proven to be the cause; not worth the risk.
        usleep(20_000)
    }
}

/// ``eventually(within:_:)`` for async code: it suspends the task between checks instead of
/// blocking its thread, so the tasks the condition waits for can run on the cooperative pool.
package func eventuallyAsync(within seconds: Double, _ condition: () throws -> Bool) async throws -> Bool {
    let deadline = Posix.monotonicNanos() &+ UInt64(seconds * 1e9)
    while true {
        if try condition() { return true }
        if Posix.monotonicNanos() >= deadline { return false }
        try await Task.sleep(for: .milliseconds(20))  // why: the poll interval, as in eventually(within:_:)
    }
}
