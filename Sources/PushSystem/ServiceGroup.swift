@preconcurrency import Glibc

/// A part of a process that starts and stops as a whole: the journal's followers, retention,
/// the HTTP server, the event hub, the status reporter.
///
/// The shape of swift-service-lifecycle's `Service`, with threads instead of tasks: the parts
/// here block in system calls (SQLite, curl, libmicrohttpd), which belong on threads of their
/// own, not on the cooperative pool.
///
/// `Sendable`: started and stopped from the lifecycle's thread, observed from others.
package protocol Service: AnyObject, Sendable {
    var serviceName: String { get }
    /// Starts the service's threads and returns. Throwing stops the services started before it.
    func start() throws(ServiceError)
    /// Stops the service; returns false when it was still running at `deadline` (monotonic
    /// nanoseconds), in which case it is left to end with the process.
    func stop(deadline: UInt64) -> Bool
}

/// Services started in order and stopped in reverse, all within one deadline: what a process
/// runs between READY=1 and its exit.
///
/// `Sendable`: the list is fixed at init; the started count is behind a lock.
package final class ServiceGroup: Sendable {
    package let services: [any Service]
    private let started = Locked(0)

    package init(_ services: [any Service]) {
        self.services = services
    }

    /// Starts each service in order; when one fails, stops those already started (in reverse)
    /// and rethrows, naming the service.
    package func start() throws(ServiceError) {
        for (index, service) in services.enumerated() {
            do throws(ServiceError) {
                try service.start()
                started.withLock { $0 = index + 1 }
            } catch {
                _ = stop(within: .seconds(5))
                throw error
            }
        }
    }

    /// Stops the started services in reverse order, the whole stop bounded by `within`.
    /// Returns the names of the services still running at the deadline.
    package func stop(within limit: Duration) -> [String] {
        let deadline = Posix.monotonicNanos() &+ limit.clampedUInt64Nanoseconds
        let count = started.withLock { count -> Int in
            defer { count = 0 }
            return count
        }
        return services[..<count].reversed().compactMap { $0.stop(deadline: deadline) ? nil : $0.serviceName }
    }
}

/// A service that could not start: which one, and why.
///
/// `Sendable`: strings and an errno.
package struct ServiceError: Error, Sendable, CustomStringConvertible {
    package var service: String
    package var message: String
    /// The errno behind it, when a system call failed.
    package var errno: Int32?

    package init(service: String, message: String, errno: Int32? = nil) {
        self.service = service
        self.message = message
        self.errno = errno
    }

    package var description: String { "\(service): \(message)" }
}
