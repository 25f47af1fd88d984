import Dispatch
import PushSystem
import PushPayload
import PushJournal
import PushMediaCore
import PushMediaURL
import PushSystemd
import PushConfig

/// The fields naming a payload or event in the events that report it, built when one is
/// logged (a user's field is an HMAC; under a burst most events are only counted).
typealias EventFields = @Sendable () -> [(String, String)]

/// Everything the daemon tells the outside about its work: journald events, the counters
/// behind `STATUS=` and `status.json`, and Prometheus metrics. The pipeline and the lifecycle
/// report through it and never format an event or touch a metric themselves.
///
/// `Sendable`: called from the ingest thread, the processing queue, the journal's writer
/// thread and media threads; every part it holds is thread-safe.
final class Reporter: Sendable {
    let counters: Counters
    let events: EventLog
    let notifier: SystemdNotifier
    private let metrics: Metrics
    private let stateDirectory: String
    /// Where status.json and the metrics textfile are written, off the ingest path.
    private let background = SerialWorker(name: "background")

    /// How events name users (`[Log] UserIds=`).
    let userNaming: LogUserNaming

    init(counters: Counters, events: EventLog, notifier: SystemdNotifier, metrics: Metrics, stateDirectory: String,
         userNaming: LogUserNaming = .plain) {
        self.counters = counters
        self.userNaming = userNaming
        self.events = events
        self.notifier = notifier
        self.metrics = metrics
        self.stateDirectory = stateDirectory
    }

    // MARK: - One file's end

    /// `fields`: `payloadFields` or `eventFields` of what was journaled.
    func ingested(fields: @autoclosure () -> [(String, String)], seq: UInt64, durationNanos: UInt64) {
        counters.ingested.add(1, ordering: .relaxed)
        metrics.increment(MetricFamily.ingested)
        events.log(.ingested, "payload ingested", fields: fields() + [
            (EventField.journalSequence, String(seq)), (EventField.durationMicroseconds, String(durationNanos / 1000)),
        ])
    }

    func duplicate(fields: @autoclosure () -> [(String, String)]) {
        counters.duplicates.add(1, ordering: .relaxed)
        metrics.increment(MetricFamily.duplicates)
        events.log(.duplicate, "duplicate payload, already journaled", fields: fields())
    }

    func refused(_ name: String, code: String, message: String, priority: Int32? = nil) {
        counters.refused.add(1, ordering: .relaxed)
        metrics.increment(MetricFamily.refused, labels: ["reason": code])
        events.log(.refused, "payload refused: \(message)", priority: priority,
                   fields: [(EventField.spoolFile, name), (EventField.reasonCode, code)])
    }

    func quarantineFailed(_ name: String, code: String, error: some Error) {
        counters.recordError("quarantine \(name): \(error)")
        events.log(.refused, "cannot quarantine refused file, leaving it in processing/: \(error)",
                   fields: [(EventField.spoolFile, name), (EventField.reasonCode, code)])
    }

    func mediaFailed(_ notification: PushNotification, file: String, url: String, outcome: MediaOutcome) {
        counters.mediaFailed.add(1, ordering: .relaxed)
        let code = outcome.error?.code.rawValue ?? "unknown"
        events.log(.mediaFailed, "media download failed: \(outcome.error.map { "\($0)" } ?? code)",
                   fields: [(EventField.pushID, notification.id), (EventField.vendor, notification.vendor.rawValue),
                            (EventField.spoolFile, file), (EventField.mediaHost, MediaURL.host(of: url)),
                            (EventField.reasonCode, code), (EventField.durationMicroseconds, String(outcome.durationMillis * 1000))])
    }

    /// Something went wrong that the daemon survives; shown as the last error in STATUS=.
    func error(_ text: String) {
        counters.recordError(text)
    }

    /// Logs a failure to act on a file that is left where it is for a later attempt.
    func leftInPlace(_ name: String, _ message: String) {
        counters.recordError("\(name): \(message)")
        events.log(.refused, message, fields: [(EventField.spoolFile, name)])
    }

    /// A Notification Center event in journald fields: `PUSH_EVENT=nc.open`, `PUSH_EVENT_ID=`,
    /// the user and the item.
    func eventFields(_ event: PushEvent, file: String) -> [(String, String)] {
        var fields = [("PUSH_EVENT", event.type.rawValue), ("PUSH_EVENT_ID", event.eventId), (EventField.spoolFile, file)]
        if let user = event.user { fields.append(userNaming.field(user)) }
        if let item = event.item { fields.append(("PUSH_ITEM", String(item))) }
        return fields
    }

    func payloadFields(_ notification: PushNotification, file: String) -> [(String, String)] {
        var fields = [(EventField.pushID, notification.id), (EventField.vendor, notification.vendor.rawValue),
                      (EventField.spoolFile, file)]
        if let user = notification.user { fields.append(userNaming.field(user)) }
        return fields
    }

    // MARK: - Status and metrics

    func statusLine(prefix: String, journalPaused: Bool) -> String {
        prefix + counters.statusLine(paused: journalPaused)
    }

    /// Sets the gauges and writes status.json and the metrics textfile on the background queue.
    /// `more` sets the gauges of parts the reporter does not know (the followers).
    /// `statusMembers`: members of status.json the followers add (`fleetErasure`, `erasures`).
    func publish(textfilePath: String?, journal: JournalWriterStats, media: MediaStats?, inFlight: Int,
                 statusMembers: JSONObject = [:], more: (Metrics) -> Void = { _ in }) {
        more(metrics)
        metrics.set(MetricFamily.backlog, to: Double(counters.backlog.load(ordering: .relaxed)))
        metrics.set(MetricFamily.mediaInFlight, to: Double(counters.mediaInFlight.load(ordering: .relaxed)))
        metrics.set(MetricFamily.media, labels: ["status": "stored"], to: Double(counters.mediaStored.load(ordering: .relaxed)))
        metrics.set(MetricFamily.media, labels: ["status": "failed"], to: Double(counters.mediaFailed.load(ordering: .relaxed)))
        metrics.set(MetricFamily.media, labels: ["status": "skipped"], to: Double(counters.mediaSkipped.load(ordering: .relaxed)))
        metrics.set(MetricFamily.journalBytes, to: Double(journal.bytes))
        let statusDirectory = stateDirectory
        // Both files describe one moment, so an operator (or a test) that sees a count in the
        // textfile finds at least that count in status.json: the textfile is rendered first
        // (a counter is added to before its metric), status.json is snapshotted after it and
        // written before it.
        let textfile = textfilePath.map { (path: $0, text: metrics.renderPrometheus()) }
        let statusJSON = StatusFile.render(counters: counters.snapshot(inFlight: inFlight), journal: journal, media: media,
                                           lastError: counters.lastError, more: statusMembers)
        background.submit {
            try? Posix.writeFileAtomically(directory: statusDirectory, name: StateLayout.statusFileName, bytes: statusJSON)
            if let textfile {
                try? Metrics.writeTextfile(path: textfile.path, text: textfile.text)
            }
        }
    }

    /// Waits (bounded) until what `publish` queued is written: without it the process could
    /// exit first and leave the counts of the previous interval behind.
    func flush(timeoutSeconds: Int = 5) {
        let flushed = DispatchSemaphore(value: 0)
        background.submit { flushed.signal() }
        _ = flushed.wait(timeout: .now() + .seconds(timeoutSeconds))
    }

    // MARK: - Journal

    /// Routes the writer's events to the event log. Runs on the journal's writer thread;
    /// `EventLog.log` does not block on anything the writer holds.
    static func journalEventHandler(events: EventLog, journalDirectory: String) -> @Sendable (JournalEvent) -> Void {
        { event in
            switch event {
            case .pausedNoSpace(let error):
                events.log(.noSpace, "journal disk full: intake paused; nothing unwritten is acknowledged and payloads wait "
                           + "in incoming/ and processing/; free space on the file system of \(journalDirectory) and intake "
                           + "resumes by itself (\(error))",
                           fields: [(EventField.errno, String(error.errno)), ("JOURNAL_DIR", journalDirectory), ("JOURNAL_STATE", "paused")])
            case .resumed:
                events.log(.noSpace, "journal has space again: queued records written, intake resumed", priority: 5,
                           fields: [("JOURNAL_DIR", journalDirectory), ("JOURNAL_STATE", "resumed")])
            case .slowSync, .checkpointFailed:
                break
            }
        }
    }

    static func logRecovery(_ report: RecoveryReport, events: EventLog, durationNanos: UInt64) {
        var fields = [
            (EventField.journalSequence, String(report.lastSeq)), ("SEGMENTS", String(report.segments)),
            ("RECORDS", String(report.records)), (EventField.durationMicroseconds, String(durationNanos / 1000)),
        ]
        if report.tornBytesTruncated > 0 {
            fields.append(("TORN_BYTES", String(report.tornBytesTruncated)))
            events.log(.tornTail, "journal tail was torn by a crash; cut back \(report.tornBytesTruncated) bytes to the last whole record",
                       fields: fields)
        }
        if report.lostAcknowledgedRecords > 0 || !report.missingSeqRanges.isEmpty {
            // Acknowledged records are gone (the start went on only under the quarantine
            // policy): corruption, never a torn tail.
            var lost = fields
            if let range = report.lostSeqRange {
                lost += [("JOURNAL_LOST_FROM", String(range.lowerBound)), ("JOURNAL_LOST_TO", String(range.upperBound))]
            }
            if !report.missingSeqRanges.isEmpty { lost.append(("JOURNAL_MISSING", report.missingSeqRanges.joined(separator: ", "))) }
            events.log(.corruption, "acknowledged journal records are lost: \(report.lostAcknowledgedRecords) below the COMMITTED "
                       + "watermark\(report.missingSeqRanges.isEmpty ? "" : ", missing \(report.missingSeqRanges.joined(separator: ", "))"); "
                       + "their sequence numbers are not reused; restore them from a backup if there is one",
                       priority: 2, fields: lost)
        }
        for segment in report.quarantined {
            events.log(.corruption, "damaged journal segment moved to quarantine: \(segment)", fields: fields)
        }
        events.log(.recovery, "journal recovered: \(report.records) records in \(report.segments) segments, last seq \(report.lastSeq)",
                   fields: fields)
    }
}

/// How journald events name a user (`[Log] UserIds=`): the id itself, or a keyed hash an
/// operator can recompute with `pushspoolctl user hash USER` but a reader of the log cannot
/// invert. journald keeps its entries beyond an erasure's reach, so hashing is the default.
///
/// `Sendable`: a value.
struct LogUserNaming: Sendable {
    private let secret: ErasureSecret?

    static let plain = LogUserNaming(secret: nil)

    /// `secret` nil: `PUSH_USER=` with the id.
    init(secret: ErasureSecret?) { self.secret = secret }

    func field(_ user: String) -> (String, String) {
        guard let secret else { return (EventField.user, user) }
        return (EventField.userHash, secret.logUserHash(user))
    }
}
