/// What a ``FollowerRunner`` does between two steps: its scheduling decision, kept apart from
/// the thread that carries it out, so the rules are tested with plain values and no clock.
///
/// A step's answer (``FollowerNext``) or failure goes in; the wait comes out. The runner then
/// blocks on its wakeup for that wait and publishes it (``FollowerRunner/waiting``), which is
/// how a test knows a runner is asleep rather than guessing after a sleep of its own.
///
/// `Sendable`: a value.
package struct RunnerSchedule: Sendable, Equatable {
    /// How the runner waits before its next step.
    package enum Wait: Sendable, Equatable {
        /// Step again at once.
        case none
        /// After a failed step, or a follower that asks again for a commit the journal has
        /// already passed: only ``FollowerRunner/wake()`` or a stop ends it early; commits do
        /// not (a failing follower would retry at the ingest rate).
        case backoff(Duration)
        /// Until the journal commits past the seq, a wake, or `atMost` (`nil`: no timer).
        case commitAfter(UInt64, atMost: Duration?)
        /// Until a wake or `atMost` (`nil`: no timer), whatever the journal does.
        case sleep(atMost: Duration?)
        /// Until the group's other followers that hold records are durable to the seq.
        case othersReach(UInt64)
    }

    package let backoff: Backoff
    /// The seq a follower asked a commit past while the journal was already beyond it, and
    /// how many times in a row since.
    private var stalledAt: UInt64?
    private var stalls = 0

    package init(backoff: Backoff) {
        self.backoff = backoff
    }

    /// After the `failures`-th failed step in a row (≥ 1). `unit` picks the point in the
    /// backoff's jitter range (see ``Backoff/delay(failures:unit:)``).
    package func afterFailure(failures: Int, unit: Double = Double.random(in: 0..<1)) -> Wait {
        .backoff(backoff.delay(failures: failures, unit: unit))
    }

    /// After a successful step that answered `next`, with the journal's last seq then.
    package mutating func after(_ next: FollowerNext, journalLastSeq: UInt64, unit: Double = Double.random(in: 0..<1)) -> Wait {
        if case .commitAfter(let seq, _) = next, journalLastSeq > seq {
            // Asked for a commit the journal has already made: step again at once the first
            // time (the record may have been committed during the step); if the same seq comes
            // back, the follower is not making progress (a failing disk it does not report),
            // and it backs off like a failed step instead of spinning.
            if stalledAt == seq {
                stalls += 1
                return .backoff(backoff.delay(failures: stalls, unit: unit))
            }
            stalledAt = seq
            stalls = 0
            return .none
        }
        stalledAt = nil
        stalls = 0
        switch next {
        case .again: return .none
        case .commitAfter(let seq, let atMost): return .commitAfter(seq, atMost: atMost)
        case .wake(let atMost): return .sleep(atMost: atMost)
        case .othersReach(let seq): return .othersReach(seq)
        }
    }
}
