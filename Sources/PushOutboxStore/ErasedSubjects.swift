import PushSystem

/// The users and devices whose erasure was requested in this process (or found pending at
/// its start), for the outbox to drop their deliveries before it sends another one
/// (docs/design/erasure.md, "Outbox").
///
/// The intake adds an erasure when it accepts the request, before the `erasure` record is
/// journaled, with no seq yet: then every delivery of the subject the outbox holds comes from
/// a record below the erasure record (the outbox has not read it). The outbox gives the seq
/// when it reads the record (``journaled(erasureID:seq:)``); from then on only deliveries of
/// records below it are covered: what the subject does after the request is new data.
/// Entries stay for the process's life (a few; they hold the plain id, as the intake and the
/// eraser do while an erasure is pending), so a POST that was in flight across a whole
/// erasure still finds its subject erased when it returns.
///
/// `Sendable`: the entries behind a lock.
package final class ErasedSubjects: Sendable {
    /// Who an erasure names. `Sendable` value.
    package enum Subject: Sendable, Equatable, Hashable {
        case user(String)
        case device(String)
    }

    /// One erasure. `Sendable` value.
    package struct Entry: Sendable, Equatable {
        package var erasureID: String
        package var subject: Subject
        /// The `erasure` record's seq; `nil` until it is known (every delivery of the subject
        /// is covered meanwhile).
        package var before: UInt64?

        package init(erasureID: String, subject: Subject, before: UInt64?) {
            self.erasureID = erasureID
            self.subject = subject
            self.before = before
        }
    }

    private struct State {
        var entries: [Entry] = []
        /// Bumped by every change that may cover more deliveries.
        var generation: UInt64 = 0
    }

    private let state = Locked(State())

    package init(_ entries: [Entry] = []) {
        state.withLock {
            $0.entries = entries
            $0.generation = entries.isEmpty ? 0 : 1
        }
    }

    /// Records an erasure (the intake, when it accepts a request; the daemon at start, for
    /// those still pending). A second add of the same id keeps the known seq.
    package func add(_ entry: Entry) {
        state.withLock { state in
            if let at = state.entries.firstIndex(where: { $0.erasureID == entry.erasureID }) {
                if state.entries[at].before == nil { state.entries[at].before = entry.before }
                return
            }
            state.entries.append(entry)
            state.generation &+= 1
        }
    }

    /// The `erasure` record of `erasureID` is at `seq`: the erasure covers the records below
    /// it. Unknown ids are ignored (an erasure requested before this process started and
    /// already complete: its deliveries were deleted then).
    package func journaled(erasureID: String, seq: UInt64) {
        state.withLock { state in
            guard let at = state.entries.firstIndex(where: { $0.erasureID == erasureID }), state.entries[at].before == nil else { return }
            state.entries[at].before = seq
        }
    }

    /// Changes whenever more deliveries may be covered; the outbox sweeps its files then.
    package var generation: UInt64 { state.withLock { $0.generation } }

    /// Whether nothing was ever erased (the common case: no check costs more than this).
    package var isEmpty: Bool { state.withLock { $0.entries.isEmpty } }

    package var entries: [Entry] { state.withLock { $0.entries } }

    /// Whether `delivery` belongs to an erased subject and comes from a record the erasure
    /// covers. A user's deliveries are ordered under `u:<user>`; a device's name it
    /// (`device`) or are ordered under `d:<device>` (as the eraser matches them).
    package func covers(_ delivery: OutboxDelivery) -> Bool {
        state.withLock { state in
            state.entries.contains { entry in
                if let before = entry.before, delivery.seq >= before { return false }
                // Ids are bytes: `String ==` would equate the NFC and NFD forms of two users.
                switch entry.subject {
                case .user(let id): return delivery.orderKey.utf8.elementsEqual(("u:" + id).utf8)
                case .device(let id):
                    return delivery.device.map { $0.utf8.elementsEqual(id.utf8) } ?? false || delivery.orderKey.utf8.elementsEqual(("d:" + id).utf8)
                }
            }
        }
    }
}
