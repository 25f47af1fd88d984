import PushSystem
import PushSystemd

/// Request counters for `/metrics` and the STATUS line: requests by route and status, a
/// latency histogram, auth failures. `Sendable`: state behind a lock.
package final class ServerStats: Sendable {
    /// Histogram bucket bounds in seconds.
    static let buckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1]

    private struct State {
        var requests: [String: Int] = [:]
        var bucketCounts = [Int](repeating: 0, count: ServerStats.buckets.count)
        var latencyCount = 0
        var latencySum = 0.0
        var authFailures = 0
        var total = 0
    }

    private let state = Locked(State())
    private let nodeReadings = Locked(NodeReadings())

    /// What `/metrics` shows of a `Source=nats` node, read when scraped: plain values, so the
    /// HTTP layer knows nothing of the node's types (the composition fills them in).
    package struct NodeReadings: Sendable {
        package var stream: (@Sendable () -> StreamReading)?
        package var fleetOutbox: (@Sendable () -> FleetOutboxReading)?
        package init(stream: (@Sendable () -> StreamReading)? = nil, fleetOutbox: (@Sendable () -> FleetOutboxReading)? = nil) {
            self.stream = stream
            self.fleetOutbox = fleetOutbox
        }
    }

    /// The stream follower's state as `/healthz` and `/metrics` show it, and the replacements
    /// seen; the composition maps the follower's health onto it.
    package struct StreamReading: Sendable {
        /// Named as `/healthz` answers them (`index`).
        package enum State: String, Sendable {
            case connecting, following, rebuilding, refused
        }
        package var state: State
        package var replacements: UInt64
        /// Following the stream (not connecting, rebuilding or refused).
        package var ready: Bool { state == .following }
        package init(state: State, replacements: UInt64) {
            self.state = state
            self.replacements = replacements
        }
    }

    /// The fleet outbox's counts: deliveries by result since start, dead letters, what the
    /// node holds, whether it reaches NATS.
    package struct FleetOutboxReading: Sendable {
        package var delivered: Int
        package var retried: Int
        package var skipped: Int
        package var parked: Int
        package var inFlight: Int
        package var connected: Bool
        package init(delivered: Int, retried: Int, skipped: Int, parked: Int, inFlight: Int, connected: Bool) {
            (self.delivered, self.retried, self.skipped) = (delivered, retried, skipped)
            (self.parked, self.inFlight, self.connected) = (parked, inFlight, connected)
        }
    }

    /// The node's readings on a `Source=nats` node; set once at start.
    package var node: NodeReadings {
        get { nodeReadings.withLock { $0 } }
        set { nodeReadings.withLock { $0 = newValue } }
    }
    private let events: EventLog

    /// Auth-failure events admitted a second before they are summarised.
    package static let authEventsPerSecond = 10

    /// `events`: where auth failures go; by default journald when stderr is a journal
    /// stream (under systemd), else lines on stderr.
    package init(events: EventLog = EventLog(identifier: "pushspool-inbox", maxEventsPerSecond: ServerStats.authEventsPerSecond)) {
        self.events = events
    }

    /// Called after every counted request and auth failure: the status reporter wakes on it
    /// instead of a timer.
    package let onChange = CallbackSlot<Void>()

    private func changed() { onChange() }

    func record(route: String, status: Int, nanos: UInt64) {
        defer { changed() }
        let seconds = Double(nanos) / 1e9
        state.withLock {
            $0.requests["\(route)|\(status)", default: 0] += 1
            $0.total += 1
            $0.latencyCount += 1
            $0.latencySum += seconds
            for (i, bound) in Self.buckets.enumerated() where seconds <= bound { $0.bucketCounts[i] += 1 }
        }
    }

    /// Counts an auth failure and logs it as an `inboxAuthFailed` event (catalogued in
    /// systemd/pushspool.catalog). ``events`` admits at most its `maxEventsPerSecond` of them
    /// a second and summarises the rest in one `aggregated` event with the count, so a
    /// token-guessing client cannot flood the journal. The token is never a field.
    func authFailure(client: String, method: String, route: String, reason: String) {
        state.withLock { $0.authFailures += 1 }
        defer { changed() }
        events.log(.inboxAuthFailed, "request refused: no valid token", fields: [
            ("REMOTE_ADDR", client.isEmpty ? "unknown" : client),
            ("HTTP_METHOD", String(method.prefix(16))),
            ("INBOX_ROUTE", route),
            (EventField.reasonCode, reason),
        ])
    }

    /// Emits the summary of auth failures not logged one by one (called by the status
    /// reporter at most once a second while failures come, and at shutdown with `all`).
    /// Returns whether a summary is still held for the current second (flush again after it).
    @discardableResult
    package func flushAuthLog(all: Bool = false) -> Bool {
        events.flush(all: all)
        return events.summaryPending
    }

    package var totalRequests: Int { state.withLock { $0.total } }
    package var authFailures: Int { state.withLock { $0.authFailures } }

    /// Prometheus text exposition format.
    package func prometheus(openStreams: Int) -> String {
        state.withLock { s in
            var out = "# TYPE pushspool_inbox_requests_total counter\n"
            for key in s.requests.keys.sorted() {
                let parts = key.split(separator: "|")
                out += "pushspool_inbox_requests_total{route=\"\(parts[0])\",code=\"\(parts[1])\"} \(s.requests[key]!)\n"
            }
            out += "# TYPE pushspool_inbox_request_seconds histogram\n"
            for (i, bound) in Self.buckets.enumerated() {
                out += "pushspool_inbox_request_seconds_bucket{le=\"\(bound)\"} \(s.bucketCounts[i])\n"
            }
            out += "pushspool_inbox_request_seconds_bucket{le=\"+Inf\"} \(s.latencyCount)\n"
            out += "pushspool_inbox_request_seconds_sum \(s.latencySum)\n"
            out += "pushspool_inbox_request_seconds_count \(s.latencyCount)\n"
            out += "# TYPE pushspool_inbox_auth_failures_total counter\npushspool_inbox_auth_failures_total \(s.authFailures)\n"
            out += "# TYPE pushspool_inbox_open_streams gauge\npushspool_inbox_open_streams \(openStreams)\n"
            return out
        } + streamPrometheus() + fleetPrometheus()
    }

    /// A `Source=nats` node's index: ready (following its stream) or not (connecting,
    /// rebuilding after the stream was replaced, refused), and the replacements seen.
    func streamPrometheus() -> String {
        guard let health = node.stream?() else { return "" }
        var out = "# TYPE pushspool_inbox_stream_ready gauge\npushspool_inbox_stream_ready \(health.ready ? 1 : 0)\n"
        out += "# TYPE pushspool_inbox_stream_rebuilding gauge\npushspool_inbox_stream_rebuilding \(health.state == .rebuilding ? 1 : 0)\n"
        out += "# TYPE pushspool_inbox_stream_replaced_total counter\npushspool_inbox_stream_replaced_total \(health.replacements)\n"
        return out
    }

    /// The fleet outbox's counts (none on a node without one): deliveries by result since
    /// start, dead letters and what the node holds, whether it reaches NATS.
    func fleetPrometheus() -> String {
        guard let status = node.fleetOutbox?() else { return "" }
        var out = "# TYPE pushspool_inbox_fleet_outbox_deliveries_total counter\n"
        for (result, count) in [("delivered", status.delivered), ("retried", status.retried), ("skipped", status.skipped)] {
            out += "pushspool_inbox_fleet_outbox_deliveries_total{result=\"\(result)\"} \(count)\n"
        }
        out += "# TYPE pushspool_inbox_fleet_outbox_parked gauge\npushspool_inbox_fleet_outbox_parked \(status.parked)\n"
        out += "# TYPE pushspool_inbox_fleet_outbox_in_flight gauge\npushspool_inbox_fleet_outbox_in_flight \(status.inFlight)\n"
        out += "# TYPE pushspool_inbox_fleet_outbox_connected gauge\npushspool_inbox_fleet_outbox_connected \(status.connected ? 1 : 0)\n"
        return out
    }
}
