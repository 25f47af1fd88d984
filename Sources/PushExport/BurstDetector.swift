import PushSystem

/// Tells an ingest burst from steady ingest by how fast the journal grows, so that the
/// exporter runs at nice 0 while ingest is steady (a record's way to its PubAck does not wait
/// for a core) and yields to ingest during a burst. A pure state machine: the exporter feeds
/// it the journal's last seq and the monotonic clock at every step.
///
/// A burst starts when the journal grows by `enterRecords` or more within one `window` (or
/// at that rate over a longer span); it ends when a whole window passes at less than half
/// that rate. The gap between the two keeps a rate near the threshold from flapping.
///
/// `Sendable` value.
package struct BurstDetector: Sendable, Equatable {
    /// Records per window that make a burst (with the defaults, 256 per 100 ms = 2,560/s).
    package let enterRecords: UInt64
    /// The window, in nanoseconds.
    package let window: UInt64
    package private(set) var inBurst = false
    private var windowStart: UInt64?
    private var windowSeq: UInt64 = 0

    package init(enterRecords: UInt64 = 256, window: Duration = .milliseconds(100)) {
        self.enterRecords = max(2, enterRecords)
        self.window = max(1, window.clampedUInt64Nanoseconds)
    }

    /// The journal's last seq was `journalSeq` at `now` (monotonic nanoseconds). Returns
    /// whether a burst is on.
    @discardableResult
    package mutating func observe(journalSeq: UInt64, now: UInt64) -> Bool {
        guard let start = windowStart, journalSeq >= windowSeq, now >= start else {
            // First call, or the journal or the clock went back (a new journal): start over.
            windowStart = now
            windowSeq = journalSeq
            return inBurst
        }
        let grown = journalSeq - windowSeq
        let elapsed = now - start
        guard elapsed >= window || grown >= enterRecords else { return inBurst }
        // The growth scaled to one window; a span shorter than a window counts as one.
        let perWindow = Double(grown) * Double(window) / Double(max(elapsed, window))
        if perWindow >= Double(enterRecords) {
            inBurst = true
        } else if elapsed >= window, perWindow < Double(enterRecords / 2) {
            inBurst = false
        }
        windowStart = now
        windowSeq = journalSeq
        return inBurst
    }
}
