@preconcurrency import Glibc
import Dispatch
import Synchronization
import PushSystem
import PushPayload
import PushJournal
import PushSpool
import PushMedia
import PushSystemd
import PushConfig

/// The running daemon: recovery, the ingest loop, and the way out.
///
/// Data flows one way: `incoming/` → claim → read → normalise → (media) → journal → unlink.
/// The ingest loop (feed and claim) runs on the thread that calls `run()`, the main thread
/// in `pushspoold`; a serial processing queue reads, normalises and submits each claimed
/// file; the journal's writer thread and the media threads finish it through completions.
/// `@unchecked Sendable`: the mutable parts are atomics, `Mutex`es, or touched only by the
/// ingest thread (documented per property).
package final class Daemon: @unchecked Sendable {
    package let arguments: DaemonArguments
    private let store: ConfigurationStore
    private let normalizerOptions: Mutex<NormalizerOptions>
    private let layout: SpoolLayout
    private let stateDirectory: String
    private let spool: Spool
    private let journal: JournalWriter
    private let media: MediaFetcher?
    /// `[Media] AllowHTTP` and `MaxWaiting` as the fetcher was opened with (a change needs a restart).
    private let mediaAllowsHTTP: Bool
    private let mediaMaxWaiting: Int
    private let notifier: SystemdNotifier
    private let events: EventLog
    private let metrics: Metrics
    package let counters = Counters()
    private let background = BlockingQueue(label: "pushspool.background")
    /// Where claimed files are read, normalised and handed to the journal.
    private let processing = BlockingQueue(label: "pushspool.process")

    private let stopRequested = Atomic<Bool>(false)
    private let reloadRequested = Atomic<Bool>(false)
    private let fatalError = Mutex<JournalError?>(nil)
    /// Bounds the files claimed but not yet finished (journaled, quarantined or rolled back).
    private let capacity: DispatchSemaphore
    private let capacityLimit: Int
    /// Names whose claim met a same-named file still in `processing/`; ingest thread only.
    private var busyNames: [String] = []
    /// Ends the watcher's wait early on SIGTERM/SIGHUP; set by the ingest thread, used by the signal queue.
    private let waker = Mutex<Waker?>(nil)
    /// Files a journal `noSpace` failure handed back; retried when space returns.
    private let retryProcessing = Mutex<[String]>([])
    private var signalSources: [DispatchSourceSignal] = []
    private let readyFlag = Atomic<Bool>(false)

    /// Called on the journal's writer thread with the spool file name and sequence number of
    /// every record once it is durable. For benchmarks and tests; set before `run()`.
    package var onCommitted: (@Sendable (String, UInt64) -> Void)?

    private let returnedFlag = Atomic<Bool>(false)

    /// True once `run()` has returned.
    package var hasReturned: Bool { returnedFlag.load(ordering: .acquiring) }

    /// True once the start-up scan is done and READY=1 was sent.
    package var isReady: Bool { readyFlag.load(ordering: .acquiring) }

    /// Asks `run()` to drain and return, as SIGTERM does.
    package func requestStop() {
        stopRequested.store(true, ordering: .relaxed)
        waker.withLock { $0?.wake() }
    }

    /// The journal writer's counters (batches, fsyncs, latency buckets).
    package var journalStats: JournalWriterStats { journal.stats }

    /// Opens everything in the order that makes start-up safe: configuration, journal
    /// recovery (the data of record), spool layout, media store. Nothing is claimed yet.
    package init(arguments: DaemonArguments, store: ConfigurationStore, events: EventLog, notifier: SystemdNotifier,
                 metrics: Metrics) throws(DaemonError) {
        let configuration = store.current
        self.arguments = arguments
        self.events = events
        self.notifier = notifier
        self.store = store
        self.normalizerOptions = Mutex(Self.normalizerOptions(for: configuration))
        self.metrics = metrics
        self.layout = SpoolLayout(root: configuration.spool.directory)
        self.stateDirectory = configuration.journal.stateDirectory
        self.capacityLimit = 4096
        self.capacity = DispatchSemaphore(value: capacityLimit)

        notifier.status("recovering journal")
        let started = Posix.monotonicNanos()
        do {
            try Posix.mkdirs(stateDirectory)
            var options = Self.journalOptions(for: configuration, quarantine: arguments.quarantineCorruptSegments)
            options.eventHandler = Self.journalEventHandler(events: events, journalDirectory: stateDirectory + "/journal")
            options.syncObserver = { nanos in metrics.observeFsync(seconds: Double(nanos) / 1e9) }
            let (journal, report) = try JournalWriter.open(directory: stateDirectory + "/journal", options: options)
            self.journal = journal
            Self.logRecovery(report, events: events, durationNanos: Posix.monotonicNanos() - started)
        } catch let error as JournalError {
            if case .corrupt(let segment, let offset, _) = error.kind {
                events.log(.corruption, "refusing to start on a damaged journal: \(error)",
                           fields: [("JOURNAL_SEGMENT", segment), ("JOURNAL_OFFSET", String(offset))])
                throw DaemonError(stage: "journal", message: "\(error) (start with `pushspoold --quarantine-corrupt-segment` "
                                  + "or set [Journal] CorruptionPolicy=quarantine-segment to move the segment to journal/quarantine/)",
                                  errno: error.errno)
            }
            throw DaemonError(stage: "journal", message: "\(error)", errno: error.errno)
        } catch let error as SystemError {
            throw DaemonError(stage: "state directory", message: "\(error)", errno: error.errno)
        } catch {
            throw DaemonError(stage: "journal", message: "\(error)", errno: EIO)
        }

        do {
            try layout.create()
            spool = try Spool(layout: layout, maxFileBytes: configuration.spool.maxFileBytes)
        } catch {
            throw DaemonError(stage: "spool", message: "\(error)", errno: error.system?.errno ?? EINVAL)
        }

        mediaAllowsHTTP = configuration.media.allowHTTP
        mediaMaxWaiting = min(configuration.media.maxWaiting, capacityLimit / 2)
        if configuration.media.enabled {
            do {
                media = try MediaFetcher(options: Self.mediaOptions(for: configuration))
            } catch {
                throw DaemonError(stage: "media", message: "\(error)", errno: EIO)
            }
        } else {
            media = nil
        }
    }

    // MARK: - Lifecycle

    /// Runs until SIGTERM/SIGINT (exit 0 after a clean drain) or a fatal journal error
    /// (exit 1, nothing more written). Call from one thread; it blocks.
    package func run() -> Int32 {
        defer { returnedFlag.store(true, ordering: .releasing) }
        installSignalHandlers()
        var feed: IncomingFeed
        do {
            feed = try makeFeed()
        } catch {
            return fail(errno: error.system?.errno ?? EIO, "cannot watch \(layout.incoming): \(error)")
        }
        // Staging files of producers that crashed long ago (Maildir's 36-hour rule).
        _ = try? spool.cleanTmp()

        // Leftovers from a previous run first: they were claimed, maybe journaled already;
        // the journal's id index makes re-processing them idempotent.
        notifier.status("re-processing files left in processing/")
        do {
            let leftovers = try spool.scanProcessing()
            while let batch = try leftovers.next() {
                for entry in batch {
                    acquireCapacity()
                    process(entry.name)
                }
                notifier.watchdogPing()
            }
        } catch {
            return fail(errno: error.system?.errno ?? EIO, "cannot read \(layout.processing): \(error)")
        }

        // The first full scan completes before READY=1, extending systemd's start timeout
        // while a large backlog drains. In small steps: systemd 252 postpones the watchdog by
        // the same extension, and a long one would hide a wedged scan from it.
        var lastScanStatus = Posix.monotonicNanos()
        var startupScanDone = false
        while !startupScanDone {
            if stopRequested.load(ordering: .relaxed) || isFatal { break }
            switch nextBatch(&feed, timeoutMillis: 0) {
            case .some(let batch):
                claimAndProcess(batch.names, feed: feed)
                startupScanDone = batch.scanCompleted
            case .none:
                startupScanDone = true
            }
            notifier.extendTimeoutIfDue(by: .seconds(10))
            let now = Posix.monotonicNanos()
            if now - lastScanStatus > 5_000_000_000 {
                notifier.status("start-up scan: " + counters.statusLine(paused: false))
                lastScanStatus = now
            }
            notifier.watchdogPing()
        }
        // The scan has claimed the backlog; READY waits until it is durable in the journal or
        // quarantined (files waiting for media excepted: a slow image server must not hold up
        // start-up), so "started" means the backlog found at start is safe.
        while counters.inFlight.load(ordering: .acquiring) > counters.mediaInFlight.load(ordering: .acquiring) {
            if isFatal || stopRequested.load(ordering: .relaxed) || journal.stats.paused { break }
            notifier.extendTimeoutIfDue(by: .seconds(10))
            notifier.watchdogPing()
            usleep(2_000)
        }
        if let failure = fatalFailure() { return failure }

        notifier.ready(status: counters.statusLine(paused: false))
        readyFlag.store(true, ordering: .releasing)
        events.log(.ready, "pushspoold ready", fields: [("SPOOL_DIR", layout.root), ("STATE_DIR", stateDirectory)])

        var lastStatus = Posix.monotonicNanos()
        var lastMetrics = Posix.monotonicNanos()
        var lastBusyRetry = Posix.monotonicNanos()
        while !stopRequested.load(ordering: .relaxed) {
            if let failure = fatalFailure() { return failure }
            notifier.watchdogPing()
            if reloadRequested.exchange(false, ordering: .relaxed) {
                reload()
                // New rescan interval or stable age: a feed made with them, and a rescan.
                if let rebuilt = try? makeFeed() { feed = rebuilt }
            }

            let now = Posix.monotonicNanos()
            let configuration = store.current
            if now - lastStatus >= 1_000_000_000 {
                notifier.status(counters.statusLine(paused: journal.stats.paused))
                lastStatus = now
            }
            if now - lastMetrics >= UInt64(configuration.metrics.intervalSeconds * 1e9) {
                publishMetrics(configuration)
                lastMetrics = now
            }
            if journal.stats.paused {
                // Disk full: claim nothing new; the journal retries its queued batch itself.
                usleep(100_000)
                continue
            }
            retryHandedBackFiles()
            if now - lastBusyRetry >= 1_000_000_000 {
                retryBusyNames()
                lastBusyRetry = now
            }
            guard let batch = nextBatch(&feed, timeoutMillis: 100) else { continue }
            claimAndProcess(batch.names, feed: feed)
        }
        return shutdown()
    }

    /// A feed over a fresh watcher: inotify events, start-up/overflow/periodic rescans and the
    /// stable-age rule for files a rescan finds, with the configuration in force.
    private func makeFeed() throws(SpoolError) -> IncomingFeed {
        let configuration = store.current
        let watcher = try IncomingWatcher(layout: layout)
        let newWaker = try watcher.makeWaker()
        waker.withLock { $0 = newWaker }
        return IncomingFeed(spool: spool, watcher: watcher,
                            rescanIntervalNanos: Int64(configuration.spool.rescanIntervalSeconds * 1e9),
                            stableAgeNanos: Int64(configuration.spool.stableAgeMillis) * 1_000_000)
    }

    /// The feed's next batch; rebuilds layout and watcher when `incoming/` was removed or
    /// replaced. `nil` when the feed failed and had to be rebuilt (the caller goes round again).
    private func nextBatch(_ feed: inout IncomingFeed, timeoutMillis: Int32) -> IncomingFeed.Batch? {
        var lost = false
        var result: IncomingFeed.Batch?
        do {
            let batch = try feed.next(timeoutMillis: timeoutMillis)
            counters.backlog.store(batch.names.count + (feed.scanning ? 1 : 0), ordering: .relaxed)
            lost = batch.watchLost || (batch.scanCompleted && ((try? spool.reopenIfReplaced()) ?? false))
            result = batch
        } catch {
            counters.recordError("incoming/: \(error)")
            lost = true
        }
        if lost {
            events.log(.inotifyOverflow, "incoming/ was removed or replaced; recreating it and rescanning",
                       fields: [("SPOOL_DIR", layout.incoming)])
            do {
                try layout.create()
                _ = try? spool.reopenIfReplaced()
                feed = try makeFeed()
            } catch {
                counters.recordError("re-watching incoming/: \(error)")
                usleep(1_000_000)
            }
        }
        return result
    }

    /// Claims and processes each name; a name whose twin is still in `processing/` waits.
    private func claimAndProcess(_ names: [String], feed: IncomingFeed) {
        for name in names {
            if stopRequested.load(ordering: .relaxed) || isFatal { return }
            acquireCapacity()
            let outcome: ClaimOutcome
            do {
                outcome = try spool.claimOutcome(name)
            } catch {
                releaseCapacity()
                counters.recordError("claim \(name): \(error)")
                events.log(.refused, "cannot claim file, leaving it in incoming/: \(error)", fields: [("SPOOL_FILE", name)])
                continue
            }
            switch outcome {
            case .claimed:
                // Reading, hashing and normalising run on their own thread, so claiming the
                // next file (a rename) overlaps with them: the pipeline uses both cores.
                processing.submit { [self] in process(name) }
            case .busy:
                releaseCapacity()
                if busyNames.count < 4096 { busyNames.append(name) } else { feed.requestRescan() }
            case .vanished, .ignored:
                releaseCapacity()
            }
        }
    }

    /// Names that met a same-named file still in flight get another try.
    private func retryBusyNames() {
        guard !busyNames.isEmpty else { return }
        let names = busyNames
        busyNames.removeAll()
        // Through the same path as new names; still busy ones come back here.
        for name in names where !stopRequested.load(ordering: .relaxed) {
            acquireCapacity()
            if (try? spool.claimOutcome(name)) == .claimed {
                processing.submit { [self] in process(name) }
            } else {
                releaseCapacity()
            }
        }
    }

    /// Stops intake, cancels downloads (their files go back to `incoming/`), waits for every
    /// queued record to be durable, closes the journal. Exit 0 when all of that worked.
    private func shutdown() -> Int32 {
        notifier.stopping(status: "stopping: draining in-flight files")
        events.log(.stopping, "pushspoold stopping", fields: [])
        media?.shutdown()
        let deadline = Posix.monotonicNanos() + 30_000_000_000
        // A journal paused on a full disk will not drain by waiting: `close` retries once and
        // hands the files back, and they stay in processing/ for the next start.
        while counters.inFlight.load(ordering: .acquiring) > 0, Posix.monotonicNanos() < deadline, !journal.stats.paused {
            if let failure = fatalFailure() { return failure }
            notifier.watchdogPing()
            usleep(5_000)
        }
        do {
            try journal.close()
        } catch {
            return fail(errno: error.errno, "journal close failed: \(error)")
        }
        publishMetrics(store.current)
        // The final status.json and metrics are written on `background`; without waiting, the
        // process could exit first and leave the counts of the previous interval behind.
        let flushed = DispatchSemaphore(value: 0)
        background.submit { flushed.signal() }
        _ = flushed.wait(timeout: .now() + 5)
        let left = counters.inFlight.load(ordering: .acquiring)
        if left > 0 {
            events.log(.stopping, "stopped with files still in processing/; they are taken again at the next start",
                       fields: [("IN_FLIGHT", String(left))])
        }
        return 0
    }

    /// Logs, tells systemd why, and returns the exit status for a failing exit.
    private func fail(errno code: Int32, _ message: String) -> Int32 {
        events.log(.fatal, message, fields: [("ERRNO", String(code))])
        notifier.failing(errno: code, status: "failed: \(message)")
        return 1
    }

    private var isFatal: Bool { fatalError.withLock { $0 != nil } }

    private func fatalFailure() -> Int32? {
        guard let error = fatalError.withLock({ $0 }) else { return nil }
        media?.shutdown()
        return fail(errno: error.errno, "journal can no longer be trusted, stopping without writing more: \(error)")
    }

    private func installSignalHandlers() {
        let queue = DispatchQueue(label: "pushspool.signals")
        for signalNumber in [SIGTERM, SIGINT, SIGHUP] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
            source.setEventHandler { [self] in
                if signalNumber == SIGHUP {
                    reloadRequested.store(true, ordering: .relaxed)
                } else {
                    stopRequested.store(true, ordering: .relaxed)
                }
                waker.withLock { $0?.wake() }
            }
            source.resume()
            signalSources.append(source)
        }
    }

    // MARK: - Reload

    /// Re-reads the configuration; the new one replaces the old only if it loads whole.
    private func reload() {
        notifier.reloading()
        switch store.reload() {
        case .applied(let changed, let restartRequired):
            let configuration = store.current
            normalizerOptions.withLock { $0 = Self.normalizerOptions(for: configuration) }
            // The media fetcher and journal keep the options they were opened with.
            let needsRestart = restartRequired + changed.filter { $0.hasPrefix("Media.") || $0.hasPrefix("Journal.") }
                .filter { !restartRequired.contains($0) }
            var fields: [(String, String)] = [("CONFIG_FILE", arguments.configFile), ("CHANGED", changed.joined(separator: " "))]
            if !needsRestart.isEmpty { fields.append(("RESTART_NEEDED_FOR", needsRestart.joined(separator: " "))) }
            events.log(.reload, needsRestart.isEmpty
                ? "configuration reloaded (\(changed.count) changed)"
                : "configuration reloaded; \(needsRestart.joined(separator: ", ")) take effect at the next restart",
                fields: fields)
        case .rejected(let error):
            counters.recordError("reload failed: \(error)")
            events.log(.reloadFailed, "configuration reload failed, keeping the previous one: \(error)",
                       fields: [("CONFIG_FILE", arguments.configFile)])
        }
        notifier.ready(status: counters.statusLine(paused: journal.stats.paused))
    }

    // MARK: - Intake

    /// Blocks until fewer than `capacityLimit` files are in flight, petting the watchdog
    /// while it waits on a healthy journal (a full batch is not a wedged loop).
    private func acquireCapacity() {
        while capacity.wait(timeout: .now() + .milliseconds(100)) == .timedOut {
            if isFatal || stopRequested.load(ordering: .relaxed) && journal.stats.paused { break }
            notifier.watchdogPing()
        }
        counters.inFlight.add(1, ordering: .relaxed)
    }

    private func releaseCapacity() {
        counters.inFlight.subtract(1, ordering: .releasing)
        capacity.signal()
    }

    private func retryHandedBackFiles() {
        let names = retryProcessing.withLock { names -> [String] in
            defer { names.removeAll() }
            return names
        }
        for name in names {
            acquireCapacity()
            processing.submit { [self] in process(name) }
        }
    }

    // MARK: - One file

    /// Takes a claimed file (now in `processing/`) to its end: quarantined, a duplicate, or
    /// handed to media and the journal. Always ends in exactly one `finish*` call.
    private func process(_ name: String) {
        if isFatal {
            // The journal stopped for good: touch nothing more; the file stays in processing/.
            releaseCapacity()
            return
        }
        let read: SpoolReadResult
        do {
            read = try spool.read(processing: name)
        } catch {
            // Gone, or unreadable for a transient reason (EIO, EMFILE): leave it for the next start.
            counters.recordError("read \(name): \(error)")
            events.log(.refused, "cannot read claimed file, leaving it in processing/: \(error)",
                       fields: [("SPOOL_FILE", name)])
            releaseCapacity()
            return
        }
        switch read {
        case .refused(let code, let message):
            quarantine(name, code: code, message: message, stage: .read, size: nil, sha256: nil)
        case .contents(let file):
            let bytes = file.bytes
            let options = normalizerOptions.withLock { $0 }
            let digest = SHA256.hex(of: bytes)
            switch Normalizer.normalize(bytes, options: options) {
            case .refused(let refusal):
                quarantine(name, code: refusal.code.rawValue, message: refusal.message, stage: .normalize,
                           size: bytes.count, sha256: digest)
            case .accepted(let notification):
                let source = SourceFile(name: name, size: bytes.count, sha256: digest)
                fetchMediaThenJournal(notification, source: source)
            }
        }
    }

    private func fetchMediaThenJournal(_ notification: PushNotification, source: SourceFile) {
        let decision = MediaDecision(notification: notification, allowHTTP: mediaAllowsHTTP,
                                     enabled: media != nil)
        guard case .fetch(let url) = decision, let media else {
            // The journal's own dedup check in `submit` covers payloads without a download.
            if case .skip(let reason) = decision, notification.mediaUrl != nil {
                counters.mediaSkipped.add(1, ordering: .relaxed)
                append(notification, source: source, media: .skipped(url: notification.mediaUrl ?? "", reason: reason))
            } else {
                append(notification, source: source, media: nil)
            }
            return
        }
        if journal.contains(key: notification.dedupKey) {
            // Already journaled (a re-delivery, or a leftover of a crash): no download for it.
            finishDuplicate(source.name, notification: notification)
            return
        }
        if counters.mediaInFlight.load(ordering: .relaxed) >= mediaMaxWaiting {
            // Every payload waiting for media also holds a slot of the in-flight bound; past
            // this many, the record lands now without its media instead of blocking intake.
            counters.mediaSkipped.add(1, ordering: .relaxed)
            append(notification, source: source, media: .skipped(url: url, reason: "media_backlog_full"))
            return
        }
        counters.mediaInFlight.add(1, ordering: .relaxed)
        media.fetch(url: url) { [self] outcome in
            counters.mediaInFlight.subtract(1, ordering: .relaxed)
            if outcome.wasCancelled {
                // Shutdown: keep the payload for the next start rather than record a failure
                // that only happened because we were stopping.
                rollback(source.name)
                return
            }
            if outcome.status == .stored {
                counters.mediaStored.add(1, ordering: .relaxed)
            } else {
                counters.mediaFailed.add(1, ordering: .relaxed)
                let code = outcome.error?.code.rawValue ?? "unknown"
                events.log(.mediaFailed, "media download failed: \(outcome.error.map { "\($0)" } ?? code)",
                           fields: [("PUSH_ID", notification.id), ("PUSH_VENDOR", notification.vendor.rawValue),
                                    ("SPOOL_FILE", source.name), ("MEDIA_HOST", urlHost(url)),
                                    ("REASON_CODE", code), ("DURATION_USEC", String(outcome.durationMillis * 1000))])
            }
            append(notification, source: source, media: .fetched(outcome))
        }
    }

    private func append(_ notification: PushNotification, source: SourceFile, media: RecordMedia?) {
        let ingestMillis = Posix.wallClockMillis()
        let body = RecordBuilder.body(notification: notification, source: source, media: media, ingestMillis: ingestMillis)
        let started = Posix.monotonicNanos()
        journal.submit(key: notification.dedupKey, body: body, ingestMillis: ingestMillis) { [self] result in
            switch result {
            case .committed(let seq):
                finishIngested(source.name, notification: notification, seq: seq,
                               durationNanos: Posix.monotonicNanos() - started)
            case .duplicate:
                finishDuplicate(source.name, notification: notification)
            case .failed(let error):
                switch error.kind {
                case .recordTooLarge, .invalidKey:
                    quarantine(source.name, code: "record_too_large", message: "\(error)", stage: .journal,
                               size: source.size, sha256: source.sha256)
                case .noSpace:
                    // Nothing was acknowledged; the file stays in processing/ and is retried
                    // once the journal has room again.
                    counters.recordError("journal: disk full")
                    retryProcessing.withLock { $0.append(source.name) }
                    releaseCapacity()
                default:
                    fatalError.withLock { if $0 == nil { $0 = error } }
                    releaseCapacity()
                }
            }
        }
    }

    private func finishIngested(_ name: String, notification: PushNotification, seq: UInt64, durationNanos: UInt64) {
        removeProcessed(name)
        onCommitted?(name, seq)
        counters.ingested.add(1, ordering: .relaxed)
        metrics.increment(MetricFamily.ingested)
        events.log(.ingested, "payload ingested", fields: payloadFields(notification, file: name) + [
            ("JOURNAL_SEQ", String(seq)), ("DURATION_USEC", String(durationNanos / 1000)),
        ])
        releaseCapacity()
    }

    private func finishDuplicate(_ name: String, notification: PushNotification) {
        removeProcessed(name)
        counters.duplicates.add(1, ordering: .relaxed)
        metrics.increment(MetricFamily.duplicates)
        events.log(.duplicate, "duplicate payload, already journaled", fields: payloadFields(notification, file: name))
        releaseCapacity()
    }

    private func removeProcessed(_ name: String) {
        do {
            try spool.complete(processing: name)
        } catch {
            // The record is durable; a leftover file is re-processed and deduplicated at the next start.
            counters.recordError("unlink \(name): \(error)")
        }
    }

    private func quarantine(_ name: String, code: String, message: String, stage: QuarantineReason.Stage, size: Int?, sha256: String?) {
        let reason = QuarantineReason(code: code, message: message, stage: stage, daemonVersion: pushspoolVersion, file: name,
                                      size: size.map { Int64($0) }, sha256: sha256, at: Timestamp.now())
        do {
            try spool.quarantine(processing: name, reason: reason)
            counters.refused.add(1, ordering: .relaxed)
            metrics.increment(MetricFamily.refused, labels: ["reason": code])
            events.log(.refused, "payload refused: \(message)",
                       fields: [("SPOOL_FILE", name), ("REASON_CODE", code)])
        } catch {
            counters.recordError("quarantine \(name): \(error)")
            events.log(.refused, "cannot quarantine refused file, leaving it in processing/: \(error)",
                       fields: [("SPOOL_FILE", name), ("REASON_CODE", code)])
        }
        releaseCapacity()
    }

    private func rollback(_ name: String) {
        do {
            try spool.rollback(processing: name)
        } catch {
            counters.recordError("rollback \(name): \(error)")
        }
        releaseCapacity()
    }

    private func payloadFields(_ notification: PushNotification, file: String) -> [(String, String)] {
        var fields = [("PUSH_ID", notification.id), ("PUSH_VENDOR", notification.vendor.rawValue), ("SPOOL_FILE", file)]
        if let user = notification.user { fields.append(("PUSH_USER", user)) }
        return fields
    }

    // MARK: - Reporting

    private func publishMetrics(_ configuration: Configuration) {
        let stats = journal.stats
        metrics.set(MetricFamily.backlog, to: Double(counters.backlog.load(ordering: .relaxed)))
        metrics.set(MetricFamily.mediaInFlight, to: Double(counters.mediaInFlight.load(ordering: .relaxed)))
        metrics.set(MetricFamily.media, labels: ["status": "stored"], to: Double(counters.mediaStored.load(ordering: .relaxed)))
        metrics.set(MetricFamily.media, labels: ["status": "failed"], to: Double(counters.mediaFailed.load(ordering: .relaxed)))
        metrics.set(MetricFamily.media, labels: ["status": "skipped"], to: Double(counters.mediaSkipped.load(ordering: .relaxed)))
        metrics.set(MetricFamily.journalBytes, to: Double(stats.bytes))
        let statusDirectory = stateDirectory
        let textfile = configuration.metrics.textfilePath
        let statusJSON = StatusFile.render(counters: counters.snapshot(), journal: stats, media: media?.stats,
                                           lastError: counters.lastError)
        let metrics = metrics
        background.submit {
            try? Posix.writeFileAtomically(directory: statusDirectory, name: "status.json", bytes: statusJSON)
            if let textfile {
                try? metrics.writeTextfile(path: textfile)
            }
        }
    }

    /// Routes the writer's events to the event log. Runs on the journal's writer thread;
    /// `EventLog.log` does not block on anything the writer holds.
    private static func journalEventHandler(events: EventLog, journalDirectory: String) -> @Sendable (JournalEvent) -> Void {
        { event in
            switch event {
            case .pausedNoSpace(let error):
                events.log(.noSpace, "journal disk full: intake paused; nothing unwritten is acknowledged and payloads wait "
                           + "in incoming/ and processing/; free space on the file system of \(journalDirectory) and intake "
                           + "resumes by itself (\(error))",
                           fields: [("ERRNO", String(error.errno)), ("JOURNAL_DIR", journalDirectory), ("JOURNAL_STATE", "paused")])
            case .resumed:
                events.log(.noSpace, "journal has space again: queued records written, intake resumed", priority: 5,
                           fields: [("JOURNAL_DIR", journalDirectory), ("JOURNAL_STATE", "resumed")])
            case .slowSync, .checkpointFailed:
                break
            }
        }
    }

    private static func logRecovery(_ report: RecoveryReport, events: EventLog, durationNanos: UInt64) {
        var fields = [
            ("JOURNAL_SEQ", String(report.lastSeq)), ("SEGMENTS", String(report.segments)),
            ("RECORDS", String(report.records)), ("DURATION_USEC", String(durationNanos / 1000)),
        ]
        if report.tornBytesTruncated > 0 {
            fields.append(("TORN_BYTES", String(report.tornBytesTruncated)))
            events.log(.tornTail, "journal tail was torn by a crash; cut back \(report.tornBytesTruncated) bytes to the last whole record",
                       fields: fields)
        }
        for segment in report.quarantined {
            events.log(.corruption, "damaged journal segment moved to quarantine: \(segment)", fields: fields)
        }
        events.log(.recovery, "journal recovered: \(report.records) records in \(report.segments) segments, last seq \(report.lastSeq)",
                   fields: fields)
    }
}

/// Where a record's bytes came from.
struct SourceFile: Sendable {
    var name: String
    var size: Int
    var sha256: String
}

/// Why the daemon could not start or had to stop.
package struct DaemonError: Error, Sendable, CustomStringConvertible {
    package var stage: String
    package var message: String
    package var errno: Int32
    package var description: String { "\(stage): \(message)" }
}

/// The host part of a URL for logs (never the path or query, which may carry tokens).
func urlHost(_ url: String) -> String {
    guard let schemeEnd = url.range(of: "://") else { return "" }
    let rest = url[schemeEnd.upperBound...]
    let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
    let hostPort = authority.split(separator: "@").last.map(String.init) ?? ""
    if hostPort.hasPrefix("[") { return String(hostPort.prefix { $0 != "]" }) + "]" }
    return String(hostPort.prefix { $0 != ":" })
}

extension JournalError {
    /// The errno behind the error, for `ERRNO=` and the exit path; EIO when there is none.
    var errno: Int32 {
        switch kind {
        case .io(let error), .noSpace(let error), .syncFailed(let error): error.errno
        case .locked: EWOULDBLOCK
        default: EIO
        }
    }
}
