import PushSystem

/// How the journal writer tells in-process followers that records became durable: each
/// follower's runner subscribes, and every committed batch notifies them all with the new
/// last seq. A follower that is idle therefore sleeps until a commit instead of
/// polling the journal, and starts on a record as soon as it is durable.
///
/// Across processes (pushspool-inbox) the committed-seq mark file plays this part, watched
/// with inotify.
///
/// `Sendable`: the last seq and the subscribers are behind one lock; signals go out after it
/// is released.
package final class CommitFeed: Sendable {
    private struct State {
        var lastSeq: UInt64
        var subscribers: [(id: UInt64, notify: @Sendable () -> Void)] = []
        var nextId: UInt64 = 0
    }

    private let state: Locked<State>

    /// True for the feed of a journal writer: every durable record is at or below
    /// ``lastSeq``, so a reader may stop there without looking at the files
    /// (``JournalReader/announcedLastSeq``). False for a feed made only to wake a follower
    /// (tests, pushspool-inbox's stream followers), whose ``lastSeq`` says nothing of a journal.
    package let speaksForTheJournal: Bool

    package init(lastSeq: UInt64 = 0, speaksForTheJournal: Bool = false) {
        state = Locked(State(lastSeq: lastSeq))
        self.speaksForTheJournal = speaksForTheJournal
    }

    /// The last committed seq announced.
    package var lastSeq: UInt64 { state.withLock { $0.lastSeq } }

    /// Called by the writer after each durable batch: records the seq and wakes every subscriber.
    package func announce(_ seq: UInt64) {
        let subscribers = state.withLock { state -> [@Sendable () -> Void] in
            guard seq > state.lastSeq else { return [] }
            state.lastSeq = seq
            return state.subscribers.map(\.notify)
        }
        for notify in subscribers { notify() }
    }

    /// Calls `notify` (on the writer's thread: keep it to a signal) on every later commit until
    /// `unsubscribe(_:)` with the returned token.
    package func subscribe(_ notify: @escaping @Sendable () -> Void) -> UInt64 {
        state.withLock { state in
            state.nextId += 1
            state.subscribers.append((state.nextId, notify))
            return state.nextId
        }
    }

    package func unsubscribe(_ token: UInt64) {
        state.withLock { $0.subscribers.removeAll { $0.id == token } }
    }
}
