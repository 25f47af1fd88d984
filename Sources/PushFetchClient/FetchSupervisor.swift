@preconcurrency import Glibc
import PushMediaCore
import PushSystem
import Synchronization
import Dispatch

/// The daemon's side of privilege separation for media: starts `pushspool-fetch` (or connects
/// to the one systemd runs behind `pushspool-fetch.socket`), sends it URLs, turns its replies
/// into `MediaOutcome`s, and restarts it when it dies or hangs.
///
/// Rules, in the order they matter for the data of record:
/// - Intake never waits for the fetcher: `fetch` only queues and tries one non-blocking send.
/// - A request the fetcher had when it crashed fails (`io`, transient) and its payload lands
///   with its `_mediaAlt` fallback; it is not retried, so a URL whose image kills the decoder
///   cannot kill every following fetcher too. Requests not yet sent go to the next fetcher.
/// - A request unanswered past `requestDeadline` fails (`timeout`) and the fetcher, presumed
///   hung, is killed (spawned) or disconnected (socket) and replaced.
/// - Restarts back off from 100 ms doubling to 10 s; a fetcher that lived 10 s resets that.
///
/// The supervisor thread sleeps in poll(2) on the fetcher's socket and a wake-up pipe, with
/// the time to the next due deadline or restart as its timeout (none when nothing is due): an
/// idle supervisor does not wake at all.
///
/// `Sendable`: state is behind a lock; completions run on the supervisor thread.
package final class FetchSupervisor: MediaSource, Sendable {
    /// How a fetcher is obtained.
    package enum Launch: Sendable, Equatable {
        /// Spawn `executable` as a child with the connection as fd 3.
        /// `environment` is set over the daemon's own (tests arm fault hooks with it).
        case spawn(executable: String, arguments: [String], environment: [String: String] = [:])
        /// Connect to a listening SOCK_SEQPACKET socket (systemd `Accept=yes`: one fresh
        /// fetcher per connection).
        case connect(path: String)
    }

    /// What the supervisor tells the daemon about the fetcher's life.
    package enum Event: Sendable, Equatable {
        case started(pid: Int32)
        /// It went away: why, and how many requests it took with it.
        case lost(reason: String, failedRequests: Int, restartInMillis: Int)
        /// It could not be started or configured.
        case startFailed(reason: String, restartInMillis: Int)
    }

    private struct Pending {
        var url: String
        var completion: @Sendable (MediaOutcome) -> Void
        var deadlineNanos: UInt64
        /// The connection generation it was sent on; nil while queued.
        var sentOn: UInt64?
    }

    private struct Connection {
        var fd: Int32
        var pid: pid_t?
        var generation: UInt64
        var startedNanos: UInt64
    }

    private struct State: ~Copyable {
        var closed = false
        var connection: Connection?
        var generation: UInt64 = 0
        var pending: [UInt64: Pending] = [:]
        var nextID: UInt64 = 0
        var stats = MediaStats()
        var restarts = 0
        var consecutiveFailures = 0
        var nextStartNanos: UInt64 = 0
        /// The last send to the fetcher found its socket full (EAGAIN): the supervisor thread
        /// waits for it to drain (POLLOUT) to send the rest.
        var sendBlocked = false
    }

    private let launch: Launch
    private let configuration: FetchConfiguration
    private let thumbnailMaxEdge: Int
    private let requestDeadline: Duration
    private let onEvent: @Sendable (Event) -> Void
    private let state = Locked(State())
    private let stopped = DispatchSemaphore(value: 0)
    /// `pthread_self()` of the supervisor thread: `shutdown` from a completion must not wait for itself.
    private let thread = Atomic<UInt>(0)
    /// Self-pipe that wakes the supervisor thread out of poll(2): new work, shutdown.
    private let wakeRead: Int32, wakeWrite: Int32
    /// True while a wake-up byte is outstanding, so a burst of `fetch` calls writes one.
    private let wakeArmed = Atomic<Bool>(false)
    /// Left once the first fetcher is ready or its start failed (`waitUntilReady` waits on it).
    private let firstStart = DispatchGroup()
    private let firstStartDone = Atomic<Bool>(false)

    /// Starts the supervisor thread; the first fetcher is started at once, in the background.
    /// `requestDeadline` bounds one request from `fetch` to its answer (the fetcher's own
    /// PayloadDeadline plus room for storing and thumbnailing).
    package init(options: MediaOptions, launch: Launch, requestDeadline: Duration,
                 onEvent: @escaping @Sendable (Event) -> Void = { _ in }) throws(MediaFailure) {
        if let problem = options.problem { throw MediaFailure(.config, problem) }
        self.launch = launch
        self.configuration = FetchConfiguration(options)
        self.thumbnailMaxEdge = options.thumbnailMaxEdge
        self.requestDeadline = requestDeadline
        self.onEvent = onEvent
        do {
            (wakeRead, wakeWrite) = try Posix.selfPipe()
        } catch {
            throw MediaFailure(.io, "cannot make the media supervisor's wake-up pipe: \(error)")
        }
        firstStart.enter()
        do {
            try PosixThread.detach(name: "fetch-supervise") { [self] in
                thread.store(UInt(pthread_self()), ordering: .releasing)
                run()
                stopped.signal()
            }
        } catch {
            // No thread to wait for: deinit's shutdown must not block.
            markFirstStartDone()
            stopped.signal()
            throw MediaFailure(.io, "cannot start the media supervisor thread: \(error)")
        }
    }

    /// Queues `url` and sends it if a fetcher is up. Never blocks on the fetcher.
    package func fetch(url: String, completion: @escaping @Sendable (MediaOutcome) -> Void) {
        let (sum, overflow) = Posix.monotonicNanos().addingReportingOverflow(requestDeadline.clampedUInt64Nanoseconds)
        let deadline = overflow ? UInt64.max : sum
        enum Action { case none, wake, cancel }
        let action: Action = state.withLock { state in
            if state.closed { return .cancel }
            let wasIdle = state.pending.isEmpty
            state.nextID += 1
            let id = state.nextID
            state.pending[id] = Pending(url: url, completion: completion, deadlineNanos: deadline, sentOn: nil)
            var sent = false
            if let connection = state.connection {
                sent = Self.trySend(&state, id: id, on: connection)
            }
            // The supervisor thread must learn of it when it sleeps without a deadline (nothing
            // was pending) or has to send it itself (no fetcher yet, or the socket is full).
            // Otherwise it already wakes before this deadline, at an earlier one.
            return wasIdle || !sent ? .wake : .none
        }
        switch action {
        case .none: break
        case .wake: wake()
        case .cancel: completion(MediaOutcome(url: url, status: .failed, error: Self.cancelled))
        }
    }

    /// Wakes the supervisor thread out of poll(2); a burst of calls writes one byte.
    private func wake() {
        guard !wakeArmed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var byte: UInt8 = 1
        // Non-blocking; a full pipe already holds a wake-up.
        _ = Glibc.write(wakeWrite, &byte, 1)
    }

    /// Takes the wake-up: clears the flag first, so a `wake` after it writes a fresh byte.
    private func drainWake() {
        wakeArmed.store(false, ordering: .sequentiallyConsistent)
        var buffer = [UInt8](repeating: 0, count: 64)
        while buffer.withUnsafeMutableBytes({ Glibc.read(wakeRead, $0.baseAddress, $0.count) }) > 0 {}
    }

    private func markFirstStartDone() {
        if !firstStartDone.exchange(true, ordering: .acquiringAndReleasing) { firstStart.leave() }
    }

    static let cancelled = MediaFailure(.cancelled, "the daemon is shutting down; the payload is kept and fetched again at next start",
                                        transient: true)

    /// Stops the supervisor and the fetcher; waiting fetches complete as `cancelled`.
    package func shutdown() {
        state.withLock { $0.closed = true }
        wake()
        if thread.load(ordering: .acquiring) == UInt(pthread_self()) { return }
        // Every caller waits; each passes the single signal on to the next.
        stopped.wait()
        stopped.signal()
    }

    deinit {
        shutdown()
        Posix.close(wakeRead)
        Posix.close(wakeWrite)
    }

    package var stats: MediaStats {
        state.withLock { state in
            var stats = state.stats
            stats.inFlight = state.pending.values.filter { $0.sentOn != nil }.count
            stats.queued = state.pending.count - stats.inFlight
            return stats
        }
    }

    /// Waits up to `timeout` for the first fetcher to be ready; false when it is not (it keeps
    /// being tried in the background). The daemon calls this once at start so that payloads
    /// found at start-up do not all wait for the fetcher's exec and configuration.
    @discardableResult
    package func waitUntilReady(timeout: Duration) -> Bool {
        let nanos = Int(clamping: timeout.clampedUInt64Nanoseconds)
        guard firstStart.wait(timeout: .now() + .nanoseconds(nanos)) == .success else { return false }
        return state.withLock { $0.connection != nil }
    }

    /// Fetchers started after the first (crashes, hangs, exits).
    package var restarts: Int { state.withLock { $0.restarts } }

    /// The running fetcher's pid (spawned fetchers only), for tests and logs.
    package var fetcherPID: Int32? { state.withLock { $0.connection?.pid } }

    // MARK: - The supervisor thread

    private func run() {
        var fds = [pollfd](repeating: pollfd(fd: -1, events: 0, revents: 0), count: 2)
        while true {
            let (closed, startDue) = state.withLock { state in
                (state.closed, state.connection == nil && Posix.monotonicNanos() >= state.nextStartNanos)
            }
            if closed { break }
            if startDue {
                start()
                markFirstStartDone()
                continue
            }
            expireDeadlines()
            // Sleep until a reply, a wake-up, a drained socket or the next due time; with
            // nothing due, until one of the others (no timeout).
            let (connection, wantsWrite, due) = state.withLock { state -> (Connection?, Bool, UInt64?) in
                var due = state.pending.values.map(\.deadlineNanos).min()
                if state.connection == nil { due = min(due ?? .max, state.nextStartNanos) }
                let unsent = state.sendBlocked && state.pending.values.contains { $0.sentOn == nil }
                return (state.connection, state.connection != nil && unsent, due)
            }
            var timeoutMillis: Int32 = -1
            if let due {
                let now = Posix.monotonicNanos()
                // Rounded up, so the wake-up finds the deadline passed.
                timeoutMillis = due <= now ? 0 : Int32(clamping: (due - now + 999_999) / 1_000_000)
            }
            fds[0] = pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)
            fds[1] = pollfd(fd: connection?.fd ?? -1, events: Int16(POLLIN) | (wantsWrite ? Int16(POLLOUT) : 0), revents: 0)
            let ready = poll(&fds, connection == nil ? 1 : 2, timeoutMillis)
            if ready <= 0 { continue }  // timed out (deadlines are looked at above) or EINTR
            if fds[0].revents != 0 { drainWake() }
            if let connection, fds[1].revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                readOne(connection)
            }
            sendQueued()
        }
        markFirstStartDone()
        closeDown()
    }

    private func start() {
        let isRestart = state.withLock { $0.generation > 0 }
        var pid: pid_t?
        var fd: Int32 = -1
        do throws(SystemError) {
            switch launch {
            case .spawn(let executable, let arguments, let environment):
                let (mine, theirs) = try SeqPacket.pair()
                defer { Posix.close(theirs) }
                do {
                    pid = try ChildProcess.spawn(executable: executable, arguments: arguments, environment: environment, socket: theirs)
                } catch {
                    Posix.close(mine)
                    throw error
                }
                fd = mine
            case .connect(let path):
                fd = try SeqPacket.connect(path: path)
            }
        } catch {
            startFailed("cannot start pushspool-fetch: \(error)", pid: nil, fd: -1)
            return
        }
        SeqPacket.setSendBuffer(fd, bytes: 1 << 20)
        // Configure and wait for `ready`: a fetcher that cannot use these limits says so.
        do throws(SystemError) {
            try SeqPacket.send(fd, FetchMessage.configure(configuration).encoded(), wait: true)
        } catch {
            startFailed("sending the configuration to pushspool-fetch failed: \(error)", pid: pid, fd: fd)
            return
        }
        guard SeqPacket.readable(fd, timeoutMillis: 10_000) else {
            startFailed("pushspool-fetch did not answer its configuration within 10 s", pid: pid, fd: fd)
            return
        }
        let reply: FetchMessage
        do {
            guard case .message(let bytes) = try SeqPacket.receive(fd) else {
                startFailed("pushspool-fetch closed the connection before it was ready", pid: pid, fd: fd)
                return
            }
            reply = try FetchMessage.decode(bytes)
        } catch {
            startFailed("pushspool-fetch's first answer was unusable: \(error)", pid: pid, fd: fd)
            return
        }
        switch reply {
        case .ready(let readyPID):
            state.withLock { state in
                state.generation += 1
                if isRestart { state.restarts += 1 }
                state.connection = Connection(fd: fd, pid: pid, generation: state.generation, startedNanos: Posix.monotonicNanos())
            }
            onEvent(.started(pid: pid ?? readyPID))
            sendQueued()
        case .refused(let message):
            startFailed("pushspool-fetch refused its configuration: \(message)", pid: pid, fd: fd)
        default:
            startFailed("pushspool-fetch answered its configuration with an unexpected message", pid: pid, fd: fd)
        }
    }

    private func startFailed(_ reason: String, pid: pid_t?, fd: Int32) {
        if fd >= 0 { Posix.close(fd) }
        if let pid {
            kill(pid, SIGKILL)
            _ = ChildProcess.reap(pid)
        }
        let delay = scheduleRestart(livedNanos: 0)
        onEvent(.startFailed(reason: reason, restartInMillis: delay))
    }

    /// Backoff: 100 ms doubling to 10 s per failure in a row; a fetcher that lived 10 s resets it.
    private func scheduleRestart(livedNanos: UInt64) -> Int {
        state.withLock { state in
            if livedNanos >= 10_000_000_000 { state.consecutiveFailures = 0 }
            let delay = min(10_000, 100 << min(state.consecutiveFailures, 7))
            state.consecutiveFailures += 1
            state.nextStartNanos = Posix.monotonicNanos() + UInt64(delay) * 1_000_000
            return delay
        }
    }

    private func readOne(_ connection: Connection) {
        let received: SeqPacket.Received
        do {
            received = try SeqPacket.receive(connection.fd)
        } catch {
            lose(connection, reason: "reading from pushspool-fetch failed: \(error)", kill: true)
            return
        }
        switch received {
        case .closed:
            lose(connection, reason: "pushspool-fetch closed the connection", kill: false)
        case .oversized(let size):
            lose(connection, reason: "pushspool-fetch sent a \(size)-byte message, over the protocol's limit", kill: true)
        case .message(let bytes):
            let message: FetchMessage
            do {
                message = try FetchMessage.decode(bytes)
            } catch {
                lose(connection, reason: "pushspool-fetch sent a malformed message: \(error)", kill: true)
                return
            }
            guard case .result(let id, let result) = message else {
                lose(connection, reason: "pushspool-fetch sent an unexpected message", kill: true)
                return
            }
            let finished: Pending? = state.withLock { state -> Pending? in
                // Only the fetcher it was sent to may answer it.
                guard let pending = state.pending[id], pending.sentOn == connection.generation else { return nil }
                state.pending[id] = nil
                Self.count(&state.stats, result)
                return pending
            }
            guard let finished else { return }
            finished.completion(result.outcome(url: finished.url, storeDirectory: configuration.storeDirectory,
                                               thumbnailMaxEdge: thumbnailMaxEdge))
        }
    }

    private static func count(_ stats: inout MediaStats, _ result: FetchResult) {
        switch result {
        case .stored(let stored):
            stats.stored += 1
            let (total, overflow) = stats.bytesStored.addingReportingOverflow(stored.bytes)
            stats.bytesStored = overflow ? Int64.max : total
            if stored.thumbnail != nil { stats.thumbnails += 1 }
            if stored.decodable == false { stats.undecodable += 1 }
            if stored.reused { stats.reused += 1 }
        case .failed(let failure):
            stats.failedByCode[failure.code.rawValue, default: 0] += 1
        case .skipped:
            stats.skipped += 1
        }
    }

    /// The fetcher is gone or no longer trusted: close, kill and reap it, fail what it had.
    private func lose(_ connection: Connection, reason: String, kill killIt: Bool, failure: MediaFailure? = nil) {
        Posix.close(connection.fd)
        var ending = reason
        if let pid = connection.pid {
            var status = killIt ? nil : ChildProcess.reap(pid, timeoutMillis: 1000)
            if status == nil {
                kill(pid, SIGKILL)
                status = ChildProcess.reap(pid)
            }
            if let status { ending += " (\(ChildProcess.describe(status: status)))" }
        }
        let failure = failure ?? MediaFailure(.io, "pushspool-fetch went away during the download: \(ending); it is restarted",
                                              transient: true)
        let failed: [Pending] = state.withLock { state in
            state.connection = nil
            var failed: [Pending] = []
            for (id, pending) in state.pending where pending.sentOn == connection.generation {
                failed.append(pending)
                state.pending[id] = nil
                state.stats.failedByCode[failure.code.rawValue, default: 0] += 1
            }
            // Requests that were queued but never answered go to the next fetcher.
            for (id, pending) in state.pending where pending.sentOn != nil {
                state.pending[id]?.sentOn = nil
            }
            return failed
        }
        let delay = scheduleRestart(livedNanos: Posix.monotonicNanos() - connection.startedNanos)
        onEvent(.lost(reason: ending, failedRequests: failed.count, restartInMillis: delay))
        for pending in failed {
            pending.completion(MediaOutcome(url: pending.url, status: .failed, error: failure))
        }
    }

    private func sendQueued() {
        state.withLock { state in
            guard let connection = state.connection else { return }
            state.sendBlocked = false
            for id in state.pending.keys.sorted() where state.pending[id]?.sentOn == nil {
                if !Self.trySend(&state, id: id, on: connection) { break }
            }
        }
    }

    /// One non-blocking send; false when the socket is full (`sendBlocked`: the supervisor
    /// thread waits for room) or broken (the reader sees that; other requests are tried again
    /// at the thread's next wake-up).
    @discardableResult
    private static func trySend(_ state: inout State, id: UInt64, on connection: Connection) -> Bool {
        guard let url = state.pending[id]?.url else { return true }
        do {
            try SeqPacket.send(connection.fd, FetchMessage.fetch(id: id, url: url).encoded(), wait: false)
            state.pending[id]?.sentOn = connection.generation
            return true
        } catch {
            if error.errno == EAGAIN || error.errno == EWOULDBLOCK { state.sendBlocked = true }
            return false
        }
    }

    private func expireDeadlines() {
        let now = Posix.monotonicNanos()
        let (expired, hungConnection): ([Pending], Connection?) = state.withLock { state in
            var expired: [Pending] = []
            var hung: Connection?
            for (id, pending) in state.pending where pending.deadlineNanos <= now {
                if let connection = state.connection, pending.sentOn == connection.generation {
                    hung = connection
                    continue
                }
                expired.append(pending)
                state.pending[id] = nil
                state.stats.failedByCode[MediaFailure.Code.timeout.rawValue, default: 0] += 1
            }
            return (expired, hung)
        }
        for pending in expired {
            pending.completion(MediaOutcome(url: pending.url, status: .failed, error: MediaFailure(
                .io, "pushspool-fetch was not available within \(requestDeadline); the media was not fetched", transient: true)))
        }
        if let hungConnection {
            lose(hungConnection, reason: "pushspool-fetch did not answer a request within \(requestDeadline)", kill: true,
                 failure: MediaFailure(.timeout, "pushspool-fetch did not answer within \(requestDeadline); it was killed and restarted",
                                       transient: true))
        }
    }

    private func closeDown() {
        let (connection, waiting): (Connection?, [Pending]) = state.withLock { state in
            defer { state.connection = nil; state.pending = [:] }
            return (state.connection, Array(state.pending.values))
        }
        if let connection {
            // The fetcher exits when its end closes; whatever it was downloading is dropped and
            // its temp files are removed by the next fetcher's `MediaStore.prepare`.
            Posix.close(connection.fd)
            if let pid = connection.pid, ChildProcess.reap(pid, timeoutMillis: 1000) == nil {
                kill(pid, SIGKILL)
                _ = ChildProcess.reap(pid)
            }
        }
        for pending in waiting {
            pending.completion(MediaOutcome(url: pending.url, status: .failed, error: Self.cancelled))
        }
    }
}
