import PushSystem
import PushJournal

/// Where the time of each exported record goes, stage by stage (CLOCK_MONOTONIC nanoseconds):
/// the commit announced by the journal writer, the start of the exporter step that read it,
/// the read, the return of the publish call, the PubAck callback and the move of the
/// acknowledged cursor over it. For the benchmark's breakdown (`pushspool-bench export`); the
/// daemon passes none, and an exporter without a trace takes no timestamps.
///
/// `Sendable`: behind a lock.
package final class ExportTrace: Sendable {
    /// One record's stamps; 0 = not reached (yet).
    package struct Stamps: Sendable, Equatable {
        package var committed: UInt64 = 0
        package var stepStarted: UInt64 = 0
        package var read: UInt64 = 0
        package var published: UInt64 = 0
        package var acked: UInt64 = 0
        package var cursor: UInt64 = 0
    }

    private struct State {
        var stamps: [UInt64: Stamps] = [:]
        var lastCommitted: UInt64 = 0
    }
    private let state = Locked(State())

    package init() {}

    /// Stamps every seq a commit of `feed` announces (call before records are appended).
    /// Returns the subscription token for `feed.unsubscribe`.
    @discardableResult
    package func observe(_ feed: CommitFeed) -> UInt64 {
        state.withLock { $0.lastCommitted = feed.lastSeq }
        return feed.subscribe { [self] in committed(through: feed.lastSeq, at: Posix.monotonicNanos()) }
    }

    func committed(through seq: UInt64, at now: UInt64) {
        state.withLock { state in
            guard seq > state.lastCommitted else { return }
            for s in (state.lastCommitted + 1)...seq { state.stamps[s, default: Stamps()].committed = now }
            state.lastCommitted = seq
        }
    }

    func read(_ seq: UInt64, stepStarted: UInt64, at now: UInt64) {
        state.withLock { state in
            state.stamps[seq, default: Stamps()].stepStarted = stepStarted
            state.stamps[seq, default: Stamps()].read = now
        }
    }

    func published(_ seq: UInt64, at now: UInt64) { state.withLock { $0.stamps[seq, default: Stamps()].published = now } }

    func acked(_ seq: UInt64, at now: UInt64) { state.withLock { $0.stamps[seq, default: Stamps()].acked = now } }

    /// The cursor moved from `from` (exclusive) through `through`.
    func cursorMoved(from: UInt64, through: UInt64, at now: UInt64) {
        guard through > from else { return }
        state.withLock { state in
            for s in (from + 1)...through { state.stamps[s, default: Stamps()].cursor = now }
        }
    }

    /// The stamps taken so far, by seq.
    package var stamps: [UInt64: Stamps] { state.withLock { $0.stamps } }

    /// The stages, in path order, each as nanoseconds per record (records that passed both
    /// ends only; a resent record counts its last publish).
    package var stages: [(name: String, nanos: [UInt64])] {
        let all = stamps.values
        func span(_ from: (Stamps) -> UInt64, _ to: (Stamps) -> UInt64) -> [UInt64] {
            all.compactMap { s in
                let a = from(s), b = to(s)
                guard a > 0, b > 0 else { return nil }
                return b > a ? b - a : 0
            }
        }
        // A record committed while a step was already reading is picked up by that step:
        // its wait for the step is 0, and its read is timed from its commit.
        let runs = { (s: Stamps) in max(s.committed, s.stepStarted) }
        return [
            ("commit announced -> exporter step runs", span(\.committed, runs)),
            ("step runs -> record read", span(runs, \.read)),
            ("record read -> publish call returned", span(\.read, \.published)),
            ("publish returned -> PubAck callback", span(\.published, \.acked)),
            ("PubAck callback -> cursor moved", span(\.acked, \.cursor)),
            ("commit announced -> cursor moved", span(\.committed, \.cursor)),
        ]
    }
}
