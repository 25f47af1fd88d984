import PushSystem
import PushPayload
import PushJournal
import PushSpool
import PushMediaCore
import PushFetchClient
import PushErasure

/// How one claimed file left the pipeline. Every `process` call ends in exactly one.
enum FileEnd: Sendable, Equatable {
    /// Journaled, found to be a duplicate, quarantined, gone before it was read, or left in
    /// `incoming/` for the next start (a download cancelled by a stop).
    case done
    /// Still where it lies (`incoming/`, or `processing/` for an old leftover) for a reason
    /// that passes (a full journal disk, a quarantine that failed); to be taken again later.
    case handBack
    /// Still where it lies and not to be retried by this process (it could not be read);
    /// the next start takes it.
    case leftForNextStart
    /// The journal can no longer be trusted; nothing more is written.
    case journalFailed(errno: Int32, message: String)
}

/// Where ``FilePipeline`` reports each file's end, exactly once per file. It exists before the
/// pipeline (the daemon's ``Intake``), so the pipeline holds no reference back to its owner.
protocol FileEndSink: AnyObject, Sendable {
    func fileEnded(_ name: String, _ end: FileEnd)
}

/// One claimed file's way through the daemon: read → normalise → media → journal → finish
/// (unlink, quarantine or roll back). It decides nothing about capacity or lifecycle: it
/// reports each file's end to its sink, which turns that into state.
///
/// `Sendable`: `process` runs on the processing queue; media completions on media threads;
/// journal completions on the writer thread. Mutable state is behind locks.
final class FilePipeline: Sendable {
    private let spool: Spool
    private let journal: JournalWriter
    /// `pushspool-fetch` behind its supervisor in production; never libcurl/libvips in this process.
    private let media: (any MediaSource)?
    private let reporter: Reporter
    private let normalizerOptions: Locked<NormalizerOptions>
    /// `[Media] AllowHTTP` and `MaxWaiting` as the fetcher was opened with (a change needs a restart).
    private let mediaAllowsHTTP: Bool
    private let mediaMaxWaiting: Int
    private let sink: any FileEndSink
    /// Called on the acknowledger's thread with the spool file name and sequence number of
    /// every record once it is durable and its file removed. For benchmarks and tests.
    private let onCommitted: (@Sendable (String, UInt64) -> Void)?
    /// `FaultHook.crashMarker`: tests only, nil in production.
    private let crashMarker: [UInt8]?
    /// The instance secret an erasure record's subject hash is keyed with, and where its
    /// subject file goes (docs/design/erasure.md).
    private let erasureSecret: ErasureSecret?
    private let erasureRequests: ErasureRequests?
    /// Unlinks and reports committed files, so the journal's writer thread goes on to its next batch.
    private let acknowledger = Acknowledger(label: "acknowledge")
    /// Names in flight from `processing/` (files an older version claimed there, drained at
    /// start-up); every other file is read, journaled and removed where it lies in `incoming/`
    /// (the pickup protocol, docs/design/spool-protocol.md). The intake never has two files of
    /// one name in flight, so a name says where its file is.
    private let legacy = Locked<Set<String>>([])

    init(spool: Spool, journal: JournalWriter, media: (any MediaSource)?, reporter: Reporter, options: NormalizerOptions,
         mediaAllowsHTTP: Bool, mediaMaxWaiting: Int,
         onCommitted: (@Sendable (String, UInt64) -> Void)?, crashMarker: [UInt8]? = nil,
         erasureSecret: ErasureSecret? = nil, erasureRequests: ErasureRequests? = nil, sink: any FileEndSink) {
        self.erasureSecret = erasureSecret
        self.erasureRequests = erasureRequests
        self.spool = spool
        self.journal = journal
        self.media = media
        self.reporter = reporter
        self.normalizerOptions = Locked(options)
        self.mediaAllowsHTTP = mediaAllowsHTTP
        self.mediaMaxWaiting = mediaMaxWaiting
        self.onCommitted = onCommitted
        self.crashMarker = crashMarker
        self.sink = sink
    }

    /// New normaliser options (a reload); files already past normalisation keep the old ones.
    func update(options: NormalizerOptions) {
        normalizerOptions.withLock { $0 = options }
    }

    private var counters: Counters { reporter.counters }

    /// Takes a file in `incoming/` (or, after ``adoptLeftover(_:)``, in `processing/`) to its end.
    func process(_ name: String) {
        finish(prepare(name))
    }

    /// Marks `name` as a file in `processing/`, left there by an older version: read, removed
    /// and quarantined from there until it ends.
    func adoptLeftover(_ name: String) {
        legacy.withLock { _ = $0.insert(name) }
    }

    /// Whether a leftover of `processing/` is still in flight.
    var hasLeftoversInFlight: Bool { legacy.withLock { !$0.isEmpty } }

    private func location(of name: String) -> SpoolLocation {
        legacy.withLock { $0.contains(name) } ? .processing : .incoming
    }

    /// Reports a file's end to the sink; a leftover from `processing/` that ended is forgotten.
    private func ended(_ name: String, _ end: FileEnd) {
        switch end {
        case .done, .leftForNextStart: legacy.withLock { _ = $0.remove(name) }
        case .handBack, .journalFailed: break
        }
        sink.fileEnded(name, end)
    }

    /// The half of `process` that decides nothing in order: read, hash, normalise and, for a
    /// record that needs no download, build its body. Files of a burst are prepared on several
    /// threads at once; `finish` then takes them in claim order.
    func prepare(_ name: String) -> PreparedFile {
        let read: SpoolReadResult
        let location = location(of: name)
        do {
            read = try spool.read(name, in: location)
        } catch where location == .incoming && error.code == .notFound {
            // Taken already: a name the feed handed out twice (an event and a rescan) after its
            // file was journaled and removed, or a producer took it back.
            return .vanished(name: name)
        } catch {
            // Gone, or unreadable for a transient reason (EIO, EMFILE): leave it for the next start.
            return .leftForNextStart(name: name, message: "cannot read file, leaving it in \(location.rawValue)/: \(error)")
        }
        switch read {
        case .refused(let code, let message):
            return .refused(name: name, code: code, message: message, stage: .read, size: nil, sha256: nil)
        case .contents(let file):
            let bytes = file.bytes
            if let crashMarker, Self.contains(bytes, crashMarker) {
                preconditionFailure("PUSHSPOOL_TEST_CRASH_ON matched \(name)")
            }
            let options = normalizerOptions.withLock { $0 }
            let digest = SHA256.hex(of: bytes)
            let source = SourceFile(name: name, size: bytes.count, sha256: digest, inode: file.inode, device: file.device)
            switch Normalizer.classify(bytes, options: options) {
            case .refused(let refusal):
                return .refused(name: name, code: refusal.code.rawValue, message: refusal.message, stage: .normalize,
                                size: bytes.count, sha256: digest)
            case .notification(let notification):
                let decision = MediaDecision(notification: notification, allowHTTP: mediaAllowsHTTP, enabled: media != nil)
                switch decision {
                case .fetch(let url):
                    return .needsMedia(notification, url: url, source: source)
                case .skip(let reason) where notification.mediaUrl != nil:
                    return .record(record(notification, source: source, media: .skipped(url: notification.mediaUrl ?? "", reason: reason)),
                                   mediaSkipped: true)
                default:
                    // The journal's own dedup check in `submit` covers payloads without a download.
                    return .record(record(notification, source: source, media: nil), mediaSkipped: false)
                }
            case .event(let event):
                // A Notification Center event: journaled like a push (deduplicated by its id),
                // then applied by the followers; it never waits for media.
                return .record(record(event, source: source), mediaSkipped: false)
            case .erasure(let request):
                return erasure(request, source: source)
            }
        }
    }

    /// The half of `process` that must run in claim order: quarantine, download or journal.
    func finish(_ prepared: PreparedFile) {
        switch prepared {
        case .vanished(let name):
            ended(name, .done)
        case .leftForNextStart(let name, let message):
            reporter.leftInPlace(name, message)
            ended(name, .leftForNextStart)
        case .refused(let name, let code, let message, let stage, let size, let sha256):
            quarantine(name, code: code, message: message, stage: stage, size: size, sha256: sha256)
        case .record(let record, let mediaSkipped):
            if mediaSkipped { counters.mediaSkipped.add(1, ordering: .relaxed) }
            append(record)
        case .needsMedia(let notification, let url, let source):
            fetchMediaThenJournal(notification, url: url, source: source)
        }
    }

    private static func contains(_ bytes: [UInt8], _ marker: [UInt8]) -> Bool {
        guard !marker.isEmpty, bytes.count >= marker.count else { return false }
        for start in 0...(bytes.count - marker.count) where bytes[start] == marker[0] {
            if bytes[start..<(start + marker.count)].elementsEqual(marker) { return true }
        }
        return false
    }

    /// Quarantines a file for a reason found outside the pipeline (a file that crashed the
    /// daemon); ends it like any other refusal.
    func quarantine(_ name: String, code: String, message: String) {
        quarantine(name, code: code, message: message, stage: .read, size: nil, sha256: nil)
    }

    private func fetchMediaThenJournal(_ notification: PushNotification, url: String, source: SourceFile) {
        guard let media else {
            // No fetcher (media disabled): journaled without media, as any other payload.
            append(record(notification, source: source, media: nil))
            return
        }
        if journal.contains(key: notification.dedupKey) {
            // Already journaled (a re-delivery, or a leftover of a crash): no download for it.
            finishDuplicate(source, fields: { [reporter] in reporter.payloadFields(notification, file: source.name) })
            return
        }
        if counters.mediaInFlight.load(ordering: .relaxed) >= mediaMaxWaiting {
            // Every payload waiting for media also holds a slot of the in-flight bound; past
            // this many, the record lands now without its media instead of blocking intake.
            counters.mediaSkipped.add(1, ordering: .relaxed)
            append(record(notification, source: source, media: .skipped(url: url, reason: "media_backlog_full")))
            return
        }
        counters.mediaInFlight.add(1, ordering: .relaxed)
        media.fetch(url: url) { [self] outcome in
            counters.mediaInFlight.subtract(1, ordering: .relaxed)
            if outcome.wasCancelled {
                // Shutdown: keep the payload for the next start rather than record a failure
                // that only happened because we were stopping.
                rollback(source)
                return
            }
            if outcome.status == .stored {
                counters.mediaStored.add(1, ordering: .relaxed)
            } else {
                reporter.mediaFailed(notification, file: source.name, url: url, outcome: outcome)
            }
            append(record(notification, source: source, media: .fetched(outcome)))
        }
    }

    private func record(_ notification: PushNotification, source: SourceFile, media: RecordMedia?) -> PreparedRecord {
        let ingestMillis = Posix.wallClockMillis()
        return PreparedRecord(key: notification.dedupKey,
                              body: RecordBuilder.body(notification: notification, source: source, media: media, ingestMillis: ingestMillis),
                              ingestMillis: ingestMillis, source: source,
                              fields: { [reporter] in reporter.payloadFields(notification, file: source.name) })
    }

    private func record(_ event: PushEvent, source: SourceFile) -> PreparedRecord {
        let ingestMillis = Posix.wallClockMillis()
        return PreparedRecord(key: event.dedupKey, body: RecordBuilder.body(event: event, source: source, ingestMillis: ingestMillis),
                              ingestMillis: ingestMillis, source: source,
                              fields: { [reporter] in reporter.eventFields(event, file: source.name) })
    }

    /// An erasure request: its subject file first (the eraser needs the plain id, the journal
    /// must not hold it), then a record naming only the keyed hash. A request already
    /// journaled writes no subject file: a duplicate must not leave the plain id behind.
    private func erasure(_ request: ErasureRequest, source: SourceFile) -> PreparedFile {
        guard let erasureSecret, let erasureRequests else {
            return .refused(name: source.name, code: ReasonCode.invalidEnvelope.rawValue,
                            message: "this pushspoold runs no eraser; erase with pushspoold stopped (pushspoolctl user erase)",
                            stage: .normalize, size: source.size, sha256: source.sha256)
        }
        if !journal.contains(key: request.dedupKey) {
            do { try erasureRequests.storeSubject(request) } catch {
                return .leftForNextStart(name: source.name, message: "cannot store erasure \(request.erasureId): \(error)")
            }
        }
        let subject: ErasureSubject = request.scope == .user ? .user(request.id) : .device(request.id)
        let ingestMillis = Posix.wallClockMillis()
        let body = ErasureRecord.body(erasureID: request.erasureId, scope: subject.scope, subjectHash: erasureSecret.subjectHash(subject),
                                      requestedAt: Timestamp.iso8601(millis: ingestMillis))
        return .record(PreparedRecord(key: request.dedupKey, body: body, ingestMillis: ingestMillis, source: source,
                                      fields: { [("SPOOL_FILE", source.name), ("ERASURE_ID", request.erasureId)] }),
                       mediaSkipped: false)
    }

    /// Submits one record and finishes its file when the journal answers.
    private func append(_ record: PreparedRecord) {
        // The completion keeps only what it reports, not the body.
        let source = record.source, fields = record.fields
        let started = Posix.monotonicNanos()
        journal.submit(key: record.key, body: record.body, ingestMillis: record.ingestMillis) { [self] result in
            switch result {
            case .committed(let seq):
                // Durable now (this runs after the covering fdatasync); the unlink that
                // acknowledges it happens on the acknowledger's thread.
                StopPoints.pass(.afterSync)
                acknowledger.submit { [self] in
                    removeProcessed(source)
                    onCommitted?(source.name, seq)
                    reporter.ingested(fields: fields(), seq: seq, durationNanos: Posix.monotonicNanos() - started)
                    ended(source.name, .done)
                }
            case .duplicate:
                finishDuplicate(source, fields: fields)
            case .failed(let error):
                switch error.kind {
                case .recordTooLarge, .invalidKey:
                    quarantine(source.name, code: ReasonCode.recordTooLarge.rawValue, message: "\(error)", stage: .journal,
                               size: source.size, sha256: source.sha256)
                case .noSpace:
                    // Nothing was acknowledged; the file stays where it lies and is retried
                    // once the journal has room again.
                    reporter.error("journal: disk full")
                    ended(source.name, .handBack)
                default:
                    ended(source.name, .journalFailed(errno: error.errno, message: "\(error)"))
                }
            }
        }
    }

    /// Runs the acknowledgements of every record already durable: their spool files are
    /// removed before a stop, so what is durable is acknowledged even when a later batch failed.
    func flushAcknowledgements() {
        acknowledger.waitUntilIdle()
    }

    private func finishDuplicate(_ source: SourceFile, fields: @escaping EventFields) {
        removeProcessed(source)
        reporter.duplicate(fields: fields())
        ended(source.name, .done)
    }

    private func removeProcessed(_ source: SourceFile) {
        do {
            // Only the file that was read: one a producer renamed over the name meanwhile stays.
            try spool.complete(source.name, in: location(of: source.name), inode: source.inode, device: source.device)
        } catch {
            // The record is durable; a leftover file is re-processed and deduplicated at the next start.
            reporter.error("unlink \(source.name): \(error)")
        }
    }

    private func quarantine(_ name: String, code: String, message: String, stage: QuarantineReason.Stage, size: Int?, sha256: String?) {
        let reason = QuarantineReason(code: code, message: message, stage: stage, daemonVersion: pushspoolVersion, file: name,
                                      size: size.map { Int64($0) }, sha256: sha256, at: Timestamp.now())
        do {
            try spool.quarantine(name, in: location(of: name), reason: reason)
            reporter.refused(name, code: code, message: message)
            ended(name, .done)
        } catch where error.isRetryable {
            // failed/ unwritable or replaced, a full disk: the file stays where it lies and is
            // taken again later, as the journal path does on a full disk. Refusal is decided again then.
            _ = try? spool.reopenIfReplaced()
            reporter.quarantineFailed(name, code: code, error: error)
            ended(name, .handBack)
        } catch where error.code == .notFound {
            reporter.error("quarantine \(name): \(error)")
            ended(name, .done)
        } catch {
            reporter.quarantineFailed(name, code: code, error: error)
            ended(name, .leftForNextStart)
        }
    }

    /// A download cancelled by a stop: the file waits for the next start. Read in place it is
    /// still in `incoming/`; a leftover of `processing/` goes back there.
    private func rollback(_ source: SourceFile) {
        if location(of: source.name) == .processing {
            do {
                try spool.rollback(processing: source.name)
            } catch {
                reporter.error("rollback \(source.name): \(error)")
            }
        }
        ended(source.name, .done)
    }
}

/// A file read and normalised, waiting for its turn (`FilePipeline.finish`).
enum PreparedFile: Sendable {
    /// Gone from `incoming/` before it was read: nothing to do.
    case vanished(name: String)
    case leftForNextStart(name: String, message: String)
    case refused(name: String, code: String, message: String, stage: QuarantineReason.Stage, size: Int?, sha256: String?)
    /// Ready to journal; `mediaSkipped` when its media was not fetched by rule.
    case record(PreparedRecord, mediaSkipped: Bool)
    case needsMedia(PushNotification, url: String, source: SourceFile)

    /// The spool file's name.
    var name: String {
        switch self {
        case .vanished(let name), .leftForNextStart(let name, _), .refused(let name, _, _, _, _, _): return name
        case .record(let record, _): return record.source.name
        case .needsMedia(_, _, let source): return source.name
        }
    }
}

/// A record's journal key and body, and the event fields that will report it.
struct PreparedRecord: Sendable {
    var key: String
    var body: [UInt8]
    var ingestMillis: Int64
    var source: SourceFile
    /// Name the record in the events that report it; built only for an event that is logged.
    var fields: EventFields
}

/// Where a record's bytes came from.
struct SourceFile: Sendable {
    var name: String
    var size: Int
    var sha256: String
    /// The file that was read: only it is removed once its record is durable.
    var inode: UInt64 = 0
    var device: UInt64 = 0
}
