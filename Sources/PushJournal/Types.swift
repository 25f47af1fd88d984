import PushSystem

/// What recovery does with a corrupt record in the middle of a segment (not a torn tail).
/// The one definition: `[Journal] CorruptionPolicy=` parses into it (the raw values are the
/// setting's words), so the configuration and the journal cannot disagree on a case.
package enum CorruptionPolicy: String, Sendable, Equatable, CaseIterable {
    /// Refuse to open (the default, like MyRocks): acknowledged data may be damaged and an
    /// operator must decide (`pushspoolctl journal verify`).
    case refuse
    /// Move the damaged segment to `quarantine/` and continue without it.
    case quarantineSegment = "quarantine-segment"
}

/// Something the writer wants an operator to hear about; the daemon routes these to journald.
package enum JournalEvent: Sendable {
    /// A write ran out of space; intake should pause. Queued records are kept and retried.
    case pausedNoSpace(SystemError)
    /// Space is back and the queued records were written.
    case resumed
    /// One `fdatasync` took longer than `JournalOptions.slowSyncNanos`.
    case slowSync(nanos: UInt64)
    /// The dedup checkpoint could not be written; the next start rebuilds it from the segments.
    case checkpointFailed(JournalError)
}

/// Journal tuning. `Sendable` value.
///
/// The values a `[Journal]` setting names have no default here: the configuration's
/// `JournalSettings` holds them, and `JournalOptions(settings:)` in PushModuleOptions builds
/// these options from it (this module sits below PushConfig). The rest are not settings and
/// keep their defaults here.
package struct JournalOptions: Sendable {
    /// A segment is closed and a new one started once it reaches this size.
    package var segmentBytes: Int64
    /// How long the first record of a batch may wait for others before its sync starts. Applied
    /// only while batches have had more than one record, so a sequential producer is not slowed,
    /// and never for longer than the last sync took.
    package var maxBatchDelay: Duration
    package var maxBatchRecords: Int
    package var maxBatchBytes = 1 << 20
    /// Largest accepted `key + body`.
    package var maxRecordBytes = 1 << 20
    package var corruptionPolicy: CorruptionPolicy
    /// Write `dedup.ckpt` after this many new records (and always at `close`); 0 = no count trigger.
    package var checkpointEvery = 50_000
    /// Also write `dedup.ckpt` this often while records keep coming (`[Journal]
    /// CheckpointIntervalSec`), so a restart after a crash rescans at most this much of the
    /// journal; `nil` or zero = no timer. Written on the writer's own checkpoint thread.
    package var checkpointInterval: Duration?
    /// While paused on ENOSPC, how often the writer retries the queued batch.
    package var noSpaceRetryInterval: Duration = .seconds(1)
    /// A sync slower than this is reported as `JournalEvent.slowSync` (etcd's "slow fdatasync").
    package var slowSyncNanos: UInt64 = 1_000_000_000
    /// How long `open` waits for another holder of `LOCK` before failing with `.locked`.
    package var lockWait: Duration = .seconds(1)
    /// Receives `JournalEvent`s on the writer thread (`.checkpointFailed` on the checkpoint
    /// thread). Must not block.
    package var eventHandler: (@Sendable (JournalEvent) -> Void)?
    /// Called on the writer thread with the duration of every successful `fdatasync`, for the
    /// sync-latency histogram; must be cheap.
    package var syncObserver: (@Sendable (_ nanos: UInt64) -> Void)?
    /// Prefix of the call names the journal's syscalls present to `FaultInjector`
    /// (`"<scope>.write"`, `".fdatasync"`, `".fsync"`, `".ftruncate"`, `".openat"`, `".renameat"`).
    /// A distinct scope keeps an injected fault from hitting an unrelated journal or module.
    package var faultScope = "journal"
    /// The dedup fingerprint of a key; `nil` = `KeyFingerprints.fingerprint` (SHA-256 prefix).
    /// A test hook: a constant function forces every key to collide, to prove that a hit is
    /// confirmed against the stored key. Recovery must use the same function as the writer.
    package var keyFingerprint: (@Sendable (String) -> UInt64)?
    /// The file system the journal's calls go through; `nil` = the real one
    /// (`RealFileSystem(faultScope:)`). Tests pass a simulated one (crash and fault models).
    package var fileSystem: (any FileSystem)?
    /// The instance's erasure secret (`<state>/erase.key`), once an erasure ran: a submission
    /// whose tombstone key (`erased:` + its keyed hash) is in the journal is a duplicate, so a
    /// vendor's redelivery of an erased push is not journaled again.
    package var erasureSecret: ErasureSecret?

    /// Every value a setting names, given; the others at their defaults.
    package init(segmentBytes: Int64, maxBatchDelay: Duration, maxBatchRecords: Int, corruptionPolicy: CorruptionPolicy,
                 checkpointInterval: Duration?) {
        self.segmentBytes = segmentBytes
        self.maxBatchDelay = maxBatchDelay
        self.maxBatchRecords = maxBatchRecords
        self.corruptionPolicy = corruptionPolicy
        self.checkpointInterval = checkpointInterval
    }

    func fingerprint(_ key: String) -> UInt64 { keyFingerprint?(key) ?? KeyFingerprints.fingerprint(key) }
}

/// A journal failure. `Sendable` value; `description` says what happened and what to do.
package struct JournalError: Error, Sendable, CustomStringConvertible {
    package enum Kind: Sendable {
        /// An I/O error; the operation did not happen.
        case io(SystemError)
        /// The disk or quota is full.
        case noSpace(SystemError)
        /// `fsync`/`fdatasync` failed: written data may be lost. Fatal; the writer stops for good.
        case syncFailed(SystemError)
        /// A record that is not a torn tail failed its checks.
        case corrupt(segment: String, offset: Int64, detail: String)
        /// Another process holds the journal's `LOCK`.
        case locked
        /// A segment carries another journal's id.
        case foreignSegment(segment: String)
        /// The writer was closed.
        case closed
        /// `key + body` exceeds `maxRecordBytes`, or the key is empty or over 255 bytes.
        case recordTooLarge(bytes: Int, limit: Int)
        case invalidKey
    }

    package var kind: Kind
    package var directory: String

    package init(_ kind: Kind, directory: String) {
        self.kind = kind
        self.directory = directory
    }

    /// Stable, without data: for metrics labels and journald fields.
    package var shortDescription: String {
        switch kind {
        case .io(let e): "io: \(e.shortDescription)"
        case .noSpace: "no-space"
        case .syncFailed: "sync-failed"
        case .corrupt: "corrupt"
        case .locked: "locked"
        case .foreignSegment: "foreign-segment"
        case .closed: "closed"
        case .recordTooLarge: "record-too-large"
        case .invalidKey: "invalid-key"
        }
    }

    package var description: String {
        switch kind {
        case .io(let e):
            "journal \(directory): \(e)"
        case .noSpace(let e):
            "journal \(directory): out of space (\(e)); free space on the file system, queued records are kept"
        case .syncFailed(let e):
            "journal \(directory): fsync failed (\(e)); data written since the last sync may be lost, "
                + "so the journal stops writing; restart the daemon to recover from what is on disk"
        case .corrupt(let segment, let offset, let detail):
            "journal corruption detected at \(directory)/\(segment):\(offset): \(detail); "
                + "run `pushspoolctl journal verify`, restore from backup, or start with the quarantine policy "
                + "to move the damaged segment aside"
        case .locked:
            "journal \(directory) is locked by another process (\(JournalFiles.lock)); stop the other writer first"
        case .foreignSegment(let segment):
            "journal \(directory): segment \(segment) belongs to another journal; move it out of the directory"
        case .closed:
            "journal \(directory) is closed"
        case .recordTooLarge(let bytes, let limit):
            "journal \(directory): record of \(bytes) bytes exceeds the limit of \(limit) bytes"
        case .invalidKey:
            "journal \(directory): record key must be 1 to 255 bytes of UTF-8"
        }
    }

    /// True for the errors after which the writer accepts nothing more.
    package var isFatal: Bool {
        switch kind {
        case .syncFailed, .io: true
        default: false
        }
    }
}

/// What recovery found and did at open. `Sendable` value; the daemon logs it.
package struct RecoveryReport: Sendable, CustomStringConvertible {
    package var segments = 0
    /// Records scanned during recovery (segments covered by the checkpoint are not rescanned).
    package var records = 0
    package var lastSeq: UInt64 = 0
    /// Bytes cut off a torn tail (0 = clean), and from which segment.
    package var tornBytesTruncated: Int64 = 0
    package var tornSegment: String?
    /// Why the tail was considered torn, e.g. "record body incomplete".
    package var tornDetail: String?
    /// Segments moved to `quarantine/` under `.quarantineSegment`.
    package var quarantined: [String] = []
    package var dedupKeys = 0
    package var checkpointUsed = false
    /// Set when `COMMITTED` named a higher seq than survived: acknowledged records were lost
    /// (the device ignored a flush, or sectors were damaged).
    /// Only under `.quarantineSegment`: `.refuse` refuses to open instead.
    package var lostAcknowledgedRecords: UInt64 = 0
    /// The seqs of those records; they are not handed out again, and a marker in
    /// `quarantine/` records them.
    package var lostSeqRange: ClosedRange<UInt64>?
    /// Seq ranges missing between segments, not explained by a quarantined segment (only
    /// under `.quarantineSegment`; `.refuse` refuses to start instead).
    package var missingSeqRanges: [String] = []
    package var durationNanos: UInt64 = 0

    package init() {}

    /// One line for the log; mentions a cut torn tail, quarantined segments and lost records.
    package var description: String {
        var parts = ["journal recovered: \(segments) segments, last seq \(lastSeq), \(records) records scanned, "
            + "\(dedupKeys) dedup keys (checkpoint \(checkpointUsed ? "used" : "not used")), \(durationNanos / 1_000_000) ms"]
        if let tornSegment {
            parts.append("torn tail of \(tornBytesTruncated) bytes cut from \(tornSegment) (\(tornDetail ?? "incomplete record"))")
        }
        if !quarantined.isEmpty { parts.append("quarantined damaged segments: \(quarantined.joined(separator: ", "))") }
        if !missingSeqRanges.isEmpty {
            parts.append("CRITICAL: records missing between segments: \(missingSeqRanges.joined(separator: ", "))")
        }
        if lostAcknowledgedRecords > 0 {
            let range = lostSeqRange.map { " (seq \($0.lowerBound)...\($0.upperBound))" } ?? ""
            parts.append("CRITICAL: \(lostAcknowledgedRecords) acknowledged records are missing\(range) (COMMITTED was ahead of the journal)")
        }
        return parts.joined(separator: "; ")
    }
}

/// The outcome of `JournalWriter.submit`.
package enum AppendResult: Sendable {
    /// Durable: the covering `fdatasync` returned.
    case committed(seq: UInt64)
    /// The key was already committed or pending; nothing was written.
    case duplicate
    case failed(JournalError)
}

/// One record as read back. `Sendable` value.
package struct JournalRecord: Sendable, Equatable {
    package var seq: UInt64
    package var ingestMillis: Int64
    package var key: String
    /// The JSON body as the daemon stored it.
    package var body: [UInt8]
    /// Segment file name and byte offset of the frame, for cursors and error messages.
    package var segment: String
    package var offset: Int64

    package init(seq: UInt64, ingestMillis: Int64, key: String, body: [UInt8], segment: String, offset: Int64) {
        self.seq = seq
        self.ingestMillis = ingestMillis
        self.key = key
        self.body = body
        self.segment = segment
        self.offset = offset
    }
}

/// Live counters of a writer. `Sendable` value snapshot.
package struct JournalWriterStats: Sendable {
    /// Upper bounds (microseconds) of the sync-latency buckets; the last bucket is unbounded.
    package static let syncBucketBoundsMicros: [UInt64] = [100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 100_000, 1_000_000]

    /// Records committed by this writer.
    package var records: UInt64 = 0
    package var duplicates: UInt64 = 0
    /// Frame bytes committed by this writer.
    package var bytes: UInt64 = 0
    package var lastSeq: UInt64 = 0
    package var segments = 0
    package var batches: UInt64 = 0
    package var largestBatch = 0
    package var fsyncs: UInt64 = 0
    /// Counts per `syncBucketBoundsMicros` bucket, plus one overflow bucket.
    package var fsyncLatencyBuckets = [UInt64](repeating: 0, count: syncBucketBoundsMicros.count + 1)
    package var fsyncNanosTotal: UInt64 = 0
    /// Records submitted and not yet completed (queued or being written).
    package var queued = 0
    /// Out of space: intake should stop until this clears.
    package var paused = false
    /// The writer stopped for good after a sync or I/O failure.
    package var failed = false
    package var checkpoints: UInt64 = 0
    package var checkpointFailures: UInt64 = 0

    package init() {}

    mutating func recordSync(nanos: UInt64) {
        fsyncs += 1
        fsyncNanosTotal += nanos
        let micros = nanos / 1000
        let index = Self.syncBucketBoundsMicros.firstIndex { micros <= $0 } ?? Self.syncBucketBoundsMicros.count
        fsyncLatencyBuckets[index] += 1
    }
}
