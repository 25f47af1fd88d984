#if canImport(Glibc)
import Glibc
#endif

/// A value behind a `pthread_mutex_t`: the one lock type of this code base.
///
/// Why not `Synchronization.Mutex`: on Linux it locks with raw futex calls inside the
/// uninstrumented Synchronization library, so ThreadSanitizer sees no happens-before between
/// two threads' `withLock` bodies and reports every locked access as a race (measured: over a
/// hundred reports across the daemon, journal and media suites, each one a false positive).
/// TSan intercepts `pthread_mutex_lock`, so with this lock its reports are real again and
/// `scripts/tsan.supp` needs no lock-shaped holes. Uncontended cost is one atomic
/// exchange each way, like `Mutex`.
///
/// A callback is kept in a ``CallbackSlot``, not as the state itself: read through
/// `withLock`, a bare closure comes back wrapped in two more thunks each time.
///
/// `@unchecked Sendable`: the state is reached only inside `withLock`, under the mutex.
package final class Locked<State: ~Copyable>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let state: UnsafeMutablePointer<State>

    package init(_ initialState: consuming sending State) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        // A default mutex: pthread_mutex_init fails only for bad attributes, and there are none.
        pthread_mutex_init(mutex, nil)
        state = .allocate(capacity: 1)
        state.initialize(to: initialState)
    }

    deinit {
        state.deinitialize(count: 1)
        state.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with exclusive access to the state. Not reentrant: calling `withLock` on the
    /// same lock from inside `body` deadlocks, as with any plain mutex.
    @inline(__always)
    package func withLock<Result, E: Error>(_ body: (inout State) throws(E) -> Result) throws(E) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state.pointee)
    }
}
