@preconcurrency import Glibc
internal import CMicroHTTPDShim
import PushSystem

/// Which connections are still sending their request, since when, and which of them to close:
/// the slowloris defence libmicrohttpd lacks (its `MHD_OPTION_CONNECTION_TIMEOUT` counts idle
/// time only, so a client that sends one header line every few seconds is never timed out).
/// Pure state, no I/O: ``ConnectionGuard`` runs it and shuts the chosen sockets down.
///
/// A connection is *receiving* from its accept (or the end of its previous response) until its
/// request head and body are in. Two rules bound what receiving connections can hold:
/// - a deadline: receiving longer than `deadlineNanos` closes the connection (this is also the
///   idle timeout between keep-alive requests, with sub-second precision);
/// - a reserve: at most `perWorker` receiving connections on one libmicrohttpd worker (whose
///   share of `MaxConnections=` is fixed) and `perAddress` from one client address. A group
///   over its cap for longer than `graceNanos` loses its oldest receiving connections until it
///   is within it. A real client sends its head within milliseconds of connecting, so a burst
///   of them is over the cap only for a moment, while trickling clients are the oldest and go.
///   The slots above the caps stay free for requests being answered and for streams.
///
/// `Sendable` value.
struct ConnectionTable: Sendable {
    struct Limits: Sendable, Equatable {
        var deadlineNanos: UInt64
        var graceNanos: UInt64
        var perWorker: Int
        var perAddress: Int

        /// Caps that leave a quarter of each limit (at least one slot) to connections whose
        /// request is in; a grace of a second (half the deadline when that is shorter).
        init(deadline: Duration, maxConnections: Int, maxConnectionsPerIP: Int, threads: Int) {
            deadlineNanos = max(1, deadline.clampedUInt64Nanoseconds)
            graceNanos = min(1_000_000_000, deadlineNanos / 2)
            // libmicrohttpd gives each worker MaxConnections / threads (the first ones one more).
            let share = max(1, maxConnections / max(1, threads))
            perWorker = Self.cap(share)
            perAddress = Self.cap(maxConnectionsPerIP)
        }

        init(deadlineNanos: UInt64, graceNanos: UInt64, perWorker: Int, perAddress: Int) {
            self.deadlineNanos = deadlineNanos
            self.graceNanos = graceNanos
            self.perWorker = perWorker
            self.perAddress = perAddress
        }

        static func cap(_ limit: Int) -> Int { max(1, limit - max(1, limit / 4)) }
    }

    enum Phase: Sendable, Equatable {
        /// Sending its request (or idle before the next one) since this monotonic time.
        case receiving(since: UInt64)
        /// Its request is in: being answered, or a stream.
        case answering
        /// Shut down here; libmicrohttpd has not closed it yet.
        case closing
    }

    struct Entry: Sendable, Equatable {
        var fd: Int32
        var address: String
        var worker: UInt
        var phase: Phase

        var since: UInt64? {
            if case .receiving(let since) = phase { return since }
            return nil
        }
    }

    let limits: Limits
    private(set) var entries: [Int: Entry] = [:]
    /// The ids of the receiving entries: what ``expire(now:)`` walks, so open streams and
    /// requests being answered cost it nothing.
    private var receivingIDs: Set<Int> = []

    init(limits: Limits) {
        self.limits = limits
    }

    /// A new connection `id`, receiving from `now`.
    mutating func opened(_ id: Int, fd: Int32, address: String, worker: UInt, now: UInt64) {
        entries[id] = Entry(fd: fd, address: address, worker: worker, phase: .receiving(since: now))
        receivingIDs.insert(id)
    }

    /// The request of `id` is in (or refused before its body): no deadline while it is answered.
    mutating func received(_ id: Int) {
        guard let entry = entries[id], entry.since != nil else { return }
        entries[id]?.phase = .answering
        receivingIDs.remove(id)
    }

    /// The response of `id` is out: the connection waits for its next request from `now`.
    mutating func completed(_ id: Int, now: UInt64) {
        guard let entry = entries[id], entry.phase == .answering else { return }
        entries[id]?.phase = .receiving(since: now)
        receivingIDs.insert(id)
    }

    /// libmicrohttpd closes `id` (its socket is still open).
    @discardableResult
    mutating func closed(_ id: Int) -> Entry? {
        receivingIDs.remove(id)
        return entries.removeValue(forKey: id)
    }

    /// Closes every connection receiving since `deadlineNanos` before `now`, and the oldest
    /// receiving ones of each group over its cap for `graceNanos`. Returns their sockets and
    /// when to look again (`nil`: nothing is receiving, nothing can expire).
    mutating func expire(now: UInt64) -> (shut: [Int32], next: UInt64?) {
        var shut: [Int32] = []
        var next: UInt64?
        func later(_ time: UInt64) { next = min(next ?? time, time) }
        var byWorker: [UInt: [(id: Int, since: UInt64)]] = [:]
        var byAddress: [String: [(id: Int, since: UInt64)]] = [:]
        for id in receivingIDs {
            guard let entry = entries[id], let since = entry.since else { continue }
            let deadline = since &+ limits.deadlineNanos
            if deadline <= now {
                shut.append(close(id))
                continue
            }
            byWorker[entry.worker, default: []].append((id, since))
            byAddress[entry.address, default: []].append((id, since))
        }
        for (cap, groups) in [(limits.perWorker, Array(byWorker.values)), (limits.perAddress, Array(byAddress.values))] {
            for group in groups where group.count > cap {
                var excess = group.filter { entries[$0.id]?.since != nil }.sorted { $0.since < $1.since }
                while excess.count > cap, let oldest = excess.first {
                    let graceEnds = oldest.since &+ limits.graceNanos
                    if graceEnds > now {
                        later(graceEnds)
                        break
                    }
                    shut.append(close(oldest.id))
                    excess.removeFirst()
                }
            }
        }
        for id in receivingIDs { if let since = entries[id]?.since { later(since &+ limits.deadlineNanos) } }
        return (shut, next)
    }

    /// How many connections are receiving (for tests and the status line).
    var receiving: Int { receivingIDs.count }

    private mutating func close(_ id: Int) -> Int32 {
        entries[id]?.phase = .closing
        receivingIDs.remove(id)
        return entries[id]?.fd ?? -1
    }
}

/// Runs ``ConnectionTable`` for an ``HTTPServer`` and watches its event streams' sockets for
/// the client's hang-up, on one thread of its own blocked in `epoll_wait(2)`: with a timeout
/// only while some connection is receiving (until the earliest deadline), without one
/// otherwise, so an idle server is never woken.
///
/// Closing is `shutdown(2)` of the socket: libmicrohttpd's worker sees the end of the stream
/// and closes the connection itself. It happens under the lock that libmicrohttpd's CLOSED
/// notification takes before it closes the socket, so the descriptor is never one reused by
/// another connection.
///
/// `Sendable`: state behind a lock; the descriptors are set in init and closed in ``stop()``.
final class ConnectionGuard: @unchecked Sendable {
    private struct State {
        var table: ConnectionTable
        /// Event streams watched for a hang-up, by epoll token.
        var watches: [UInt64: (connection: Int, stream: EventStream)] = [:]
        /// The epoll token of each watched connection.
        var tokens: [Int: UInt64] = [:]
        var nextToken: UInt64 = 1
        /// When the thread wakes next (`nil`: only when woken): an earlier time must wake it.
        var sleepsUntil: UInt64?
        var stopping = false
    }

    private let state: Locked<State>
    private let epollFD: Int32
    private let wakeFD: Int32
    private var thread: pthread_t?

    init(limits: ConnectionTable.Limits) throws(SystemError) {
        let epollFD = cmhd_epoll_create()
        if epollFD < 0 { throw SystemError(call: "epoll_create1", errno: errno) }
        let wakeFD = cmhd_epoll_add_wakeup(epollFD)
        if wakeFD < 0 {
            let saved = errno
            Glibc.close(epollFD)
            throw SystemError(call: "eventfd", errno: saved)
        }
        self.epollFD = epollFD
        self.wakeFD = wakeFD
        state = Locked(State(table: ConnectionTable(limits: limits)))
    }

    deinit {
        Glibc.close(wakeFD)
        Glibc.close(epollFD)
    }

    func start() throws(SystemError) {
        thread = try PosixThread.spawn(name: "conn-guard") { [self] in run() }
    }

    /// Ends the thread; call after libmicrohttpd stopped.
    func stop() {
        state.withLock { $0.stopping = true }
        wake()
        if let thread { pthread_join(thread, nil) }
        thread = nil
    }

    // MARK: libmicrohttpd's notifications (on its worker threads)

    func opened(_ connection: OpaquePointer, fd: Int32, address: String) {
        let id = Int(bitPattern: connection)
        let worker = UInt(pthread_self())
        let now = Posix.monotonicNanos()
        let mustWake = state.withLock { state in
            state.table.opened(id, fd: fd, address: address, worker: worker, now: now)
            return Self.mustWake(state, for: expire(&state, now: now))
        }
        if mustWake { wake() }
    }

    func received(_ connection: OpaquePointer) {
        state.withLock { $0.table.received(Int(bitPattern: connection)) }
    }

    func completed(_ connection: OpaquePointer) {
        let now = Posix.monotonicNanos()
        let mustWake = state.withLock { state in
            state.table.completed(Int(bitPattern: connection), now: now)
            return Self.mustWake(state, for: expire(&state, now: now))
        }
        if mustWake { wake() }
    }

    func closed(_ connection: OpaquePointer) {
        let id = Int(bitPattern: connection)
        state.withLock { state in
            let entry = state.table.closed(id)
            if let token = state.tokens.removeValue(forKey: id) {
                state.watches[token] = nil
                if let fd = entry?.fd { _ = cmhd_epoll_forget(epollFD, fd) }
            }
        }
    }

    /// Tells `stream` when the client of `connection` hangs up (`EPOLLRDHUP`): a suspended
    /// stream does not read its socket, so libmicrohttpd would notice only at its next write.
    func watchHangup(_ connection: OpaquePointer, _ stream: EventStream) {
        let id = Int(bitPattern: connection)
        state.withLock { state in
            guard let fd = state.table.entries[id]?.fd, fd >= 0, state.tokens[id] == nil else { return }
            let token = state.nextToken
            state.nextToken += 1
            guard cmhd_epoll_watch_hangup(epollFD, fd, token) == 0 else { return }
            state.tokens[id] = token
            state.watches[token] = (id, stream)
        }
    }

    var receiving: Int { state.withLock { $0.table.receiving } }

    // MARK: the thread

    /// Runs the table's deadlines and caps under the lock (see the type's note on why there).
    /// Returns the table's next time.
    private func expire(_ state: inout State, now: UInt64) -> UInt64? {
        let (shut, next) = state.table.expire(now: now)
        for fd in shut where fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) }
        return next
    }

    /// Whether the thread sleeps past `next` and must be woken.
    private static func mustWake(_ state: State, for next: UInt64?) -> Bool {
        guard let next else { return false }
        return state.sleepsUntil.map { next < $0 } ?? true
    }

    private func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    private func run() {
        var tokens = [UInt64](repeating: 0, count: 32)
        while true {
            let now = Posix.monotonicNanos()
            let timeout: Int32? = state.withLock { state in
                if state.stopping { return nil }
                let next = expire(&state, now: now)
                state.sleepsUntil = next
                guard let next else { return -1 }
                // Rounded up to the millisecond: waking early would only sleep again.
                return Int32(clamping: (next &- now + 999_999) / 1_000_000)
            }
            guard let timeout else { return }
            let count = tokens.withUnsafeMutableBufferPointer { cmhd_epoll_wait(epollFD, $0.baseAddress, Int32($0.count), timeout) }
            guard count > 0 else { continue }
            for token in tokens.prefix(Int(count)) {
                if token == 0 {
                    var value: UInt64 = 0
                    _ = read(wakeFD, &value, 8)
                    continue
                }
                // Outside the lock: the stream resumes its connection under the hub's lock.
                // The token stays until libmicrohttpd closes the connection, which takes the
                // socket out of the epoll set (closed(_:)).
                let stream = state.withLock { $0.watches.removeValue(forKey: token)?.stream }
                stream?.hungUp()
            }
        }
    }
}
