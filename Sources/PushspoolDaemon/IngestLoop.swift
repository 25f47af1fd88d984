@preconcurrency import Glibc
import Synchronization
import PushSystem
import PushJournal
import PushSpool
import PushFetchClient
import PushConfig
import PushSystemd
import PushMediaCore

/// The ingest loop: leftovers of the last run, the watch and READY, then feed and claim until
/// a stop or a failure, then the drain — and the pieces that loop owns: reload (it is asked for
/// between batches), the status line and metrics it publishes, and the way out on a failure.
///
/// Runs on the intake service's thread (``Daemon``'s wiring starts it); a serial processing
/// queue runs the pipeline; the journal's writer thread and media threads finish files
/// through the pipeline's completions.
final class IngestLoop: Sendable {
    private let arguments: DaemonArguments
    private let store: ConfigurationStore
    private let layout: SpoolLayout
    private let stateDirectory: String
    private let spool: Spool
    private let journal: JournalWriter
    private let media: (any MediaSource)?
    private let reporter: Reporter
    private let followers: Followers
    /// Capacity, READY, drain and retries: the intake state, its wake-ups, and the pipeline's sink.
    let intake: Intake
    private var state: Locked<IntakeState> { intake.state }
    /// Takes each claimed file to its end and reports that end to `intake`.
    let pipeline: FilePipeline
    /// Where claimed files are read and normalised under a burst, a chunk per lane, and handed
    /// to the journal in claim order.
    private let processing = ProcessingLanes<PreparedFile>(label: "lane", count: ProcessingLanes<PreparedFile>.laneCount(limit: 2))
    /// Jobs submitted to `processing` and not finished: inline processing waits for zero, so
    /// a file never overtakes files claimed before it.
    private let processingPending = Atomic<Int>(0)
    /// Files processed on the ingest thread itself (a quiet spool): for tests and benchmarks.
    let inlineProcessed = Atomic<Int>(0)
    /// Set once READY=1 was sent.
    let readyFlag = Atomic<Bool>(false)
    /// 1 once a failure was reported (``fail(errno:_:)``): the exit status, and nothing more is written.
    let exitStatus = Locked<Int32>(0)
    /// Files the drain left in flight (a full disk, the drain's deadline): they stay where they lie.
    let leftInFlight = Locked(0)
    /// The crash guard of the running `run`: it records each chunk's names before they are read.
    private let crashGuard = Locked<Locked<CrashGuard>?>(nil)

    init(arguments: DaemonArguments, store: ConfigurationStore, layout: SpoolLayout, stateDirectory: String, spool: Spool,
         journal: JournalWriter, media: (any MediaSource)?, reporter: Reporter, followers: Followers,
         intake: Intake, pipeline: FilePipeline) {
        self.arguments = arguments
        self.store = store
        self.layout = layout
        self.stateDirectory = stateDirectory
        self.spool = spool
        self.journal = journal
        self.media = media
        self.reporter = reporter
        self.followers = followers
        self.intake = intake
        self.pipeline = pipeline
    }

    /// True once a failure was reported or the journal stopped for good: nothing more is written.
    var hasFailed: Bool { exitStatus.withLock { $0 } != 0 || state.withLock { $0.isFailed } }

    /// The ingest thread: leftovers of the last run, the watch and READY, then feed and claim
    /// until a stop or a failure, then the drain. Returns the exit status.
    /// - Parameter previousRun: how the previous run ended and its crash suspects, from the run marker.
    func run(_ crashGuard: Locked<CrashGuard>, previousRun: (previous: CrashTriage.PreviousEnd, triage: CrashTriage)?) -> Int32 {
        self.crashGuard.withLock { $0 = crashGuard }
        // Staging files of producers that crashed long ago (Maildir's 36-hour rule).
        _ = try? spool.cleanTmp()
        if let failure = recoverLeftovers(crashGuard, previousRun: previousRun) { return failure }

        var feed: IncomingFeed
        do {
            feed = try makeFeed()
        } catch {
            return fail(errno: error.system?.errno ?? EIO, "cannot watch \(layout.incoming): \(error)")
        }
        // Intake runs: the watch is armed and the start-up scan begins with the next batch.
        // What waits in incoming/ is as safe there as it will be in the journal, so READY
        // does not wait for the backlog; STATUS= shows it draining.
        if state.withLock({ $0.intakeArmed() }) {
            reporter.notifier.ready(status: statusLine())
            readyFlag.store(true, ordering: .releasing)
            reporter.events.log(.ready, "pushspoold ready",
                                fields: [("SPOOL_DIR", layout.root), ("STATE_DIR", stateDirectory)])
        }

        // The notifier throttles STATUS= to the interval it was made with; a reload of
        // [Status] IntervalSec is reported as needing a restart, so the loop keeps it too.
        let statusInterval = store.current.status.interval.clampedUInt64Nanoseconds
        var clock = LoopClock(now: Posix.monotonicNanos())
        while !state.withLock({ $0.isStopping }) {
            if let failure = fatalFailure() { return failure }
            reporter.notifier.watchdogPing()
            if state.withLock({ $0.takeReload() }) {
                reload()
                // New rescan interval or stable age: a feed made with them, and a rescan.
                if let rebuilt = try? makeFeed() { feed = rebuilt }
                clock.statusSettled = false
            }

            let now = Posix.monotonicNanos()
            let configuration = store.current
            // A settled line is still checked at every wake-up (the metrics tick bounds how
            // long that takes): a follower can change it with no file arriving (NATS gone,
            // an outbox failing and recovering).
            if clock.statusSettled, statusLine() != clock.lastStatusLine { clock.statusSettled = false }
            if !clock.statusSettled, now &- clock.lastStatus >= statusInterval {
                let line = statusLine()
                reporter.notifier.status(line)
                // Refreshed each interval while it changes (followers catching up, a backlog
                // draining); once it holds still, the loop stops waking for it.
                clock.statusSettled = line == clock.lastStatusLine
                clock.lastStatusLine = line
                clock.lastStatus = now
            }
            let metricsInterval = configuration.metrics.interval.clampedUInt64Nanoseconds
            if now &- clock.lastMetrics >= metricsInterval {
                publishMetrics(configuration)
                clock.lastMetrics = now
            }
            let paused = journal.stats.paused
            state.withLock { $0.journalPausedChanged(paused) }
            if paused {
                // Disk full: claim nothing new; the journal retries its queued batch itself and
                // rings the doorbell when it has written it (`resumed`). Until then the loop
                // wakes for what is due (watchdog, metrics, the status line) or a stop.
                clock.statusSettled = false
                var due = now &+ Self.longestIdleWait
                due = min(due, clock.lastStatus &+ statusInterval)
                due = min(due, clock.lastMetrics &+ metricsInterval)
                if let watchdog = reporter.notifier.watchdogInterval { due = min(due, now &+ watchdog.clampedUInt64Nanoseconds) }
                intake.waitForDoorbell(timeout: .nanoseconds(Int64(clamping: due > now ? due - now : 0)))
                continue
            }
            let retryPending = state.withLock { $0.retryPending }
            if retryPending, now &- clock.lastRetry >= 1_000_000_000 {
                retryHandedBack()
                clock.lastRetry = now
            }
            // Sleep until the next thing that is due, not on a fixed tick: an idle daemon wakes
            // for the watchdog, the metrics file and a status line that still changes, and
            // otherwise only when a file arrives or a signal comes.
            var due = now &+ Self.longestIdleWait
            if !clock.statusSettled { due = min(due, clock.lastStatus &+ statusInterval) }
            due = min(due, clock.lastMetrics &+ metricsInterval)
            if let watchdog = reporter.notifier.watchdogInterval { due = min(due, now &+ watchdog.clampedUInt64Nanoseconds) }
            if state.withLock({ $0.retryPending }) { due = min(due, clock.lastRetry &+ 1_000_000_000) }
            let waitMillis = Int32(clamping: (due > now ? due - now : 0) / 1_000_000)
            guard let batch = nextBatch(&feed, timeoutMillis: waitMillis) else { continue }
            if !batch.names.isEmpty || feed.scanning { clock.statusSettled = false }
            claimAndProcess(batch.names, feed: feed)
        }
        return drain()
    }

    /// Takes what a previous run left in flight: files an older version claimed into
    /// `processing/`, and — after an unclean end — the files the in-flight record names that
    /// are still in `incoming/` (read in place, a file stays there until its record is durable).
    /// Either may be journaled already: the journal's id index makes re-processing idempotent.
    /// After an unclean end, `CrashTriage` decides which are processed alone and which crashed
    /// the daemon before. Returns an exit status when start-up cannot go on.
    private func recoverLeftovers(_ crashGuard: Locked<CrashGuard>,
                                  previousRun: (previous: CrashTriage.PreviousEnd, triage: CrashTriage)?) -> Int32? {
        // The run marker, first of the services, has begun the run.
        let (previous, triage) = previousRun ?? (.clean, CrashTriage())
        reporter.notifier.status("re-processing files left in flight by the previous run")
        if previous == .clean {
            // Streamed: after a clean exit nothing needs the whole list at once. Only an older
            // version leaves files in processing/; a clean exit of this one leaves none.
            do {
                let leftovers = try spool.scanProcessing()
                while let batch = try leftovers.next() {
                    for entry in batch where admitLeftover(entry.name) {
                        pipeline.adoptLeftover(entry.name)
                        submit([entry.name], record: false)
                    }
                    reporter.notifier.watchdogPing()
                }
            } catch {
                return fail(errno: error.system?.errno ?? EIO, "cannot read \(layout.processing): \(error)")
            }
            return waitForLeftovers()
        }

        let claimed: [String]
        do {
            claimed = try spool.processingNames()
        } catch {
            return fail(errno: error.system?.errno ?? EIO, "cannot read \(layout.processing): \(error)")
        }
        let legacy = Set(claimed)
        // The record names the last chunks, most of them long gone: a suspect is one still here.
        let inPlace = crashGuard.withLock { $0.previousInFlight }.filter { name in
            !legacy.contains(name) && (try? spool.status(incoming: name)) != nil
        }
        for name in claimed { pipeline.adoptLeftover(name) }
        let plan = triage.plan(previous: previous, leftovers: claimed + inPlace)
        do {
            try crashGuard.withLock { guardian throws(SystemError) in try guardian.save(plan.next) }
        } catch {
            return fail(errno: error.errno, "cannot record crash suspects in \(stateDirectory): \(error)")
        }
        // Still suspects if this start dies too: the fresh record names them before any is read.
        if !inPlace.isEmpty, let error = crashGuard.withLock({ $0.recordInFlight(inPlace) }) {
            reporter.error("cannot record the files in flight in \(stateDirectory): \(error)")
        }
        reporter.events.log(.recovery, "previous run ended without a clean exit (\(previous)); \(plan.quarantine.count) file(s) "
                            + "crashed it and are quarantined, \(plan.isolate.count) are processed one at a time first",
                            priority: plan.quarantine.isEmpty ? 5 : 2,
                            fields: [("QUARANTINED", String(plan.quarantine.count)), ("ISOLATED", String(plan.isolate.count))])
        for name in plan.quarantine where admitLeftover(name) {
            pipeline.quarantine(name, code: ReasonCode.crashedDaemon.rawValue,
                                message: "the daemon died while processing this file alone after it had already been in "
                                + "flight at an earlier crash; quarantined so that it cannot stop the daemon again "
                                + "(report it: it is a bug in pushspoold)")
        }
        for (index, name) in plan.isolate.enumerated() {
            guard admitLeftover(name) else { break }
            reporter.notifier.status("re-processing files left by a crash one at a time: \(index + 1) of \(plan.isolate.count)")
            crashGuard.withLock { $0.isolating(name) }
            submit([name], record: false)
            // Alone means alone: the next one starts when this one is journaled or refused. Its
            // end rings the doorbell, as do a stop, a failure and a paused journal; the wait
            // wakes on its own only to keep systemd's start timeout extended (sent when a
            // third of the extension has passed) and the watchdog fed.
            waitWhileInFlight { true }
            crashGuard.withLock { $0.isolating(nil) }
        }
        if let failure = fatalFailure() { return failure }
        for name in plan.normal where admitLeftover(name) {
            submit([name], record: false)
        }
        return waitForLeftovers()
    }

    /// Takes a slot and the name for a leftover; false when stopping or failed.
    private func admitLeftover(_ name: String) -> Bool {
        state.withLock { state in
            guard state.admitLeftover() else { return false }
            _ = state.takeName(name)
            return true
        }
    }

    /// Files from `processing/` are told from files in `incoming/` by name alone, so the feed
    /// starts only once none is in flight any more (only after an upgrade is there any).
    /// Returns an exit status on a failure.
    private func waitForLeftovers() -> Int32? {
        waitWhileInFlight { pipeline.hasLeftoversInFlight }
        return fatalFailure()
    }

    /// Waits on the intake's doorbell while files are in flight and `relevant()` holds, until
    /// a stop, a failure or a paused journal; wakes on its own only to feed the watchdog and
    /// keep systemd's start timeout extended.
    private func waitWhileInFlight(_ relevant: () -> Bool) {
        while relevant(), state.withLock({ state in
            let waiting = state.inFlight > 0 && !state.isStopping && !state.isFailed && !state.journalPaused
            if waiting { state.awaitFinish() }
            return waiting
        }) {
            reporter.notifier.watchdogPing()
            reporter.notifier.extendTimeoutIfDue(by: .seconds(10))
            let paused = journal.stats.paused
            state.withLock { $0.journalPausedChanged(paused) }
            if paused { continue }
            intake.waitForDoorbell(timeout: min(Self.isolationHeartbeat, reporter.notifier.watchdogInterval ?? Self.isolationHeartbeat))
        }
    }

    /// A feed over a fresh watcher: inotify events, start-up/overflow/periodic rescans and the
    /// stable-age rule for files a rescan finds, with the configuration in force.
    private func makeFeed() throws(SpoolError) -> IncomingFeed {
        let configuration = store.current
        let watcher = try IncomingWatcher(layout: layout)
        let newWaker = try watcher.makeWaker()
        intake.use(newWaker)
        return IncomingFeed(spool: spool, watcher: watcher,
                            rescanIntervalNanos: configuration.spool.rescanInterval.clampedNanoseconds,
                            stableAgeNanos: configuration.spool.stableAge.clampedNanoseconds)
    }

    /// The feed's next batch; rebuilds layout and watcher when `incoming/` was removed or
    /// replaced. `nil` when the feed failed and had to be rebuilt (the caller goes round again;
    /// a failed feed never counts as a finished scan).
    private func nextBatch(_ feed: inout IncomingFeed, timeoutMillis: Int32) -> IncomingFeed.Batch? {
        var lost = false
        var result: IncomingFeed.Batch?
        do {
            let batch = try feed.next(timeoutMillis: timeoutMillis)
            reporter.counters.backlog.store(batch.names.count + (feed.scanning ? 1 : 0), ordering: .relaxed)
            lost = batch.watchLost || (batch.scanCompleted && ((try? spool.reopenIfReplaced()) ?? false))
            if !lost {
                state.withLock { $0.feedDelivered(scanCompleted: batch.scanCompleted) }
            }
            result = batch
        } catch {
            reporter.error("incoming/: \(error)")
            lost = true
        }
        if lost {
            reporter.events.log(.inotifyOverflow, "incoming/ was removed or replaced; recreating it and rescanning",
                                fields: [("SPOOL_DIR", layout.incoming)])
            do {
                try layout.create()
                _ = try? spool.reopenIfReplaced()
                feed = try makeFeed()
            } catch {
                // The kernel refused the watch (out of inotify instances or watches, incoming/
                // not creatable): nothing will ring, so this one wait is on the clock.
                reporter.error("re-watching incoming/: \(error)")
                usleep(1_000_000)
            }
        }
        return result
    }

    /// Takes and processes each name; a name already in flight is skipped.
    /// Adaptive: a small batch (a quiet spool, files arriving one by one) while the processing
    /// queue is idle is processed right here on the ingest thread — a hand-off would cost a
    /// wake-up and two context switches per file for a few microseconds of work. Under a
    /// burst, claimed names go to the processing queue in chunks: one hand-off (and at most
    /// one wake-up of that thread) per chunk instead of per file, and one write of the chunk's
    /// names into the in-flight record (the crash guard's suspects).
    private func claimAndProcess(_ names: [String], feed: IncomingFeed) {
        if names.count <= Self.inlineBatchLimit && processingPending.load(ordering: .acquiring) == 0 {
            for name in names {
                guard admit() else { return }
                if claim(name, feed: feed, handOver: false) {
                    inlineProcessed.add(1, ordering: .relaxed)
                    record([name])
                    processClaimed(name)
                }
            }
            return
        }
        var claimed: [String] = []
        claimed.reserveCapacity(Self.claimChunk)
        for name in names {
            // Never wait for a slot while holding claimed files back: they may be what frees one.
            guard admit(beforeWaiting: {
                if !claimed.isEmpty {
                    submit(claimed)
                    claimed.removeAll(keepingCapacity: true)
                }
            }) else { break }
            if claim(name, feed: feed, handOver: false) {
                claimed.append(name)
                if claimed.count >= Self.claimChunk {
                    submit(claimed)
                    claimed.removeAll(keepingCapacity: true)
                }
            }
        }
        if !claimed.isEmpty { submit(claimed) }
    }





    /// When the ingest loop last did its periodic chores, and whether the status line has
    /// stopped changing.
    private struct LoopClock {
        var lastStatus: UInt64 = 0
        var lastStatusLine = ""
        var statusSettled = false
        var lastMetrics: UInt64
        var lastRetry: UInt64

        init(now: UInt64) {
            lastMetrics = now
            lastRetry = now
        }
    }

    /// Batches up to this size are processed inline when the processing queue is idle: more
    /// than a file or two at once means a burst has begun, and both cores should work.
    static let inlineBatchLimit = 2

    /// Files taken before the processing queue gets them: one in-flight record write and one
    /// hand-off per chunk. At most ``InFlightRecord/namesPerSlot``, a slot of that record.
    static let claimChunk = 32

    /// Takes one admitted name: processed when taken, its slot given back otherwise. No claim
    /// rename: the file is read, journaled and removed where it lies in `incoming/` (the pickup
    /// protocol; pushspoold holds the spool lock, so no other reader takes it). A name already
    /// in flight is skipped: its file is the one being processed, still in `incoming/`. With
    /// `handOver: false` a taken name is not submitted: the caller does it (returns true then).
    @discardableResult
    private func claim(_ name: String, feed: IncomingFeed, handOver: Bool = true) -> Bool {
        do {
            try SpoolName.validate(name)
        } catch {
            finish()
            reporter.error("take \(name): \(error)")
            reporter.events.log(.refused, "cannot take file, leaving it in incoming/: \(error)", fields: [(EventField.spoolFile, name)])
            return false
        }
        guard !SpoolName.isIgnored(name), state.withLock({ $0.takeName(name) }) else {
            finish()
            return false
        }
        if handOver { submit([name]) }
        return true
    }

    /// Files a full journal disk or a failed quarantine handed back, taken again.
    private func retryHandedBack() {
        for name in state.withLock({ $0.takeHandedBack() }) {
            guard admit() else { return }
            submit([name])
        }
    }

    /// Hands `names` to the processing lanes, naming them in the in-flight record first unless
    /// `record` is false (start-up recorded its leftovers already).
    private func submit(_ names: [String], record shouldRecord: Bool = true) {
        if shouldRecord { record(names) }
        processingPending.add(1, ordering: .relaxed)
        processing.submit(names, prepare: { [self] name in pipeline.prepare(name) },
                          finish: { [self] prepared in finishClaimed(prepared) },
                          done: { [self] in processingPending.subtract(1, ordering: .releasing) })
    }

    /// Names files in the in-flight record before they are read: if one crashes the process,
    /// the next start finds it among the suspects (``CrashTriage``).
    private func record(_ names: [String]) {
        guard let guardian = crashGuard.withLock({ $0 }) else { return }
        if let error = guardian.withLock({ $0.recordInFlight(names) }) {
            reporter.error("cannot record the files in flight in \(stateDirectory), a file that crashes pushspoold may crash it "
                           + "once more before it is isolated: \(error)")
        }
    }

    /// One file through the pipeline, on whichever thread decided to run it.
    private func processClaimed(_ name: String) {
        finishClaimed(pipeline.prepare(name))
    }

    private func finishClaimed(_ prepared: PreparedFile) {
        if state.withLock({ $0.isFailed }) {
            // The journal stopped for good: touch nothing more; the file stays where it lies.
            intake.fileEnded(prepared.name, .leftForNextStart)
        } else {
            pipeline.finish(prepared)
        }
    }

    // MARK: - Capacity

    /// Takes a slot for one file, waiting while all are taken and petting the watchdog while
    /// it waits (a full batch is not a wedged loop). False when stopping or failed: no slot.
    private func admit(beforeWaiting: () -> Void = {}) -> Bool {
        while true {
            switch state.withLock({ $0.admit() }) {
            case .granted:
                    return true
            case .refused:
                return false
            case .full:
                beforeWaiting()
                // A finish rings the doorbell (`.full` asked for it), as do a stop and a
                // failure; the watchdog's interval bounds the wait so it is fed meanwhile.
                intake.waitForDoorbell(timeout: reporter.notifier.watchdogInterval)
                reporter.notifier.watchdogPing()
            }
        }
    }

    private func finish() { intake.finish() }

    // MARK: - The way out

    /// Intake's part of a stop: claims nothing more and waits for every file in flight to be
    /// journaled or refused (downloads were cancelled as the stop began; their files went back
    /// to `incoming/`). The journal closes after the followers stop (`Daemon`'s services list).
    private func drain() -> Int32 {
        let deadline = Posix.monotonicNanos() + 30_000_000_000
        while true {
            let paused = journal.stats.paused
            let step = state.withLock { state in
                // A journal paused on a full disk will not drain by waiting: `close` retries
                // once and hands the files back, and they stay in processing/ for the next start.
                state.journalPausedChanged(paused)
                let step = state.drainStep(deadlinePassed: Posix.monotonicNanos() >= deadline)
                if step == .wait { state.awaitFinish() }
                return step
            }
            switch step {
            case .wait:
                reporter.notifier.watchdogPing()
                // Until a file in flight ends (its finish rings the doorbell: `awaitFinish`
                // below), the journal pauses or fails, or the drain's deadline; at most the
                // watchdog's interval, which must be fed meanwhile.
                let now = Posix.monotonicNanos()
                var timeout = Duration.nanoseconds(Int64(clamping: deadline > now ? deadline - now : 0))
                if let watchdog = reporter.notifier.watchdogInterval { timeout = min(timeout, watchdog) }
                intake.waitForDoorbell(timeout: timeout)
            case .fail(let failure):
                media?.shutdown()
                return fail(errno: failure.errno, "journal can no longer be trusted, stopping without writing more: \(failure.message)")
            case .close(let left):
                leftInFlight.withLock { $0 = left }
                return 0
            }
        }
    }

    /// Closes the journal once nothing writes it; the close commits what was queued, and its
    /// acknowledgements run before the exit. After a failure nothing more is written: the
    /// journal stays as it is for the next start's recovery.
    func closeJournal() {
        guard exitStatus.withLock({ $0 }) == 0, !state.withLock({ $0.isFailed }) else { return }
        do {
            try journal.close()
        } catch {
            _ = fail(errno: error.errno, "journal close failed: \(error)")
            return
        }
        pipeline.flushAcknowledgements()
    }

    /// Logs, tells systemd why, and returns the exit status for a failing exit.
    func fail(errno code: Int32, _ message: String) -> Int32 {
        exitStatus.withLock { $0 = 1 }
        pipeline.flushAcknowledgements()
        reporter.events.log(.fatal, message, fields: [(EventField.errno, String(code))])
        reporter.notifier.failing(errno: code, status: "failed: \(message)")
        return 1
    }

    private func fatalFailure() -> Int32? {
        guard let failure = state.withLock({ $0.failure }) else { return nil }
        media?.shutdown()
        return fail(errno: failure.errno, "journal can no longer be trusted, stopping without writing more: \(failure.message)")
    }

    // MARK: - Reload

    /// Re-reads the configuration; the new one replaces the old only if it loads whole.
    private func reload() {
        reporter.notifier.reloading()
        switch store.reload() {
        case .applied(let changed, let needsRestart):
            let configuration = store.current
            do {
                pipeline.update(options: try Daemon.normalizerOptions(for: configuration))
            } catch {
                reporter.events.log(.reloadFailed, "configuration reload could not build the category table, keeping the previous "
                                    + "one: \(error)", fields: [("CONFIG_FILE", arguments.configFile)])
            }
            spool.maxFileBytes = configuration.spool.maxFileBytes
            var fields: [(String, String)] = [("CONFIG_FILE", arguments.configFile), ("CHANGED", changed.joined(separator: " "))]
            if !needsRestart.isEmpty { fields.append(("RESTART_NEEDED_FOR", needsRestart.joined(separator: " "))) }
            reporter.events.log(.reload, needsRestart.isEmpty
                ? "configuration reloaded (\(changed.count) changed)"
                : "configuration reloaded; \(needsRestart.joined(separator: ", ")) take effect at the next restart",
                fields: fields)
        case .rejected(let error):
            reporter.error("reload failed: \(error)")
            reporter.events.log(.reloadFailed, "configuration reload failed, keeping the previous one: \(error)",
                                fields: [("CONFIG_FILE", arguments.configFile)])
        }
        reporter.notifier.ready(status: statusLine())
    }

    // MARK: - Reporting

    func statusLine() -> String {
        let (prefix, paused) = state.withLock { ($0.statusPrefix, $0.journalPaused) }
        return reporter.statusLine(prefix: prefix, journalPaused: paused) + followers.statusSuffix
    }

    func publishMetrics(_ configuration: Configuration) {
        reporter.publish(textfilePath: configuration.metrics.textfilePath, journal: journal.stats, media: media?.stats,
                         inFlight: state.withLock { $0.inFlight }, statusMembers: followers.statusMembers,
                         more: followers.publish(to:))
    }

    /// While a leftover is processed alone at start-up, how often the wait for its end wakes
    /// without it: `EXTEND_TIMEOUT_USEC` of 10 s is renewed after a third of it.
    static let isolationHeartbeat: Duration = .seconds(3)

    /// The longest the ingest loop sleeps with nothing due (the feed's periodic rescan and the
    /// watchdog come sooner when set).
    static let longestIdleWait: UInt64 = 60_000_000_000
}
