import PushSystem

/// A reader of the journal that keeps something of its own up to date: the inbox index, the
/// outbox, the export to NATS, retention, the inbox server's event hub. It only decides what
/// to do with the records; the thread, the stop, the waiting, the backoff after a failure, the
/// lag and the status are the ``FollowerRunner``'s, the same for every follower.
///
/// Durability rule, for every follower: ``durableSeq()`` may only return a seq once the effect
/// of that record and of every earlier one is durable in the follower's own store (the SQLite
/// transaction that applied it, the cursor file written after the pending files). After a
/// crash a follower starts again from there, so each record is applied at least once, and the
/// store makes re-applying it harmless. Retention never retires a record above the lowest
/// ``durableSeq()`` of the registered followers.
///
/// `Sendable`: the runner calls ``step(_:)`` on its own thread, and ``durableSeq()`` and
/// ``statusDetail`` from any thread.
package protocol Follower: AnyObject, Sendable {
    /// A short name for STATUS=, metric labels and logs: `inbox`, `outbox`, `export`.
    var name: String { get }
    /// The highest seq whose effect (and every earlier record's) is durable in this follower's
    /// store; `nil` for a follower that holds no records back (retention itself).
    func durableSeq() -> UInt64?
    /// One unit of work on the runner's thread: apply a batch, deliver what is due, publish.
    /// Returns what to wait for before the next step. Throw to have the runner back off
    /// (with jitter, growing with consecutive failures) and call again.
    func step(_ context: FollowerContext) throws(FollowerError) -> FollowerNext
    /// The niceness the runner's thread starts with; `nil` = the runner's (10 in pushspoold).
    /// A follower that sets its own niceness while it runs (the exporter) asks for 0.
    var threadNiceness: Int32? { get }
    /// Words for the STATUS= line (`outbox 3 pending, 1 parked`); `nil` = the lag says it all.
    var statusDetail: String? { get }
    /// Called once on the runner's thread after the last step, before the thread ends:
    /// flush and checkpoint what can be.
    func finish()
    /// Called once when a runner takes the follower: `wake` makes a waiting step happen now,
    /// for followers that learn of work from elsewhere than the journal (PubAcks, a directory).
    func attached(wake: @escaping @Sendable () -> Void)
    /// Called from the stopping thread as soon as a stop is requested, while a step may be
    /// running: abort what blocks (an HTTP request in flight) so the step returns promptly.
    func stopRequested()
}

extension Follower {
    package var threadNiceness: Int32? { nil }
    package var statusDetail: String? { nil }
    package func finish() {}
    package func stopRequested() {}
    package func attached(wake: @escaping @Sendable () -> Void) {}
}

/// What a follower's step can see of its runner.
///
/// `Sendable`: reads atomics and locked values.
package struct FollowerContext: Sendable {
    /// The journal's last committed seq, as announced by the writer (in process) or the
    /// committed-seq mark (across processes).
    package let journalLastSeq: UInt64
    /// ``journalLastSeq`` when it comes from the journal writer's own feed, else `nil`: the
    /// bound a follower may give its ``JournalReader`` (``JournalReader/announcedLastSeq``).
    package let announcedLastSeq: UInt64?
    /// True once the runner was asked to stop: a long step (an HTTP request, a big batch)
    /// checks it and returns early.
    package let stopRequested: @Sendable () -> Bool
    /// The lowest ``Follower/durableSeq()`` of the other followers of the runner's group
    /// (`nil` = none holds records), as ``FollowerNext/othersReach(_:)`` compares it.
    package let othersDurable: @Sendable () -> UInt64?
    /// The group's decoded records: a follower reads the journal through a ``FollowedReader``
    /// made with them, so a record the group's other followers decoded is not decoded again.
    package let records: DecodedRecords

    package init(journalLastSeq: UInt64, stopRequested: @escaping @Sendable () -> Bool,
                 othersDurable: @escaping @Sendable () -> UInt64? = { nil }, announcedByTheWriter: Bool = false,
                 records: DecodedRecords = .unshared) {
        self.journalLastSeq = journalLastSeq
        announcedLastSeq = announcedByTheWriter ? journalLastSeq : nil
        self.stopRequested = stopRequested
        self.othersDurable = othersDurable
        self.records = records
    }
}

/// What the runner waits for before the next step.
package enum FollowerNext: Sendable, Equatable {
    /// More work is ready: step again at once.
    case again
    /// Caught up: sleep until the journal commits a record past `after`, the runner is woken
    /// (``FollowerRunner/wake()``), or `atMost` has passed (`nil` = no limit: an idle follower
    /// does not wake at all).
    case commitAfter(UInt64, atMost: Duration?)
    /// Sleep until woken or `atMost` has passed, whatever the journal does (retention's
    /// interval, a connection retry).
    case wake(atMost: Duration?)
    /// Sleep until every other follower of the group that holds records has a durable seq of
    /// at least `seq` (``FollowerContext/othersDurable``), the runner is woken, or it stops.
    /// No timer: a runner whose durable seq advances after a step tells the group's runners
    /// that wait so (the eraser waiting for the index, the outbox and the exporter to pass an
    /// erasure record).
    case othersReach(UInt64)
}

/// A failed step: what happened, and the short stable text for STATUS=, metrics and logs.
///
/// `Sendable`: strings.
package struct FollowerError: Error, Sendable, CustomStringConvertible {
    /// Stable, without dynamic data: `sqlite_busy`, `journal_read`, `nats_disconnected`.
    package var shortDescription: String
    package var message: String

    package init(_ shortDescription: String, _ message: String) {
        self.shortDescription = shortDescription
        self.message = message
    }

    package var description: String { message }
}

/// Delays after consecutive failures: doubling from `base` up to `ceiling`, each drawn
/// uniformly from its upper half so that followers (and hosts) that failed together do not
/// retry in step.
///
/// `Sendable`: a value.
package struct Backoff: Sendable, Equatable {
    package var base: Duration
    package var ceiling: Duration

    package init(base: Duration = .milliseconds(100), ceiling: Duration = .seconds(30)) {
        self.base = base
        self.ceiling = ceiling
    }

    /// The delay before the next try after `failures` consecutive failures (≥ 1); `unit` in
    /// [0, 1) picks the point in the jitter range (tests pass fixed values).
    package func delay(failures: Int, unit: Double = Double.random(in: 0..<1)) -> Duration {
        let ceilingNanos = max(1, ceiling.clampedUInt64Nanoseconds)
        let shift = UInt64(clamping: max(0, min(failures - 1, 40)))
        let (scaled, overflow) = max(1, base.clampedUInt64Nanoseconds).multipliedReportingOverflow(by: 1 << shift)
        let full = overflow ? ceilingNanos : min(scaled, ceilingNanos)
        let fraction = 0.5 + 0.5 * min(max(unit, 0), 1)
        let nanos = Double(full) * fraction
        return .nanoseconds(nanos < 9.0e18 ? Int64(nanos) : Int64.max)
    }
}

/// A follower that holds no records and runs `pass` once at start and then every `interval`,
/// or at once when its runner is woken (tests): journal retention and what retires with it.
/// Sleeps between passes; never polls.
///
/// `Sendable`: the pass is `@Sendable`; the count is atomic-by-lock.
package final class PeriodicFollower: Follower, Sendable {
    package let name: String
    private let interval: Duration
    private let pass: @Sendable () -> Void
    private let count = Locked<UInt64>(0)

    package init(name: String, interval: Duration, pass: @escaping @Sendable () -> Void) {
        self.name = name
        self.interval = interval
        self.pass = pass
    }

    /// Passes run since start.
    package var passes: UInt64 { count.withLock { $0 } }

    package func durableSeq() -> UInt64? { nil }

    package func step(_ context: FollowerContext) throws(FollowerError) -> FollowerNext {
        pass()
        count.withLock { $0 += 1 }
        return .wake(atMost: interval)
    }
}
