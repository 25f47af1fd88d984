/// The daemon's lifecycle and intake as one value: events go in through `mutating` methods,
/// decisions come out as return values, and no method does I/O. `Daemon` holds it in a
/// lock and runs the returned actions after releasing the lock (swift-service-lifecycle's
/// pattern), so capacity, READY gating, draining and hand-back retry are testable without a
/// process, a spool or a clock.
///
/// Phases, in order: `.recovering` (journal recovery, leftovers in `processing/`) →
/// `.running` (intake armed; READY is sent on entry, while the start-up scan may still be
/// under way) → `.draining` (stop requested: no new claims, in-flight files finish) → `.stopped`.
/// `.failed` can follow any phase when the journal can no longer be trusted. Each phase
/// carries what only it has (the running phase its scan and reload flags, the failed phase
/// its failure), so a failure without the failed phase, or a pending reload while draining,
/// cannot be represented. Events return an ``IntakeAction`` for the caller to run outside
/// the lock.
struct IntakeState: Sendable {
    /// Where the daemon is, with what belongs to that phase alone.
    enum Phase: Sendable, Equatable {
        /// `reloadPending`: SIGHUP came during start-up; the reload happens once running.
        case recovering(reloadPending: Bool)
        /// `startupScanComplete`: the first full scan of `incoming/` has finished since intake
        /// was armed. `reloadPending`: SIGHUP came; the loop reloads at its next turn.
        case running(startupScanComplete: Bool, reloadPending: Bool)
        case draining
        case stopped
        /// The first failure wins.
        case failed(Failure)
    }

    /// The phase without its data, for logs and tests.
    enum Stage: Sendable, Equatable {
        case recovering, running, draining, stopped, failed
    }

    /// Why the daemon gave up; the first failure wins.
    struct Failure: Sendable, Equatable {
        var errno: Int32
        var message: String
    }

    /// What `admit` decided for one file about to be claimed or processed.
    enum Admission: Sendable, Equatable {
        /// A slot was taken; the caller owes exactly one `finish`.
        case granted
        /// Every slot is taken; wait for a `finish` (which returns `wakeAdmitter`) and ask again.
        case full
        /// Stopping or failed: take nothing more. No slot was taken.
        case refused
    }

    /// What the run loop does after a drain step.
    enum DrainStep: Sendable, Equatable {
        case wait
        /// Close the journal: nothing is in flight, or what is left cannot finish by waiting.
        case close(leftInFlight: Int)
        case fail(Failure)
    }

    private(set) var phase: Phase = .recovering(reloadPending: false)
    let capacityLimit: Int
    /// Files taken (claimed or re-processed) and not yet finished.
    private(set) var inFlight = 0
    private(set) var journalPaused = false
    /// Once per process, whatever the phases: a rebuilt feed does not send READY again.
    private(set) var readySent = false
    /// The admitter is blocked in `.full`; a `finish` that brings the files in flight down to
    /// ``refillMark`` wakes it.
    private var admitterWaitingForRoom = false
    /// The ingest thread waits for any file to end (the drain, a leftover processed alone);
    /// the next `finish` wakes it.
    private var awaitingFinish = false
    /// Files in `processing/` that could not finish for a reason that passes (a full journal
    /// disk, a quarantine that failed) and are taken again later.
    private var handedBack: [String] = []
    /// Names of the files taken and not ended (handed-back ones included). Read in place, a
    /// file stays in `incoming/` while in flight, so the feed may hand its name out again (an
    /// event and a rescan, a rescan after `IN_Q_OVERFLOW`): such a name is skipped, not queued.
    private var inFlightNames: Set<String> = []

    init(capacityLimit: Int) {
        self.capacityLimit = max(1, capacityLimit)
    }

    /// A full admitter is woken once the files in flight are down to this many, not at the
    /// first free slot: woken per slot, it admits one file, hands the lanes a chunk of one and
    /// waits again, so under a burst every file cost a wake-up of the ingest thread, a
    /// hand-off and an in-flight record write (the profile's `Wakeup.signal` and task
    /// switches). Half the bound keeps the lanes busy while it refills in whole chunks.
    var refillMark: Int { capacityLimit / 2 }

    var stage: Stage {
        switch phase {
        case .recovering: .recovering
        case .running: .running
        case .draining: .draining
        case .stopped: .stopped
        case .failed: .failed
        }
    }

    var isStopping: Bool { stage == .draining || stage == .stopped }
    var failure: Failure? {
        if case .failed(let failure) = phase { return failure }
        return nil
    }
    var isFailed: Bool { failure != nil }
    var startupScanComplete: Bool {
        if case .running(let complete, _) = phase { return complete }
        return false
    }

    // MARK: - Lifecycle

    /// Recovery is done and the watch on `incoming/` is armed: intake runs from here. Returns
    /// true when READY=1 is to be sent now (once per process; a later rebuild of the feed
    /// after `incoming/` was replaced does not send it again). The start-up backlog is as
    /// safe in `incoming/` as it will be in the journal, so READY does not wait for it.
    mutating func intakeArmed() -> Bool {
        guard case .recovering(let reloadPending) = phase else { return false }
        phase = .running(startupScanComplete: false, reloadPending: reloadPending)
        guard !readySent else { return false }
        readySent = true
        return true
    }

    /// A batch came from the feed; `scanCompleted` is the feed's own word that a full scan
    /// finished. A failed feed is never taken as a finished scan.
    mutating func feedDelivered(scanCompleted: Bool) {
        if scanCompleted, case .running(_, let reload) = phase { phase = .running(startupScanComplete: true, reloadPending: reload) }
    }

    /// SIGTERM/SIGINT. `.wakeLoop` when this request changed anything.
    mutating func requestStop() -> IntakeAction {
        switch phase {
        case .recovering, .running:
            phase = .draining
            return .wakeLoop
        case .draining, .stopped, .failed:
            return []
        }
    }

    /// SIGHUP: a reload is due at the loop's next turn.
    mutating func requestReload() -> IntakeAction {
        switch phase {
        case .recovering:
            // Kept for the running phase: the loop that reloads has not started yet.
            phase = .recovering(reloadPending: true)
            return []
        case .running(let complete, _):
            phase = .running(startupScanComplete: complete, reloadPending: true)
            return .wakeLoop
        case .draining, .stopped, .failed:
            return []
        }
    }

    /// Whether a reload is due; consumes the request.
    mutating func takeReload() -> Bool {
        guard case .running(let complete, true) = phase else { return false }
        phase = .running(startupScanComplete: complete, reloadPending: false)
        return true
    }

    /// The journal failed for good: stop taking and finishing work.
    mutating func journalFailed(_ failure: Failure) -> IntakeAction {
        if case .failed = phase { return [] }
        phase = .failed(failure)
        return .wakeLoop
    }

    mutating func journalPausedChanged(_ paused: Bool) {
        journalPaused = paused
    }

    // MARK: - Capacity

    /// Takes a slot for one file, or says why not. Refuses while stopping or failed. (While
    /// the journal is paused on a full disk the loop claims nothing, so it never asks.)
    mutating func admit() -> Admission {
        if isFailed || isStopping { return .refused }
        guard inFlight < capacityLimit else {
            admitterWaitingForRoom = true
            return .full
        }
        inFlight += 1
        return .granted
    }

    /// Takes a slot regardless of the bound: for files already in `processing/` at start-up,
    /// which must be finished before anything else is taken.
    mutating func admitLeftover() -> Bool {
        if isFailed || isStopping { return false }
        inFlight += 1
        return true
    }

    /// The ingest thread is about to wait for files in flight to end (the drain, a leftover
    /// processed alone): the next `finish` returns `.wakeAdmitter` for it.
    mutating func awaitFinish() {
        awaitingFinish = true
    }

    /// A file taken by `admit`/`admitLeftover` reached its end: `.wakeAdmitter` when the
    /// ingest thread waits for any end, or for room and the files in flight are down to
    /// ``refillMark``.
    mutating func finish() -> IntakeAction {
        // A finish without an admit is a bug in the caller; never let the count go negative.
        assert(inFlight > 0, "finish without admit")
        inFlight = max(0, inFlight - 1)
        let roomEnough = admitterWaitingForRoom && inFlight <= refillMark
        guard awaitingFinish || roomEnough else { return [] }
        awaitingFinish = false
        admitterWaitingForRoom = false
        return .wakeAdmitter
    }

    /// A file that stays in `processing/` for now and is taken again later (by
    /// `takeHandedBack`). Finishes its slot; the loop is woken, since it may sleep with
    /// nothing else due.
    mutating func handBack(_ name: String) -> IntakeAction {
        handedBack.append(name)
        return finish().union(.wakeLoop)
    }

    /// Handed-back files to take again; none while the journal is paused or stopping.
    mutating func takeHandedBack() -> [String] {
        guard !journalPaused, !isStopping, !isFailed, !handedBack.isEmpty else { return [] }
        defer { handedBack.removeAll() }
        return handedBack
    }

    // MARK: - Names in flight

    /// Marks `name` in flight; false when a file of that name already is (skip it: its file
    /// is the one in flight, or one renamed over it, found by the next rescan).
    mutating func takeName(_ name: String) -> Bool {
        inFlightNames.insert(name).inserted
    }

    /// The file of `name` ended (journaled, a duplicate, quarantined, gone, left for the next start).
    mutating func releaseName(_ name: String) {
        inFlightNames.remove(name)
    }

    func isInFlight(_ name: String) -> Bool { inFlightNames.contains(name) }

    // MARK: - Retry

    /// Files wait to be taken again (handed back): the loop must wake for them.
    var retryPending: Bool { !handedBack.isEmpty }

    // MARK: - Draining

    /// One step of the drain after a stop: wait while files are in flight and can still
    /// finish; close once nothing is in flight, the deadline passed, or the journal is paused
    /// on a full disk (waiting would not drain it; the files stay in `processing/`).
    mutating func drainStep(deadlinePassed: Bool) -> DrainStep {
        if let failure { return .fail(failure) }
        if inFlight == 0 || deadlinePassed || journalPaused {
            phase = .stopped
            return .close(leftInFlight: inFlight)
        }
        return .wait
    }

    // MARK: - Reporting

    /// The prefix of STATUS= while the start-up backlog drains, so `systemctl status` shows
    /// that READY came before the backlog was done.
    var statusPrefix: String {
        switch phase {
        case .recovering: "recovering: "
        case .running(let complete, _): complete ? "" : "draining start-up backlog: "
        case .draining, .stopped: "stopping: "
        case .failed: "failed: "
        }
    }
}

/// What the caller of an ``IntakeState`` event does once it has released the lock.
struct IntakeAction: OptionSet, Sendable {
    let rawValue: UInt8
    /// The ingest thread waits for a slot: ring its doorbell.
    static let wakeAdmitter = IntakeAction(rawValue: 1)
    /// The ingest loop may be asleep in the feed's wait: wake it (stop, reload, failure,
    /// a file handed back).
    static let wakeLoop = IntakeAction(rawValue: 2)
}
