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
        usleep(2_000) // why: the poll interval; short, so the wait ends within 2 ms of the condition
    }
}
