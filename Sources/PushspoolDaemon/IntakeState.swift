/// The daemon's lifecycle and intake as one value: events go in through `mutating` methods,
/// decisions come out as return values, and no method does I/O. `Daemon` holds it in a
/// lock and runs the returned actions after releasing the lock (swift-service-lifecycle's
/// pattern), so capacity, READY gating, draining and busy-name retry are testable without a
/// process, a spool or a clock.
///
/// Phases, in order: `.recovering` (journal recovery, leftovers in `processing/`) →
/// `.running` (intake armed; READY is sent on entry, while the start-up scan may still be
/// under way) → `.draining` (stop requested: no new claims, in-flight files finish) → `.stopped`.
/// `.failed` can follow any phase when the journal can no longer be trusted.
struct IntakeState: Sendable {
    enum Phase: Sendable, Equatable {
        case recovering
        case running
        case draining
        case stopped
        case failed
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

    /// What `nameBusy` decided for a name whose twin is still in `processing/`.
    enum BusyOutcome: Sendable, Equatable {
        /// Kept; it comes back from `takeBusyNames`.
        case queued
        /// The list is full: the caller asks its feed for a rescan, which finds the name again.
        case rescanNeeded
    }

    private(set) var phase: Phase = .recovering
    let capacityLimit: Int
    let busyLimit: Int
    /// Files taken (claimed or re-processed) and not yet finished.
    private(set) var inFlight = 0
    private(set) var failure: Failure?
    private(set) var journalPaused = false
    /// The first full scan of `incoming/` has finished since intake was armed.
    private(set) var startupScanComplete = false
    private(set) var readySent = false
    private var reloadPending = false
    /// The admitter is blocked in `.full`; the next `finish` must wake it.
    private var admitterWaiting = false
    private var busyNames: [String] = []
    private var busySet: Set<String> = []
    /// Files in `processing/` that could not finish for a reason that passes (a full journal
    /// disk, a quarantine that failed) and are taken again later.
    private var handedBack: [String] = []

    init(capacityLimit: Int, busyLimit: Int = 4096) {
        self.capacityLimit = max(1, capacityLimit)
        self.busyLimit = max(1, busyLimit)
    }

    var isStopping: Bool { phase == .draining || phase == .stopped }
    var isFailed: Bool { failure != nil }

    // MARK: - Lifecycle

    /// Recovery is done and the watch on `incoming/` is armed: intake runs from here. Returns
    /// true when READY=1 is to be sent now (once per process; a later rebuild of the feed
    /// after `incoming/` was replaced does not send it again). The start-up backlog is as
    /// safe in `incoming/` as it will be in the journal, so READY does not wait for it.
    mutating func intakeArmed() -> Bool {
        guard phase == .recovering else { return false }
        phase = .running
        guard !readySent else { return false }
        readySent = true
        return true
    }

    /// A batch came from the feed; `scanCompleted` is the feed's own word that a full scan
    /// finished. A failed feed is never taken as a finished scan.
    mutating func feedDelivered(scanCompleted: Bool) {
        if scanCompleted { startupScanComplete = true }
    }

    /// SIGTERM/SIGINT. Returns true when this request changed anything (wake the loop).
    mutating func requestStop() -> Bool {
        switch phase {
        case .recovering, .running:
            phase = .draining
            return true
        case .draining, .stopped, .failed:
            return false
        }
    }

    /// SIGHUP: a reload is due at the loop's next turn.
    mutating func requestReload() {
        if phase == .running || phase == .recovering { reloadPending = true }
    }

    /// Whether a reload is due; consumes the request.
    mutating func takeReload() -> Bool {
        defer { reloadPending = false }
        return reloadPending && phase == .running
    }

    /// The journal failed for good: stop taking and finishing work.
    mutating func journalFailed(_ failure: Failure) {
        if self.failure == nil { self.failure = failure }
        phase = .failed
    }

    mutating func journalPausedChanged(_ paused: Bool) {
        journalPaused = paused
    }

    // MARK: - Capacity

    /// Takes a slot for one file, or says why not. Refuses while stopping or failed. (While
    /// the journal is paused on a full disk the loop claims nothing, so it never asks.)
    mutating func admit() -> Admission {
        if failure != nil || isStopping { return .refused }
        guard inFlight < capacityLimit else {
            admitterWaiting = true
            return .full
        }
        inFlight += 1
        return .granted
    }

    /// Takes a slot regardless of the bound: for files already in `processing/` at start-up,
    /// which must be finished before anything else is taken.
    mutating func admitLeftover() -> Bool {
        if failure != nil || isStopping { return false }
        inFlight += 1
        return true
    }

    /// A file taken by `admit`/`admitLeftover` reached its end. Returns true when the
    /// admitter waits for a slot and must be woken.
    mutating func finish() -> Bool {
        // A finish without an admit is a bug in the caller; never let the count go negative.
        assert(inFlight > 0, "finish without admit")
        inFlight = max(0, inFlight - 1)
        defer { admitterWaiting = false }
        return admitterWaiting
    }

    /// A file that stays in `processing/` for now and is taken again later (by
    /// `takeHandedBack`). Finishes its slot; returns what `finish` returns.
    mutating func handBack(_ name: String) -> Bool {
        handedBack.append(name)
        return finish()
    }

    /// Handed-back files to take again; none while the journal is paused or stopping.
    mutating func takeHandedBack() -> [String] {
        guard !journalPaused, !isStopping, failure == nil, !handedBack.isEmpty else { return [] }
        defer { handedBack.removeAll() }
        return handedBack
    }

    // MARK: - Busy names

    /// `incoming/NAME` met a `processing/NAME` still in flight: try again later.
    mutating func nameBusy(_ name: String) -> BusyOutcome {
        if busySet.contains(name) { return .queued }
        guard busyNames.count < busyLimit else { return .rescanNeeded }
        busyNames.append(name)
        busySet.insert(name)
        return .queued
    }

    /// The names to try again; one still busy goes back through `nameBusy`.
    mutating func takeBusyNames() -> [String] {
        guard !isStopping, failure == nil else { return [] }
        defer {
            busyNames.removeAll()
            busySet.removeAll()
        }
        return busyNames
    }

    var busyCount: Int { busyNames.count }

    /// Files wait to be taken again (busy names or handed back): the loop must wake for them.
    var retryPending: Bool { !busyNames.isEmpty || !handedBack.isEmpty }

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
        case .running: startupScanComplete ? "" : "draining start-up backlog: "
        case .draining, .stopped: "stopping: "
        case .failed: "failed: "
        }
    }
}
