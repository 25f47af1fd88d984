@preconcurrency import Glibc
import PushSystem
import PushJournal
import PushSystemd
import PushConfig
import PushErasure

/// The steps of ``Daemon``'s `init` that open the data of record, apart from the wiring.
extension Daemon {
    /// Loads the erasure secret, creating it at the first start.
    static func loadErasureSecret(stateDirectory: String) throws(DaemonError) -> ErasureSecret {
        // The erasure secret keys both the tombstones' dedup check and the user hashes in
        // events; under UserIds=hash it is made now, so the first event can carry one.
        // Created at the first start, not at the first erasure: the writer that journals an
        // erasure already checks its tombstones, and the first event can carry a user hash.
        do {
            try Posix.mkdirs(stateDirectory)
            return try ErasureSecret.loadOrCreate(stateDirectory: stateDirectory)
        } catch {
            throw DaemonError(stage: "erasure secret", message: "\(error)", errno: EIO)
        }
    }

    /// Recovers the journal (the data of record) and opens it for writing; a damaged segment
    /// refuses the start unless quarantine was asked for.
    static func openJournal(configuration: Configuration, arguments: DaemonArguments, events: EventLog, notifier: SystemdNotifier,
                            metrics: Metrics, intake: Intake, secret: ErasureSecret) throws(DaemonError) -> JournalWriter {
        notifier.status("recovering journal")
        let started = Posix.monotonicNanos()
        do {
            try Posix.mkdirs(configuration.journal.stateDirectory)
            var options = JournalOptions(settings: configuration.journal, quarantine: arguments.quarantineCorruptSegments)
            let journalEvents = Reporter.journalEventHandler(events: events, journalDirectory: StateLayout(root: configuration.journal.stateDirectory).journal)
            options.eventHandler = { event in
                journalEvents(event)
                // The ingest thread waits for these, not on a timer: claiming stops at a full
                // disk and starts again once the writer has written its queued batch.
                switch event {
                case .pausedNoSpace: intake.journalPauseChanged(true)
                case .resumed: intake.journalPauseChanged(false)
                case .slowSync, .checkpointFailed: break
                }
            }
            options.syncObserver = { nanos in metrics.observeFsync(seconds: Double(nanos) / 1e9) }
            // After an erasure a redelivered erased push is still a duplicate.
            options.erasureSecret = secret
            let (journal, report) = try JournalWriter.open(directory: StateLayout(root: configuration.journal.stateDirectory).journal, options: options)
            Reporter.logRecovery(report, events: events, durationNanos: Posix.monotonicNanos() - started)
            return journal
        } catch let error as JournalError {
            if case .corrupt(let segment, let offset, _) = error.kind {
                events.log(.corruption, "refusing to start on a damaged journal: \(error)",
                           fields: [("JOURNAL_SEGMENT", segment), ("JOURNAL_OFFSET", String(offset))])
                throw DaemonError(stage: "journal", message: "\(error) (start with `pushspoold --quarantine-corrupt-segment` "
                                  + "or set [Journal] CorruptionPolicy=quarantine-segment to move the segment to journal/quarantine/)",
                                  errno: error.errno)
            }
            throw DaemonError(stage: "journal", message: "\(error)", errno: error.errno)
        } catch let error as SystemError {
            throw DaemonError(stage: "state directory", message: "\(error)", errno: error.errno)
        } catch {
            throw DaemonError(stage: "journal", message: "\(error)", errno: EIO)
        }
    }

    /// A feature that needs the network under a unit that denies it: said at once, not fatal.
    static func reportNetworkProblems(configuration: Configuration, reporter: Reporter, events: EventLog) {
        if configuration.outbox.enabled, let problem = NetworkProbe.problem(feature: "[Outbox]") {
            // Not fatal: the outbox keeps its events pending and delivers once the network is allowed.
            reporter.error(problem)
            events.log(.outboxFailed, problem, fields: [(EventField.reasonCode, "network_denied")])
        }
        if configuration.export.enabled, let problem = NetworkProbe.problem(feature: "[Export]") {
            // Not fatal either: ingest goes on, export lag grows and shows in STATUS= and the metrics.
            reporter.error(problem)
            events.log(.exportLag, problem, fields: [(EventField.reasonCode, "network_denied")])
        }
    }
}
