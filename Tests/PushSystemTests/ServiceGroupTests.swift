@preconcurrency import Glibc
import Dispatch
import PushSystem
import Testing

/// The group's decisions without threads or a clock: the time is a number the test passes.
@Suite struct ServiceGroupStateMachineTests {
    typealias Machine = ServiceGroupStateMachine
    static let grace: UInt64 = 1_000

    static func running(_ members: [Machine.Member]) -> Machine {
        var machine = Machine(members: members, gracefulStop: grace)
        var action = machine.start()
        while case .start(let index) = action { action = machine.started(index) }
        #expect(action == .ready)
        return machine
    }

    @Test func startsInOrderAndIsReadyAfterTheLast() {
        var machine = Machine(members: [.init(name: "a"), .init(name: "b")], gracefulStop: Self.grace)
        #expect(machine.state == .idle)
        #expect(machine.start() == .start(0))
        #expect(machine.started(0) == .start(1))
        #expect(machine.started(1) == .ready)
        #expect(machine.state == .running(.init(started: 2)))
    }

    @Test func aFailureThatShutsTheGroupDownStopsEveryServiceInReverse() {
        var machine = Self.running([.init(name: "a"), .init(name: "b"), .init(name: "c")])
        let error = ServiceError(service: "b", message: "injected")
        #expect(machine.ended(1, .failed(error), now: 500) == .beginStop([2, 1, 0]))
        guard case .stopping(let stopping) = machine.state else {
            Issue.record("not stopping: \(machine.state)")
            return
        }
        #expect(stopping.deadline == 500 + Self.grace)
        #expect(machine.next(now: 500) == .wait(2, deadline: 1_500))
        #expect(machine.stopped(2, inTime: true, now: 600) == .wait(1, deadline: 1_500))
        #expect(machine.stopped(1, inTime: true, now: 700) == .wait(0, deadline: 1_500))
        let stopped = Machine.Stopped(reason: .serviceFailed("b", error), stuck: [])
        #expect(machine.stopped(0, inTime: true, now: 800) == .done(stopped))
        #expect(machine.state == .stopped(stopped))
        #expect(stopped.reason.failure == error)
    }

    @Test func aRestartingServiceRestartsUpToItsLimitThenShutsTheGroupDown() {
        var machine = Self.running([.init(name: "a"), .init(name: "b", onFailed: .restart(limit: 2))])
        let error = ServiceError(service: "b", message: "injected")
        #expect(machine.ended(1, .failed(error), now: 10) == .restart(1))
        #expect(machine.ended(1, .failed(error), now: 20) == .restart(1))
        #expect(machine.ended(1, .failed(error), now: 30) == .beginStop([1, 0]))
        // A finished service with the default behaviour shuts the group down at once.
        var other = Self.running([.init(name: "a"), .init(name: "b", onFailed: .restart(limit: 2))])
        #expect(other.ended(1, .finished, now: 10) == .beginStop([1, 0]))
    }

    @Test func anIgnoredEndLeavesTheGroupRunning() {
        var machine = Self.running([.init(name: "a", onFinished: .ignore, onFailed: .ignore), .init(name: "b")])
        #expect(machine.ended(0, .finished, now: 10) == .none)
        #expect(machine.ended(0, .failed(ServiceError(service: "a", message: "x")), now: 20) == .none)
        #expect(machine.state == .running(.init(started: 2)))
        // It is still waited for at the stop: its threads are joined like the others'.
        #expect(machine.stop(.signal(SIGTERM), now: 30) == .beginStop([1, 0]))
    }

    @Test func servicesStillRunningAtTheDeadlineAreEscalated() {
        var machine = Self.running([.init(name: "a"), .init(name: "b"), .init(name: "c")])
        #expect(machine.stop(.signal(SIGTERM), now: 0) == .beginStop([2, 1, 0]))
        #expect(machine.next(now: 0) == .wait(2, deadline: Self.grace))
        // c used the whole grace period; b and a still get a look (they may have ended meanwhile).
        #expect(machine.stopped(2, inTime: false, now: Self.grace) == .wait(1, deadline: Self.grace))
        #expect(machine.stopped(1, inTime: false, now: Self.grace + 1) == .wait(0, deadline: Self.grace))
        #expect(machine.stopped(0, inTime: true, now: Self.grace + 2) == .escalate(["c", "b"]))
        #expect(machine.next(now: Self.grace + 3) == .done(.init(reason: .signal(SIGTERM), stuck: ["c", "b"])))
    }

    @Test func aStartFailureStopsOnlyTheServicesStartedBeforeIt() {
        var machine = Machine(members: [.init(name: "a"), .init(name: "b"), .init(name: "c")], gracefulStop: Self.grace)
        _ = machine.start()
        #expect(machine.started(0) == .start(1))
        let error = ServiceError(service: "b", message: "cannot")
        #expect(machine.startFailed(1, error, now: 5) == .beginStop([0]))
        #expect(machine.next(now: 5) == .wait(0, deadline: 5 + Self.grace))
        #expect(machine.stopped(0, inTime: true, now: 6) == .done(.init(reason: .startFailed(error), stuck: [])))
    }

    @Test func aStopWhileStoppingOrIdleChangesNothing() {
        var idle = Machine(members: [.init(name: "a")], gracefulStop: Self.grace)
        #expect(idle.stop(.requested, now: 0) == .done(.init(reason: .requested, stuck: [])))
        var machine = Self.running([.init(name: "a")])
        #expect(machine.stop(.signal(SIGINT), now: 0) == .beginStop([0]))
        #expect(machine.stop(.signal(SIGTERM), now: 1) == .none)
        #expect(machine.ended(0, .failed(ServiceError(service: "a", message: "late")), now: 2) == .none)
    }
}

/// The group on real threads: a test injects an end into a service and sees the group's
/// named behaviour.
@Suite struct ServiceGroupTests {
    /// Records what the group did to it in a shared log; its end is reported through `ending`.
    final class FakeService: Service, Sendable {
        let serviceName: String
        let log: Locked<[String]>
        let endings = Locked<[ServiceEnding]>([])
        /// Called on the group's thread at each start, with the start's number (from 1).
        let onStart: @Sendable (FakeService, Int) -> Void
        /// Stops only at the deadline when true.
        let hangs: Bool

        init(_ name: String, log: Locked<[String]>, hangs: Bool = false, onStart: @escaping @Sendable (FakeService, Int) -> Void = { _, _ in }) {
            serviceName = name
            self.log = log
            self.hangs = hangs
            self.onStart = onStart
        }

        func start(ending: ServiceEnding) throws(ServiceError) {
            let count = endings.withLock {
                $0.append(ending)
                return $0.count
            }
            log.withLock { $0.append("start \(serviceName)") }
            onStart(self, count)
        }

        func requestStop() { log.withLock { $0.append("requestStop \(serviceName)") } }

        func stop(deadline: UInt64) -> Bool {
            log.withLock { $0.append("stop \(serviceName)") }
            guard hangs else { return true }
            let now = Posix.monotonicNanos()
            _ = DispatchSemaphore(value: 0).wait(timeout: .now() + .nanoseconds(Int(clamping: deadline > now ? deadline - now : 0)))
            return false
        }

        var ending: ServiceEnding { endings.withLock { $0.last! } }
    }

    @Test func aFailedServiceShutsTheGroupDownInReverseOrder() {
        let log = Locked<[String]>([])
        let a = FakeService("a", log: log), b = FakeService("b", log: log), c = FakeService("c", log: log)
        let group = ServiceGroup([a, b, c], watchSignals: false)
        let error = ServiceError(service: "b", message: "injected failure")
        let stopped = group.run(onReady: {
            log.withLock { $0.append("ready") }
            b.ending.failed(error)
        })
        #expect(stopped.reason == .serviceFailed("b", error))
        #expect(stopped.stuck.isEmpty)
        #expect(log.withLock { $0 } == ["start a", "start b", "start c", "ready",
                                        "requestStop c", "requestStop b", "requestStop a", "stop c", "stop b", "stop a"])
        #expect(group.state == .stopped(stopped))
    }

    @Test func aRestartingServiceIsStoppedAndStartedAgain() {
        let log = Locked<[String]>([])
        let a = FakeService("a", log: log)
        // Its second start fails at once: past its one restart, the group shuts down.
        let b = FakeService("b", log: log) { service, count in
            if count == 2 { service.ending.failed(ServiceError(service: "b", message: "again")) }
        }
        let group = ServiceGroup([ServiceGroup.Entry(a), ServiceGroup.Entry(b, onFailed: .restart(limit: 1))], watchSignals: false)
        let stopped = group.run(onReady: { b.ending.failed(ServiceError(service: "b", message: "first")) })
        #expect(stopped.reason == .serviceFailed("b", ServiceError(service: "b", message: "again")))
        #expect(log.withLock { $0 } == ["start a", "start b", "requestStop b", "stop b", "start b",
                                        "requestStop b", "requestStop a", "stop b", "stop a"])
    }

    @Test func anIgnoredEndLeavesTheOthersRunningUntilTheStop() {
        let log = Locked<[String]>([])
        let a = FakeService("a", log: log), b = FakeService("b", log: log)
        let group = ServiceGroup([ServiceGroup.Entry(a, onFinished: .ignore), ServiceGroup.Entry(b)], watchSignals: false)
        let stopped = group.run(onReady: {
            a.ending.finished()
            log.withLock { $0.append("a finished") }
            group.stop()
        })
        #expect(stopped.reason == .requested)
        #expect(log.withLock { $0 } == ["start a", "start b", "a finished", "requestStop b", "requestStop a", "stop b", "stop a"])
    }

    @Test func aServiceStillRunningAtTheDeadlineIsEscalatedAndTheStopEndsThere() {
        let log = Locked<[String]>([])
        let a = FakeService("a", log: log), stuck = FakeService("stuck", log: log, hangs: true)
        let escalated = Locked<[String]>([])
        let group = ServiceGroup([a, stuck], gracefulStop: .milliseconds(200), watchSignals: false,
                                 escalated: { names in escalated.withLock { $0 += names } })
        let started = Posix.monotonicNanos()
        let stopped = group.run(onReady: { group.stop() })
        let took = Posix.monotonicNanos() - started
        #expect(stopped.stuck == ["stuck"])
        #expect(escalated.withLock { $0 } == ["stuck"])
        #expect(took >= 200_000_000 && took < 5_000_000_000, "the stop ended at its deadline (\(took) ns)")
        // The one after it in the stop order is still stopped.
        #expect(log.withLock { $0 }.suffix(2) == ["stop stuck", "stop a"])
    }

    @Test func aServiceThatCannotStartStopsThoseBeforeItAndNamesTheError() {
        final class Refusing: Service, Sendable {
            var serviceName: String { "refusing" }
            func start(ending: ServiceEnding) throws(ServiceError) { throw ServiceError(service: serviceName, message: "no") }
            func stop(deadline: UInt64) -> Bool { true }
        }
        let log = Locked<[String]>([])
        let a = FakeService("a", log: log)
        let group = ServiceGroup([a, Refusing(), FakeService("never", log: log)], watchSignals: false)
        var readied = false
        let stopped = group.run(onReady: { readied = true })
        #expect(!readied)
        #expect(stopped.reason == .startFailed(ServiceError(service: "refusing", message: "no")))
        #expect(log.withLock { $0 } == ["start a", "requestStop a", "stop a"])
    }
}
