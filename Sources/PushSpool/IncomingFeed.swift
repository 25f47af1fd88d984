import PushSystem

/// The spool protocol for `incoming/` in one place: inotify events, a full rescan at start-up,
/// after `IN_Q_OVERFLOW` and periodically, and the stable-age rule for files a rescan finds.
/// Each `next` call hands out a bounded batch of names ready to `claim`.
///
/// Not `Sendable`: drive it from the ingest thread, which owns the `Spool` and the watcher.
///
///     let feed = IncomingFeed(spool: spool, watcher: watcher)
///     while running {
///         let batch = try feed.next(timeoutMillis: 1000)   // pet the watchdog between calls
///         for name in batch.names where try spool.claim(name) { ... }
///     }
package final class IncomingFeed {
    /// One call's worth of work.
    package struct Batch: Sendable, Equatable {
        /// Names to claim, each at most once per batch.
        package var names: [String] = []
        /// A `Waker` fired.
        package var woken = false
        /// `incoming/` was removed or replaced: recreate the layout, reopen, make a new feed.
        package var watchLost = false
        /// A full scan finished during this call (the first one completes start-up).
        package var scanCompleted = false
    }

    /// Counters for STATUS= lines and metrics.
    package struct Stats: Sendable, Equatable {
        package var scansStarted = 0
        package var scansCompleted = 0
        package var overflows = 0
        package var deferred = 0
    }

    private let spool: Spool
    private let watcher: IncomingWatcher
    private let rescanIntervalNanos: Int64
    private let batchSize: Int
    private var filter: StableAgeFilter
    private var scan: SpoolScan?
    /// Another full scan must follow the running one (events were lost while it ran).
    private var rescanPending = true
    /// Monotonic: a wall-clock jump must not stall or storm the periodic rescan.
    private var nextPeriodicScanMonotonic: Int64 = 0
    package private(set) var stats = Stats()

    /// - Parameters:
    ///   - rescanIntervalNanos: the periodic safety-net rescan (default 5 minutes).
    ///   - stableAgeNanos: how old a rescan-found file's mtime must be (default 1 s).
    ///   - batchSize: at most this many names per scan step.
    package init(spool: Spool, watcher: IncomingWatcher, rescanIntervalNanos: Int64 = 300_000_000_000,
                 stableAgeNanos: Int64 = 1_000_000_000, batchSize: Int = 1024, maxDeferred: Int = 4096) {
        self.spool = spool
        self.watcher = watcher
        self.rescanIntervalNanos = rescanIntervalNanos
        self.batchSize = batchSize
        self.filter = StableAgeFilter(stableAgeNanos: stableAgeNanos, capacity: maxDeferred)
    }

    /// Whether a full scan is running or due (start-up, overflow): the caller should not
    /// report "idle" yet.
    package var scanning: Bool { scan != nil || rescanPending }

    /// Asks for a full rescan (e.g. on SIGHUP or after an operator's `failed retry ALL`).
    package func requestRescan() {
        rescanPending = true
    }

    /// Waits at most `timeoutMillis` for work and returns it. Returns at once while a scan or
    /// due revisits have names to hand out.
    package func next(timeoutMillis: Int32) throws(SpoolError) -> Batch {
        var batch = Batch()
        var seen = Set<String>()
        func add(_ name: String) {
            if seen.insert(name).inserted { batch.names.append(name) }
        }

        let now = Self.wallNanos()
        let monotonic = Int64(Posix.monotonicNanos())
        if scan == nil && (rescanPending || monotonic >= nextPeriodicScanMonotonic) {
            scan = try spool.scanIncoming(batchSize: batchSize)
            rescanPending = false
            nextPeriodicScanMonotonic = monotonic + rescanIntervalNanos
            stats.scansStarted += 1
        }

        // Names found by a scan, and deferred names whose time has come, go through the rule.
        if let running = scan {
            if let entries = try running.next() {
                for entry in entries { try consider(entry.name, now: now, add: add) }
            } else {
                scan = nil
                batch.scanCompleted = true
                stats.scansCompleted += 1
            }
        }
        for name in filter.due(nowNanos: now).prefix(batchSize) { try consider(name, now: now, add: add) }
        if filter.overflowed {
            // Files were found that could not be remembered: look again once they can be stable.
            filter.acknowledgeOverflow()
            nextPeriodicScanMonotonic = min(nextPeriodicScanMonotonic, monotonic + filter.stableAgeNanos)
        }
        stats.deferred = filter.count

        // Events: the watcher's names were complete when they fired (rename, or close after write).
        let busy = scan != nil || !batch.names.isEmpty || rescanPending
        let wait = busy ? 0 : waitMillis(now: now, monotonic: monotonic, limit: timeoutMillis)
        for event in try watcher.wait(timeoutMillis: wait) {
            switch event {
            case .file(let name):
                filter.forget(name)
                add(name)
            case .overflow:
                stats.overflows += 1
                rescanPending = true
            case .watchLost:
                batch.watchLost = true
            case .woken:
                batch.woken = true
            }
        }
        return batch
    }

    private func consider(_ name: String, now: Int64, add: (String) -> Void) throws(SpoolError) {
        // With no stable age the rule takes every name whatever its status says: skip the
        // `lstat`. A name gone meanwhile is found gone by the claim's rename (`.vanished`).
        if filter.stableAgeNanos <= 0 {
            add(name)
            return
        }
        guard let status = try spool.status(incoming: name) else {
            filter.forget(name)
            return
        }
        if filter.decide(name, status: status, nowNanos: now) == .take { add(name) }
    }

    /// How long the watcher may block: until the next revisit or periodic scan, capped.
    private func waitMillis(now: Int64, monotonic: Int64, limit: Int32) -> Int32 {
        var nanos = nextPeriodicScanMonotonic - monotonic
        if let due = filter.nextDueNanos { nanos = min(nanos, due - now) }
        let millis = max(0, (nanos + 999_999) / 1_000_000)
        if limit < 0 { return Int32(clamping: millis) }
        return Int32(min(Int64(limit), millis))
    }

    static func wallNanos() -> Int64 {
        Posix.wallClockMillis() * 1_000_000
    }
}
