@preconcurrency import Glibc
import Dispatch
import Synchronization
import PushSystem
import PushPayload
import PushJournal
import PushSpool
import PushMediaCore
import PushFetchClient
import PushSystemd
import PushConfig
import PushModuleOptions
import PushErasure

/// The running daemon's lifecycle: recovery, intake, reload and the way out.
///
/// Wiring and lifecycle only: `init` opens the parts in a safe order, `run()` runs them as one
/// ``ServiceGroup``. `IntakeState` decides (capacity, READY, drain, retries — pure, under one
/// lock), `FilePipeline` takes each claimed file to its end, `Reporter` tells the outside, and
/// ``IngestLoop`` — the intake service, on a thread of its own — feeds, claims, reloads and drains.
package final class Daemon: Sendable {
    package let arguments: DaemonArguments
    private let store: ConfigurationStore
    private let layout: SpoolLayout
    private let stateDirectory: String
    private let journal: JournalWriter
    private let media: (any MediaSource)?
    private let reporter: Reporter
    /// The inbox index and the outbox, following the journal on threads of their own.
    private let followers: Followers
    /// Retires journal segments, dedup entries, media and failed/ files on its own thread.
    /// The lowest seq a follower still needs: retention keeps every segment above it.
    package let retentionFloor = RetentionFloor()
    /// Held by a retention pass and by the eraser's rewrite of sealed segments: retention must
    /// not archive or retire a segment while it is rewritten.
    private let retentionGate = Locked(())
    /// Leftovers, READY, feed and claim, reload, the drain: runs on the intake service's thread.
    private let loop: IngestLoop
    private let returnedFlag = Atomic<Bool>(false)
    /// The group `run()` runs, for ``requestStop()``.
    private let runningGroup = Locked<ServiceGroup?>(nil)
    /// How the previous run ended and its crash suspects, read by the run marker's start.
    private let previousRun = Locked<(previous: CrashTriage.PreviousEnd, triage: CrashTriage)?>(nil)

    /// Files processed on the ingest thread itself (a quiet spool): for tests and benchmarks.
    package var inlineProcessed: InlineProcessed { InlineProcessed(loop: loop) }

    /// A read-only view of the loop's count (an `Atomic` cannot be handed out by value).
    package struct InlineProcessed: Sendable {
        fileprivate let loop: IngestLoop
        /// Always an acquiring load (the ordering must be a constant where the atomic is read),
        /// at least as strong as any ordering asked for.
        package func load(ordering _: AtomicLoadOrdering) -> Int { loop.inlineProcessed.load(ordering: .acquiring) }
    }

    package var counters: Counters { reporter.counters }

    /// True once `run()` has returned.
    package var hasReturned: Bool { returnedFlag.load(ordering: .acquiring) }

    /// True once READY=1 was sent.
    package var isReady: Bool { loop.readyFlag.load(ordering: .acquiring) }

    /// Asks `run()` to drain and return, as SIGTERM does.
    package func requestStop() {
        loop.intake.requestStop()
        runningGroup.withLock { $0 }?.stop()
    }

    /// The journal's announcements of durable batches (in-process followers sleep on them).
    package var commits: CommitFeed { journal.commits }

    /// The journal writer's counters (batches, fsyncs, latency buckets).
    package var journalStats: JournalWriterStats { journal.stats }

    /// Opens everything in the order that makes start-up safe: configuration, journal
    /// recovery (the data of record), spool layout, media store. Nothing is claimed yet.
    /// - Parameter onCommitted: called on the journal's writer thread with the spool file name
    ///   and sequence number of every record once it is durable (benchmarks and tests).
    package init(arguments: DaemonArguments, store: ConfigurationStore, events: EventLog, notifier: SystemdNotifier,
                 metrics: Metrics, onCommitted: (@Sendable (String, UInt64) -> Void)? = nil) throws(DaemonError) {
        let configuration = store.current
        self.arguments = arguments
        self.store = store
        self.layout = SpoolLayout(root: configuration.spool.directory)
        self.stateDirectory = configuration.journal.stateDirectory
        let intake = Intake(capacityLimit: 4096)
        let secret = try Self.loadErasureSecret(stateDirectory: configuration.journal.stateDirectory)
        self.reporter = Reporter(counters: Counters(), events: events, notifier: notifier, metrics: metrics,
                                 stateDirectory: configuration.journal.stateDirectory,
                                 userNaming: configuration.log.userIds == .hash ? LogUserNaming(secret: secret) : .plain)

        journal = try Self.openJournal(configuration: configuration, arguments: arguments, events: events, notifier: notifier,
                                       metrics: metrics, intake: intake, secret: secret)

        let retention = RetentionPass.follower(configuration: configuration, journal: journal, journalDirectory: StateLayout(root: stateDirectory).journal,
                                               layout: layout, mediaDirectory: configuration.media.enabled ? StateLayout(root: stateDirectory).media : nil,
                                               floor: retentionFloor, gate: retentionGate, events: events)
        let journal = journal
        let eraserJournal = EraserFollower.LiveErasureJournalFactory(
            seal: { () throws(ErasureError) -> UInt64 in
                do { return try journal.sealActiveSegment() } catch { throw ErasureError(.journal, "sealing the active segment: \(error)") }
            },
            replaceFingerprints: { tombstones throws(ErasureError) in
                do { try journal.replaceErasedFingerprints(tombstones) } catch {
                    throw ErasureError(.journal, "writing the dedup checkpoint: \(error)")
                }
            },
            retentionGate: retentionGate)
        // One value for the intake that writes subject files and the eraser that removes them:
        // it counts them in memory (the eraser's durableSeq() asks after every commit).
        let erasureRequests = ErasureRequests(stateDirectory: stateDirectory)
        followers = try Followers(configuration: configuration, journal: journal, events: events, retention: retention,
                                  eraser: eraserJournal, erasureRequests: erasureRequests, spool: layout, erasureSecret: secret, eraserHook: EraseKillHook.hook(environment: { getenv($0).map { String(cString: $0) } }))
        Self.reportNetworkProblems(configuration: configuration, reporter: reporter, events: events)
        let followers = followers
        retentionFloor.set { followers.retentionFloor() }

        let spool: Spool
        do {
            try layout.create()
            spool = try Spool(layout: layout, maxFileBytes: configuration.spool.maxFileBytes)
        } catch {
            throw DaemonError(stage: "spool", message: "\(error)", errno: error.system?.errno ?? EINVAL)
        }

        let normalizerOptions: NormalizerOptions
        do {
            normalizerOptions = try Self.normalizerOptions(for: configuration)
        } catch {
            throw DaemonError(stage: "configuration", message: "\(error)", errno: EINVAL)
        }
        if configuration.media.enabled {
            do {
                media = try Self.mediaSource(for: configuration, reporter: reporter)
            } catch {
                throw DaemonError(stage: "media", message: "\(error)", errno: EIO)
            }
        } else {
            media = nil
        }
        let capacityLimit = intake.state.withLock { $0.capacityLimit }
        let pipeline = FilePipeline(
            spool: spool, journal: journal, media: media, reporter: reporter,
            options: normalizerOptions,
            mediaAllowsHTTP: configuration.media.allowHTTP,
            mediaMaxWaiting: min(configuration.media.maxWaiting, capacityLimit / 2),
            onCommitted: onCommitted,
            crashMarker: FaultHook.crashMarker(environment: { getenv($0).map { String(cString: $0) } }),
            erasureSecret: secret, erasureRequests: erasureRequests,
            sink: intake)
        loop = IngestLoop(arguments: arguments, store: store, layout: layout, stateDirectory: stateDirectory, spool: spool,
                          journal: journal, media: media, reporter: reporter, followers: followers,
                          intake: intake, pipeline: pipeline)
    }

    // MARK: - Lifecycle

    /// Runs until SIGTERM/SIGINT (exit 0 after a clean drain) or a fatal journal error
    /// (exit 1, nothing more written). Call from one thread; it blocks while the parts run
    /// as one ``ServiceGroup`` (``services(crashGuard:)``), which owns the signals.
    package func run() -> Int32 {
        defer { returnedFlag.store(true, ordering: .releasing) }
        let crashGuard = Locked(CrashGuard(stateDirectory: stateDirectory))
        let group = ServiceGroup(services(crashGuard: crashGuard), gracefulStop: Self.stopLimit,
                                 reload: { [loop] in loop.intake.requestReload() },
                                 escalated: { [reporter] names in
                                     reporter.events.log(.stopping, "still busy at the stop deadline, left to end with the process: "
                                                         + names.joined(separator: ", "), priority: 4,
                                                         fields: [("SERVICES", names.joined(separator: " "))])
                                 })
        runningGroup.withLock { $0 = group }
        defer { runningGroup.withLock { $0 = nil } }
        let stopped = group.run(onStopping: { [self] in
            // A failure already told systemd why (ERRNO=, STATUS=); only a stop drains.
            guard !loop.hasFailed else { return }
            reporter.notifier.stopping(status: "stopping: draining in-flight files")
            reporter.events.log(.stopping, "pushspoold stopping", fields: [])
        })
        let status = loop.exitStatus.withLock { $0 }
        if status != 0 { return status }
        if let failure = stopped.reason.failure {
            return loop.fail(errno: failure.errno ?? EIO, failure.message)
        }
        loop.publishMetrics(store.current)
        reporter.flush()
        let left = loop.leftInFlight.withLock { $0 }
        if left > 0 {
            reporter.events.log(.stopping, "stopped with files still in flight; they stay where they lie and are taken again at the next start",
                                fields: [("IN_FLIGHT", String(left))])
        }
        return 0
    }

    /// pushspoold's parts in the order they start; the group stops them in the reverse order,
    /// after asking all of them at once to wind down (downloads cancelled, follower steps
    /// abandoned, intake draining):
    /// 1. the run marker (``CrashGuard``): first up, last down, so a crash anywhere between is
    ///    seen at the next start; a deliberate exit removes it;
    /// 2. the journal, recovered by `init`: closed once nothing writes it, then the close's
    ///    acknowledgements run;
    /// 3. media (with `[Media] Enabled=yes`): its downloads are cancelled as the stop begins,
    ///    their files going back to `incoming/`;
    /// 4. the followers (crashing ones parked first): stopped before the journal closes, since
    ///    retention deletes segments under the journal's lock;
    /// 5. intake, the ingest loop on a thread of its own: leftovers, READY, feed and claim
    ///    until the stop, then the drain. Its end (a fatal journal error) stops the group.
    private func services(crashGuard: Locked<CrashGuard>) -> [ServiceGroup.Entry] {
        var parts: [any Service] = []
        parts.append(DaemonPart("run marker", start: { [self] (_: ServiceEnding) throws(ServiceError) in
            do throws(SystemError) {
                let begun = try crashGuard.withLock { guardian throws(SystemError) in try guardian.begin() }
                previousRun.withLock { $0 = begun }
            } catch {
                throw ServiceError(service: "run marker", message: "cannot write the run marker in \(stateDirectory): \(error)",
                                   errno: error.errno)
            }
        }, stop: { _ in
            crashGuard.withLock { $0.end() }
            return true
        }))
        parts.append(DaemonPart("journal", stop: { [self] _ in
            loop.closeJournal()
            return true
        }))
        if let media {
            parts.append(DaemonPart("media", requestStop: { media.shutdown() }))
        }
        parts.append(DaemonPart("followers", start: { [self] (_: ServiceEnding) throws(ServiceError) in
            parkCrashingFollowers(crashGuard)
            do throws(ServiceError) {
                try followers.start()
            } catch {
                throw ServiceError(service: "followers", message: "cannot start the journal's followers: \(error)", errno: error.errno ?? EAGAIN)
            }
        }, requestStop: { [followers] in followers.requestStop() }, stop: { [self] deadline in
            stopFollowers(deadline: deadline)
        }))
        parts.append(ThreadPart("intake", requestStop: { [loop] in loop.intake.requestStop() }, body: { [self] in
            let status = loop.run(crashGuard, previousRun: previousRun.withLock { $0 })
            // `fail` has told systemd and the journal why.
            return status == 0 ? nil : ServiceError(service: "intake", message: "stopped on a failure", errno: EIO)
        }))
        return parts.map { ServiceGroup.Entry($0) }
    }


    /// A follower whose thread crashed the process at its last starts is not started again:
    /// it would crash this run too and take ingest down with it (``FollowerCrashCounts``).
    private func parkCrashingFollowers(_ crashGuard: Locked<CrashGuard>) {
        let crashes = crashGuard.withLock { $0.followerCrashes() }
        for name in crashes.parked.sorted() {
            guard let runner = followers.group.runner(named: name) else { continue }
            let count = crashes.crashes[name] ?? 0
            runner.park(reason: "crashed pushspoold at its last \(count) starts; fix the cause, then restart pushspoold")
            reporter.events.log(.followerParked, "follower \(name) parked: it crashed pushspoold at its last \(count) starts; "
                                + "ingest and the other followers run, its records wait in the journal; fix the cause, then restart pushspoold",
                                fields: [(EventField.follower, name), (EventField.followerCrashes, String(count))])
        }
    }


    /// Waits for the followers (asked to stop as the stop began), each within its current
    /// step, at most ``followerStopLimit``. Those still busy are named here and left to end with
    /// the process; the group need not escalate them again.
    private func stopFollowers(deadline: UInt64) -> Bool {
        let stuck = followers.stop(deadline: min(deadline, Posix.monotonicNanos() &+ Self.followerStopLimit))
        if !stuck.isEmpty {
            reporter.events.log(.stopping, "followers still busy at the stop deadline, left to end with the process: "
                                + stuck.joined(separator: ", "), priority: 4, fields: [("FOLLOWERS", stuck.joined(separator: " "))])
        }
        return true
    }


    /// How long a stop waits for the followers after the journal is closed: they were asked to
    /// stop when the drain began, and each stops within its current step.
    static let followerStopLimit: UInt64 = 5_000_000_000

    /// The whole stop: the drain (at most 30 s), the followers (5 s), the journal's close.
    /// Past it, the parts still running are named and left to end with the process.
    static let stopLimit: Duration = .seconds(60)
}
