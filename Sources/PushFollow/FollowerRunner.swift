@preconcurrency import Glibc
import PushJournal
import PushSystem
import Synchronization

/// A follower's state as STATUS=, the metrics and `pushspoolctl` show it.
///
/// `Sendable`: a value.
package struct FollowerStatus: Sendable, Equatable {
    package var name: String
    /// ``Follower/durableSeq()`` when the status was taken; `nil` for a follower that holds none.
    package var durableSeq: UInt64?
    /// The journal's last committed seq as announced.
    package var journalLastSeq: UInt64
    package var running: Bool
    /// The last failure (`shortDescription: message`), cleared by the next successful step.
    package var lastError: String?
    /// Consecutive failed steps (0 while healthy).
    package var failures: Int
    /// Failed steps since start.
    package var failuresTotal: UInt64
    /// ``Follower/statusDetail``.
    package var detail: String?
    /// Why the follower was not started (it crashed the process at its previous starts).
    package var parked: String?

    /// Records committed and not yet durable in the follower's store.
    package var lag: UInt64 {
        guard let durableSeq else { return 0 }
        return journalLastSeq > durableSeq ? journalLastSeq - durableSeq : 0
    }

    /// `inbox lag 0` or the follower's own detail, plus the last error while failing.
    package var summary: String {
        if let parked { return "\(name) parked (\(parked))" }
        var text = detail ?? (durableSeq == nil ? name : "\(name) lag \(lag)")
        if failures > 0, let lastError { text += " (failing: \(lastError))" }
        return text
    }
}

/// A follower's health changed: its first failed step after healthy ones, or its first
/// successful step after failures. A failing follower is never fatal: its runner retries with
/// backoff (parked at the longest delay) while ingest and the other followers go on; these
/// transitions are what the process logs, once each, instead of one line per retry.
///
/// `Sendable`: a value.
package enum FollowerHealthChange: Sendable, Equatable {
    case failing(follower: String, error: String)
    case recovered(follower: String, failedSteps: Int)
}

/// The followers of one group as each runner sees the others: their durable seqs, and a way
/// to wake those that wait for them to advance (``FollowerNext/othersReach(_:)``). A runner
/// announces after a step that advanced its own durable seq; nothing here polls.
///
/// `Sendable`: the members are behind a lock; their closures are `@Sendable`.
package final class ProgressBoard: Sendable {
    private struct Member {
        var id: Int
        var durable: @Sendable () -> UInt64?
        var progressed: @Sendable () -> Void
    }
    private let members = Locked<[Member]>([])
    /// The records the members decoded: each is decoded once for all of them.
    package let records: DecodedRecords

    /// `records`: the group's window of decoded records; a runner alone (the default board)
    /// keeps none.
    package init(records: DecodedRecords = .unshared) { self.records = records }

    /// Adds a runner; returns its id. The closures must not hold the runner (the group holds
    /// the board through every runner: a runner held here would never be freed).
    func join(durable: @escaping @Sendable () -> UInt64?, progressed: @escaping @Sendable () -> Void) -> Int {
        members.withLock { members in
            let id = members.count
            members.append(Member(id: id, durable: durable, progressed: progressed))
            return id
        }
    }

    /// The lowest durable seq of the members other than `id`; `nil` when none holds records.
    func othersDurable(except id: Int) -> UInt64? {
        let others = members.withLock { $0.filter { $0.id != id }.map(\.durable) }
        return others.compactMap { $0() }.min()
    }

    /// Wakes the members other than `id` that wait for the others' progress.
    func announce(from id: Int) {
        let others = members.withLock { $0.filter { $0.id != id }.map(\.progressed) }
        for progressed in others { progressed() }
    }
}

/// Runs one ``Follower`` on a thread of its own: steps it, sleeps on the journal's
/// ``CommitFeed`` (or a ``Wakeup``) when it is caught up, backs off with jitter when a step
/// fails, and keeps its status. Every follower gets the same runner, so none can forget the
/// stop check, poll on a timer, or spin on a failing disk.
///
/// `Sendable`: the thread handle and status are behind a lock; the stop flag is atomic.
package final class FollowerRunner: Sendable {
    package let follower: any Follower
    private let commits: CommitFeed
    private let backoff: Backoff
    private let niceness: Int32
    private let wakeup = Wakeup()
    /// Shared with the closures the follower and the commit feed hold.
    private final class Flags: Sendable {
        /// Set by ``FollowerRunner/wake()`` (and the follower's own wake closure): ends any
        /// wait, unlike a commit.
        let poked = Atomic<Bool>(false)
        /// True only while the runner waits for a commit: commits wake nothing else, so a
        /// follower's timed sleep or failure backoff is not cut short by ingest.
        let wantsCommits = Atomic<Bool>(false)
        /// True only while the runner waits for the others' progress
        /// (``FollowerNext/othersReach(_:)``): their progress wakes nothing else.
        let wantsProgress = Atomic<Bool>(false)
        let commitWakeups = Atomic<Int>(0)
        /// Checks of the others' progress that found them short and went back to waiting.
        let othersShort = Atomic<Int>(0)
    }
    private let flags = Flags()
    private let stopping = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    /// Signalled by the thread as it ends; `stop(deadline:)` waits on it.
    private let exited = Wakeup()
    private struct Control {
        var thread: pthread_t?
        var status: FollowerStatus
        /// Steps taken since start (tests and the idle bench read it).
        var steps: UInt64 = 0
        /// What the thread is blocked on now; nil while it steps.
        var waiting: RunnerSchedule.Wait?
    }
    private let control: Locked<Control>
    private let board: ProgressBoard
    private let boardID: Int
    private let healthChanged: @Sendable (FollowerHealthChange) -> Void

    /// - Parameters:
    ///   - commits: the feed that announces durable records (the writer's, in pushspoold).
    ///   - niceness: > 0 lowers the thread's priority, so that under a burst a follower lags a
    ///     little instead of taking a core from ingest. A follower's own
    ///     ``Follower/threadNiceness`` takes precedence.
    ///   - board: shared by the runners of one group (``FollowerGroup`` makes it); a runner
    ///     alone has no others to wait for.
    ///   - healthChanged: called on the runner's thread, outside its lock, when the follower
    ///     starts failing or recovers.
    package init(_ follower: any Follower, commits: CommitFeed, backoff: Backoff = Backoff(), niceness: Int32 = 10,
                 board: ProgressBoard = ProgressBoard(),
                 healthChanged: @escaping @Sendable (FollowerHealthChange) -> Void = { _ in }) {
        self.follower = follower
        self.healthChanged = healthChanged
        self.commits = commits
        self.backoff = backoff
        self.niceness = follower.threadNiceness ?? niceness
        control = Locked(Control(status: FollowerStatus(name: follower.name, durableSeq: follower.durableSeq(),
                                                        journalLastSeq: commits.lastSeq, running: false, lastError: nil,
                                                        failures: 0, failuresTotal: 0, detail: follower.statusDetail)))
        let wakeup = wakeup, flags = flags
        self.board = board
        boardID = board.join(durable: { [follower] in follower.durableSeq() }, progressed: {
            if flags.wantsProgress.load(ordering: .sequentiallyConsistent) { wakeup.signal() }
        })
        follower.attached(wake: {
            flags.poked.store(true, ordering: .releasing)
            wakeup.signal()
        })
    }

    package var name: String { follower.name }

    /// A fresh snapshot: the follower's durable seq and detail now, the journal's last seq as announced.
    package var status: FollowerStatus {
        let durable = follower.durableSeq()
        let detail = follower.statusDetail
        let last = commits.lastSeq
        return control.withLock { control in
            control.status.durableSeq = durable
            control.status.detail = detail
            control.status.journalLastSeq = max(last, durable ?? 0)
            return control.status
        }
    }

    /// Steps taken since start.
    package var steps: UInt64 { control.withLock { $0.steps } }

    /// What the thread is blocked on now (nil while it steps or before it started): a runner
    /// seen in `.commitAfter(seq, atMost: nil)` takes no step until a commit past `seq`, a
    /// ``wake()`` or a stop — which is how tests see an idle runner without a sleep.
    package var waiting: RunnerSchedule.Wait? { control.withLock { $0.waiting } }

    /// Wakeups the commit feed has sent this runner: only while it waits for a commit, never
    /// in a backoff or a timed sleep.
    package var commitWakeups: Int { flags.commitWakeups.load(ordering: .relaxed) }
    /// How often, while waiting for the others' progress, a check found them still short and
    /// the runner went back to waiting (a test's signal that an announcement was looked at).
    package var othersShortChecks: Int { flags.othersShort.load(ordering: .acquiring) }

    /// Starts the thread; a second call does nothing. Throws when the thread cannot be made.
    package func start() throws(SystemError) {
        try control.withLock { control throws(SystemError) in
            guard control.thread == nil, control.status.parked == nil, !stopping.load(ordering: .acquiring) else { return }
            control.thread = try PosixThread.spawn(name: "follow-" + name, niceness: niceness) { [self] in run() }
            control.status.running = true
        }
    }

    /// Keeps the follower from starting (before ``start()``): its status says `reason`, its
    /// durable seq still holds retention's floor.
    package func park(reason: String) {
        control.withLock { $0.status.parked = reason }
    }

    /// Makes a waiting step happen now (an acknowledgement arrived, a retry was requested),
    /// also one sleeping out a backoff or a timed wait.
    package func wake() {
        flags.poked.store(true, ordering: .releasing)
        wakeup.signal()
    }

    package var stopRequested: Bool { stopping.load(ordering: .acquiring) }

    /// Asks the thread to stop after its current step, without waiting for it.
    package func requestStop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        follower.stopRequested()
        wakeup.signal()
    }

    /// Asks the thread to stop after its current step and waits for it until `deadline`
    /// (monotonic nanoseconds; `nil` = as long as it takes). Returns false when the thread was
    /// still running at the deadline (it is left to end on its own; the process is exiting).
    @discardableResult
    package func stop(deadline: UInt64? = nil) -> Bool {
        requestStop()
        guard let thread = control.withLock({ $0.thread }) else { return true }
        guard pthread_self() != thread else { return false }
        if let deadline {
            while !finished.load(ordering: .acquiring) {
                let now = Posix.monotonicNanos()
                if now >= deadline { return false }
                exited.wait(timeout: .nanoseconds(Int64(clamping: deadline - now)))
            }
            exited.signal()  // passed on: another stop may be waiting too
        }
        pthread_join(thread, nil)
        control.withLock { control in
            control.thread = nil
            control.status.running = false
        }
        return true
    }

    private func run() {
        // A crash signal on this thread names the follower, so the next start can tell which
        // one crashed the process and park it after repeated crashes.
        Posix.setCrashTag("follower " + follower.name)
        let wakeup = wakeup, flags = flags
        let token = commits.subscribe {
            if flags.wantsCommits.load(ordering: .acquiring) {
                flags.commitWakeups.add(1, ordering: .relaxed)
                wakeup.signal()
            }
        }
        defer {
            commits.unsubscribe(token)
            follower.finish()
            finished.store(true, ordering: .releasing)
            exited.signal()
        }
        let stopRequested: @Sendable () -> Bool = { [self] in self.stopRequested }
        let board = board, boardID = boardID
        let othersDurable: @Sendable () -> UInt64? = { board.othersDurable(except: boardID) }
        var announced = follower.durableSeq()
        var schedule = RunnerSchedule(backoff: backoff)
        while !stopRequested() {
            let context = FollowerContext(journalLastSeq: commits.lastSeq, stopRequested: stopRequested, othersDurable: othersDurable,
                                          announcedByTheWriter: commits.speaksForTheJournal, records: board.records)
            flags.poked.store(false, ordering: .releasing)
            let wait: RunnerSchedule.Wait
            do {
                let next = try follower.step(context)
                let failedBefore = control.withLock { control -> Int in
                    control.steps += 1
                    defer {
                        control.status.failures = 0
                        control.status.lastError = nil
                    }
                    return control.status.failures
                }
                if failedBefore > 0 { healthChanged(.recovered(follower: follower.name, failedSteps: failedBefore)) }
                // After every successful step, not only those that applied records: an
                // exporter's durable seq moves with the PubAcks whose arrival woke the step.
                let durable = follower.durableSeq()
                if let durable, announced.map({ durable > $0 }) ?? true {
                    announced = durable
                    board.announce(from: boardID)
                }
                wait = schedule.after(next, journalLastSeq: commits.lastSeq)
            } catch {
                let text = "\(error.shortDescription): \(error.message)"
                let failures = control.withLock { control -> Int in
                    control.steps += 1
                    control.status.failures += 1
                    control.status.failuresTotal += 1
                    control.status.lastError = text
                    return control.status.failures
                }
                if failures == 1 { healthChanged(.failing(follower: follower.name, error: text)) }
                wait = schedule.afterFailure(failures: failures)
            }
            perform(wait, othersDurable: othersDurable)
        }
    }

    /// Blocks for `wait`, published in ``waiting`` meanwhile.
    private func perform(_ wait: RunnerSchedule.Wait, othersDurable: @Sendable () -> UInt64?) {
        guard wait != .none else { return }
        control.withLock { $0.waiting = wait }
        defer { control.withLock { $0.waiting = nil } }
        switch wait {
        case .none:
            return
        case .backoff(let delay):
            sleep(for: delay)
        case .commitAfter(let seq, let atMost):
            // Armed before the check, so a commit after it signals the wakeup.
            flags.wantsCommits.store(true, ordering: .releasing)
            if commits.lastSeq <= seq, !flags.poked.load(ordering: .acquiring) { wakeup.wait(timeout: atMost) }
            flags.wantsCommits.store(false, ordering: .releasing)
        case .sleep(let atMost):
            sleep(for: atMost)
        case .othersReach(let seq):
            waitForOthers(toReach: seq, othersDurable: othersDurable)
        }
    }

    /// Blocks until the other followers' lowest durable seq is `seq` or more (or none holds
    /// records), a ``wake()``, or a stop. Their progress is announced, so the condition is
    /// checked once per announcement and never on a timer.
    private func waitForOthers(toReach seq: UInt64, othersDurable: @Sendable () -> UInt64?) {
        // Armed before the check, so an announcement after it signals the wakeup.
        flags.wantsProgress.store(true, ordering: .sequentiallyConsistent)
        defer { flags.wantsProgress.store(false, ordering: .sequentiallyConsistent) }
        while !stopRequested, !flags.poked.load(ordering: .acquiring) {
            if let others = othersDurable(), others < seq {
                flags.othersShort.add(1, ordering: .releasing)
                wakeup.wait(timeout: nil)
            } else {
                return
            }
        }
    }

    /// Sleeps `duration` (`nil` = until woken), ending early only for ``wake()`` or a stop:
    /// commits do not wake a follower here.
    private func sleep(for duration: Duration?) {
        let deadline = duration.map { Posix.monotonicNanos() &+ $0.clampedUInt64Nanoseconds }
        while !stopRequested, !flags.poked.load(ordering: .acquiring) {
            var remaining: Duration?
            if let deadline {
                let now = Posix.monotonicNanos()
                guard now < deadline else { return }
                remaining = .nanoseconds(Int64(clamping: deadline - now))
            }
            wakeup.wait(timeout: remaining)
        }
    }
}

/// The followers of one process, in the order they start; they stop in reverse. Retention's
/// floor and the STATUS= words are derived from this list, so a follower cannot be left out
/// of either. One ``Service`` of the process's ``ServiceGroup``.
///
/// `Sendable`: the list is fixed at init.
package final class FollowerGroup: Service, Sendable {
    package let runners: [FollowerRunner]

    /// The records the group's followers decoded, each once (``DecodedRecords``).
    package let records: DecodedRecords

    /// - Parameter records: the group's window of decoded records, handed to every
    ///   follower's steps (``FollowerContext/records``).
    package init(_ followers: [any Follower], commits: CommitFeed, backoff: Backoff = Backoff(), niceness: Int32 = 10,
                 records: DecodedRecords = DecodedRecords(),
                 healthChanged: @escaping @Sendable (FollowerHealthChange) -> Void = { _ in }) {
        let board = ProgressBoard(records: records)
        self.records = records
        runners = followers.map {
            FollowerRunner($0, commits: commits, backoff: backoff, niceness: niceness, board: board, healthChanged: healthChanged)
        }
    }

    package func runner(named name: String) -> FollowerRunner? { runners.first { $0.name == name } }

    package var serviceName: String { "followers" }

    /// Followers do not end by themselves: a failing one backs off or parks and says so.
    package func start(ending: ServiceEnding) throws(ServiceError) { try start() }

    /// Asks every runner to stop after its current step, without waiting: an outbox POST in
    /// flight is abandoned while the services after the followers stop.
    package func requestStop() {
        for runner in runners { runner.requestStop() }
    }

    /// Starts every runner in order; on a failure, stops those started and throws.
    package func start() throws(ServiceError) {
        for (index, runner) in runners.enumerated() {
            do throws(SystemError) {
                try runner.start()
            } catch {
                for started in runners[..<index].reversed() { started.stop() }
                throw ServiceError(service: "follower \(runner.name)", message: "\(error)", errno: error.errno)
            }
        }
    }

    package func stop(deadline: UInt64) -> Bool { stop(deadline: Optional(deadline)).isEmpty }

    /// Stops the runners in reverse order, all within `deadline` (monotonic nanoseconds).
    /// Returns the names of those still running at the deadline.
    @discardableResult
    package func stop(deadline: UInt64? = nil) -> [String] {
        // All at once, so that the slowest step bounds the stop, not the sum of them.
        for runner in runners { runner.requestStop() }
        return runners.reversed().compactMap { $0.stop(deadline: deadline) ? nil : $0.name }
    }

    /// The lowest seq a registered follower still needs: retention keeps every record above it.
    /// `nil` = no follower holds records.
    package func retentionFloor() -> UInt64? {
        runners.compactMap { $0.follower.durableSeq() }.min()
    }

    package var statuses: [FollowerStatus] { runners.map(\.status) }

    /// `; inbox lag 0; outbox 0 pending, 0 parked; export lag 0 (connected)` for STATUS=.
    package var statusSuffix: String {
        statuses.filter { $0.durableSeq != nil || $0.detail != nil || $0.failures > 0 || $0.parked != nil }.map { "; " + $0.summary }.joined()
    }
}
