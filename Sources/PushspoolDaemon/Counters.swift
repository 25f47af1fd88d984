import Synchronization
import PushSystem
import PushSystemd

/// Live counts for `STATUS=`, the status file and metrics. Updated from the ingest thread, the
/// journal's writer thread and media threads, so every field is atomic.
package final class Counters: Sendable {
    package let ingested = Atomic<Int>(0)
    package let refused = Atomic<Int>(0)
    package let duplicates = Atomic<Int>(0)
    package let backlog = Atomic<Int>(0)
    package let mediaInFlight = Atomic<Int>(0)
    package let mediaStored = Atomic<Int>(0)
    package let mediaFailed = Atomic<Int>(0)
    package let mediaSkipped = Atomic<Int>(0)
    private let lastErrorText = Locked<String?>(nil)

    package init() {}

    package var lastError: String? { lastErrorText.withLock { $0 } }

    package func recordError(_ text: String) { lastErrorText.withLock { $0 = text } }

    /// One line for `systemctl status`: PushSystemd's `LiveCounts` format, plus a note while
    /// intake is paused on a full journal disk.
    package func statusLine(paused: Bool) -> String {
        let line = LiveCounts(ingested: ingested.load(ordering: .relaxed), refused: refused.load(ordering: .relaxed),
                              duplicates: duplicates.load(ordering: .relaxed), backlog: backlog.load(ordering: .relaxed),
                              mediaInFlight: mediaInFlight.load(ordering: .relaxed), lastError: lastError).statusLine
        return paused ? line + "; PAUSED: journal disk full, intake stopped until space is freed" : line
    }

    /// The counts as a flat JSON object for `<state>/status.json` and `pushspoolctl stats --json`.
    /// `inFlight` comes from the daemon's intake state, which owns that count.
    package func snapshot(inFlight: Int) -> [(String, Int)] {
        [
            ("ingested", ingested.load(ordering: .relaxed)),
            ("refused", refused.load(ordering: .relaxed)),
            ("duplicates", duplicates.load(ordering: .relaxed)),
            ("backlog", backlog.load(ordering: .relaxed)),
            ("inFlight", inFlight),
            ("mediaInFlight", mediaInFlight.load(ordering: .relaxed)),
            ("mediaStored", mediaStored.load(ordering: .relaxed)),
            ("mediaFailed", mediaFailed.load(ordering: .relaxed)),
            ("mediaSkipped", mediaSkipped.load(ordering: .relaxed)),
        ]
    }
}
