/// The publishes in flight and the acknowledged cursor: a pure state machine, kept behind the
/// exporter's lock (libnats calls the ack handler on its own thread).
///
/// Seqs are published in increasing order. The cursor advances only over a contiguous run of
/// acknowledged seqs from the oldest in flight, so everything at or below it is in the stream
/// and a restart from it loses nothing; acks out of order wait for the gap to close.
/// `Sendable` value.
package struct AckWindow: Sendable, Equatable {
    /// The highest seq whose record and all earlier ones are acknowledged.
    package private(set) var acknowledged: UInt64
    /// In flight, oldest first: (seq, acked).
    private var inFlight: [(seq: UInt64, acked: Bool)] = []
    private var head = 0
    /// Set by a failed publish; the exporter resends from `acknowledged + 1`.
    package private(set) var failed = false

    package init(acknowledged: UInt64) { self.acknowledged = acknowledged }

    package static func == (a: AckWindow, b: AckWindow) -> Bool {
        a.acknowledged == b.acknowledged && a.failed == b.failed && a.pendingSeqs == b.pendingSeqs
    }

    package var pending: Int { inFlight.count - head }
    package var pendingSeqs: [UInt64] { inFlight[head...].filter { !$0.acked }.map(\.seq) }
    /// The newest seq handed to the publisher (the cursor when nothing is in flight).
    package var lastPublished: UInt64 { head < inFlight.count ? inFlight[inFlight.count - 1].seq : acknowledged }

    /// Records that `seq` was handed to the publisher. Seqs at or below the last one are ignored.
    package mutating func published(_ seq: UInt64) {
        guard seq > lastPublished else { return }
        inFlight.append((seq, false))
    }

    /// A PubAck for `seq` (a duplicate ack counts: the server holds the message). Returns
    /// whether the cursor moved.
    @discardableResult
    package mutating func acked(_ seq: UInt64) -> Bool {
        guard seq > acknowledged, let index = find(seq) else { return false }
        inFlight[index].acked = true
        let before = acknowledged
        while head < inFlight.count, inFlight[head].acked {
            acknowledged = inFlight[head].seq
            head += 1
        }
        if head > 4096, head * 2 > inFlight.count {
            inFlight.removeFirst(head)
            head = 0
        }
        return acknowledged != before
    }

    /// A publish of `seq` failed (error reply, ack timeout).
    package mutating func failed(_ seq: UInt64) {
        if seq > acknowledged { failed = true }
    }

    /// Forgets everything in flight; the exporter publishes again from `acknowledged + 1`.
    package mutating func reset() {
        inFlight.removeAll(keepingCapacity: true)
        head = 0
        failed = false
    }

    private func find(_ seq: UInt64) -> Int? {
        // In flight is sorted by seq: binary search.
        var low = head, high = inFlight.count
        while low < high {
            let mid = (low + high) / 2
            if inFlight[mid].seq < seq { low = mid + 1 } else { high = mid }
        }
        return low < inFlight.count && inFlight[low].seq == seq ? low : nil
    }
}
