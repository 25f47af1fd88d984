import Testing
import PushExport

/// The exporter's niceness follows ingest: nice 0 while steady, niced during a burst.
@Suite struct BurstDetectorTests {
    private static let ms: UInt64 = 1_000_000

    /// Feeds `rate` records/s for `seconds`, one step per commit of `perCommit` records.
    private func feed(_ d: inout BurstDetector, rate: UInt64, seconds: Double, perCommit: UInt64 = 1,
                      from start: (seq: UInt64, now: UInt64)) -> (seq: UInt64, now: UInt64, sawBurst: Bool) {
        var seq = start.seq, now = start.now, saw = false
        let step = 1_000_000_000 * perCommit / rate
        let end = now + UInt64(seconds * 1e9)
        while now < end {
            seq += perCommit
            now += step
            if d.observe(journalSeq: seq, now: now) { saw = true }
        }
        return (seq, now, saw)
    }

    @Test func steadyIngestAtAThousandASecondIsNeverABurst() {
        var d = BurstDetector()
        let r = feed(&d, rate: 1_000, seconds: 5, from: (0, 1_000 * Self.ms))
        #expect(!r.sawBurst)
        // Group commits of 3 records at the same rate change nothing.
        let g = feed(&d, rate: 1_000, seconds: 5, perCommit: 3, from: (r.seq, r.now))
        #expect(!g.sawBurst)
    }

    @Test func aBurstIsSeenWithinAWindowAndEndsAfterAQuietOne() {
        var d = BurstDetector()
        var r = feed(&d, rate: 1_000, seconds: 1, from: (0, 1_000 * Self.ms))
        #expect(!d.inBurst)
        // 7,700 records/s in commits of 20: a burst within 100 ms.
        r = feed(&d, rate: 7_700, seconds: 0.1, perCommit: 20, from: (r.seq, r.now))
        #expect(r.sawBurst)
        r = feed(&d, rate: 7_700, seconds: 1, perCommit: 20, from: (r.seq, r.now))
        #expect(d.inBurst)
        // Back to 1,000/s: over within a couple of windows.
        r = feed(&d, rate: 1_000, seconds: 0.25, from: (r.seq, r.now))
        #expect(!d.inBurst)
    }

    @Test func aRateBetweenTheThresholdsKeepsTheStateItHas() {
        // 2,000/s: under the 2,560/s that starts a burst, over the 1,280/s that ends one.
        var d = BurstDetector()
        var r = feed(&d, rate: 2_000, seconds: 1, from: (0, 1_000 * Self.ms))
        #expect(!r.sawBurst)
        r = feed(&d, rate: 5_000, seconds: 0.2, perCommit: 10, from: (r.seq, r.now))
        #expect(d.inBurst)
        r = feed(&d, rate: 2_000, seconds: 1, from: (r.seq, r.now))
        #expect(d.inBurst)
    }

    @Test func aSlowTrickleOverALongSleepIsNotABurst() {
        // The exporter sleeps while nothing commits: 300 records over 10 s between two steps
        // are 30 a second, however many they are.
        var d = BurstDetector()
        d.observe(journalSeq: 0, now: 1_000 * Self.ms)
        var burst = d.observe(journalSeq: 300, now: 11_000 * Self.ms)
        #expect(!burst)
        burst = d.observe(journalSeq: 301, now: 11_001 * Self.ms)
        #expect(!burst)
    }

    @Test func aJournalOrClockGoingBackStartsOver() {
        var d = BurstDetector()
        d.observe(journalSeq: 10_000, now: 1_000 * Self.ms)
        // A new, empty journal: not a negative rate, not a trap.
        var burst = d.observe(journalSeq: 5, now: 1_010 * Self.ms)
        #expect(!burst)
        burst = d.observe(journalSeq: 6, now: 900 * Self.ms)
        #expect(!burst)
        burst = d.observe(journalSeq: 306, now: 950 * Self.ms)
        #expect(burst)
    }
}
