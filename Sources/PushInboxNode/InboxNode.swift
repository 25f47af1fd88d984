@preconcurrency import Glibc
import PushExport
import PushFleetOutbox
import PushFollow
import PushInboxJetStream
import PushJournal
import PushOutbox
import PushOutboxStore
import PushSystem
import PushSystemd
import PushErasure

/// An inbox node's duties (`[Inbox] Source=nats`), built from options: the follower that
/// builds the index from the `[Export]` stream, the publisher of the events the HTTP layer
/// accepts, and with `[Outbox] Enabled=yes` the fleet outbox; run as ``services`` of the
/// process's ``ServiceGroup``. It knows nothing of HTTP: what the HTTP layer must learn (the
/// index moved, the stream was replaced) reaches it through ``Hooks``, so the HTTP layer and
/// the node meet only in pushspool-inbox's composition (`InboxServerMain` in `PushInboxMain`).
/// A refusal after the start is the followers' service's end (``InboxNodeFollowers``).
///
/// `Sendable`: fixed at init; its parts lock internally.
package final class InboxNode: Sendable {
    /// What the node tells its owner, on the follower's thread. `Sendable` value.
    package struct Hooks: Sendable {
        /// The index applied records, or an erasure took rows from it: readers look again.
        package var indexApplied: @Sendable () -> Void
        /// The follower's health changed (stream replaced, index rebuilt): STATUS= follows.
        package var changed: @Sendable () -> Void

        package init(indexApplied: @escaping @Sendable () -> Void, changed: @escaping @Sendable () -> Void) {
            self.indexApplied = indexApplied
            self.changed = changed
        }
    }

    /// Why the node did not start, by the part that failed; the owner maps each to its exit
    /// status. `Sendable` value.
    package enum StartError: Error, Sendable {
        /// The follower could not be made (its index or state).
        case follower(JetStreamInboxError)
        /// The publisher refused its options (`[Export] Subject=`).
        case publisher(ExportError)
        /// The stream no longer holds what the index needs, or another node uses this host id
        /// (already said on stderr and in the journal).
        case refused(JetStreamInboxError)
        /// The fleet outbox's options (key files, URLs) or its state.
        case fleetOutbox(OutboxError)
    }

    package let follower: JetStreamInboxFollower
    package let publisher: EventPublisher
    /// `nil` unless `[Outbox] Enabled=yes`.
    package let fleetOutbox: FleetOutbox?
    /// The follower, and the fleet outbox with its retry sender: one service of the group.
    package let followers: InboxNodeFollowers
    /// The publisher's connecting thread: started with the group, closed at its stop.
    package let publishing: EventPublisherService

    /// The node's services, in the order they start (the group stops them in reverse): the
    /// followers, then the publisher, which only the HTTP layer (started after it) publishes
    /// through, and which closes once that has stopped.
    package var services: [any Service] { [followers, publishing] }

    /// Makes the follower (checked against the stream: a refusal throws; NATS out of reach
    /// only delays the index), the publisher (connecting on its own thread once its service
    /// starts) and, when `outbox` is given, the fleet outbox with the options it returns (key
    /// files loaded). Nothing runs until the services start.
    package init(options: JetStreamInboxOptions, outbox: (() throws(OutboxError) -> OutboxOptions)?, fleetOutboxDirectory: String,
                 hooks: Hooks) throws(StartError) {
        let events = EventLog(identifier: "pushspool-inbox")
        let streamName = options.export.stream
        // The fleet outbox works an event once the index applied it: each commit wakes it.
        let fleetSlot = Locked<FleetOutbox?>(nil)
        // The erasures the index applies, for the fleet outbox (made later) to stop sending.
        let erased = ErasedSubjects()
        // A refusal after the start ends the followers' service (made last).
        let service = Locked<InboxNodeFollowers?>(nil)
        do throws(JetStreamInboxError) {
            follower = try JetStreamInboxFollower(options: options, refused: { error in
                // On stderr once the group has stopped, as the failure that stopped it.
                Self.refusalEvent(error, events: events)
                service.withLock { $0 }?.refused(error)
            }, observer: { event in
                switch event {
                case .resumed, .applied: hooks.indexApplied()
                case .erasure(let id, let seq, let outcome):
                    if Self.erasureApplied(id: id, streamSeq: seq, outcome: outcome, events: events, erased: erased) {
                        hooks.indexApplied()
                    }
                case .streamReplaced(let reason, let seq):
                    Self.streamReplaced(reason, appliedSeq: seq, events: events)
                    hooks.changed()
                case .rebuilt(let seq, let items, let failure):
                    Self.indexRebuilt(appliedSeq: seq, items: items, failure: failure, stream: streamName, events: events)
                    hooks.changed()
                }
                fleetSlot.withLock { $0 }?.indexAdvanced()
            })
        } catch {
            throw .follower(error)
        }
        // The PubAck wait bounded at 2 s, and the connection made by the publisher's own
        // thread: an HTTP worker never waits for a connect, and at most 2 s for a stream that
        // stopped answering (the outage's first request; the next ones answer 503 at once).
        do throws(ExportError) { publisher = try EventPublisher(options: options.export, maxWait: .seconds(2)) } catch {
            throw .publisher(error)
        }
        publishing = EventPublisherService(publisher)
        do throws(JetStreamInboxError) {
            try follower.prepare()
        } catch where error.refusesStart {
            Self.refusedStart(error, events: events)
            throw .refused(error)
        } catch {
            Self.err("pushspool-inbox: the inbox index waits for NATS: \(error)\n")
        }
        var followers: [any Follower] = [follower]
        if let outbox {
            do throws(OutboxError) {
                let fleet = try Self.fleetOutbox(options: try outbox(), export: options.export, directory: fleetOutboxDirectory,
                                                 follower: follower, erased: erased)
                fleetSlot.withLock { $0 = fleet }
                fleetOutbox = fleet
                followers += [fleet, fleet.retrySender] as [any Follower]
            } catch {
                throw .fleetOutbox(error)
            }
        } else {
            fleetOutbox = nil
        }
        self.followers = InboxNodeFollowers(FollowerGroup(followers, commits: CommitFeed(), niceness: 0))
        service.withLock { $0 = self.followers }
    }

    static func err(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }

    /// A refusal of the stream follower at start (gap, host id in use): on stderr, and a host
    /// id in use as a journald event too.
    static func refusedStart(_ error: JetStreamInboxError, events: EventLog) {
        err("pushspool-inbox: \(error)\n")
        refusalEvent(error, events: events)
    }

    /// A host id in use, as a journald event.
    static func refusalEvent(_ error: JetStreamInboxError, events: EventLog) {
        if case .hostIdInUse(let hostId, let other) = error.kind {
            events.log(.inboxHostIdInUse, "another inbox node uses this host id: set [Export] HostId= per node",
                       fields: [("HOST_ID", hostId), ("OTHER_NODE", other), (EventField.reasonCode, error.shortDescription)])
        }
    }

    /// The stream is not the one the index was built from: said on stderr and as a journald
    /// event before the follower rebuilds.
    static func streamReplaced(_ reason: JetStreamInboxError, appliedSeq: UInt64, events: EventLog) {
        err("pushspool-inbox: \(reason)\n")
        var fields: [(String, String)] = [("INBOX_APPLIED_SEQ", String(appliedSeq)), (EventField.reasonCode, "rebuilding")]
        if case .replaced(let indexCreated, let streamCreated) = reason.kind {
            fields += [("STREAM_CREATED", String(streamCreated)), ("INDEX_STREAM_CREATED", indexCreated.map(String.init) ?? "none")]
        }
        events.log(.inboxStreamReplaced, "export stream replaced: rebuilding the inbox index from the new stream", fields: fields)
    }

    /// The end of the rebuild after a replaced stream.
    static func indexRebuilt(appliedSeq: UInt64, items: Int64, failure: JetStreamInboxError?, stream: String, events: EventLog) {
        if let failure {
            err("pushspool-inbox: rebuilding the inbox index from stream \(stream) failed (retried): \(failure)\n")
            events.log(.inboxStreamReplaced, "export stream replaced: rebuilding the inbox index failed, retried",
                       fields: [("INBOX_APPLIED_SEQ", String(appliedSeq)), (EventField.reasonCode, "rebuild_failed")])
        } else {
            err("pushspool-inbox: inbox index rebuilt from the new stream \(stream): \(items) items, stream seq \(appliedSeq)\n")
            events.log(.inboxStreamReplaced, "export stream replaced: inbox index rebuilt from the new stream",
                       fields: [("INBOX_APPLIED_SEQ", String(appliedSeq)), ("INBOX_ITEMS", String(items)), (EventField.reasonCode, "rebuilt")])
        }
    }

    /// An erasure record from the stream, applied by the follower (the erased user's rows,
    /// their stream `changes` too, left the index); one that named no one here is a journald
    /// event (never the plain id: the record holds only the hash, and so does the event).
    /// The fleet outbox (`erased`) stops sending the subject's events from before the record.
    /// Returns true when the index lost rows (readers look again).
    static func erasureApplied(id: String, streamSeq: UInt64, outcome: NodeErasure.Outcome, events: EventLog,
                               erased: ErasedSubjects) -> Bool {
        switch outcome {
        case .erased(let subject, _):
            let erasedSubject: ErasedSubjects.Subject = switch subject {
            case .user(let user): .user(user)
            case .device(let device): .device(device)
            }
            erased.add(ErasedSubjects.Entry(erasureID: id, subject: erasedSubject, before: streamSeq))
            return true
        case .unmatched(let reason, _):
            let why = reason == "no_key"
                ? "this node has no erasure key (give the fleet one: [Export] ErasureKeyFile=)"
                : "no user or device of this node's index matches it"
            events.log(.erasureUnmatched, "erasure \(id) from the stream names no one here: \(why)",
                       fields: [("ERASURE_ID", id), ("STREAM_SEQ", String(streamSeq)), (EventField.reasonCode, reason)])
            return false
        case .alreadyDone:
            return false
        }
    }

    /// The fleet outbox, pulling the events inbox nodes publish from the consumer every such
    /// node shares.
    static func fleetOutbox(options outbox: OutboxOptions, export: ExportOptions, directory: String,
                            follower: JetStreamInboxFollower, erased: ErasedSubjects) throws(OutboxError) -> FleetOutbox {
        let options = FleetOutboxOptions(outbox: outbox, export: export, directory: directory)
        return try FleetOutbox(options: options, appliedSeq: { follower.appliedSeq }, erased: erased, onNotice: { notice in
            switch notice {
            case .parked(let id, let target, let status, let reason, let message):
                err("pushspool-inbox: outbox delivery \(id) to \(target) parked (\(reason), HTTP \(status)): \(message)\n")
            case .failed(let id, let target, let status, let message, let retryInMillis):
                err("pushspool-inbox: outbox delivery \(id) to \(target) failed (HTTP \(status)), handed back for \(retryInMillis) ms: \(message)\n")
            case .fieldProblem(let id, let target, let field, let reason, let message):
                err("pushspool-inbox: outbox delivery \(id) to \(target): field \(field) not normalised (\(reason)): \(message)\n")
            }
        })
    }
}

/// The node's followers (the stream follower; with `[Outbox] Enabled=yes` the fleet outbox
/// and its retry sender) as one service of pushspool-inbox's group. The stream found no longer
/// holding what the index needs after the start (a gap, another node with this host id) is
/// its end: a failure of kind ``ServiceError/Kind/configuration``, which stops the group.
///
/// `Sendable`: the group is fixed at init; the end it was started with is locked.
package final class InboxNodeFollowers: Service, Sendable {
    package let group: FollowerGroup
    private let ending = Locked<ServiceEnding?>(nil)

    package init(_ group: FollowerGroup) { self.group = group }

    package var serviceName: String { "followers" }

    package func start(ending: ServiceEnding) throws(ServiceError) {
        self.ending.withLock { $0 = ending }
        try group.start(ending: ending)
    }

    package func requestStop() { group.requestStop() }

    package func stop(deadline: UInt64) -> Bool { group.stop(deadline: deadline) }

    /// The stream follower refused the stream (on its runner's thread): the service ends.
    package func refused(_ error: JetStreamInboxError) {
        ending.withLock { $0 }?.failed(Self.failure(error))
    }

    /// A refusal as the service's failure: the host's configuration or state, not a fault a
    /// restart clears (an operator rebuilds the index, or sets `[Export] HostId=`).
    package static func failure(_ error: JetStreamInboxError) -> ServiceError {
        ServiceError(service: "inbox-stream", message: "\(error)", kind: .configuration)
    }
}

/// The event publisher's connecting thread as a service: started before the HTTP layer
/// publishes through it, closed (its connection and thread) after the HTTP layer stopped.
///
/// `Sendable`: the publisher locks internally.
package final class EventPublisherService: Service, Sendable {
    package let publisher: EventPublisher

    package init(_ publisher: EventPublisher) { self.publisher = publisher }

    package var serviceName: String { "event publisher" }

    package func start(ending: ServiceEnding) throws(ServiceError) {
        do throws(SystemError) {
            try publisher.startConnecting()
        } catch {
            throw ServiceError(service: serviceName, message: "cannot start the thread that connects to NATS: \(error)", errno: error.errno)
        }
    }

    package func stop(deadline: UInt64) -> Bool { publisher.close(waitingUntil: deadline) }
}
