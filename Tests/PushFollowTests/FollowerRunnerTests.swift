@preconcurrency import Glibc
import Dispatch
import Testing
import PushFollow
import PushJournal
import PushSystem
import TestSupport

/// A follower over an in-memory "journal" (the feed's last seq): applies up to `batch` records
/// a step, optionally failing the first `failFirst` steps.
private final class CountingFollower: Follower, Sendable {
    let name: String
    let applied = Locked<UInt64>(0)
    let stepsTaken = Locked<Int>(0)
    let failuresLeft: Locked<Int>
    let batch: UInt64
    let finished = Locked(false)
    /// What the last step was told of the writer's announcement.
    let lastAnnounced = Locked<UInt64??>(nil)

    init(name: String = "count", batch: UInt64 = 10, failFirst: Int = 0) {
        self.name = name
        self.batch = batch
        failuresLeft = Locked(failFirst)
    }

    func durableSeq() -> UInt64? { applied.withLock { $0 } }

    func step(_ context: FollowerContext) throws(FollowerError) -> FollowerNext {
        stepsTaken.withLock { $0 += 1 }
        lastAnnounced.withLock { $0 = .some(context.announcedLastSeq) }
        if failuresLeft.withLock({ left -> Bool in
            guard left > 0 else { return false }
            left -= 1
            return true
        }) {
            throw FollowerError("test_failure", "injected")
        }
        let now = applied.withLock { applied -> UInt64 in
            applied = min(context.journalLastSeq, applied + batch)
            return applied
        }
        return now < context.journalLastSeq ? .again : .commitAfter(now, atMost: nil)
    }

    func finish() { finished.withLock { $0 = true } }
}

private func isBackoff(_ wait: RunnerSchedule.Wait) -> Bool {
    if case .backoff = wait { return true }
    return false
}

private func sleepsAtLeast(_ wait: RunnerSchedule.Wait, _ least: Duration) -> Bool {
    if case .sleep(let atMost?) = wait { return atMost >= least }
    return false
}

private func waitFor(_ seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    eventually(within: seconds, condition)
}

@Suite struct FollowerRunnerTests {
    @Test func appliesEveryCommitAndSleepsWhenIdle() throws {
        let feed = CommitFeed(lastSeq: 25)
        let follower = CountingFollower()
        let runner = FollowerRunner(follower, commits: feed)
        try runner.start()
        #expect(waitFor { follower.durableSeq() == 25 })
        // Idle: asleep for a commit past 25 with no timer, so no step happens without one (a
        // polling runner would wait with a timeout, or not at all).
        #expect(waitFor { runner.waiting == .commitAfter(25, atMost: nil) })
        feed.announce(31)
        #expect(waitFor { follower.durableSeq() == 31 })
        #expect(runner.status.lag == 0)
        #expect(runner.stop(deadline: Posix.monotonicNanos() + 5_000_000_000))
        #expect(follower.finished.withLock { $0 })
        #expect(runner.status.running == false)
    }

    /// A step may bound its journal reader by the last seq only when the feed is a writer's:
    /// a feed made to wake a follower says nothing of what the journal holds.
    @Test func onlyAWritersFeedAnnouncesTheJournalsLastSeq() throws {
        for (feed, expected) in [(CommitFeed(lastSeq: 12, speaksForTheJournal: true), UInt64?.some(12)), (CommitFeed(lastSeq: 12), nil)] {
            let follower = CountingFollower()
            let runner = FollowerRunner(follower, commits: feed)
            try runner.start()
            #expect(waitFor { follower.durableSeq() == 12 })
            #expect(follower.lastAnnounced.withLock { $0 } == .some(expected))
            #expect(runner.stop(deadline: Posix.monotonicNanos() + 5_000_000_000))
        }
    }

    @Test func aCommitBetweenStepAndWaitIsNotMissed() throws {
        // Many small commits, each announced while the follower may be between its step and
        // its wait: every one must be applied without any timer to rescue it.
        let feed = CommitFeed()
        let follower = CountingFollower(batch: 1)
        let runner = FollowerRunner(follower, commits: feed, niceness: 0)
        try runner.start()
        for seq in 1...2_000 as ClosedRange<UInt64> {
            feed.announce(seq)
            if seq % 97 == 0 { usleep(200) } // why: the producer's pacing, so commits land while the follower is mid-step
        }
        #expect(waitFor { follower.durableSeq() == 2_000 })
        runner.stop()
    }

    @Test func failuresBackOffAndClearOnSuccess() throws {
        let feed = CommitFeed(lastSeq: 5)
        let follower = CountingFollower(failFirst: 3)
        let runner = FollowerRunner(follower, commits: feed, backoff: Backoff(base: .milliseconds(20), ceiling: .milliseconds(50)))
        try runner.start()
        #expect(waitFor { follower.durableSeq() == 5 })
        let status = runner.status
        #expect(status.failures == 0)
        #expect(status.failuresTotal == 3)
        #expect(status.lastError == nil)
        runner.stop()
    }

    /// A failing follower is logged once when it starts failing and once when it recovers,
    /// not once per retry (a follower failing for hours would flood journald).
    @Test func healthChangesAreReportedOncePerTransition() throws {
        let feed = CommitFeed(lastSeq: 5)
        let follower = CountingFollower(failFirst: 3)
        let changes = Locked<[FollowerHealthChange]>([])
        let runner = FollowerRunner(follower, commits: feed, backoff: Backoff(base: .milliseconds(1), ceiling: .milliseconds(2)),
                                    healthChanged: { change in changes.withLock { $0.append(change) } })
        try runner.start()
        #expect(waitFor { follower.durableSeq() == 5 })
        runner.stop()
        #expect(changes.withLock { $0 } == [.failing(follower: "count", error: "test_failure: injected"),
                                            .recovered(follower: "count", failedSteps: 3)])
    }

    @Test func aFailingFollowerShowsItsErrorAndStopsPromptly() throws {
        let feed = CommitFeed(lastSeq: 5)
        let follower = CountingFollower(failFirst: .max)
        let runner = FollowerRunner(follower, commits: feed, backoff: Backoff(base: .seconds(30), ceiling: .seconds(30)))
        try runner.start()
        #expect(waitFor { runner.status.failures >= 1 })
        #expect(runner.status.lastError == "test_failure: injected")
        #expect(runner.status.summary.contains("failing: test_failure"))
        // Commits do not cut a backoff short (a failing follower would retry at the ingest rate):
        // the feed sends a backing-off runner no wakeup at all.
        #expect(waitFor { runner.waiting.map(isBackoff) == true })
        for seq in 6...50 as ClosedRange<UInt64> { feed.announce(seq) }
        #expect(runner.commitWakeups == 0)
        #expect(runner.waiting.map(isBackoff) == true)
        #expect(follower.stepsTaken.withLock { $0 } == 1)
        // In a 30 s backoff: the stop wakes it.
        let started = Posix.monotonicNanos()
        #expect(runner.stop(deadline: started + 5_000_000_000))
        #expect(Posix.monotonicNanos() - started < 2_000_000_000)
        #expect(follower.stepsTaken.withLock { $0 } == 1)
    }

    @Test func retentionFloorIsTheLowestRegisteredFollower() throws {
        let feed = CommitFeed(lastSeq: 100)
        let fast = CountingFollower(name: "fast", batch: 100)
        let slow = CountingFollower(name: "slow", batch: 100, failFirst: .max)
        let group = FollowerGroup([fast, slow], commits: feed, backoff: Backoff(base: .seconds(30), ceiling: .seconds(30)))
        try group.start()
        #expect(waitFor { fast.durableSeq() == 100 })
        // The failing follower has applied nothing: retention must keep everything.
        #expect(group.retentionFloor() == 0)
        #expect(group.statusSuffix.contains("fast lag 0"))
        #expect(group.statusSuffix.contains("slow lag 100"))
        #expect(group.stop(deadline: Posix.monotonicNanos() + 5_000_000_000).isEmpty)
    }

    @Test func aStepThatOutlivesTheDeadlineIsReported() throws {
        final class Stuck: Follower, Sendable {
            let name = "stuck"
            let entered = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            func durableSeq() -> UInt64? { 0 }
            func step(_ context: FollowerContext) throws(FollowerError) -> FollowerNext {
                entered.signal()
                release.wait()
                return .wake(atMost: nil)
            }
        }
        let stuck = Stuck()
        let group = FollowerGroup([stuck], commits: CommitFeed())
        try group.start()
        stuck.entered.wait()
        #expect(group.stop(deadline: Posix.monotonicNanos() + 200_000_000) == ["stuck"])
        stuck.release.signal()
        #expect(group.runners[0].stop())
    }

    @Test(arguments: [1, 2, 5, 40, 1_000])
    func backoffDoublesWithinItsJitterAndNeverExceedsTheCeiling(failures: Int) {
        let backoff = Backoff(base: .milliseconds(100), ceiling: .seconds(30))
        let low = backoff.delay(failures: failures, unit: 0)
        let high = backoff.delay(failures: failures, unit: 0.999_999)
        let full = min(Duration.milliseconds(100) * (1 << min(failures - 1, 20)), .seconds(30))
        #expect(low == full / 2)
        #expect(high <= full && high > full * 0.99)
        // Hostile settings never trap.
        _ = Backoff(base: .seconds(Int64.max / 2), ceiling: .seconds(Int64.max / 2)).delay(failures: 1_000)
    }
}

@Suite struct PeriodicFollowerTests {
    @Test func runsOnceAtStartThenOnlyWhenWokenOrDue() throws {
        let follower = PeriodicFollower(name: "retention", interval: .seconds(3600)) {}
        let runner = FollowerRunner(follower, commits: CommitFeed())
        try runner.start()
        #expect(waitFor { follower.passes == 1 })
        // Asleep until the next pass is due, about an hour away.
        #expect(waitFor { runner.waiting.map { sleepsAtLeast($0, .seconds(3_000)) } == true })
        #expect(follower.passes == 1)
        runner.wake()
        #expect(waitFor { follower.passes == 2 })
        #expect(runner.status.durableSeq == nil)
        #expect(runner.status.summary == "retention")
        runner.stop()
    }
}

@Suite struct RunnerWaitTests {
    @Test func commitsDoNotShortenATimedSleep() throws {
        let feed = CommitFeed()
        let follower = PeriodicFollower(name: "retention", interval: .seconds(3600)) {}
        let runner = FollowerRunner(follower, commits: feed)
        try runner.start()
        #expect(waitFor { runner.waiting.map { sleepsAtLeast($0, .seconds(3_000)) } == true })
        for seq in 1...200 as ClosedRange<UInt64> { feed.announce(seq) }
        #expect(runner.commitWakeups == 0)
        #expect(follower.passes == 1)
        runner.wake()
        #expect(waitFor { follower.passes == 2 })
        runner.stop()
    }

    /// A follower that keeps asking for a commit past a seq the journal has already passed
    /// makes no progress: the runner backs off instead of stepping it in a tight loop.
    @Test func aFollowerThatMakesNoProgressIsBackedOff() throws {
        final class Stalled: Follower, Sendable {
            let name = "stalled"
            let steps = Locked(0)
            func durableSeq() -> UInt64? { 0 }
            func step(_ context: FollowerContext) throws(FollowerError) -> FollowerNext {
                steps.withLock { $0 += 1 }
                return .commitAfter(0, atMost: nil)
            }
        }
        let stalled = Stalled()
        let runner = FollowerRunner(stalled, commits: CommitFeed(lastSeq: 5), backoff: Backoff(base: .milliseconds(50), ceiling: .seconds(1)))
        try runner.start()
        // The first repeat of seq 0 is stepped again at once, the second backs off
        // (RunnerScheduleTests has the whole sequence).
        #expect(waitFor { runner.waiting.map(isBackoff) == true })
        #expect(stalled.steps.withLock { $0 } == 2)
        #expect(runner.stop(deadline: Posix.monotonicNanos() + 5_000_000_000))
    }
}

/// The runner's scheduling rules, as values: no thread, no clock.
@Suite struct RunnerScheduleTests {
    let backoff = Backoff(base: .milliseconds(50), ceiling: .seconds(1))

    @Test func eachAnswerBecomesItsWait() {
        var schedule = RunnerSchedule(backoff: backoff)
        #expect(schedule.after(.again, journalLastSeq: 9) == .none)
        #expect(schedule.after(.commitAfter(9, atMost: nil), journalLastSeq: 9) == .commitAfter(9, atMost: nil))
        #expect(schedule.after(.commitAfter(9, atMost: .seconds(2)), journalLastSeq: 9) == .commitAfter(9, atMost: .seconds(2)))
        #expect(schedule.after(.wake(atMost: .seconds(60)), journalLastSeq: 9) == .sleep(atMost: .seconds(60)))
        #expect(schedule.after(.wake(atMost: nil), journalLastSeq: 9) == .sleep(atMost: nil))
        #expect(schedule.after(.othersReach(4), journalLastSeq: 9) == .othersReach(4))
    }

    @Test func aFailureBacksOffByItsCountInARow() {
        let schedule = RunnerSchedule(backoff: backoff)
        #expect(schedule.afterFailure(failures: 1, unit: 0) == .backoff(.milliseconds(25)))
        #expect(schedule.afterFailure(failures: 2, unit: 0) == .backoff(.milliseconds(50)))
        #expect(schedule.afterFailure(failures: 30, unit: 0) == .backoff(.milliseconds(500)))
    }

    /// A follower that keeps asking for a commit the journal has passed: stepped again once
    /// (the record may have come during the step), then backed off longer each time, and
    /// reset by any other answer.
    @Test func aFollowerThatMakesNoProgressBacksOffLongerEachTime() {
        var schedule = RunnerSchedule(backoff: backoff)
        var waits: [RunnerSchedule.Wait] = []
        for _ in 0..<7 { waits.append(schedule.after(.commitAfter(3, atMost: nil), journalLastSeq: 5, unit: 0)) }
        #expect(waits == [.none, .backoff(.milliseconds(25)), .backoff(.milliseconds(50)), .backoff(.milliseconds(100)),
                          .backoff(.milliseconds(200)), .backoff(.milliseconds(400)), .backoff(.milliseconds(500))])
        // Progress (a later seq asked) starts over.
        #expect(schedule.after(.commitAfter(4, atMost: nil), journalLastSeq: 5, unit: 0) == .none)
        #expect(schedule.after(.commitAfter(4, atMost: nil), journalLastSeq: 5, unit: 0) == .backoff(.milliseconds(25)))
        #expect(schedule.after(.again, journalLastSeq: 5, unit: 0) == .none)
        #expect(schedule.after(.commitAfter(4, atMost: nil), journalLastSeq: 5, unit: 0) == .none)
        // Caught up is not stalled.
        #expect(schedule.after(.commitAfter(5, atMost: nil), journalLastSeq: 5, unit: 0) == .commitAfter(5, atMost: nil))
    }
}
