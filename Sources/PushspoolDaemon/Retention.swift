import PushConfig
import PushFollow
import PushJournal
import PushMediaCore
import PushSpool
import PushSystem
import PushSystemd

/// The lowest seq the journal's followers still need, for retention: a segment holding a
/// record above it is kept. `nil` (the default, until the daemon sets a source) = no follower.
///
/// `Sendable`: the source is behind a lock.
package final class RetentionFloor: Sendable {
    private let source = CallbackSlot<UInt64?>()

    package init() {}

    /// Called once by the daemon, before the followers start.
    package func set(_ floor: @escaping @Sendable () -> UInt64?) { source.set(floor) }

    package func callAsFunction() -> UInt64? { source() ?? nil }
}

/// Everything retention retires, in one pass on the retention thread (never the ingest path):
/// journal segments (`[Journal] RetainSec=`, `RetainBytes=`, `Archive=`), the dedup index
/// past `DedupWindowSec=`, unreferenced media, and `failed/` past `[Spool] FailedRetainSec=`.
enum RetentionPass {
    /// How often a pass runs.
    static let interval: Duration = .seconds(60)
    /// Media GC reads every retained record, so it runs at most this often.
    static let mediaInterval: UInt64 = 3_600_000_000_000
    /// Past the media fetcher's reuse window and payload deadline (see `MediaGC`).
    static let mediaGraceMargin: Duration = .seconds(3600)

    static func policy(for configuration: Configuration) -> RetentionPolicy {
        let journal = configuration.journal
        var policy = RetentionPolicy(maxAge: journal.retain > .zero ? journal.retain : nil,
                                     maxBytes: journal.retainBytes > 0 ? Int64(journal.retainBytes) : nil,
                                     archive: journal.archive == .zstd)
        policy.dedupWindow = journal.effectiveDedupWindow
        return policy
    }

    /// The follower for `configuration` (a pass at start, then every `interval` or on SIGHUP),
    /// or `nil` when it retires nothing.
    static func follower(configuration: Configuration, journal: JournalWriter, journalDirectory: String, layout: SpoolLayout,
                         mediaDirectory: String?, floor: RetentionFloor, gate: Locked<Void> = Locked(()),
                         events: EventLog) -> PeriodicFollower? {
        let policy = policy(for: configuration)
        let failedRetain = configuration.spool.failedRetain
        guard policy.isActive || failedRetain > .zero else { return nil }
        let grace = configuration.media.dedupWindow + configuration.media.payloadDeadline + mediaGraceMargin
        let lastMedia = Locked<UInt64?>(nil)
        return PeriodicFollower(name: "retention", interval: interval) {
            if policy.isActive {
                do throws(JournalError) {
                    // The gate: an erasure rewriting a sealed segment holds it (docs/design/erasure.md).
                    let result = try gate.withLock { (_: inout Void) throws(JournalError) in
                        try JournalRetention.runPass(directory: journalDirectory, policy: policy, retentionFloor: { floor() })
                    }
                    let pruned = journal.pruneDedupIndex(belowSeq: result.dedupFloorSeq)
                    if !result.retired.isEmpty || pruned > 0 {
                        events.log(.recovery, "journal retention: retired \(result.retired.count) segments",
                                   fields: [("RETIRED_SEGMENTS", String(result.retired.count)),
                                            ("ARCHIVED_SEGMENTS", String(result.archived.count)),
                                            ("BYTES_FREED", String(result.bytesFreed)),
                                            ("FIRST_RETAINED_SEQ", String(result.firstRetainedSeq)),
                                            ("HELD_FOR_EXPORT", String(result.heldForExport)),
                                            ("DEDUP_ENTRIES_DROPPED", String(pruned))])
                    }
                } catch {
                    events.log(.metricsFailed, "journal retention pass failed: \(error)", fields: [("ERROR", error.shortDescription)])
                }
            }
            if failedRetain > .zero {
                do {
                    let removed = try FailedQueue.expire(layout: layout, retain: failedRetain)
                    if !removed.isEmpty {
                        events.log(.recovery, "removed \(removed.count) files from failed/ past FailedRetainSec",
                                   fields: [("FAILED_REMOVED", String(removed.count))])
                    }
                } catch {
                    events.log(.metricsFailed, "failed/ retention failed: \(error)")
                }
            }
            // Media follows the journal's retention: only when records are retired at all.
            if policy.maxAge != nil || policy.maxBytes != nil, let mediaDirectory {
                let now = Posix.monotonicNanos()
                let due = lastMedia.withLock { last -> Bool in
                    guard last.map({ now &- $0 >= mediaInterval }) ?? true else { return false }
                    last = now
                    return true
                }
                if due { collectMedia(directory: mediaDirectory, journalDirectory: journalDirectory, grace: grace, events: events) }
            }
        }
    }

    /// Candidates first (older than `grace`), then the references of every committed record.
    static func collectMedia(directory: String, journalDirectory: String, grace: Duration, events: EventLog) {
        let cutoff = Posix.wallClockMillis() &* 1_000_000 &- grace.clampedNanoseconds
        let candidates = MediaGC.candidates(directory: directory, olderThanNanos: cutoff)
        guard !candidates.isEmpty else { return }
        var referenced = Set<String>()
        do {
            let reader = try JournalReader(directory: journalDirectory)
            while let record = try reader.next() { MediaGC.collectReferences(in: record.body, into: &referenced) }
        } catch {
            // Without the full set of references nothing may go.
            events.log(.metricsFailed, "media collection skipped: journal read failed: \(error)")
            return
        }
        let result = MediaGC.collect(directory: directory, candidates: candidates, referenced: referenced, olderThanNanos: cutoff)
        if !result.removed.isEmpty {
            events.log(.recovery, "removed \(result.removed.count) media files no retained record references",
                       fields: [("MEDIA_REMOVED", String(result.removed.count)), ("BYTES_FREED", String(result.bytesFreed))])
        }
    }
}
