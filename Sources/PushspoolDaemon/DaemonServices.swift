import Dispatch
import PushSystem

/// One part of pushspoold as a service of its ``ServiceGroup``: the parts are small (a marker
/// file, the journal, the media supervisor), so each is written as what it does at its start,
/// when the stop begins, and at its stop, in ``Daemon/services``'s one list.
///
/// `Sendable`: the closures are.
final class DaemonPart: Service, Sendable {
    let serviceName: String
    private let begin: @Sendable (ServiceEnding) throws(ServiceError) -> Void
    private let windDown: @Sendable () -> Void
    private let end: @Sendable (UInt64) -> Bool

    init(_ name: String, start: @escaping @Sendable (ServiceEnding) throws(ServiceError) -> Void = { _ in },
         requestStop: @escaping @Sendable () -> Void = {}, stop: @escaping @Sendable (UInt64) -> Bool = { _ in true }) {
        serviceName = name
        begin = start
        windDown = requestStop
        end = stop
    }

    func start(ending: ServiceEnding) throws(ServiceError) { try begin(ending) }
    func requestStop() { windDown() }
    func stop(deadline: UInt64) -> Bool { end(deadline) }
}

/// A service whose work runs on a thread of its own until it returns: pushspoold's ingest loop
/// (recovery, READY, feed and claim, the drain). The body's return is the service's end, and
/// the stop waits for it.
///
/// `Sendable`: the semaphore is thread-safe; the rest is fixed at init.
final class ThreadPart: Service, Sendable {
    let serviceName: String
    /// Runs on the thread; returns nil when it finished, the error when it failed.
    private let body: @Sendable () -> ServiceError?
    private let windDown: @Sendable () -> Void
    private let returned = DispatchSemaphore(value: 0)

    init(_ name: String, requestStop: @escaping @Sendable () -> Void, body: @escaping @Sendable () -> ServiceError?) {
        serviceName = name
        windDown = requestStop
        self.body = body
    }

    func start(ending: ServiceEnding) throws(ServiceError) {
        do throws(SystemError) {
            try PosixThread.detach { [self] in
                let failure = body()
                returned.signal()
                if let failure { ending.failed(failure) } else { ending.finished() }
            }
        } catch {
            throw ServiceError(service: serviceName, message: "cannot start its thread: \(error)", errno: error.errno)
        }
    }

    func requestStop() { windDown() }

    func stop(deadline: UInt64) -> Bool {
        let now = Posix.monotonicNanos()
        guard returned.wait(timeout: .now() + .nanoseconds(Int(clamping: deadline > now ? deadline - now : 0))) == .success else { return false }
        // Later waits (a restart, a second stop) find it returned too.
        returned.signal()
        return true
    }
}
