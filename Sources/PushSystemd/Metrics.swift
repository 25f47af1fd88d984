import PushSystem

/// The daemon's counters, gauges and histograms, rendered in Prometheus text exposition
/// format (version 0.0.4) for node_exporter's textfile collector, and as a snapshot for
/// `pushspoolctl stats [--json]`.
///
/// Metric families are declared up front (`MetricFamily.standard`) so HELP and TYPE lines
/// always exist; a name that was not declared is a programming error and traps in debug
/// builds (in release it is declared on the fly with a generic help text).
///
/// `Sendable`: all state is behind one lock; updates are a dictionary write, cheap enough
/// for the ingest loop.
package final class Metrics: Sendable {
    private let state: Locked<State>

    private struct State {
        var families: [String: MetricFamily]
        var order: [String]
        var values: [String: [Labels: Double]] = [:]
        var histograms: [String: [Labels: HistogramValue]] = [:]

        mutating func declareIfMissing(_ name: String, type: MetricFamily.MetricType) {
            guard families[name] == nil else { return }
            assertionFailure("metric \(name) was not declared in MetricFamily.standard")
            families[name] = MetricFamily(name: name, help: "pushspool metric \(name).", type: type)
            order.append(name)
        }
    }

    package init(families: [MetricFamily] = MetricFamily.standard) {
        state = Locked(State(families: Dictionary(uniqueKeysWithValues: families.map { ($0.name, $0) }), order: families.map(\.name)))
    }

    /// Adds `amount` to a counter (or gauge).
    package func increment(_ name: String, labels: [String: String] = [:], by amount: Double = 1) {
        state.withLock { state in
            state.declareIfMissing(name, type: .counter)
            state.values[name, default: [:]][Labels(labels), default: 0] += amount
        }
    }

    /// Sets a gauge.
    package func set(_ name: String, labels: [String: String] = [:], to value: Double) {
        state.withLock { state in
            state.declareIfMissing(name, type: .gauge)
            state.values[name, default: [:]][Labels(labels)] = value
        }
    }

    /// Records one observation in a histogram.
    package func observe(_ name: String, labels: [String: String] = [:], _ value: Double) {
        state.withLock { state in
            state.declareIfMissing(name, type: .histogram)
            let buckets = state.families[name]?.buckets ?? MetricFamily.defaultBuckets
            var histogram = state.histograms[name]?[Labels(labels)] ?? HistogramValue(bucketCounts: Array(repeating: 0, count: buckets.count))
            for (index, bound) in buckets.enumerated() where value <= bound { histogram.bucketCounts[index] += 1 }
            histogram.sum += value
            histogram.count += 1
            state.histograms[name, default: [:]][Labels(labels)] = histogram
        }
    }

    /// Records one journal fsync's duration.
    package func observeFsync(seconds: Double) {
        observe(MetricFamily.journalFsyncSeconds, seconds)
    }

    /// The current value of a counter or gauge series (0 when never touched).
    package func value(_ name: String, labels: [String: String] = [:]) -> Double {
        state.withLock { $0.values[name]?[Labels(labels)] ?? 0 }
    }

    /// All series in the Prometheus text format: `# HELP`, `# TYPE`, then samples sorted by
    /// labels; histograms as cumulative `_bucket{le=...}` plus `_sum` and `_count`. Counters
    /// and histograms never touched render as 0 without labels so dashboards see them.
    package func renderPrometheus() -> String {
        state.withLock { state in
            var out = ""
            for name in state.order {
                guard let family = state.families[name] else { continue }
                out += "# HELP \(name) \(PrometheusText.escapeHelp(family.help))\n"
                out += "# TYPE \(name) \(family.type.rawValue)\n"
                switch family.type {
                case .counter, .gauge:
                    let series = state.values[name] ?? [:]
                    if series.isEmpty, family.labelNames.isEmpty { out += "\(name) 0\n" }
                    for (labels, value) in series.sorted(by: { $0.key < $1.key }) {
                        out += "\(name)\(labels.rendered()) \(PrometheusText.format(value))\n"
                    }
                case .histogram:
                    var series = state.histograms[name] ?? [:]
                    if series.isEmpty, family.labelNames.isEmpty {
                        series[Labels([:])] = HistogramValue(bucketCounts: Array(repeating: 0, count: family.buckets.count))
                    }
                    for (labels, histogram) in series.sorted(by: { $0.key < $1.key }) {
                        for (bound, count) in zip(family.buckets, histogram.bucketCounts) {
                            out += "\(name)_bucket\(labels.rendered(adding: ("le", PrometheusText.format(bound)))) \(count)\n"
                        }
                        out += "\(name)_bucket\(labels.rendered(adding: ("le", "+Inf"))) \(histogram.count)\n"
                        out += "\(name)_sum\(labels.rendered()) \(PrometheusText.format(histogram.sum))\n"
                        out += "\(name)_count\(labels.rendered()) \(histogram.count)\n"
                    }
                }
            }
            return out
        }
    }

    /// Writes `renderPrometheus()` to `path` atomically (temporary file in the same
    /// directory, fsync, rename), so node_exporter never reads half a file. Mode 0644: the
    /// exporter runs as another user.
    package func writeTextfile(path: String) throws(SystemError) {
        try Self.writeTextfile(path: path, text: renderPrometheus())
    }

    /// Writes text rendered earlier (`renderPrometheus`), for a caller that snapshots the
    /// metrics at one moment and writes them later.
    package static func writeTextfile(path: String, text: String) throws(SystemError) {
        let slash = path.lastIndex(of: "/")
        let directory = slash.map { $0 == path.startIndex ? "/" : String(path[..<$0]) } ?? "."
        let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
        try Posix.writeFileAtomically(directory: directory, name: name, bytes: Array(text.utf8), mode: 0o644)
    }

    /// Every sample as `pushspoolctl stats` shows it.
    package func snapshot() -> MetricsSnapshot {
        MetricsSnapshot(prometheusText: renderPrometheus())
    }
}

/// A declared metric family.
package struct MetricFamily: Sendable, Equatable {
    package enum MetricType: String, Sendable { case counter, gauge, histogram }

    package var name: String
    package var help: String
    package var type: MetricType
    /// Label names the family's series carry (documentation, and no unlabelled zero sample).
    package var labelNames: [String]
    /// Upper bounds of histogram buckets, ascending; `+Inf` is implicit.
    package var buckets: [Double]

    package init(name: String, help: String, type: MetricType, labelNames: [String] = [], buckets: [Double] = []) {
        self.name = name
        self.help = help
        self.type = type
        self.labelNames = labelNames
        self.buckets = type == .histogram && buckets.isEmpty ? Self.defaultBuckets : buckets
    }

    package static let defaultBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    package static let ingested = "pushspool_ingested_total"
    package static let refused = "pushspool_refused_total"
    package static let duplicates = "pushspool_duplicates_total"
    package static let backlog = "pushspool_backlog_files"
    package static let media = "pushspool_media_total"
    package static let mediaInFlight = "pushspool_media_in_flight"
    package static let journalBytes = "pushspool_journal_bytes_total"
    package static let journalFsyncSeconds = "pushspool_journal_fsync_seconds"
    package static let eventsAggregated = "pushspool_events_aggregated_total"
    package static let startTime = "pushspool_start_time_seconds"
    package static let inboxLag = "pushspool_inbox_lag_records"
    package static let inboxIndexCorrupt = "pushspool_inbox_index_corrupt_total"
    package static let inboxRebuilding = "pushspool_inbox_index_rebuilding"
    package static let outbox = "pushspool_outbox_deliveries"
    package static let exportLag = "pushspool_export_lag_records"
    package static let exportAcknowledged = "pushspool_export_acknowledged_seq"
    package static let exportConnected = "pushspool_export_connected"
    package static let fleetErasures = "pushspool_fleet_erasures_total"
    package static let fleetErasureConnected = "pushspool_fleet_erasure_connected"
    package static let followerLag = "pushspool_follower_lag_records"
    package static let followerFailures = "pushspool_follower_failures_total"
    package static let followerFailing = "pushspool_follower_failing"
    package static let erasuresPending = "pushspool_erasures_pending"
    package static let erasureRecords = "pushspool_erasure_records_total"

    /// The families the daemon exports.
    package static let standard: [MetricFamily] = [
        MetricFamily(name: ingested, help: "Payloads written durably to the journal.", type: .counter),
        MetricFamily(name: refused, help: "Spool files quarantined instead of ingested, by reason code.", type: .counter, labelNames: ["reason"]),
        MetricFamily(name: duplicates, help: "Payloads whose id was already in the journal.", type: .counter),
        MetricFamily(name: backlog, help: "Spool files waiting to be ingested.", type: .gauge),
        MetricFamily(name: media, help: "Media downloads finished, by status (fetched, cached, failed, skipped).", type: .counter, labelNames: ["status"]),
        MetricFamily(name: mediaInFlight, help: "Media downloads in progress.", type: .gauge),
        MetricFamily(name: journalBytes, help: "Bytes appended to journal segments.", type: .counter),
        MetricFamily(name: journalFsyncSeconds, help: "Duration of journal group-commit fsyncs.", type: .histogram,
                     buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]),
        MetricFamily(name: eventsAggregated, help: "journald events summarised instead of logged one by one, by event kind.", type: .counter, labelNames: ["event"]),
        MetricFamily(name: startTime, help: "Start time of the daemon, seconds since the epoch.", type: .gauge),
        MetricFamily(name: inboxLag, help: "Journal records the Notification Center index has not applied yet.", type: .gauge),
        MetricFamily(name: inboxIndexCorrupt, help: "Damaged Notification Center indexes moved aside and rebuilt since start.", type: .counter),
        MetricFamily(name: inboxRebuilding, help: "1 while a fresh Notification Center index is rebuilt from the journal.", type: .gauge),
        MetricFamily(name: outbox, help: "Notification Center event deliveries in the outbox, by state (pending, parked).",
                     type: .gauge, labelNames: ["state"]),
        MetricFamily(name: exportLag, help: "Journal records not yet acknowledged by NATS JetStream.", type: .gauge),
        MetricFamily(name: exportAcknowledged, help: "The highest journal seq acknowledged by NATS JetStream with all earlier ones.", type: .gauge),
        MetricFamily(name: exportConnected, help: "1 while the exporter is connected to NATS.", type: .gauge),
        MetricFamily(name: fleetErasures, help: "Erasures of other hosts taken from the export stream, by result (dropped, nothing_here, already_here, unusable_id).",
                     type: .counter, labelNames: ["result"]),
        MetricFamily(name: fleetErasureConnected, help: "1 while the fleet erasure listener is connected to NATS.", type: .gauge),
        MetricFamily(name: followerLag, help: "Journal records a follower has not made durable in its own store, by follower.",
                     type: .gauge, labelNames: ["follower"]),
        MetricFamily(name: followerFailures, help: "Failed steps of a follower since start (each retried after a backoff), by follower.",
                     type: .counter, labelNames: ["follower"]),
        MetricFamily(name: followerFailing, help: "1 while a follower's last step failed, by follower.", type: .gauge, labelNames: ["follower"]),
        MetricFamily(name: erasuresPending, help: "Erasure requests accepted and not yet complete.", type: .gauge),
        MetricFamily(name: erasureRecords, help: "Journal records turned into tombstones by the erasures completed since start.", type: .counter),
    ]
}

struct HistogramValue {
    var bucketCounts: [UInt64]
    var sum = 0.0
    var count: UInt64 = 0
}

/// A label set, sorted by name so equal sets compare and render equally.
struct Labels: Hashable, Comparable {
    var pairs: [(String, String)]

    init(_ labels: [String: String]) {
        pairs = labels.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    static func == (lhs: Labels, rhs: Labels) -> Bool {
        lhs.pairs.elementsEqual(rhs.pairs) { $0 == $1 }
    }

    func hash(into hasher: inout Hasher) {
        for (name, value) in pairs { hasher.combine(name); hasher.combine(value) }
    }

    static func < (lhs: Labels, rhs: Labels) -> Bool {
        lhs.rendered() < rhs.rendered()
    }

    func rendered(adding extra: (String, String)? = nil) -> String {
        var all = pairs
        if let extra { all.append(extra) }
        guard !all.isEmpty else { return "" }
        return "{" + all.map { "\($0.0)=\"\(PrometheusText.escapeLabelValue($0.1))\"" }.joined(separator: ",") + "}"
    }
}

/// The escaping rules of the text exposition format.
enum PrometheusText {
    /// Label values escape backslash, double quote and newline.
    static func escapeLabelValue(_ value: String) -> String {
        value.escaping(["\\": "\\\\", "\"": "\\\"", "\n": "\\n"])
    }

    /// HELP text escapes backslash and newline only.
    static func escapeHelp(_ text: String) -> String {
        text.escaping(["\\": "\\\\", "\n": "\\n"])
    }

    /// Integers without a fraction, other values in Swift's shortest round-trip form.
    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 9.007_199_254_740_992e15 { return String(Int64(value)) }
        return "\(value)"
    }

    static func unescape(_ text: Substring) -> String {
        var out = ""
        var escaping = false
        for character in text {
            if escaping {
                out.append(character == "n" ? "\n" : character)
                escaping = false
            } else if character == "\\" {
                escaping = true
            } else {
                out.append(character)
            }
        }
        return out
    }
}
