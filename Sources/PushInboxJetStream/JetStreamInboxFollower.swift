@preconcurrency import Glibc
import PushExport
import PushFollow
import PushInbox
import PushJournal
import PushSystem
import PushErasure

/// Why the index cannot be built from the stream. `Sendable` value; `description` says
/// what happened and what to do.
package struct JetStreamInboxError: Error, Sendable, CustomStringConvertible {
    package enum Kind: Sendable {
        /// The stream no longer holds the records the index needs next: its first seq is
        /// `firstSeq`, the index applied up to `appliedSeq` (retention or a purge passed it).
        case gap(appliedSeq: UInt64, firstSeq: UInt64)
        case nats(ExportError)
        case index(InboxError)
        /// An erasure record from the stream could not be applied here (retried).
        case erasure(UserDataError)
        /// Another live inbox node answered on this node's host id: the two would share one
        /// durable consumer, each seeing part of the stream (`other` is what it answered).
        case hostIdInUse(hostId: String, other: String)
        /// The stream is not the one the index was built from (deleted and created again):
        /// its creation time is `streamCreated`, the index recorded `indexCreated` (`nil`: none
        /// recorded, but the index is past the stream's last seq). The follower rebuilds.
        case replaced(indexCreated: Int64?, streamCreated: Int64)
    }

    package var kind: Kind
    package var stream: String

    package init(_ kind: Kind, stream: String) {
        self.kind = kind
        self.stream = stream
    }

    /// The index cannot go on from where it is: the operator must rebuild it (exit 78).
    package var isGap: Bool {
        if case .gap = kind { return true }
        return false
    }

    /// The node must not run as configured (exit 78): a gap, or its host id in use.
    package var refusesStart: Bool {
        switch kind {
        case .gap, .hostIdInUse: true
        case .nats, .index, .erasure, .replaced: false
        }
    }

    /// Stable, without data: for STATUS=, metrics and journald fields.
    package var shortDescription: String {
        switch kind {
        case .gap: "stream-gap"
        case .nats(let e): e.shortDescription
        case .index(let e): "index-\(e.shortDescription)"
        case .erasure(let e): "erasure-\(e.shortDescription)"
        case .hostIdInUse: "host-id-in-use"
        case .replaced: "stream-replaced"
        }
    }

    package var description: String {
        switch kind {
        case .gap(let applied, let first):
            "the inbox index applied stream \(stream) up to seq \(applied), but the stream now starts at seq \(first): "
                + "records \(applied + 1) to \(first - 1) are gone (the stream's retention or a purge passed the index). "
                + "Rebuild the index from what the stream holds with `pushspoolctl nc reindex --from-stream`, "
                + "or keep the stream longer (its MaxAge/MaxMsgs must cover the inbox's)"
        case .nats(let e): "inbox index from stream \(stream): \(e)"
        case .index(let e): "\(e)"
        case .erasure(let e): "applying an erasure from stream \(stream): \(e) (retried)"
        case .hostIdInUse(let hostId, let other):
            "another inbox node with host id \(hostId) is following stream \(stream) (it answered: \(other)); two nodes with one host id "
                + "share one durable consumer and each silently sees only part of the stream. Give each node its own "
                + "[Export] HostId= (machines or VMs cloned from one image share /etc/machine-id, the default)"
        case .replaced(let indexCreated, let streamCreated):
            "stream \(stream) is not the one the inbox index was built from (stream created at \(streamCreated) ns, the index's "
                + (indexCreated.map { "at \($0) ns" } ?? "not recorded, but past the stream's last seq")
                + "): it was deleted and created again; the index is rebuilt from the new stream"
        }
    }
}

/// What the stream follower needs: the `[Export]` connection, the index, its own consumer.
/// `Sendable` value.
package struct JetStreamInboxOptions: Sendable {
    /// URLs, credentials, TLS files and `Stream=` (``ExportOptions``, from `[Export]`).
    package var export: ExportOptions
    package var indexPath: String
    /// `[Inbox] ListModals=`.
    package var listModals: Bool
    /// `[Feed NAME]` (``InboxIndex/feeds``).
    package var feeds: [InboxFeed] = []
    /// `[Inbox] RetentionSec=` (``InboxIndex/retentionMillis``; `nil` = none).
    package var retention: Duration?
    /// The durable consumer's name: one per inbox node (``consumerName(hostId:)``).
    package var consumerName: String
    /// The resolved `[Export] HostId=` (messages; empty: taken from ``consumerName``).
    package var hostId = ""
    /// How long the node waits for another live node with its host id to answer, at each
    /// new connection (``presenceSubject``).
    package var presenceWait: Duration = .seconds(1)
    /// Messages per fetch and per SQLite transaction.
    package var batchSize = 1000
    /// How long one fetch waits on the server when nothing is new (the follower's idle wait;
    /// a stop interrupts it).
    package var fetchWait: Duration = .seconds(10)
    /// Applies the erasure records the stream carries to this node (``NodeErasure``), in the
    /// follower and in `nc reindex --from-stream`; `nil` = they pass as any record.
    package var erasure: NodeErasure?
    /// Test seam: called with `erasure-received` (an erasure record is next, everything before
    /// it committed) and `erasure-applied` (the node erased, the index not yet past the record);
    /// the crash tests kill the process there.
    package var erasureHook: @Sendable (String) -> Void = { _ in }

    package init(export: ExportOptions, indexPath: String, listModals: Bool, consumerName: String) {
        self.export = export
        self.indexPath = indexPath
        self.listModals = listModals
        self.consumerName = consumerName
    }

    /// `pushspool-inbox-<host id>` with `.` as `_` (consumer names cannot hold a dot): the
    /// host id is unique per node (`[Export] HostId=`, else /etc/machine-id), so two inbox
    /// nodes never share, and thus never replace, each other's consumer.
    package static func consumerName(hostId: String) -> String {
        "pushspool-inbox-" + String(hostId.map { $0 == "." ? "_" : $0 })
    }

    /// The core NATS subject on which a running node answers for its consumer (and so its
    /// host id): `pushspool-inbox-node.<stream>.<consumer name>`. A node starting asks there
    /// first and refuses when another answers.
    package var presenceSubject: String { "pushspool-inbox-node.\(export.stream).\(consumerName)" }
}

/// What a ``JetStreamInboxFollower`` tells its owner about the index, on the runner's thread:
/// pushspool-inbox's event hub learns state changes from it (it has no journal to read them
/// from). `Sendable` value.
package enum StreamApplyEvent: Sendable {
    /// The index was opened at `appliedSeq` (at start, or a replaced file): what came before
    /// is not reported.
    case resumed(appliedSeq: UInt64)
    /// `records` (stream seqs, no journal key) were committed; the index is at `appliedSeq`.
    case applied([FollowedRecord], appliedSeq: UInt64)
    /// The erasure record at `streamSeq` was applied to this node (before the index moves
    /// past it): what the owner holds in memory of an ``NodeErasure/Outcome/erased(subject:status:)``
    /// subject must go too; an unmatched one is logged.
    case erasure(erasureID: String, streamSeq: UInt64, outcome: NodeErasure.Outcome)
    /// The stream is not the one the index was built from (`reason`, a ``JetStreamInboxError``
    /// of kind `.replaced`); the index, at `appliedSeq`, is being rebuilt from the new stream.
    case streamReplaced(JetStreamInboxError, appliedSeq: UInt64)
    /// The index was rebuilt from the new stream (after ``streamReplaced(_:appliedSeq:)``),
    /// up to `appliedSeq`, `items` items; or the rebuild failed (`failure`, retried).
    case rebuilt(appliedSeq: UInt64, items: Int64, failure: JetStreamInboxError?)
}

/// How a stream follower stands, for a readiness answer, `/metrics` and STATUS=. `Sendable` value.
package struct StreamFollowerHealth: Sendable, Equatable {
    package enum State: String, Sendable {
        /// Not connected yet or reconnecting: the index serves as it is.
        case connecting
        /// Following the stream.
        case following
        /// The stream was replaced; the index is being rebuilt from the new one (answers are
        /// of the old stream until the new file is in place).
        case rebuilding
        /// Refused (gap, host id in use): the node stops.
        case refused
    }

    package var state: State
    /// How many times this process found the stream replaced.
    package var streamReplacements: UInt64
    /// Ready: following the stream (not rebuilding, not refused).
    package var ready: Bool { state == .following }
}

/// Builds the inbox index from the export stream instead of the local journal, on a
/// ``FollowerRunner`` (pushspool-inbox with `[Inbox] Source=nats`).
///
/// Each fetched batch is applied in stream order through the same path as the journal's
/// records (``InboxIndex/apply(_:)``), with the stream seq as the record's seq: items are
/// identified by their stream seq, which every node following the stream agrees on. The
/// stream seq applied is stored in the same SQLite transaction as the items, and the batch is
/// acknowledged only after the commit: a crash (kill -9 included) anywhere loses nothing and
/// applies nothing twice — the consumer is recreated at the stored seq + 1 at start, and a
/// redelivery at or below it is skipped by ``InboxIndex/apply(_:)``.
///
/// Before it creates the consumer it checks that the stream still starts at or before the
/// stored seq + 1; when it does not (``JetStreamInboxError/isGap``) it reports through
/// `refused` and stops applying: the owner exits (78) and an operator rebuilds.
///
/// `Sendable`: the connection, consumer and index live behind one lock (the runner's thread
/// uses them); the status behind another.
package final class JetStreamInboxFollower: Follower, Sendable {
    package let options: JetStreamInboxOptions
    private let refused: @Sendable (JetStreamInboxError) -> Void
    private let observer: @Sendable (StreamApplyEvent) -> Void
    private let interrupt = NatsInterrupt()

    private struct Session: ~Copyable {
        var handle: InboxIndexHandle
        var client: NatsClient?
        var consumer: NatsPullConsumer?
        /// The stream seq the consumer delivers next (the index's applied seq + 1 when made).
        var consumerNext: UInt64 = 0
        var generation: UInt64 = 0
        /// The connection answers on ``JetStreamInboxOptions/presenceSubject`` (claimed once per connection).
        var claimed = false
    }

    private struct Control {
        var appliedSeq: UInt64 = 0
        var streamLastSeq: UInt64 = 0
        var connected = false
        var refusal: JetStreamInboxError?
        var rebuilding = false
        var streamReplacements: UInt64 = 0
    }

    private let session: Locked<Session>
    private let control = Locked(Control())

    /// Opens (creating when missing) the index; connects only in a step or ``prepare()``.
    /// `refused`: called once, on the runner's thread, when the stream no longer holds what
    /// the index needs. `observer`: told where the index starts (here, first) and of every
    /// committed batch.
    package init(options: JetStreamInboxOptions, refused: @escaping @Sendable (JetStreamInboxError) -> Void = { _ in },
                 observer: @escaping @Sendable (StreamApplyEvent) -> Void = { _ in }) throws(JetStreamInboxError) {
        self.options = options
        self.refused = refused
        self.observer = observer
        let handle = InboxIndexHandle(path: options.indexPath, readOnly: false, listModals: options.listModals, feeds: options.feeds,
                                      retention: options.retention)
        let applied: UInt64
        do throws(InboxError) {
            applied = try Self.openIndex(handle).appliedSeq()
        } catch {
            throw JetStreamInboxError(.index(error), stream: options.export.stream)
        }
        session = Locked(Session(handle: handle))
        control.withLock { $0.appliedSeq = applied }
        observer(.resumed(appliedSeq: applied))
    }

    /// The index at the handle, a damaged one moved aside and an outdated one replaced by an
    /// empty one (derived data: rebuilt from the stream, or refused when the stream lacks
    /// its start).
    private static func openIndex(_ handle: InboxIndexHandle) throws(InboxError) -> InboxIndex {
        do {
            return try handle.current()
        } catch where error.isCorrupt {
            handle.close()
            _ = try InboxIndex.moveAside(path: handle.path)
            return try handle.current()
        } catch where error.isStale {
            handle.close()
            try InboxIndex.replaceWithEmpty(path: handle.path, listModals: handle.listModals, feeds: handle.feeds, retention: handle.retention)
            return try handle.current()
        }
    }

    /// The stream seq of the last record in the index.
    package var appliedSeq: UInt64 { control.withLock { $0.appliedSeq } }

    /// Connected, following, rebuilding or refused, and the replacements seen.
    package var health: StreamFollowerHealth {
        control.withLock { c in
            let state: StreamFollowerHealth.State = c.refusal != nil ? .refused : c.rebuilding ? .rebuilding : c.connected ? .following : .connecting
            return StreamFollowerHealth(state: state, streamReplacements: c.streamReplacements)
        }
    }

    /// Connects and creates the consumer now, on the caller's thread (pushspool-inbox, before
    /// it serves). Throws the gap refusal, or why NATS could not be reached (the runner then
    /// keeps trying).
    /// A stream found replaced is not rebuilt here but by the runner's first step (the
    /// rebuild may take long; the node serves meanwhile).
    package func prepare() throws(JetStreamInboxError) {
        do throws(JetStreamInboxError) {
            try session.withLock { session throws(JetStreamInboxError) in
                _ = try ensureConsumer(&session, rebuild: false)
            }
        } catch {
            if case .replaced = error.kind { return }
            throw error
        }
    }

    // MARK: Follower

    package var name: String { "inbox-stream" }

    /// The applied stream seq (not a journal seq: the runner's journal lag means nothing here).
    package func durableSeq() -> UInt64? { nil }

    package var statusDetail: String? {
        let c = control.withLock { $0 }
        if let refusal = c.refusal {
            if case .hostIdInUse = refusal.kind { return "inbox index: another node uses this host id (set [Export] HostId=)" }
            return "inbox index: stream no longer holds what it needs (rebuild with nc reindex --from-stream)"
        }
        if c.rebuilding { return "inbox index: stream replaced, rebuilding from the new stream" }
        let lag = c.streamLastSeq > c.appliedSeq ? c.streamLastSeq - c.appliedSeq : 0
        return "inbox from stream seq \(c.appliedSeq), lag \(lag) (\(c.connected ? "connected" : "disconnected"))"
    }

    /// A stop closes the connection, so a fetch waiting on the server returns at once.
    package func stopRequested() { interrupt.interrupt() }

    package func finish() {
        session.withLock { session in
            interrupt.disarm()
            session.consumer = nil
            session.client?.close()
            session.client = nil
        }
        control.withLock { $0.connected = false }
    }

    package func step(_ context: FollowerContext) throws(FollowerError) -> FollowerNext {
        if control.withLock({ $0.refusal != nil }) || context.stopRequested() { return .wake(atMost: nil) }
        do throws(JetStreamInboxError) {
            return try session.withLock { session throws(JetStreamInboxError) -> FollowerNext in
                try step(&session, context)
            }
        } catch {
            if error.refusesStart {
                control.withLock { $0.refusal = error }
                refused(error)
                return .wake(atMost: nil)
            }
            throw FollowerError(error.shortDescription, error.description)
        }
    }

    private func step(_ session: inout Session, _ context: FollowerContext) throws(JetStreamInboxError) -> FollowerNext {
        let stream = options.export.stream
        let (index, consumer) = try ensureConsumer(&session, rebuild: true)
        // What fell due (expiries, snoozes' ends) is applied now, and the fetch waits no
        // longer than until the next due time, so it is applied at its moment here too.
        var wait = options.fetchWait
        do throws(InboxError) {
            let now = Posix.wallClockMillis()
            try index.applyDue(now: now)
            if let due = try index.dueSleep(now: now) { wait = max(min(wait, due), .milliseconds(1)) }
        } catch {
            if error.isCorrupt || error.isStale { session.handle.close() }
            throw JetStreamInboxError(.index(error), stream: stream)
        }
        let records: [StreamRecord]
        do throws(ExportError) {
            records = try consumer.fetch(batch: options.batchSize, timeout: wait)
        } catch {
            // Start over with a fresh consumer (and connection, when it is gone).
            session.consumer = nil
            if session.client?.isClosed ?? true { dropClient(&session) }
            if context.stopRequested() { return .wake(atMost: nil) }
            throw JetStreamInboxError(.nats(error), stream: stream)
        }
        guard let first = records.first else { return .again }
        if first.streamSeq < session.consumerNext {
            // At or below what the index applied: a redelivery after a lost ack, or a stream
            // that is not the one the index was built from. A fresh consumer is made from the
            // index's seq, after ensureConsumer compared the stream's identity.
            session.consumer = nil
            return .again
        }
        if first.streamSeq > session.consumerNext {
            // A consumer skips what the stream no longer holds. Messages deleted one by one
            // inside the stream (an erasure) are a legitimate hole; a stream whose first seq
            // moved past the index (retention, a purge while this node followed) is a gap
            // that would silently lose items: refused as at start.
            try checkStreamStillHolds(appliedSeq: max(session.consumerNext, 1) - 1, session: &session)
        }
        // Decoded once here: the index applies them and the event hub reads their changes.
        let journalRecords = records.map { record in
            FollowedRecord(JournalRecord(seq: record.streamSeq, ingestMillis: record.ingestMillis, key: "", body: record.body, segment: "", offset: 0))
        }
        let before = session.consumerNext - min(session.consumerNext, 1)
        var applied = before
        func commit(_ chunk: ArraySlice<FollowedRecord>) throws(JetStreamInboxError) {
            guard !chunk.isEmpty else { return }
            do throws(InboxError) {
                try index.apply(Array(chunk))
                applied = try index.appliedSeq()
            } catch {
                session.consumer = nil  // what was fetched comes again from the stored seq
                if error.isCorrupt || error.isStale { session.handle.close() }
                throw JetStreamInboxError(.index(error), stream: stream)
            }
            // Redelivered records (at or below what was applied) changed nothing: not reported.
            observer(.applied(chunk.filter { $0.seq > before }, appliedSeq: applied))
        }
        // An erasure record covers what came before it in stream order: that is committed
        // first, the erasure done next, and only then is the record itself applied, so the
        // index's seq passes it only once this node erased (a crash in between redoes it).
        var start = 0
        if let erasure = options.erasure {
            for (position, record) in records.enumerated() where record.streamSeq > before {
                guard let key = record.exportedKey,
                      let announced = ErasureRecord.parse(key: key, body: journalRecords[position].body) else { continue }
                try commit(journalRecords[start..<position])
                start = position
                options.erasureHook("erasure-received")
                let outcome: NodeErasure.Outcome
                do throws(UserDataError) {
                    outcome = try erasure.apply(erasureID: announced.erasureID, scope: announced.scope,
                                                subjectHash: announced.subject, streamSeq: record.streamSeq)
                } catch {
                    session.consumer = nil  // the record comes again from the stored seq
                    throw JetStreamInboxError(.erasure(error), stream: stream)
                }
                observer(.erasure(erasureID: announced.erasureID, streamSeq: record.streamSeq, outcome: outcome))
                options.erasureHook("erasure-applied")
            }
        }
        try commit(journalRecords[start...])
        // After the commit: a lost ack only costs a redelivery that apply skips.
        do throws(ExportError) { try consumer.acknowledgeFetched() } catch {
            session.consumer = nil
            throw JetStreamInboxError(.nats(error), stream: stream)
        }
        session.consumerNext = applied + 1
        control.withLock { c in
            c.appliedSeq = applied
            c.streamLastSeq = max(c.streamLastSeq, applied)
        }
        return .again
    }

    private func dropClient(_ session: inout Session) {
        interrupt.disarm()
        session.consumer = nil
        session.client?.close()
        session.client = nil
        control.withLock { $0.connected = false }
    }

    /// The index and a consumer delivering from its applied seq + 1: connects (claiming the
    /// host id on a new connection), checks that the stream is the one the index was built
    /// from (rebuilding it from the new one when not, or with `rebuild: false` throwing
    /// `.replaced`) and that its first seq is not past the index, and (re)creates the
    /// consumer when there is none or the index file was replaced (`nc reindex
    /// --from-stream`) or moved on without it.
    private func ensureConsumer(_ session: inout Session, rebuild: Bool) throws(JetStreamInboxError) -> (InboxIndex, NatsPullConsumer) {
        let stream = options.export.stream
        var index: InboxIndex
        var applied: UInt64
        var recorded: Int64?
        do throws(InboxError) {
            index = try Self.openIndex(session.handle)
            applied = try index.appliedSeq()
        } catch {
            session.handle.close()
            throw JetStreamInboxError(.index(error), stream: stream)
        }
        control.withLock { $0.appliedSeq = applied }
        if let consumer = session.consumer, session.generation == session.handle.generation, session.consumerNext == applied + 1 {
            return (index, consumer)
        }
        session.consumer = nil
        // A new consumer starts at the index's seq, which a replaced file may have moved.
        observer(.resumed(appliedSeq: applied))
        if session.client?.isClosed ?? true {
            dropClient(&session)
            let e = options.export
            do throws(ExportError) {
                let client = try NatsClient(e, name: "pushspool-inbox", noEcho: true)
                client.arm(interrupt)
                session.client = client
                session.claimed = false
            } catch {
                throw JetStreamInboxError(.nats(error), stream: stream)
            }
        }
        guard let client = session.client else { throw JetStreamInboxError(.nats(ExportError(.connect, "not connected")), stream: stream) }
        if !session.claimed {
            // Another live node with this host id would share the durable consumer below, each
            // of the two silently seeing part of the stream: refused before it is touched.
            let hostId = options.hostId.isEmpty ? options.consumerName : options.hostId
            let answer = "pushspool-inbox pid \(getpid()) on \(Self.hostName())"
            let claim: NatsClient.NameClaim
            do throws(ExportError) {
                claim = try client.claimName(subject: options.presenceSubject, answer: answer, wait: options.presenceWait)
            } catch {
                if client.isClosed { dropClient(&session) }
                throw JetStreamInboxError(.nats(error), stream: stream)
            }
            switch claim {
            case .claimed: session.claimed = true
            case .taken(let other):
                dropClient(&session)
                throw JetStreamInboxError(.hostIdInUse(hostId: hostId, other: other), stream: stream)
            }
        }
        control.withLock { $0.connected = true }
        var info: NatsClient.StreamInfo
        do throws(ExportError) {
            info = try client.streamInfo(stream)
            control.withLock { $0.streamLastSeq = info.lastSeq }
        } catch {
            if client.isClosed { dropClient(&session) }
            throw JetStreamInboxError(.nats(error), stream: stream)
        }
        do throws(InboxError) { recorded = try index.streamCreated() } catch {
            session.handle.close()
            throw JetStreamInboxError(.index(error), stream: stream)
        }
        // Another stream under the same name: its seqs number other messages, and those up to
        // the index's seq would pass as applied. Without a recorded identity (an index from
        // before it was kept), an index past the stream's last seq tells the same.
        if recorded != info.createdNanos, recorded != nil || applied > info.lastSeq {
            let replaced = JetStreamInboxError(.replaced(indexCreated: recorded, streamCreated: info.createdNanos), stream: stream)
            guard rebuild else { throw replaced }
            control.withLock {
                $0.rebuilding = true
                $0.streamReplacements += 1
            }
            observer(.streamReplaced(replaced, appliedSeq: applied))
            let result: (appliedSeq: UInt64, items: Int64)
            do throws(JetStreamInboxError) {
                result = try Self.rebuild(options: options, client: client)
            } catch {
                observer(.rebuilt(appliedSeq: applied, items: 0, failure: error))
                if client.isClosed { dropClient(&session) }
                throw error
            }
            do throws(InboxError) {
                index = try Self.openIndex(session.handle)
                applied = try index.appliedSeq()
                recorded = try index.streamCreated()
            } catch {
                session.handle.close()
                throw JetStreamInboxError(.index(error), stream: stream)
            }
            control.withLock {
                $0.rebuilding = false
                $0.appliedSeq = applied
            }
            observer(.rebuilt(appliedSeq: result.appliedSeq, items: result.items, failure: nil))
            observer(.resumed(appliedSeq: applied))
            // The stream as the rebuild read it (it may have been replaced once more since:
            // the consumer below fails then, and the next step compares again).
            do throws(ExportError) { info = try client.streamInfo(stream) } catch {
                if client.isClosed { dropClient(&session) }
                throw JetStreamInboxError(.nats(error), stream: stream)
            }
        }
        if recorded == nil {
            do throws(InboxError) { try index.setStreamCreated(info.createdNanos) } catch {
                session.handle.close()
                throw JetStreamInboxError(.index(error), stream: stream)
            }
        }
        if info.firstSeq > applied + 1 {
            throw JetStreamInboxError(.gap(appliedSeq: applied, firstSeq: info.firstSeq), stream: stream)
        }
        do throws(ExportError) {
            let consumer = try NatsPullConsumer(client: client, stream: stream,
                                                config: Self.consumerConfig(options.consumerName, startSeq: applied + 1, options: options))
            session.consumer = consumer
            session.consumerNext = applied + 1
            session.generation = session.handle.generation
            return (index, consumer)
        } catch {
            if client.isClosed { dropClient(&session) }
            throw JetStreamInboxError(.nats(error), stream: stream)
        }
    }

    /// This machine's name (gethostname(2)), for the answer another node with this host id gets.
    private static func hostName() -> String {
        var name = [CChar](repeating: 0, count: 256)
        guard gethostname(&name, name.count - 1) == 0 else { return "unknown" }
        return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private func checkStreamStillHolds(appliedSeq: UInt64, session: inout Session) throws(JetStreamInboxError) {
        let stream = options.export.stream
        guard let client = session.client else { return }
        let bounds: (firstSeq: UInt64, lastSeq: UInt64, messages: UInt64)
        do throws(ExportError) {
            bounds = try client.streamBounds(stream)
        } catch {
            session.consumer = nil
            if client.isClosed { dropClient(&session) }
            throw JetStreamInboxError(.nats(error), stream: stream)
        }
        control.withLock { $0.streamLastSeq = max($0.streamLastSeq, bounds.lastSeq) }
        if bounds.firstSeq > appliedSeq + 1 {
            session.consumer = nil
            throw JetStreamInboxError(.gap(appliedSeq: appliedSeq, firstSeq: bounds.firstSeq), stream: stream)
        }
    }

    // MARK: Rebuild

    /// Rebuilds the index at `options.indexPath` from what the stream holds now, from its
    /// first seq to its last (`nc reindex --from-stream`), into a temp file renamed over the
    /// old one; a running follower notices the new file and goes on from its seq. Records the
    /// stream no longer holds are taken as accounted for (``InboxIndex/startAfter(_:)``).
    /// Uses a consumer of its own (`<consumerName>-rebuild`), deleted at the end.
    package static func rebuild(options: JetStreamInboxOptions, patience: Duration = .seconds(30),
                                progress: (UInt64) -> Void = { _ in }) throws(JetStreamInboxError) -> (appliedSeq: UInt64, items: Int64) {
        let e = options.export
        let client: NatsClient
        do throws(ExportError) {
            client = try NatsClient(e, name: "pushspoolctl")
        } catch {
            throw JetStreamInboxError(.nats(error), stream: e.stream)
        }
        defer { client.close() }
        return try rebuild(options: options, client: client, patience: patience, progress: progress)
    }

    /// ``rebuild(options:patience:progress:)`` on a connection the caller owns (a follower
    /// that found its stream replaced rebuilds on its own).
    static func rebuild(options: JetStreamInboxOptions, client: NatsClient, patience: Duration = .seconds(30),
                        progress: (UInt64) -> Void = { _ in }) throws(JetStreamInboxError) -> (appliedSeq: UInt64, items: Int64) {
        let stream = options.export.stream
        var natsFailure: ExportError?
        do throws(InboxError) {
            return try InboxIndex.rebuild(path: options.indexPath, listModals: options.listModals, feeds: options.feeds,
                                          retention: options.retention) { fresh throws(InboxError) in
                do throws(ExportError) {
                    try fill(fresh, client: client, options: options, patience: patience, progress: progress)
                } catch {
                    natsFailure = error
                    throw InboxError(.io(SystemError(call: "nats", errno: EIO, subject: stream)), path: options.indexPath)
                }
            }
        } catch {
            if let natsFailure { throw JetStreamInboxError(.nats(natsFailure), stream: stream) }
            throw JetStreamInboxError(.index(error), stream: stream)
        }
    }

    /// Applies fetched records to an index being rebuilt, erasure records included: the
    /// stream may still hold messages of a subject erased since (until every ingest host has
    /// erased its copies), and a rebuild must not bring them back. As the follower does: what
    /// came before an erasure record is committed, then erased, then the record applied.
    private static func applyRebuilding(_ index: InboxIndex, _ records: [StreamRecord], options: JetStreamInboxOptions) throws {
        let journalRecords = records.map {
            FollowedRecord(JournalRecord(seq: $0.streamSeq, ingestMillis: $0.ingestMillis, key: "", body: $0.body, segment: "", offset: 0))
        }
        var start = 0
        if var erasure = options.erasure {
            // The file being built, not the one in place.
            erasure.indexPath = index.path
            for (position, record) in records.enumerated() {
                guard let key = record.exportedKey,
                      let announced = ErasureRecord.parse(key: key, body: journalRecords[position].body) else { continue }
                if position > start { try index.apply(Array(journalRecords[start..<position])) }
                start = position
                _ = try erasure.apply(erasureID: announced.erasureID, scope: announced.scope, subjectHash: announced.subject,
                                      streamSeq: record.streamSeq, rebuilding: true)
            }
        }
        if start < journalRecords.count { try index.apply(Array(journalRecords[start...])) }
    }

    /// The follower's and the rebuild's consumer: its own, acknowledged a batch at a time once
    /// the batch is in the index, with room for two batches out.
    private static func consumerConfig(_ name: String, startSeq: UInt64, options: JetStreamInboxOptions) -> PullConsumerConfig {
        PullConsumerConfig(name: .durable(name), ack: .all(maxPending: max(options.batchSize * 2, 1000)), start: .seq(startSeq))
    }

    private static func fill(_ index: InboxIndex, client: NatsClient, options: JetStreamInboxOptions, patience: Duration,
                             progress: (UInt64) -> Void) throws(ExportError) {
        let stream = options.export.stream
        let bounds = try client.streamInfo(stream)
        // The stream this index is built from: a follower compares it with the stream's at
        // each new consumer.
        do { try index.setStreamCreated(bounds.createdNanos) } catch { throw ExportError(.io, "\(error)") }
        guard bounds.messages > 0, bounds.lastSeq >= max(1, bounds.firstSeq) else {
            // Nothing to read: the index starts after the stream's last seq.
            do { try index.startAfter(bounds.lastSeq) } catch { throw ExportError(.io, "\(error)") }
            return
        }
        let first = max(1, bounds.firstSeq)
        do { try index.startAfter(first - 1) } catch { throw ExportError(.io, "\(error)") }
        let consumer = try NatsPullConsumer(client: client, stream: stream,
                                            config: consumerConfig(options.consumerName + "-rebuild", startSeq: first, options: options))
        defer { consumer.delete() }
        var applied = first - 1
        var quietSince = Posix.monotonicNanos()
        // Up to the last seq the stream had when the rebuild began; what comes later the
        // follower applies. A deleted message leaves a hole below it: the quiet limit ends that.
        while applied < bounds.lastSeq {
            let records = try consumer.fetch(batch: options.batchSize, timeout: .seconds(2))
            if records.isEmpty {
                let now = Posix.monotonicNanos()
                if now &- quietSince >= patience.clampedUInt64Nanoseconds { break }
                if try client.streamBounds(stream).lastSeq <= applied { break }
                continue
            }
            quietSince = Posix.monotonicNanos()
            do {
                try applyRebuilding(index, records, options: options)
                applied = try index.appliedSeq()
            } catch let error as ExportError {
                throw error
            } catch {
                throw ExportError(.io, "\(error)")
            }
            try consumer.acknowledgeFetched()
            progress(applied)
        }
    }
}
