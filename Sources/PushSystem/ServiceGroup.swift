@preconcurrency import Glibc

/// A part of a process that starts and stops as a whole: the journal's followers, the intake,
/// the HTTP server, the event hub, the status reporter.
///
/// The shape of swift-service-lifecycle's `Service`, with threads instead of tasks: the parts
/// here block in system calls (SQLite, curl, libmicrohttpd, fsync), which belong on threads of
/// their own, not on the cooperative pool.
///
/// `Sendable`: started and stopped from the group's thread, observed from others.
package protocol Service: AnyObject, Sendable {
    var serviceName: String { get }
    /// Starts the service's threads and returns. Throwing stops the services started before it.
    /// A service that can end by itself (its work is done, or it failed) says so through
    /// `ending`, once; the group then applies that service's ``ServiceTermination``.
    func start(ending: ServiceEnding) throws(ServiceError)
    /// The group begins to stop: wind down without waiting. Every started service hears it at
    /// once, before any is waited for, so the slowest bounds a stop, not the sum of them.
    func requestStop()
    /// Waits until the service has stopped, at most until `deadline` (monotonic nanoseconds).
    /// False when it was still running then: it is left to end with the process.
    func stop(deadline: UInt64) -> Bool
}

extension Service {
    /// Nothing to wind down before ``stop(deadline:)``.
    package func requestStop() {}

    /// Starts the service on its own, outside a group (tests): its end is not observed.
    package func start() throws(ServiceError) { try start(ending: ServiceEnding { _ in }) }
}

/// How a service ended by itself.
package enum ServiceEnd: Sendable, Equatable {
    case finished
    case failed(ServiceError)
}

/// What a service calls when it ends by itself. `Sendable`: a closure into the group.
package struct ServiceEnding: Sendable {
    private let report: @Sendable (ServiceEnd) -> Void

    package init(_ report: @escaping @Sendable (ServiceEnd) -> Void) { self.report = report }

    package func finished() { report(.finished) }
    package func failed(_ error: ServiceError) { report(.failed(error)) }
}

/// What the group does when one of its services ends by itself (swift-service-lifecycle's
/// `TerminationBehavior`).
package enum ServiceTermination: Sendable, Equatable {
    /// Stop the whole group: every other service, in reverse order.
    case shutdownGroup
    /// Stop and start the service again, at most `limit` times; after that the group shuts down.
    case restart(limit: Int)
    /// Leave the rest running.
    case ignore
}

/// The group's lifecycle as one value, without I/O or a clock: events go in, the action to
/// run comes out (swift-nio's and swift-service-lifecycle's state machines). The states carry
/// their data — which services started, how often each restarted, the stop's deadline and
/// reason, who was still running at it — so a stop without a deadline, or a restart while
/// stopping, cannot be represented. ``ServiceGroup`` runs the actions on threads; tests drive
/// it with a fake clock.
///
/// `Sendable`: a value.
package struct ServiceGroupStateMachine: Sendable, Equatable {
    /// One service as the machine knows it: its name and what its ends mean.
    package struct Member: Sendable, Equatable {
        package var name: String
        package var onFinished: ServiceTermination
        package var onFailed: ServiceTermination

        package init(name: String, onFinished: ServiceTermination = .shutdownGroup, onFailed: ServiceTermination = .shutdownGroup) {
            self.name = name
            self.onFinished = onFinished
            self.onFailed = onFailed
        }
    }

    /// Why the group stopped.
    package enum StopReason: Sendable, Equatable {
        /// `stop()` was called: a SIGTERM/SIGINT, or the owner.
        case requested
        case signal(Int32)
        /// A service whose end shuts the group down ended (or exhausted its restarts).
        case serviceFinished(String)
        case serviceFailed(String, ServiceError)
        case startFailed(ServiceError)

        /// The error behind the stop, when a service failed.
        package var failure: ServiceError? {
            switch self {
            case .serviceFailed(_, let error), .startFailed(let error): error
            case .requested, .signal, .serviceFinished: nil
            }
        }
    }

    package struct Running: Sendable, Equatable {
        /// Services `0..<started` were started (all of them once the group is ready).
        package var started = 0
        package var restarts: [Int: Int] = [:]

        package init(started: Int = 0, restarts: [Int: Int] = [:]) {
            self.started = started
            self.restarts = restarts
        }
    }

    package struct Stopping: Sendable, Equatable {
        /// Monotonic nanoseconds; services still running then are escalated.
        package var deadline: UInt64
        package var reason: StopReason
        /// The services left to wait for, in the order they are waited for (the reverse of
        /// the start order).
        package var pending: [Int]
        package var stuck: [String] = []
    }

    package struct Stopped: Sendable, Equatable {
        package var reason: StopReason
        /// Services still running at the deadline, left to end with the process.
        package var stuck: [String]

        package init(reason: StopReason, stuck: [String]) {
            self.reason = reason
            self.stuck = stuck
        }
    }

    package enum State: Sendable, Equatable {
        case idle
        case running(Running)
        case stopping(Stopping)
        case stopped(Stopped)
    }

    /// What the runner does next.
    package enum Action: Sendable, Equatable {
        case none
        case start(Int)
        /// Every service is running.
        case ready
        /// Stop the service, then start it again (``restarted(_:)`` or ``restartFailed(_:_:now:)``).
        case restart(Int)
        /// Ask these services to stop (``Service/requestStop()``), all at once, then ask ``next(now:)``.
        case beginStop([Int])
        /// Wait for this service to stop until `deadline`, then report ``stopped(_:inTime:now:)``.
        case wait(Int, deadline: UInt64)
        /// The deadline passed with these services still running: they are given up on and
        /// end with the process. ``next(now:)`` then says `.done`.
        case escalate([String])
        case done(Stopped)
    }

    package let members: [Member]
    /// How long a stop may take from its start to its last service.
    package let gracefulStop: UInt64
    package private(set) var state: State = .idle

    package init(members: [Member], gracefulStop: UInt64) {
        self.members = members
        self.gracefulStop = gracefulStop
    }

    /// The first service to start, or `.ready` when there is none.
    package mutating func start() -> Action {
        guard case .idle = state else { return .none }
        state = .running(Running())
        return members.isEmpty ? .ready : .start(0)
    }

    /// Service `index` started: the next one, or `.ready` after the last.
    package mutating func started(_ index: Int) -> Action {
        guard case .running(var running) = state, index == running.started else { return .none }
        running.started = index + 1
        state = .running(running)
        return running.started == members.count ? .ready : .start(running.started)
    }

    /// Service `index` could not start: the ones before it stop, in reverse.
    package mutating func startFailed(_ index: Int, _ error: ServiceError, now: UInt64) -> Action {
        beginStop(.startFailed(error), now: now)
    }

    /// SIGTERM/SIGINT or the owner: the group stops. Idle, it is stopped at once.
    package mutating func stop(_ reason: StopReason, now: UInt64) -> Action {
        beginStop(reason, now: now)
    }

    /// Service `index` ended by itself: its member's termination behaviour decides.
    package mutating func ended(_ index: Int, _ end: ServiceEnd, now: UInt64) -> Action {
        guard case .running(var running) = state, index < running.started else { return .none }
        let member = members[index]
        let (behaviour, reason): (ServiceTermination, StopReason) = switch end {
        case .finished: (member.onFinished, .serviceFinished(member.name))
        case .failed(let error): (member.onFailed, .serviceFailed(member.name, error))
        }
        switch behaviour {
        case .ignore:
            return .none
        case .restart(let limit):
            let done = running.restarts[index, default: 0]
            // Out of restarts: a service that keeps ending is not left to spin.
            guard done < limit else { return beginStop(reason, now: now) }
            running.restarts[index] = done + 1
            state = .running(running)
            return .restart(index)
        case .shutdownGroup:
            return beginStop(reason, now: now)
        }
    }

    /// A restarted service runs again.
    package mutating func restarted(_ index: Int) -> Action { .none }

    /// A restart's start failed: the group stops.
    package mutating func restartFailed(_ index: Int, _ error: ServiceError, now: UInt64) -> Action {
        beginStop(.serviceFailed(members[index].name, error), now: now)
    }

    /// Service `index` stopped (`inTime`) or was still running at the deadline.
    package mutating func stopped(_ index: Int, inTime: Bool, now: UInt64) -> Action {
        guard case .stopping(var stopping) = state, stopping.pending.first == index else { return .none }
        stopping.pending.removeFirst()
        if !inTime { stopping.stuck.append(members[index].name) }
        state = .stopping(stopping)
        return next(now: now)
    }

    /// The next service to wait for; past the deadline the ones left are escalated, then done.
    package mutating func next(now: UInt64) -> Action {
        guard case .stopping(var stopping) = state else {
            if case .stopped(let stopped) = state { return .done(stopped) }
            return .none
        }
        if now >= stopping.deadline, !stopping.pending.isEmpty {
            // Each one left gets one more look (it may have ended meanwhile) with no time to wait.
            return .wait(stopping.pending[0], deadline: stopping.deadline)
        }
        if let index = stopping.pending.first { return .wait(index, deadline: stopping.deadline) }
        if !stopping.stuck.isEmpty {
            let stuck = stopping.stuck
            // Reported once; the stop ends with them named.
            stopping.stuck = []
            state = .stopped(Stopped(reason: stopping.reason, stuck: stuck))
            return .escalate(stuck)
        }
        let stopped = Stopped(reason: stopping.reason, stuck: [])
        state = .stopped(stopped)
        return .done(stopped)
    }

    private mutating func beginStop(_ reason: StopReason, now: UInt64) -> Action {
        switch state {
        case .idle:
            let stopped = Stopped(reason: reason, stuck: [])
            state = .stopped(stopped)
            return .done(stopped)
        case .running(let running):
            let pending = Array((0..<running.started).reversed())
            state = .stopping(Stopping(deadline: now &+ gracefulStop, reason: reason, pending: pending))
            return .beginStop(pending)
        case .stopping, .stopped:
            return .none
        }
    }
}

/// Services started in order and stopped in reverse, all within one deadline, with the stop
/// signals: what a process runs between its start and its exit.
///
/// ``run(onReady:)`` blocks the calling thread: it starts the services in order, sleeps until
/// a SIGTERM/SIGINT, ``stop()`` or a service's end that shuts the group down, then asks every
/// service to stop and waits for them in reverse order within ``gracefulStop``. SIGHUP calls
/// the group's `reload`. The decisions are ``ServiceGroupStateMachine``'s.
///
/// `Sendable`: the list is fixed at init; the machine and the event queue are behind locks.
package final class ServiceGroup: Sendable {
    /// A service and what its ends mean.
    package struct Entry: Sendable {
        package var service: any Service
        package var onFinished: ServiceTermination
        package var onFailed: ServiceTermination

        package init(_ service: any Service, onFinished: ServiceTermination = .shutdownGroup, onFailed: ServiceTermination = .shutdownGroup) {
            self.service = service
            self.onFinished = onFinished
            self.onFailed = onFailed
        }
    }

    private enum Event: Sendable {
        case stop(ServiceGroupStateMachine.StopReason)
        case ended(Int, ServiceEnd)
        case reload
    }

    package let entries: [Entry]
    package var services: [any Service] { entries.map(\.service) }
    private let machine: Locked<ServiceGroupStateMachine>
    private let events = Locked<[Event]>([])
    private let wakeup = Wakeup()
    private let watchSignals: Bool
    private let reload: (@Sendable () -> Void)?
    private let escalated: @Sendable ([String]) -> Void
    /// The start a restart made in the previous round: an end reported by an older start is stale.
    private let generations: Locked<[Int]>

    /// - Parameters:
    ///   - gracefulStop: how long the whole stop may take.
    ///   - watchSignals: whether ``run(onReady:)`` takes SIGTERM/SIGINT (stop) and SIGHUP
    ///     (`reload`) on a ``SignalWatcher`` (tests running several groups in one process pass false).
    ///   - escalated: told the names of the services still running at the stop's deadline.
    package init(_ entries: [Entry], gracefulStop: Duration = .seconds(10), watchSignals: Bool = true,
                 reload: (@Sendable () -> Void)? = nil, escalated: @escaping @Sendable ([String]) -> Void = { _ in }) {
        self.entries = entries
        machine = Locked(ServiceGroupStateMachine(members: entries.map {
            .init(name: $0.service.serviceName, onFinished: $0.onFinished, onFailed: $0.onFailed)
        }, gracefulStop: gracefulStop.clampedUInt64Nanoseconds))
        self.watchSignals = watchSignals
        self.reload = reload
        self.escalated = escalated
        generations = Locked(Array(repeating: 0, count: entries.count))
    }

    /// Services that shut the group down whichever way they end.
    package convenience init(_ services: [any Service], gracefulStop: Duration = .seconds(10), watchSignals: Bool = true,
                             reload: (@Sendable () -> Void)? = nil, escalated: @escaping @Sendable ([String]) -> Void = { _ in }) {
        self.init(services.map { Entry($0) }, gracefulStop: gracefulStop, watchSignals: watchSignals, reload: reload, escalated: escalated)
    }

    /// The group's state now (for status and tests).
    package var state: ServiceGroupStateMachine.State { machine.withLock { $0.state } }

    /// Stops the group, as SIGTERM does; from any thread.
    package func stop() { post(.stop(.requested)) }

    /// Starts the services in order, calls `onReady` once all run, and blocks until the group
    /// has stopped; `onStopping` is called as the stop begins (STOPPING=1), before any service
    /// is asked to stop. Returns how it stopped: `reason.failure` is the error when a service
    /// failed to start or ended with a failure that shut the group down.
    @discardableResult
    package func run(onReady: () -> Void = {}, onStopping: () -> Void = {}) -> ServiceGroupStateMachine.Stopped {
        var signals: SignalWatcher?
        if watchSignals {
            do {
                signals = try SignalWatcher { [self] signalNumber in
                    post(signalNumber == SIGHUP ? .reload : .stop(.signal(signalNumber)))
                }
            } catch {
                // Without the signal thread the process could not be stopped: refuse to start.
                let failure = ServiceError(service: "signals", message: "cannot start the signal thread: \(error)", errno: error.errno)
                return finish(machine.withLock { $0.stop(.startFailed(failure), now: Posix.monotonicNanos()) }, onStopping: onStopping)
            }
        }
        defer { signals?.stop() }
        var action = machine.withLock { $0.start() }
        while true {
            switch action {
            case .start(let index):
                action = startService(index)
            case .ready:
                onReady()
                action = .none
            case .none:
                // Running: sleep until something happens to the group; nothing here has a timer.
                action = nextEvent()
            case .done(let stopped):
                return stopped
            default:
                return finish(action, onStopping: onStopping)
            }
        }
    }

    private func startService(_ index: Int) -> ServiceGroupStateMachine.Action {
        do throws(ServiceError) {
            try entries[index].service.start(ending: ending(for: index))
            return machine.withLock { $0.started(index) }
        } catch {
            return machine.withLock { $0.startFailed(index, error, now: Posix.monotonicNanos()) }
        }
    }

    /// Runs the stop's actions to the end.
    private func finish(_ first: ServiceGroupStateMachine.Action, onStopping: () -> Void) -> ServiceGroupStateMachine.Stopped {
        var action = first
        while true {
            switch action {
            case .beginStop(let indices):
                onStopping()
                for index in indices { entries[index].service.requestStop() }
                action = machine.withLock { $0.next(now: Posix.monotonicNanos()) }
            case .wait(let index, let deadline):
                let inTime = entries[index].service.stop(deadline: deadline)
                action = machine.withLock { $0.stopped(index, inTime: inTime, now: Posix.monotonicNanos()) }
            case .escalate(let names):
                escalated(names)
                action = machine.withLock { $0.next(now: Posix.monotonicNanos()) }
            case .done(let stopped):
                return stopped
            case .none, .start, .ready, .restart:
                // Not reachable once a stop began: end with what the machine holds rather than spin.
                return machine.withLock { machine in
                    if case .stopped(let stopped) = machine.state { return stopped }
                    return ServiceGroupStateMachine.Stopped(reason: .requested, stuck: [])
                }
            }
        }
    }

    /// Sleeps until an event, applies it, and returns the machine's answer.
    private func nextEvent() -> ServiceGroupStateMachine.Action {
        while true {
            let pending = events.withLock { queue -> [Event] in
                defer { queue.removeAll() }
                return queue
            }
            for event in pending {
                let now = Posix.monotonicNanos()
                let action: ServiceGroupStateMachine.Action
                switch event {
                case .reload:
                    reload?()
                    continue
                case .stop(let reason):
                    action = machine.withLock { $0.stop(reason, now: now) }
                case .ended(let index, let end):
                    action = machine.withLock { $0.ended(index, end, now: now) }
                }
                switch action {
                case .none:
                    continue
                case .restart(let index):
                    if let failed = restart(index) { return failed }
                default:
                    // Events after this one are moot: the group is stopping.
                    return action
                }
            }
            wakeup.wait(timeout: nil)
        }
    }

    /// Stops the service, then starts it again; the machine's answer when that start failed.
    private func restart(_ index: Int) -> ServiceGroupStateMachine.Action? {
        let service = entries[index].service
        service.requestStop()
        _ = service.stop(deadline: Posix.monotonicNanos() &+ machine.withLock { $0.gracefulStop })
        generations.withLock { $0[index] &+= 1 }
        do throws(ServiceError) {
            try service.start(ending: ending(for: index))
            _ = machine.withLock { $0.restarted(index) }
            return nil
        } catch {
            return machine.withLock { $0.restartFailed(index, error, now: Posix.monotonicNanos()) }
        }
    }

    private func ending(for index: Int) -> ServiceEnding {
        let generation = generations.withLock { $0[index] }
        return ServiceEnding { [self] end in
            // An end reported by a start that a restart has since replaced is stale.
            guard generations.withLock({ $0[index] }) == generation else { return }
            post(.ended(index, end))
        }
    }

    private func post(_ event: Event) {
        events.withLock { $0.append(event) }
        wakeup.signal()
    }
}

/// A service that could not start or that failed: which one, and why.
///
/// `Sendable`: strings, an errno and a kind.
package struct ServiceError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What the failure asks of the process's owner. `Sendable` value.
    package enum Kind: Sendable, Equatable {
        /// Something went wrong at run time: a restart may help (exit 1, `Restart=on-failure`).
        case runtime
        /// The configuration or the state the host has cannot be served (an inbox index the
        /// export stream no longer holds the start of): a restart does not help, an operator
        /// must act (exit 78, EX_CONFIG, as a configuration refused at start).
        case configuration
    }

    package var service: String
    package var message: String
    /// The errno behind it, when a system call failed.
    package var errno: Int32?
    package var kind: Kind

    package init(service: String, message: String, errno: Int32? = nil, kind: Kind = .runtime) {
        self.service = service
        self.message = message
        self.errno = errno
        self.kind = kind
    }

    package var description: String { "\(service): \(message)" }
}
