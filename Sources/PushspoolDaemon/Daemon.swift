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
/// The ingest loop runs on the thread that calls `run()` (the main thread in `pushspoold`);
/// the journal's writer thread and the media threads finish each file through completions.
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
    /// `[Media] AllowHTTP` as the fetcher was opened with (a change needs a restart).
    private let mediaAllowsHTTP: Bool
    private let notifier: SystemdNotifier
    private let events: EventLog
    private let metrics: Metrics
    package let counters = Counters()
    private let background = BlockingQueue(label: "pushspool.background")

    private let stopRequested = Atomic<Bool>(false)
    private let reloadRequested = Atomic<Bool>(false)
    private let fatalError = Mutex<JournalError?>(nil)
    /// Bounds the files claimed but not yet finished (journaled, quarantined or rolled back).
    private let capacity: DispatchSemaphore
    private let capacityLimit: Int
    /// Names waiting to be handled; touched by the ingest thread only.
    private var queue = WorkQueue()
    /// The streaming rescan in progress, if any; ingest thread only.
    private var scan: SpoolScan?
    /// Files a rescan found still being written (a plain copy into `incoming/`); ingest thread only.
    private var stableAge: StableAgeFilter
    private var lastDeferredCheck: UInt64 = 0
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
        self.stableAge = StableAgeFilter(stableAgeNanos: Int64(configuration.spool.stableAgeMillis) * 1_000_000)

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
        var watcher: IncomingWatcher
        do {
            watcher = try IncomingWatcher(layout: layout)
            let newWaker = try watcher.makeWaker()
            waker.withLock { $0 = newWaker }
        } catch {
            return fail(errno: error.system?.errno ?? EIO, "cannot watch \(layout.incoming): \(error)")
        }

        // Leftovers from a previous run first: they were claimed, maybe journaled already;
        // the journal's id index makes re-processing them idempotent.
        notifier.status("re-processing files left in processing/")
        do {
            let leftovers = try spool.scanProcessing()
            while let batch = try leftovers.next() {
                for entry in batch {
                    _ = queue.push(.processing(entry.name), force: true)
                }
                drainQueueOnce(limit: Int.max)
            }
        } catch {
            return fail(errno: error.system?.errno ?? EIO, "cannot read \(layout.processing): \(error)")
        }

        // The first full scan completes before READY=1, extending systemd's start timeout
        // while a large backlog drains. In small steps: systemd 252 postpones the watchdog by
        // the same extension, and a long one would hide a wedged scan from it.
        startRescan(reason: nil)
        var lastScanStatus = Posix.monotonicNanos()
        while scan != nil || !queue.isEmpty {
            if stopRequested.load(ordering: .relaxed) || isFatal { break }
            drainQueueOnce(limit: 512)
            notifier.extendTimeoutIfDue(by: .seconds(10))
            let now = Posix.monotonicNanos()
            if now - lastScanStatus > 5_000_000_000 {
                notifier.status("start-up scan: " + counters.statusLine(paused: false))
                lastScanStatus = now
            }
            notifier.watchdogPing()
        }
        if let failure = fatalFailure() { return failure }

        notifier.ready(status: counters.statusLine(paused: false))
        readyFlag.store(true, ordering: .releasing)
        events.log(.ready, "pushspoold ready", fields: [("SPOOL_DIR", layout.root), ("STATE_DIR", stateDirectory)])

        var lastStatus = Posix.monotonicNanos()
        var lastRescan = Posix.monotonicNanos()
        var lastMetrics = Posix.monotonicNanos()
        while !stopRequested.load(ordering: .relaxed) {
            if let failure = fatalFailure() { return failure }
            notifier.watchdogPing()
            if reloadRequested.exchange(false, ordering: .relaxed) { reload() }

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
            if scan == nil, now - lastRescan >= UInt64(configuration.spool.rescanIntervalSeconds * 1e9) || stableAge.overflowed {
                stableAge.acknowledgeOverflow()
                startRescan(reason: nil)
                lastRescan = now
            }
            if now - lastDeferredCheck >= 100_000_000 {
                revisitDeferred()
                lastDeferredCheck = now
            }
            if journal.stats.paused {
                // Disk full: claim nothing new; the journal retries its queued batch itself.
                usleep(100_000)
                continue
            }
            retryHandedBackFiles()

            let busy = !queue.isEmpty || scan != nil
            if busy { drainQueueOnce(limit: 256) }
            // Pick up fresh events without sleeping while busy, so inotify's queue does not overflow.
            let watchEvents: [WatchEvent]
            do {
                watchEvents = try watcher.wait(timeoutMillis: busy ? 0 : 100)
            } catch {
                counters.recordError("inotify: \(error)")
                watchEvents = [.watchLost]
            }
            if absorb(watchEvents) {
                // incoming/ itself went away or the watch broke: rebuild both and rescan.
                do {
                    try layout.create()
                    watcher = try IncomingWatcher(layout: layout)
                    let newWaker = try watcher.makeWaker()
                    waker.withLock { $0 = newWaker }
                } catch {
                    counters.recordError("re-watching incoming/: \(error)")
                    usleep(1_000_000)
                }
                startRescan(reason: "the watch on incoming/ was lost")
            }
        }
        return shutdown()
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
            usleep(5_000)
        }
        do {
            try journal.close()
        } catch {
            return fail(errno: error.errno, "journal close failed: \(error)")
        }
        publishMetrics(store.current)
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
            stableAge = StableAgeFilter(stableAgeNanos: Int64(configuration.spool.stableAgeMillis) * 1_000_000)
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

    /// Queues the names of `watchEvents`; true when the watch itself was lost.
    private func absorb(_ watchEvents: [WatchEvent]) -> Bool {
        var lost = false
        for event in watchEvents {
            switch event {
            case .file(let name):
                stableAge.forget(name)
                if !queue.push(.incoming(name)) { startRescan(reason: nil) }
            case .overflow:
                startRescan(reason: "inotify queue overflowed")
            case .watchLost:
                lost = true
            case .woken:
                break
            }
        }
        return lost
    }

    private func startRescan(reason: String?) {
        if let reason {
            events.log(.inotifyOverflow, "rescanning incoming/: \(reason)", fields: [("SPOOL_DIR", layout.incoming)])
        }
        guard scan == nil else { return }
        do {
            scan = try spool.scanIncoming()
        } catch {
            counters.recordError("rescan: \(error)")
            events.log(.inotifyOverflow, "cannot scan incoming/: \(error)", fields: [("SPOOL_DIR", layout.incoming)])
        }
    }

    /// Queues the rescan-found files whose stable age has now passed.
    private func revisitDeferred() {
        guard stableAge.count > 0 else { return }
        let now = Int64(Posix.wallClockMillis()) * 1_000_000
        for name in stableAge.due(nowNanos: now) {
            consider(name, nowNanos: now)
        }
    }

    /// Applies the stable-age rule to a name a scan found, queueing it when it is ready.
    private func consider(_ name: String, nowNanos: Int64) {
        let status: EntryStatus?
        do {
            status = try spool.status(incoming: name)
        } catch {
            stableAge.forget(name)
            return
        }
        guard let status else {
            stableAge.forget(name)
            return
        }
        if case .take = stableAge.decide(name, status: status, nowNanos: nowNanos) {
            _ = queue.push(.incoming(name), force: true)
        }
    }

    /// Refills the queue from the streaming scan when it runs low, then handles up to `limit` names.
    private func drainQueueOnce(limit: Int) {
        if queue.count < 1024, let current = scan {
            do {
                if let batch = try current.next() {
                    let now = Int64(Posix.wallClockMillis()) * 1_000_000
                    for entry in batch { consider(entry.name, nowNanos: now) }
                } else {
                    scan = nil
                }
            } catch {
                counters.recordError("rescan: \(error)")
                events.log(.inotifyOverflow, "rescan of incoming/ failed: \(error)", fields: [])
                scan = nil
            }
        }
        counters.backlog.store(queue.count, ordering: .relaxed)
        var handled = 0
        // After a fatal journal error nothing more is claimed: the loop only has to reach its exit.
        while handled < limit, !isFatal, let item = queue.pop() {
            handled += 1
            switch item {
            case .incoming(let name):
                acquireCapacity()
                let claimed: Bool
                do {
                    // `busy`: a file of that name is still in flight; a later rescan takes it.
                    claimed = try spool.claim(name)
                } catch {
                    releaseCapacity()
                    counters.recordError("claim \(name): \(error)")
                    events.log(.refused, "cannot claim file, leaving it in incoming/: \(error)",
                               fields: [("SPOOL_FILE", name)])
                    continue
                }
                if claimed { process(name) } else { releaseCapacity() }
            case .processing(let name):
                acquireCapacity()
                process(name)
            }
        }
    }

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
        for name in names { _ = queue.push(.processing(name), force: true) }
    }

    // MARK: - One file

    /// Takes a claimed file (now in `processing/`) to its end: quarantined, a duplicate, or
    /// handed to media and the journal. Always ends in exactly one `finish*` call.
    private func process(_ name: String) {
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
                if journal.contains(key: notification.dedupKey) {
                    finishDuplicate(name, notification: notification)
                } else {
                    fetchMediaThenJournal(notification, source: source)
                }
            }
        }
    }

    private func fetchMediaThenJournal(_ notification: PushNotification, source: SourceFile) {
        let decision = MediaDecision(notification: notification, allowHTTP: mediaAllowsHTTP,
                                     enabled: media != nil)
        guard case .fetch(let url) = decision, let media else {
            if case .skip(let reason) = decision, notification.mediaUrl != nil {
                counters.mediaSkipped.add(1, ordering: .relaxed)
                append(notification, source: source, media: .skipped(url: notification.mediaUrl ?? "", reason: reason))
            } else {
                append(notification, source: source, media: nil)
            }
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
        let statusJSON = StatusFile.render(counters: counters.snapshot(), journal: stats, lastError: counters.lastError)
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
