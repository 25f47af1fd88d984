@preconcurrency import Glibc
import Testing
import PushSystem

/// The eraser lowers its thread's I/O priority only while it rewrites: ioprio_set(2) on the
/// thread id, read back through ioprio_get(2), and the previous priority restored after.
@Suite struct IOPriorityTests {
    struct Thrown: Error {}

    /// Runs `body` on a fresh thread (its I/O priority is its own, not the test runner's).
    func onThread(_ body: @escaping @Sendable () -> Void) throws {
        let thread = try PosixThread.spawn(body)
        pthread_join(thread, nil)
    }

    @Test func aPriorityHoldsInsideTheScopeAndTheOldOneComesBack() throws {
        let seen = Locked<[IOPriority?]>([])
        try onThread {
            let before = try? PosixThread.currentIOPriority()
            let inside = PosixThread.withIOPriority(.bestEffort(level: 7)) { try? PosixThread.currentIOPriority() }
            let idle = PosixThread.withIOPriority(.idle) { try? PosixThread.currentIOPriority() }
            do throws(Thrown) {
                try PosixThread.withIOPriority(.bestEffort(level: 6)) { () throws(Thrown) in throw Thrown() }
            } catch {}
            seen.withLock { $0 = [before, inside, idle, try? PosixThread.currentIOPriority()] }
        }
        let values = seen.withLock { $0 }
        #expect(values.count == 4 && values[0] != nil && values[3] == values[0])
        #expect(Array(values.dropFirst().prefix(2)) == [.bestEffort(level: 7), .idle])
    }

    @Test func levelsOutsideTheRangeAreRefusedNotTruncated() throws {
        let errors = Locked<[Int32]>([])
        try onThread {
            for priority in [IOPriority.bestEffort(level: 8), .bestEffort(level: -1)] {
                do throws(SystemError) { try PosixThread.setCurrentIOPriority(priority) } catch { errors.withLock { $0.append(error.errno) } }
            }
            // Refused, the thread's priority is unchanged, and a scope with it runs the body as is.
            let before = try? PosixThread.currentIOPriority()
            let inside = PosixThread.withIOPriority(.bestEffort(level: 99)) { try? PosixThread.currentIOPriority() }
            errors.withLock { $0.append(before != nil && inside == before ? 0 : -1) }
        }
        #expect(errors.withLock { $0 } == [EINVAL, EINVAL, 0])
    }
}
