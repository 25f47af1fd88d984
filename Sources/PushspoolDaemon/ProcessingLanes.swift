import Dispatch
import PushSystem

/// Runs chunks of claimed files on several serial workers at once while keeping their effects
/// in claim order.
///
/// Each chunk has two halves: `prepare` (read, hash, normalise, build the record — the CPU of a
/// burst, and independent per file) runs on whichever lane the chunk was dealt to, in parallel
/// with the other lanes; `finish` (quarantine, download or journal submission) runs only once
/// the chunk dealt before it has finished. The order is a chain of gates: a chunk waits for the
/// gate its predecessor opens, so journal sequence numbers follow claim order exactly as with
/// one queue, and an event file is never journaled before a push claimed ahead of it.
///
/// Chunks are dealt round robin, and every lane runs its chunks in the order dealt, so a chunk
/// only ever waits for one that is already running or done: no cycle, no deadlock.
///
/// `Sendable`: the dealing state (next lane, last gate) is behind a lock; the workers are serial.
final class ProcessingLanes<Prepared>: Sendable {
    private let lanes: [SerialWorker]
    private struct Dealer {
        var nextLane = 0
        /// Opened when the most recently dealt chunk has finished; nil before the first.
        var lastGate: DispatchSemaphore?
    }
    private let dealer = Locked(Dealer())

    var count: Int { lanes.count }

    /// `count` lanes (at least one).
    init(label: String, count: Int) {
        lanes = (0..<max(1, count)).map { SerialWorker(name: "\(label)-\($0)") }
    }

    /// One lane per CPU this process may run on, at most `limit`.
    static func laneCount(limit: Int) -> Int {
        max(1, min(limit, Posix.usableCPUs()))
    }

    /// Deals `items` to the next lane: `prepare` runs there on each item, then, once every
    /// chunk dealt earlier has finished, `finish` on each result in order; `done` last.
    func submit<Item: Sendable>(_ items: [Item], prepare: @escaping @Sendable (Item) -> Prepared,
                                finish: @escaping @Sendable (Prepared) -> Void, done: @escaping @Sendable () -> Void)
    where Prepared: Sendable {
        let gate = DispatchSemaphore(value: 0)
        let (lane, previous) = dealer.withLock { dealer -> (SerialWorker, DispatchSemaphore?) in
            let lane = lanes[dealer.nextLane]
            dealer.nextLane = (dealer.nextLane + 1) % lanes.count
            let previous = dealer.lastGate
            dealer.lastGate = gate
            return (lane, previous)
        }
        lane.submit {
            let prepared = items.map(prepare)
            previous?.wait()
            for item in prepared { finish(item) }
            done()
            gate.signal()
        }
    }
}
