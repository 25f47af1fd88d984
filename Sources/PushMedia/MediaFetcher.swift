@preconcurrency import Glibc
internal import CCurl
import Dispatch
import PushMediaCore
import PushSystem
import Synchronization

/// Downloads media with libcurl's multi interface on one dedicated network thread: many
/// slow servers cost file descriptors, not threads or CPU, and nothing blocks Swift's
/// cooperative pool. Finished bodies are verified, stored and thumbnailed on a few
/// finishing threads so disk and image work never stalls the network loop.
///
/// `Sendable`: shared state is behind a lock; curl handles belong to the network thread.
package final class MediaFetcher: Sendable {
    private let core: FetcherCore

    /// Creates the store directory (clearing stale temp files) and starts the network thread.
    package init(options: MediaOptions) throws(MediaFailure) {
        guard CurlGlobal.initialized else {
            throw MediaFailure(.io, "curl_global_init failed; libcurl cannot be used")
        }
        if let problem = options.problem {
            throw MediaFailure(.config, problem)
        }
        var allowed: [IPNetwork] = []
        for text in options.allowNetworks {
            guard let network = IPNetwork(text) else {
                throw MediaFailure(.config, "AllowNetworks= entry \"\(text)\" is not a CIDR such as 127.0.0.1/32 or fd00::/8")
            }
            allowed.append(network)
        }
        do {
            try MediaStore.prepare(directory: options.storeDirectory)
        } catch {
            throw MediaFailure(.io, "cannot prepare media store: \(error)")
        }
        if options.thumbnailMaxEdge > 0 && !Thumbnailer.available {
            throw MediaFailure(.io, "libvips could not be initialised; install libvips or set ThumbnailMaxEdge=0 to run without thumbnails")
        }
        core = try FetcherCore(options: options, policy: AddressPolicy(allowed: allowed))
        core.start()
    }

    deinit {
        core.shutdown()
    }

    /// Fetches `url` (or reuses a download of it in flight or within the dedup window) and
    /// calls `completion` with the outcome, on a fetcher thread, exactly once; keep it short.
    package func fetch(url: String, completion: @escaping @Sendable (MediaOutcome) -> Void) {
        core.submit(url: url, completion: completion)
    }

    /// Cancels queued and running downloads; their outcomes are `failed` with code
    /// `cancelled` (keep those payloads for the next start). Returns once the network thread
    /// has stopped, normally well within a second. Later fetches are cancelled at once.
    /// Safe to call more than once and from inside a completion (it then does not wait).
    package func shutdown() {
        core.shutdown()
    }

    /// A snapshot of the counters.
    package var stats: MediaStats { core.statsSnapshot() }
}

/// Wraps the multi handle so the thread-safe `curl_multi_wakeup` can be called from any
/// thread. `@unchecked Sendable`: every other use happens on the network thread.
struct MultiHandle: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
}

typealias Completion = @Sendable (MediaOutcome) -> Void

/// State shared between callers, the network thread and the finishing threads.
struct SharedState: ~Copyable {
    var closed = false
    var submissions: [String] = []
    var waiters: [String: [Completion]] = [:]
    var recent: [String: (outcome: MediaOutcome, expiresNanos: UInt64)] = [:]
    /// Size of `recent` at which expired entries are swept (doubles, so sweeps stay amortised O(1)).
    var sweepAt = 1024
    var stats = MediaStats()
}

/// A finished body handed from the network thread to a finishing thread.
struct FinishedBody: Sendable {
    var url: String
    var tempPath: String
    var fd: Int32
    var sha256: String
    var type: MediaType
    var bytes: Int64
    var attempts: Int
    var startedNanos: UInt64
}

final class FetcherCore: Sendable {
    let options: MediaOptions
    let policy: AddressPolicy
    let multi: MultiHandle
    let state = Locked(SharedState())
    /// `shutdown` called from a completion does not wait for the finisher it runs on.
    let finishers: [SerialWorker]
    /// `pthread_self()` of the network thread, for the same reason.
    let networkThread = Atomic<UInt>(0)
    let nextFinisher = Atomic<Int>(0)
    let tempCounter = Atomic<Int>(0)
    let stopped = DispatchSemaphore(value: 0)
    let started = Atomic<Bool>(false)
    let thumbnailer: Thumbnailer?

    init(options: MediaOptions, policy: AddressPolicy) throws(MediaFailure) {
        guard let multi = curl_multi_init() else { throw MediaFailure(.io, "curl_multi_init failed") }
        self.options = options
        self.policy = policy
        self.multi = MultiHandle(pointer: multi)
        finishers = (0..<max(1, options.finishThreads)).map { index in
            SerialWorker(name: "media-finish-\(index)")
        }
        thumbnailer = options.thumbnailMaxEdge > 0 ? Thumbnailer(maxEdge: options.thumbnailMaxEdge, maxPixels: options.thumbnailMaxPixels) : nil
    }

    deinit {
        curl_multi_cleanup(multi.pointer)
    }

    func start() {
        started.store(true, ordering: .releasing)
        let loop = NetworkLoop(core: self)
        startThread(name: "media-net") {
            self.networkThread.store(UInt(pthread_self()), ordering: .releasing)
            loop.run()
            self.stopped.signal()
        }
    }

    /// Registers `completion` for `url`.
    func submit(url: String, completion: @escaping Completion) {
        let now = Posix.monotonicNanos()
        enum Action { case none, wake, cancelled, reuse(MediaOutcome) }
        let action: Action = state.withLock { state in
            if state.closed {
                state.stats.failedByCode[MediaFailure.Code.cancelled.rawValue, default: 0] += 1
                return .cancelled
            }
            if let recent = state.recent[url] {
                if recent.expiresNanos > now, recent.outcome.path.map({ access($0, F_OK) == 0 }) ?? true {
                    state.stats.reused += 1
                    return .reuse(recent.outcome)
                }
                state.recent[url] = nil
            }
            if state.waiters[url] != nil {
                state.waiters[url]!.append(completion)
                state.stats.reused += 1
                return .none
            }
            state.waiters[url] = [completion]
            state.submissions.append(url)
            state.stats.queued += 1
            return .wake
        }
        switch action {
        case .none: break
        case .wake: curl_multi_wakeup(multi.pointer)
        case .cancelled:
            completion(MediaOutcome(url: url, status: .failed, error: FetcherCore.cancelledFailure))
        case .reuse(var outcome):
            outcome.reused = true
            outcome.attempts = 0
            outcome.durationMillis = 0
            completion(outcome)
        }
    }

    static let cancelledFailure = MediaFailure(.cancelled, "the daemon is shutting down; the payload is kept and fetched again at next start", transient: true)

    /// Delivers the outcome for `url` to everyone waiting for it and records it.
    func complete(_ outcome: MediaOutcome) {
        let now = Posix.monotonicNanos()
        let waiters: [Completion] = state.withLock { state in
            let waiters = state.waiters.removeValue(forKey: outcome.url) ?? []
            switch outcome.status {
            case .stored:
                state.stats.stored += 1
                state.stats.bytesStored = Bounded.sum(state.stats.bytesStored, outcome.bytes ?? 0)
                if outcome.thumbnail != nil { state.stats.thumbnails += 1 }
                if outcome.decodable == false { state.stats.undecodable += 1 }
            case .failed:
                state.stats.failedByCode[outcome.error?.code.rawValue ?? "unknown", default: 0] += 1
            case .skipped:
                state.stats.skipped += 1
            }
            // Cancelled and transient outcomes are not remembered: the next payload may succeed.
            if options.dedupWindow > .zero, outcome.status == .stored || outcome.error?.isTransient == false {
                if state.recent.count >= state.sweepAt { FetcherCore.sweep(&state, now: now, limit: options.dedupMaxEntries) }
                state.recent[outcome.url] = (outcome, Bounded.deadline(now, plus: options.dedupWindow.clampedUInt64Nanoseconds))
            }
            return waiters
        }
        for (index, waiter) in waiters.enumerated() {
            var copy = outcome
            if index > 0 { copy.reused = true }
            waiter(copy)
        }
    }

    /// Drops expired dedup entries and, past `limit`, the older half, so a busy daemon with a
    /// long window cannot grow the map without bound.
    static func sweep(_ state: inout SharedState, now: UInt64, limit: Int) {
        state.recent = state.recent.filter { $0.value.expiresNanos > now }
        if state.recent.count > limit {
            let keep = state.recent.sorted { $0.value.expiresNanos > $1.value.expiresNanos }.prefix(limit / 2)
            state.recent = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
        }
        state.sweepAt = max(1024, state.recent.count * 2)
    }

    func shutdown() {
        state.withLock { $0.closed = true }
        guard started.load(ordering: .acquiring) else { return }
        curl_multi_wakeup(multi.pointer)
        // Called from a completion (on the network thread or a finishing queue): waiting for
        // that thread would deadlock; the loop sees `closed` as soon as the callback returns.
        if networkThread.load(ordering: .acquiring) == UInt(pthread_self()) { return }
        // Every caller waits; each passes the single signal on to the next.
        stopped.wait()
        stopped.signal()
        // Finishing work already handed over completes; wait for it so no callback runs late.
        for finisher in finishers where !finisher.isCurrent {
            finisher.waitUntilIdle()
        }
    }

    func statsSnapshot() -> MediaStats {
        state.withLock { $0.stats }
    }

    func newTempPath() -> String {
        let n = tempCounter.add(1, ordering: .relaxed).newValue
        return "\(options.storeDirectory)/\(MediaStore.tempDirectoryName)/\(getpid())-\(n).part"
    }

    /// Verifies, stores and thumbnails a complete body, on a finishing thread.
    func finish(_ body: FinishedBody) {
        let index = nextFinisher.add(1, ordering: .relaxed).newValue % finishers.count
        finishers[index].submit {
            self.complete(self.store(body))
        }
    }

    private func store(_ body: FinishedBody) -> MediaOutcome {
        var outcome = MediaOutcome(url: body.url, status: .stored, attempts: body.attempts)
        let relative = MediaStore.relativePath(sha256: body.sha256, fileExtension: body.type.fileExtension)
        let finalPath = options.storeDirectory + "/" + relative
        let directory = options.storeDirectory + "/" + relative.prefix(2)
        do throws(SystemError) {
            // The record names this path once the journal commits, so the bytes must be durable first.
            try Posix.fsync(body.fd, subject: body.tempPath)
            Posix.close(body.fd)
            try Posix.mkdirIfMissing(directory)
            try Posix.renameat(AT_FDCWD, body.tempPath, AT_FDCWD, finalPath)
            try Posix.syncDirectory(directory)
        } catch {
            Posix.close(body.fd)
            try? Posix.unlinkat(AT_FDCWD, body.tempPath)
            outcome.status = .failed
            outcome.error = MediaFailure(.io, "storing \(finalPath) failed: \(error)", transient: true)
            outcome.durationMillis = Int64((Posix.monotonicNanos() - body.startedNanos) / 1_000_000)
            return outcome
        }
        outcome.path = finalPath
        outcome.sha256 = body.sha256
        outcome.contentType = body.type.mimeType
        outcome.bytes = body.bytes
        if body.type.isImage, let thumbnailer {
            let result = thumbnailer.makeThumbnail(source: finalPath, sha256: body.sha256, storeDirectory: options.storeDirectory)
            outcome.decodable = result.decodable
            outcome.thumbnail = result.thumbnail
            outcome.thumbnailError = result.error
        }
        outcome.durationMillis = Int64((Posix.monotonicNanos() - body.startedNanos) / 1_000_000)
        return outcome
    }
}

/// Starts a detached POSIX thread running `body`. A process that cannot start its network
/// thread cannot fetch anything: that is a start-up failure, not a state to limp on in.
func startThread(name: String, _ body: @escaping @Sendable () -> Void) {
    do {
        try PosixThread.detach(name: name, body)
    } catch {
        preconditionFailure("\(name): \(error)")
    }
}
