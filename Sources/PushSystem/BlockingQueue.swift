import Dispatch

/// A serial queue of blocking work (fsync, directory scans, curl) kept off Swift's cooperative
/// pool, with an async bridge.
///
/// `Sendable`: Dispatch queues are thread-safe.
package final class BlockingQueue: Sendable {
    private let queue: DispatchQueue

    package init(label: String) {
        queue = DispatchQueue(label: label, qos: .userInitiated)
    }

    /// Runs `body` on the queue and resumes the caller with its result.
    package func run<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            queue.async {
                do throws(E) {
                    continuation.resume(returning: .success(try body()))
                } catch {
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        return try result.get()
    }

    /// Schedules `body` without waiting for it.
    package func submit(_ body: @escaping @Sendable () -> Void) {
        queue.async(execute: body)
    }
}
