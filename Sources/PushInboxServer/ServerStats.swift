import PushSystem
import Synchronization

/// Request counters for `/metrics` and the STATUS line: requests by route and status, a
/// latency histogram, auth failures. `Sendable`: state behind a `Mutex`.
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
        /// Auth failures not yet logged, and when the last log line went out.
        var unloggedFailures = 0
        var lastLogNanos: UInt64 = 0
        var lastClient = ""
    }

    private let state = Mutex(State())

    package init() {}

    func record(route: String, status: Int, nanos: UInt64) {
        let seconds = Double(nanos) / 1e9
        state.withLock {
            $0.requests["\(route)|\(status)", default: 0] += 1
            $0.total += 1
            $0.latencyCount += 1
            $0.latencySum += seconds
            for (i, bound) in Self.buckets.enumerated() where seconds <= bound { $0.bucketCounts[i] += 1 }
        }
    }

    /// Counts an auth failure and logs it — at most one line a second, summarising the
    /// failures since the last line, so a token-guessing client cannot flood the journal.
    func authFailure(client: String) {
        let now = Posix.monotonicNanos()
        let line: String? = state.withLock { s in
            s.authFailures += 1
            s.unloggedFailures += 1
            s.lastClient = client
            return Self.takeLogLine(&s, now: now)
        }
        if let line { FileDescriptor.stderr(line) }
    }

    private static func takeLogLine(_ s: inout State, now: UInt64) -> String? {
        guard s.unloggedFailures > 0, now &- s.lastLogNanos >= 1_000_000_000 else { return nil }
        let line = "<4>pushspool-inbox: authentication failed: \(s.unloggedFailures) request(s) refused, last from \(s.lastClient)\n"
        s.unloggedFailures = 0
        s.lastLogNanos = now
        return line
    }

    /// Flushes a pending summary of auth failures (called once a second by the status thread).
    package func flushAuthLog() {
        let now = Posix.monotonicNanos()
        let line: String? = state.withLock { Self.takeLogLine(&$0, now: now) }
        if let line { FileDescriptor.stderr(line) }
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
        }
    }
}

/// Plain writes to the standard streams (journald reads `<N>` priority prefixes on stderr).
enum FileDescriptor {
    static func stderr(_ text: String) {
        let bytes = Array(text.utf8)
        _ = try? Posix.writeAll(2, bytes)
    }
}
