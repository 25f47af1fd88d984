@preconcurrency import Glibc
import Testing
import PushExport
import PushFollow
import PushInboxJetStream
import PushInboxNode
import PushJournal
import PushSystem
import TestSupport
@testable import PushInboxMain

/// pushspool-inbox's group as `main` builds it (``InboxServerMain/serviceGroup``), with a
/// service failing while the rest serve: the group stops every service in reverse, names the
/// failure, and `main` exits with what systemd must see.
@Suite struct InboxServiceGroupTests {
    /// Logs what the group did to it; its end is reported through the `ending` it was started with.
    final class Part: Service, Sendable {
        let serviceName: String
        let log: Locked<[String]>
        private let ending = Locked<ServiceEnding?>(nil)

        init(_ name: String, log: Locked<[String]>) {
            serviceName = name
            self.log = log
        }

        func start(ending: ServiceEnding) throws(ServiceError) {
            self.ending.withLock { $0 = ending }
            log.withLock { $0.append("start \(serviceName)") }
        }

        func stop(deadline: UInt64) -> Bool {
            log.withLock { $0.append("stop \(serviceName)") }
            return true
        }

        func fail(_ error: ServiceError) { ending.withLock { $0 }!.failed(error) }
    }

    /// Runs the group on the test's thread; `whenReady` runs from a thread of its own, as a
    /// service's end does (the group's thread is the one that runs the stop). A group that
    /// has not begun to stop 10 s later is stopped, so a failure that never reaches it ends
    /// the test (stopped as `.requested`) instead of hanging it.
    static func run(_ group: ServiceGroup, whenReady: @escaping @Sendable () -> Void) -> ServiceGroupStateMachine.Stopped {
        let stopping = Wakeup()
        return group.run(onReady: {
            do {
                try PosixThread.detach(name: "inject") {
                    whenReady()
                    if !stopping.wait(timeout: .seconds(10)) { group.stop() }
                }
            } catch {
                Issue.record("no thread: \(error)")
                group.stop()
            }
        }, onStopping: { stopping.signal() })
    }

    @Test func aServiceFailingWhileServingStopsTheGroupInReverseAndExitsNonZero() {
        let log = Locked<[String]>([])
        let followers = Part("followers", log: log), publisher = Part("event publisher", log: log)
        let http = Part("http", log: log), hub = Part("event hub", log: log), status = Part("status", log: log)
        let group = InboxServerMain.serviceGroup(node: [followers, publisher], http: http, hub: hub, status: status, watchSignals: false)
        let failure = ServiceError(service: "http", message: "injected failure", errno: EIO)
        let stopped = Self.run(group) { http.fail(failure) }
        #expect(stopped.reason == .serviceFailed("http", failure))
        #expect(stopped.stuck.isEmpty)
        #expect(log.withLock { $0 } == ["start followers", "start event publisher", "start http", "start event hub", "start status",
                                        "stop status", "stop event hub", "stop http", "stop event publisher", "stop followers"])
        // Not 0: systemd restarts it (Restart=on-failure).
        #expect(InboxServerMain.exitStatus(stopped.reason) == 1)
        #expect(InboxServerMain.stopMessage(stopped.reason) == "http: injected failure")
    }

    /// The stream no longer holds what the index needs, found after the start: the node's
    /// followers end with a failure of kind configuration, which stops the group through its
    /// own path, and `main` exits 78 (EX_CONFIG), as for the refusal at start.
    @Test func aStreamRefusalWhileServingStopsTheGroupAndExits78() {
        let log = Locked<[String]>([])
        // The node's followers as InboxNode makes them, without a follower (none to connect).
        let followers = InboxNodeFollowers(FollowerGroup([], commits: CommitFeed()))
        let http = Part("http", log: log), hub = Part("event hub", log: log), status = Part("status", log: log)
        let group = InboxServerMain.serviceGroup(node: [followers], http: http, hub: hub, status: status, watchSignals: false)
        let refusal = JetStreamInboxError(.gap(appliedSeq: 20, firstSeq: 30), stream: "PUSHSPOOL")
        let stopped = Self.run(group) { followers.refused(refusal) }
        guard case .serviceFailed(let name, let error) = stopped.reason else {
            Issue.record("stopped by \(stopped.reason), not by the followers' failure")
            return
        }
        #expect(name == "followers")
        #expect(error == InboxNodeFollowers.failure(refusal))
        #expect(error.kind == .configuration)
        #expect(error.message.contains("up to seq 20, but the stream now starts at seq 30"), "\(error.message)")
        #expect(log.withLock { $0 } == ["start http", "start event hub", "start status", "stop status", "stop event hub", "stop http"])
        #expect(InboxServerMain.exitStatus(stopped.reason) == 78)
    }

    @Test func aStopAskedForExitsZero() {
        let log = Locked<[String]>([])
        let group = InboxServerMain.serviceGroup(node: [], http: Part("http", log: log), hub: Part("event hub", log: log),
                                                 status: Part("status", log: log), watchSignals: false)
        let stopped = Self.run(group) { group.stop() }
        #expect(stopped.reason == .requested)
        #expect(InboxServerMain.exitStatus(stopped.reason) == 0)
        #expect(InboxServerMain.stopMessage(stopped.reason) == nil)
    }

    /// The publisher's connecting thread runs from its service's start to its stop, which
    /// waits for it to return (NATS out of reach: the thread is between connects).
    @Test func thePublishersConnectingThreadEndsWithItsServicesStop() throws {
        var options = ExportOptions(stateDirectory: "/nonexistent", instance: nil)
        options.urls = ["nats://127.0.0.1:\(try NatsServer.freePort())"]
        let service = EventPublisherService(try EventPublisher(options: options))
        try service.start()
        #expect(service.stop(deadline: Posix.monotonicNanos() &+ 5_000_000_000))
        // Closed: a publish neither connects nor waits.
        #expect(throws: ExportError.self) { try service.publisher.publishRecord(key: "k", body: [], hostId: "h") }
    }
}
