@preconcurrency import Glibc
import Dispatch
import PushSystem

// pushspool-inbox's parts as services of one ServiceGroup, the lifecycle pushspoold runs
// too: started in order (the node's followers and publisher, HTTP, event hub, status),
// stopped in reverse (InboxServerMain.serviceGroup).

/// The HTTP server as a service.
///
/// `Sendable`: the server locks internally.
package final class HTTPService: Service, Sendable {
    let server: HTTPServer
    package init(_ server: HTTPServer) { self.server = server }

    package var serviceName: String { "http" }

    package func start(ending: ServiceEnding) throws(ServiceError) {
        do throws(HTTPServerError) {
            try server.start()
        } catch {
            throw ServiceError(service: serviceName, message: error.message)
        }
    }

    package func stop(deadline: UInt64) -> Bool {
        server.stop()
        return true
    }
}

/// The event hub as a service.
///
/// `Sendable`: the hub locks internally.
package final class EventHubService: Service, Sendable {
    let hub: EventHub
    package init(_ hub: EventHub) { self.hub = hub }

    /// Rung when a stream opens or closes.
    private let streamsChanged = Wakeup()

    package var serviceName: String { "event hub" }

    package func start(ending: ServiceEnding) throws(ServiceError) { hub.start() }

    /// A stream opened or closed (the hub's `onStreamsChanged`).
    package func streamCountChanged() { streamsChanged.signal() }

    /// Ends every stream: each sends its end once resumed.
    package func requestStop() { hub.shutdown() }

    /// Waits for the streams to close before the server (stopped next) closes their
    /// connections, which libmicrohttpd requires to be resumed by then: at most
    /// ``endGrace`` (a client that does not read its end does not hold the stop), and never
    /// past `deadline`; then joins the hub's thread (its poll ended with the stop).
    package func stop(deadline: UInt64) -> Bool {
        let limit = min(deadline, Posix.monotonicNanos() &+ Self.endGrace)
        while hub.openStreams > 0 {
            let now = Posix.monotonicNanos()
            guard now < limit else { break }
            streamsChanged.wait(timeout: .nanoseconds(Int64(clamping: limit - now)))
        }
        hub.join()
        return true
    }

    /// How long the streams get to send their end.
    static let endGrace: UInt64 = 100_000_000
}

/// STATUS= for systemd (connections, streams, requests, refusals) and the auth-failure
/// summary, when something changed and at most once a second: an idle server does not wake.
///
/// `Sendable`: the wake-up and the stop flag are thread-safe; the rest is fixed at init.
package final class StatusReporter: Service, Sendable {
    private let wakeup = Wakeup()
    private let stopping = Locked(false)
    private let finished = DispatchSemaphore(value: 0)
    private let update: @Sendable () -> Bool

    /// `update` runs on the reporter's thread after each change, throttled to one a second; it
    /// returns true when it has work left for a second later (a summary of auth failures held
    /// for a second that has not ended), which then runs without another change.
    package init(update: @escaping @Sendable () -> Bool) {
        self.update = update
    }

    package var serviceName: String { "status" }

    /// Something the status line counts changed.
    package func changed() { wakeup.signal() }

    package func start(ending: ServiceEnding) throws(ServiceError) {
        do throws(SystemError) {
            try PosixThread.detach(name: "status") { [self] in run() }
        } catch {
            throw ServiceError(service: serviceName, message: "\(error)", errno: error.errno)
        }
    }

    package func stop(deadline: UInt64) -> Bool {
        stopping.withLock { $0 = true }
        wakeup.signal()
        let now = Posix.monotonicNanos()
        return finished.wait(timeout: .now() + .nanoseconds(Int(clamping: deadline > now ? deadline - now : 0))) == .success
    }

    private var isStopping: Bool { stopping.withLock { $0 } }

    private func run() {
        defer { finished.signal() }
        var lastUpdate: UInt64 = 0
        var again = false
        while true {
            // Sleeps until a change, or, with work left over, until the next second's update.
            if !again { wakeup.wait(timeout: nil) }
            // A change within a second of the last update waits out that second; the changes
            // meanwhile fold into one update.
            while !isStopping {
                let now = Posix.monotonicNanos()
                guard now &- lastUpdate < 1_000_000_000 else { break }
                wakeup.wait(timeout: .nanoseconds(Int64(clamping: 1_000_000_000 - (now &- lastUpdate))))
            }
            if isStopping { return }
            again = update()
            lastUpdate = Posix.monotonicNanos()
        }
    }
}
