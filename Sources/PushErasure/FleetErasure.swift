@preconcurrency import Glibc
import PushExport
import PushFollow
import PushJournal
import PushPayload
import PushSpool
import PushSystem

/// An `erasure` record as another host (or an inbox node) put it into the export stream:
/// `{"kind":"erasure","erasureId":…,"scope":…,"subject":<keyed hash>}`. Pure; `Sendable` value.
package struct FleetErasureNotice: Sendable, Equatable {
    package var erasureID: String
    package var scope: ErasureScope
    /// HMAC-SHA256 of the subject under the fleet's erasure key, 64 hex digits.
    package var subject: String

    package init(erasureID: String, scope: ErasureScope, subject: String) {
        self.erasureID = erasureID
        self.scope = scope
        self.subject = subject
    }

    /// The notice a message body announces; `nil` for every other message (a push, an event,
    /// a tombstone) and for a body that does not hold a well-formed one.
    package static func parse(_ body: [UInt8]) -> FleetErasureNotice? {
        // Most messages of an unfiltered consumer are pushes: skip them without parsing.
        guard UserDataExport.containsMember(body, name: "kind", value: Array(#""erasure""#.utf8)) else { return nil }
        switch RecordBody(decoding: body) {
        case .erasure(let erasure):
            return FleetErasureNotice(erasureID: erasure.erasureID, scope: erasure.scope, subject: erasure.subject)
        case .notification, .event, .tombstone, .undecodable:
            return nil
        }
    }

    /// The journal key this host gives the erasure when it performs it (`erasure:<id>`).
    package var dedupKey: String { "erasure:" + erasureID }

    /// What journald may say about the subject: the hash's first 16 digits (as `[Log]
    /// UserIds=hash` logs users), never a plain id.
    package var subjectPrefix: String { String(subject.prefix(16)) }
}

/// Finds which of this host's users (or devices) an erasure's keyed hash stands for, by
/// hashing the ids its journal names with the erasure key. The plain id never travels: the
/// stream carries only the hash.
///
/// Cost: one sequential read of every archive (decompressed) and live segment; for a user, the
/// id comes from the record's key (`vendor@N:user:id`) without parsing the body, and only
/// records whose key names no user but whose body holds a `"user"` member (events) are parsed;
/// for a device, the records holding a `"device"` member are parsed. Each distinct id is hashed
/// once. Tombstones are skipped: an erased record names nobody. Then the quarantined spool
/// files (`failed/`), whose envelope may name someone no record does: each one that parses as
/// a JSON object is read for its `user` (`device`); one that does not parse names nobody that
/// can be hashed.
///
/// `Sendable`: a value.
package struct FleetSubjectResolver: Sendable {
    package var journalDirectory: String
    package var secret: ErasureSecret
    /// The spool whose `failed/` is searched too; `nil` = the journal only.
    package var spool: SpoolLayout?
    /// Quarantined files larger than this are not read (the erasure's quarantine step reads
    /// up to the same size).
    package var readLimit = 64 << 20

    package init(journalDirectory: String, secret: ErasureSecret, spool: SpoolLayout? = nil) {
        self.journalDirectory = journalDirectory
        self.secret = secret
        self.spool = spool
    }

    /// The id whose subject hash is `notice.subject`, or `nil` when no record here names it.
    /// `shouldStop` is asked between records, so that a stop does not wait for a long scan
    /// (then `nil` is returned, and the caller must not take it as "not here").
    package func resolve(_ notice: FleetErasureNotice, shouldStop: () -> Bool = { false }) throws(UserDataError) -> String? {
        var checked: Set<String> = []
        var found: String?
        let member = notice.scope == .user ? "user" : "device"
        let quoted = Array("\"\(member)\"".utf8)
        func matches(_ candidate: String?) -> Bool {
            guard let candidate, !candidate.isEmpty, checked.insert(candidate).inserted else { return false }
            let subject: ErasureSubject = notice.scope == .user ? .user(candidate) : .device(candidate)
            guard secret.subjectHash(subject) == notice.subject else { return false }
            found = candidate
            return true
        }
        func named(in bytes: [UInt8]) -> String? {
            guard ErasureTarget.contains(bytes, quoted), case .object(let body)? = try? JSONParser(maxDepth: 64).parse(bytes) else { return nil }
            return body[member]?.stringValue
        }
        func consider(_ record: JournalRecord) -> Bool {
            if record.key.hasPrefix(ErasureSecret.tombstoneKeyPrefix) { return false }
            if notice.scope == .user, let user = DedupKey.parse(record.key)?.user { return matches(user) }
            return matches(named(in: record.body))
        }
        do throws(JournalError) {
            var read = 0
            var stopped = false
            var matched = false
            try JournalArchive.forEachRecord(directory: journalDirectory) { record, _ in
                if consider(record) {
                    matched = true
                    return false
                }
                read += 1
                if read & 0xFFF == 0, shouldStop() {
                    stopped = true
                    return false
                }
                return true
            }
            if matched { return found }
            if stopped { return nil }
        } catch {
            throw UserDataError(.journal, "reading the journal to resolve erasure \(notice.erasureID): \(error)")
        }
        guard let spool else { return nil }
        let limit = readLimit
        do throws(SpoolError) {
            try FailedQueue.forEach(layout: spool) { entry throws(SpoolError) in
                guard found == nil, !entry.payloadMissing,
                      case .bytes(let bytes) = UserDataExport.readRegularFile(spool.failed + "/" + entry.name, limit: limit) else { return }
                _ = matches(named(in: bytes))
            }
        } catch {
            // A spool without failed/ yet holds no quarantined file.
            if UserDataExport.isDirectory(spool.failed) {
                throw UserDataError(.spool, "reading \(spool.failed) to resolve erasure \(notice.erasureID): \(error)")
            }
        }
        return found
    }
}

/// What became of one erasure notice. `Sendable` value.
package enum FleetErasureOutcome: Sendable, Equatable {
    /// Not an erasure (an unfiltered consumer also sees pushes and events).
    case other
    /// This host has journaled (or performed) the erasure already: it was requested here,
    /// or an earlier delivery of the notice was dropped here.
    case alreadyHere
    /// The hash is one of this host's ids: the ordinary request went into the spool.
    case dropped
    /// No record here names the subject.
    case nothingHere
    /// The hash names an id here that an erasure request cannot carry (a control character,
    /// which intake refuses now but older records may hold, or more than 255 bytes): pushspoold
    /// would quarantine the request, plain id and all, so none is dropped. The offline erasure
    /// (pushspoold stopped, `pushspoolctl user erase`) is the way for such an id.
    case unusableId
}

/// The listener's counts and connection, for STATUS=, status.json and the metrics.
/// `Sendable` value.
package struct FleetErasureStatus: Sendable, Equatable {
    package var connected = false
    /// Erasure notices taken from the stream since start (redeliveries included).
    package var seen: UInt64 = 0
    /// Notices whose hash named an id here: a request was dropped into the spool.
    package var resolved: UInt64 = 0
    /// Notices naming nobody here.
    package var nothingHere: UInt64 = 0
    /// Notices of erasures journaled here already.
    package var alreadyHere: UInt64 = 0
    /// Notices naming an id here that no erasure request can carry (``FleetErasureOutcome/unusableId``).
    package var unusable: UInt64 = 0
    package var lastError: String?

    package init() {}

    /// `fleet erasure connected, 2 seen, 1 resolved` for STATUS=.
    package var summary: String {
        "fleet erasure \(connected ? "connected" : "disconnected"), \(seen) seen, \(resolved) resolved"
    }

    package var jsonValue: JSONValue {
        .object([
            "connected": .bool(connected), "seen": .integer(Int(clamping: seen)), "resolved": .integer(Int(clamping: resolved)),
            "nothingHere": .integer(Int(clamping: nothingHere)), "alreadyHere": .integer(Int(clamping: alreadyHere)),
            "unusable": .integer(Int(clamping: unusable)),
            "lastError": lastError.map { .string($0) } ?? .null,
        ])
    }
}

/// How the listener reaches the stream. `Sendable` value.
package struct FleetErasureOptions: Sendable {
    package var export: ExportOptions
    /// `pushspool-erase-<host id>`: one durable consumer per ingest host, since every host
    /// must see every notice (unlike the fleet outbox's shared work queue).
    package var consumerName: String
    /// The subject the exporter gives an `erasure:` key, when the template has `{vendor}`;
    /// empty (every subject) otherwise, and other messages are skipped.
    package var filterSubject: String
    /// How long one fetch waits on the server when nothing is new (a stop interrupts it).
    package var fetchWait: Duration = .seconds(60)
    package var fetchBatch = 16
    /// A notice not acknowledged this long is delivered again: after a crash, the restarted
    /// host gets it back within this time. A long scan says "in progress" as it goes.
    package var ackWait: Duration = .seconds(30)

    /// `hostId`: the exporter's (``ExportOptions/resolvedHostId(machineIdPath:)``).
    package init(export: ExportOptions, hostId: String) {
        self.export = export
        consumerName = "pushspool-erase-" + String(hostId.map { $0 == "." ? "_" : $0 })
        let template = SubjectTemplate(export.subject) ?? SubjectTemplate("pushspool.{vendor}.{platform}")!
        let vendor = DedupKey.parse("erasure:" + String(repeating: "0", count: 32))?.vendor ?? "erasure"
        filterSubject = export.subject.contains("{vendor}") ? template.subject(vendor: vendor, platform: "none") : ""
    }

    /// A consumer created now reads the stream from its start: a notice published while this
    /// host did not listen yet (before an upgrade, while it was being set up) may name records
    /// it holds. A notice of an erasure done here already costs a lookup.
    package var consumerConfig: PullConsumerConfig {
        PullConsumerConfig(name: .shared(consumerName), ack: .explicit(wait: ackWait, maxDeliver: 1_000_000, maxPending: 256),
                           filterSubject: filterSubject)
    }
}

/// The fleet erasure listener (issue 26 across a fleet, docs/design/erasure.md): on an
/// ingest host with `[Export] Enabled=yes`, it follows the `erasure` records every host and
/// inbox node puts into the export stream, and performs here those that name one of this
/// host's users or devices, by dropping the ordinary erasure request (the same erasure id, the
/// plain id it resolved) into this host's spool. The live erasure path does the rest; its own
/// `erasure` record has the same key `erasure:<id>` as every other host's, so the stream's
/// copy of it is a duplicate for them.
///
/// For each notice, in stream order: skip it when `erasure:<id>` is journaled here (the
/// writer's dedup) or has a status file (the eraser reached it: it outlives the dedup window);
/// else resolve its hash (``FleetSubjectResolver``); if resolved, drop the request (synced
/// before it returns) and only then acknowledge (waiting for the server's confirmation). A
/// crash between the two delivers the notice again after the ack wait: the request is then
/// journaled, or still in the spool and dropped again under the same name or as a duplicate.
///
/// A follower on the daemon's runtime without journal records of its own: it sleeps in a
/// fetch on the server, which a stop interrupts by closing the connection.
///
/// `Sendable`: the connection and consumer live behind one lock (the runner's thread uses
/// them); the counts behind another.
package final class FleetErasureListener: Follower, Sendable {
    package let options: FleetErasureOptions
    private let resolver: FleetSubjectResolver
    private let spool: SpoolLayout
    private let requests: ErasureRequests
    private let journaled: @Sendable (String) -> Bool
    private let onResult: @Sendable (FleetErasureNotice, FleetErasureOutcome) -> Void
    private let hook: @Sendable (String) -> Void
    private let interrupt = NatsInterrupt()
    private let stopping = Locked(false)
    private let snapshot = Locked(FleetErasureStatus())
    private let session: Locked<Session>

    /// The connection and this host's consumer. `@unchecked Sendable`: used only under
    /// ``session``, by the runner's thread.
    private final class Session: @unchecked Sendable {
        let nats: NatsWorkSession
        init(_ nats: NatsWorkSession) { self.nats = nats }
    }

    /// `journaled`: whether the journal holds a key (the writer's dedup). `onResult`: a notice
    /// that was resolved (`.dropped`) or names nobody here (`.nothingHere`), for journald.
    /// `hook`: a test seam called with `fleet-dropped` after a request is in the spool and
    /// before the notice is acknowledged.
    package init(options: FleetErasureOptions, secret: ErasureSecret, stateDirectory: String, spool: SpoolLayout,
                 journaled: @escaping @Sendable (String) -> Bool,
                 onResult: @escaping @Sendable (FleetErasureNotice, FleetErasureOutcome) -> Void = { _, _ in },
                 hook: @escaping @Sendable (String) -> Void = { _ in }) {
        self.options = options
        session = Locked(Session(NatsWorkSession(options: options.export, clientName: "pushspool-erase", createsStream: true)))
        resolver = FleetSubjectResolver(journalDirectory: StateLayout(root: stateDirectory).journal, secret: secret, spool: spool)
        self.spool = spool
        requests = ErasureRequests(stateDirectory: stateDirectory)
        self.journaled = journaled
        self.onResult = onResult
        self.hook = hook
    }

    package var status: FleetErasureStatus { snapshot.withLock { $0 } }

    /// What one notice comes to here, without acknowledging it. The request is in the spool
    /// (durably) when this returns `.dropped`. `progress` is called now and then during a long
    /// scan of the journal (to tell the server the notice is still being worked).
    package func handle(_ body: [UInt8], progress: () -> Void = {}) throws(UserDataError) -> FleetErasureOutcome {
        guard let notice = FleetErasureNotice.parse(body) else { return .other }
        if journaled(notice.dedupKey) || requests.status(notice.erasureID) != nil { return .alreadyHere }
        let stopping = self.stopping
        guard let id = try resolver.resolve(notice, shouldStop: {
            progress()
            return stopping.withLock { $0 }
        }) else {
            if stopping.withLock({ $0 }) { throw UserDataError(.journal, "stopped while resolving erasure \(notice.erasureID)") }
            return .nothingHere
        }
        guard ControlCharacters.first(in: id) == nil, id.utf8.count <= PushEvent.maxNameBytes else { return .unusableId }
        let request = ErasureRequest(scope: notice.scope == .user ? .user : .device, id: id, erasureId: notice.erasureID)
        do throws(SpoolError) {
            // One name per erasure: a redelivery while the first drop still waits in
            // incoming/ finds it there.
            try SpoolDropper.drop(bytes: request.envelopeBytes(), layout: spool, name: "fleet-erase-\(notice.erasureID).json")
        } catch where error.code == .nameTaken {
            // Dropped by an earlier delivery and not yet taken: the same request.
        } catch {
            throw UserDataError(.spool, "dropping the request of erasure \(notice.erasureID) into \(spool.incoming): \(error)")
        }
        hook("fleet-dropped")
        return .dropped
    }

    // MARK: Follower

    package var name: String { "fleet-erase" }

    /// Holds no journal records: its position is its consumer's, on the server.
    package func durableSeq() -> UInt64? { nil }

    package var statusDetail: String? { status.summary }

    package func stopRequested() {
        stopping.withLock { $0 = true }
        interrupt.interrupt()
    }

    package func finish() {
        session.withLock { close($0) }
        snapshot.withLock { $0.connected = false }
    }

    private func close(_ session: Session) {
        session.nats.close(interrupt)
    }

    package func step(_ context: FollowerContext) throws(FollowerError) -> FollowerNext {
        if context.stopRequested() { return .wake(atMost: nil) }
        let failure: String? = session.withLock { session in
            do throws(UserDataError) {
                try work(session, stopRequested: context.stopRequested)
                return nil
            } catch {
                // Unacknowledged notices come back after the ack wait.
                close(session)
                return context.stopRequested() ? nil : error.message
            }
        }
        snapshot.withLock {
            $0.connected = failure == nil && !context.stopRequested()
            if let failure { $0.lastError = failure }
        }
        if let failure { throw FollowerError("fleet_erase", failure) }
        return .again
    }

    /// One fetch and its notices, each acknowledged once handled.
    private func work(_ session: Session, stopRequested: @Sendable () -> Bool) throws(UserDataError) {
        let consumer: NatsPullConsumer
        let fetched: [StreamRecord]
        do throws(ExportError) {
            // The stream is created by the exporter's rules when it does not exist.
            consumer = try session.nats.open(interrupt) { options.consumerConfig }
            snapshot.withLock { $0.connected = true }
            guard let batch = try session.nats.fetch(consumer, batch: options.fetchBatch, timeout: options.fetchWait,
                                                     interrupt: interrupt, stopRequested: stopRequested) else { return }
            fetched = batch
        } catch {
            throw UserDataError(.stream, "\(error)")
        }
        for message in fetched {
            if stopRequested() {
                do throws(ExportError) { try consumer.release(message.streamSeq) } catch { throw UserDataError(.stream, "\(error)") }
                continue
            }
            var extended = Posix.monotonicNanos()
            let outcome = try handle(message.body) {
                // A scan of a long journal may outlast the ack wait: restart it every 10 s.
                let now = Posix.monotonicNanos()
                guard now &- extended >= 10_000_000_000 else { return }
                extended = now
                try? consumer.extend(message.streamSeq)
            }
            if outcome != .other, outcome != .alreadyHere, let notice = FleetErasureNotice.parse(message.body) { onResult(notice, outcome) }
            do throws(ExportError) { try consumer.acknowledge(message.streamSeq) } catch { throw UserDataError(.stream, "\(error)") }
            snapshot.withLock { status in
                switch outcome {
                case .other: return
                case .alreadyHere: status.alreadyHere += 1
                case .dropped: status.resolved += 1
                case .nothingHere: status.nothingHere += 1
                case .unusableId: status.unusable += 1
                }
                status.seen += 1
                status.lastError = nil
            }
        }
    }
}
