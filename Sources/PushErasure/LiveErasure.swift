@preconcurrency import Glibc
import PushExport
import PushFollow
import PushInbox
import PushJournal
import PushOutboxStore
import PushPayload
import PushSystem

/// The erasures pushspoold runs, as files under `<state>/erase/` (docs/design/erasure.md):
///
/// - `<erasureId>.subject` (0600): the plain id and its scope, written by pushspoold before it
///   journals the `erasure` record (the record names only the keyed hash) and removed when
///   the erasure is done, just before its status says complete. It is what lets the eraser find the subject's inbox rows, outbox
///   files and quarantined files after a restart; no other file of the instance names them.
/// - `<erasureId>.status` (0640): the record's seq, the subject's hash, the steps done and
///   whether it is complete; no plain id. Read by `pushspoolctl user erase --status` and the
///   admin route.
/// - `cursor`: the eraser follower's position in the journal.
///
/// The subject files waiting are counted in memory, not by listing the directory: the eraser's
/// `durableSeq()` asks after every journal commit. Only this process writes and removes them
/// (the intake in ``storeSubject(_:)``, the eraser in ``removeSubject(_:)``); `pushspoolctl
/// user erase` with pushspoold running drops a request into the spool, which the intake turns
/// into a subject file, and without pushspoold it writes none. So the directory is listed
/// once, on first use (the eraser's start), or when ``refreshPending()`` asks; copies share
/// the count, and the intake and the eraser of one pushspoold must share one value.
///
/// The same value tells the outbox whom to stop delivering for: ``erased`` gets each request
/// the intake accepts, before its record is journaled, and at start the erasures still
/// pending (``restoreErased(journalDirectory:)``).
///
/// `Sendable`: a directory name and the count behind a lock.
package struct ErasureRequests: Sendable {
    package let directory: String
    /// The erasures requested in this process or pending at its start, for the outbox
    /// (docs/design/erasure.md, "Outbox"); shared by copies.
    package let erased = ErasedSubjects()
    /// The erasure ids with a subject file, `nil` until the directory is listed.
    private let pending = Locked<Set<String>?>(nil)
    private let listDirectory: @Sendable (String) -> [String]

    /// `listDirectory` is every listing of the directory (a test counts them).
    package init(stateDirectory: String,
                 listDirectory: @escaping @Sendable (String) -> [String] = { (try? RealFileSystem().listDirectory($0)) ?? [] }) {
        directory = stateDirectory + "/erase"
        self.listDirectory = listDirectory
    }

    /// The status of one erasure, as its status file holds it. `Sendable`: a value.
    package struct Status: Sendable, Equatable {
        package var erasureID: String
        package var scope: String
        /// HMAC-SHA256 of the subject under the instance secret.
        package var subject: String
        /// The `erasure` record's seq (0 until it is journaled).
        package var seq: UInt64
        /// Steps done, in order (`planned`, `journal-done`, `inbox-done`, …, `stream-done`).
        package var steps: [String]
        package var complete: Bool
        /// Records turned into tombstones (0 on a rerun that found them done).
        package var journalRecords: Int
        /// The last failure (the eraser retries); never quotes the subject.
        package var lastError: String?
        /// Set on an inbox node (`[Inbox] Source=nats`): `"node"`, this node's own part of an
        /// erasure read from the stream, not the ingest hosts' status.
        package var statusScope: String?
        /// On an inbox node: the index items erased and the fleet outbox files removed.
        package var inboxItems: Int?
        package var outboxDeliveries: Int?
        /// On an inbox node that could not resolve the subject: `no_key` or `no_match`.
        package var unmatched: String?

        package init(erasureID: String, scope: String, subject: String, seq: UInt64) {
            self.erasureID = erasureID
            self.scope = scope
            self.subject = subject
            self.seq = seq
            steps = []
            complete = false
            journalRecords = 0
        }

        package var jsonValue: JSONValue {
            var object: JSONObject = [
                "erasureId": .string(erasureID), "scope": .string(scope), "subject": .string(subject),
                "seq": .string(String(seq)), "steps": .array(steps.map { .string($0) }), "complete": .bool(complete),
                "journalRecords": .integer(journalRecords), "lastError": lastError.map { .string($0) } ?? .null,
            ]
            // Only a node's status has these: a journal host's document stays as it was.
            if let statusScope { object["statusScope"] = .string(statusScope) }
            if let inboxItems { object["inboxItems"] = .integer(inboxItems) }
            if let outboxDeliveries { object["outboxDeliveries"] = .integer(outboxDeliveries) }
            if let unmatched { object["unmatched"] = .string(unmatched) }
            return .object(object)
        }

        init?(_ value: JSONValue) {
            guard case .object(let o) = value, let id = o["erasureId"]?.stringValue, let scope = o["scope"]?.stringValue,
                  let subject = o["subject"]?.stringValue else { return nil }
            self.init(erasureID: id, scope: scope, subject: subject, seq: o["seq"]?.stringValue.flatMap { UInt64($0) } ?? 0)
            steps = o["steps"]?.arrayValue?.compactMap(\.stringValue) ?? []
            complete = o["complete"] == .bool(true)
            journalRecords = o["journalRecords"]?.intValue ?? 0
            lastError = o["lastError"]?.stringValue
            statusScope = o["statusScope"]?.stringValue
            inboxItems = o["inboxItems"]?.intValue
            outboxDeliveries = o["outboxDeliveries"]?.intValue
            unmatched = o["unmatched"]?.stringValue
        }
    }

    /// Writes the request's subject file, durably, before its record is journaled. The outbox
    /// stops sending the subject's deliveries from here on, even if the write fails: the
    /// request then stays in the spool and is journaled at a later start.
    package func storeSubject(_ request: ErasureRequest) throws(SystemError) {
        erased.add(ErasedSubjects.Entry(erasureID: request.erasureId, subject: Self.erasedSubject(scope: request.scope, id: request.id), before: nil))
        try Posix.mkdirIfMissing(directory, mode: 0o700)
        let document = JSONValue.object(["scope": .string(request.scope.rawValue), "id": .string(request.id)]).serialized()
        do {
            try Posix.writeFileAtomically(directory: directory, name: request.erasureId + ".subject", bytes: document, mode: 0o600)
        } catch {
            // A failure after the rename (syncing the directory) leaves the file: it is pending.
            if access(directory + "/" + request.erasureId + ".subject", F_OK) == 0 { notePending(request.erasureId, true) }
            throw error
        }
        notePending(request.erasureId, true)
    }

    /// Records a subject file written or removed, once the directory says so. Before the
    /// first listing there is nothing to update: that listing will see the change.
    private func notePending(_ id: String, _ isPending: Bool) {
        pending.withLock { ids in
            if isPending { ids?.insert(id) } else { ids?.remove(id) }
        }
    }

    /// The subject of erasure `id`, `nil` once it is complete (the file is gone).
    package func subject(_ id: String) -> DataSubject? {
        guard let bytes = try? Posix.readFile(directory + "/" + id + ".subject", limit: 4096),
              case .object(let o)? = try? JSONParser(maxDepth: 4).parse(bytes),
              let subject = o["id"]?.stringValue, !subject.isEmpty else { return nil }
        switch o["scope"]?.stringValue {
        case "user": return .user(subject)
        case "device": return .device(subject)
        default: return nil
        }
    }

    private static func erasedSubject(scope: ErasureRequest.Scope, id: String) -> ErasedSubjects.Subject {
        switch scope {
        case .user: .user(id)
        case .device: .device(id)
        }
    }

    /// At start, before the outbox loads its files: every erasure with a subject file (not
    /// complete) goes into ``erased`` with its record's seq — from its status file, else from
    /// the journal after the eraser's cursor (the eraser moves past a record only once it is
    /// complete), else none (not journaled yet: the spool still holds the request, and every
    /// record of the subject is below the one it will get). So a restart never sends what a
    /// pending erasure covers, even when the outbox had passed the record before the crash.
    package func restoreErased(journalDirectory: String) {
        var found: [String: (DataSubject, UInt64?)] = [:]
        for name in listDirectory(directory) where name.hasSuffix(".subject") {
            let id = String(name.dropLast(".subject".count))
            guard ErasureRequest.isValidErasureId(id), let subject = subject(id) else { continue }
            let seq = status(id).map(\.seq).flatMap { $0 > 0 ? $0 : nil }
            found[id] = (subject, seq)
        }
        if found.values.contains(where: { $0.1 == nil }) {
            let from = ((try? CursorFile.read(directory: directory)) ?? 0) &+ 1
            if let reader = try? JournalReader(directory: journalDirectory, fromSeq: from) {
                while let record = try? reader.next() {
                    guard record.key.hasPrefix("erasure:") else { continue }
                    let id = String(record.key.dropFirst("erasure:".count))
                    if let entry = found[id], entry.1 == nil { found[id] = (entry.0, record.seq) }
                }
            }
        }
        for (id, (subject, seq)) in found.sorted(by: { $0.key < $1.key }) {
            let erasedSubject: ErasedSubjects.Subject = switch subject {
            case .user(let plain): .user(plain)
            case .device(let plain): .device(plain)
            }
            erased.add(ErasedSubjects.Entry(erasureID: id, subject: erasedSubject, before: seq))
        }
    }

    /// Whether subject files are waiting (an erasure may be journaled but not yet done).
    package var hasPendingSubjects: Bool { pendingCount > 0 }

    /// Erasures requested and not complete: their subject files (written before the record
    /// is journaled, removed when the erasure is done).
    package var pendingCount: Int {
        pending.withLock { ids in
            if let ids { return ids.count }
            let listed = listedSubjects()
            ids = listed
            return listed.count
        }
    }

    /// Lists the directory again for ``pendingCount``: at start, and should anything outside
    /// this process have written or removed subject files.
    package func refreshPending() {
        pending.withLock { $0 = listedSubjects() }
    }

    /// Listed under the lock, so a subject file written or removed meanwhile is noted after.
    private func listedSubjects() -> Set<String> {
        Set(listDirectory(directory).compactMap { $0.hasSuffix(".subject") ? String($0.dropLast(".subject".count)) : nil })
    }

    /// Removes the temp files a kill left behind in the middle of an atomic write
    /// (`.<name>.<pid>.tmp`): one of a subject file holds the plain id, and nothing else would
    /// ever remove it. Only at start, before anything writes here.
    package func removeLeftoverTemps() {
        for name in listDirectory(directory) where name.hasPrefix(".") && name.hasSuffix(".tmp") {
            _ = unlink(directory + "/" + name)
        }
        try? Posix.syncDirectory(directory)
    }

    package func removeSubject(_ id: String) throws(SystemError) {
        let path = directory + "/" + id + ".subject"
        if unlink(path) != 0, errno != ENOENT { throw SystemError(call: "unlink", errno: errno, subject: path) }
        notePending(id, false)
        try Posix.syncDirectory(directory)
    }

    package func status(_ id: String) -> Status? {
        guard ErasureRequest.isValidErasureId(id),
              let bytes = try? Posix.readFile(directory + "/" + id + ".status", limit: 1 << 20),
              let value = try? JSONParser(maxDepth: 8).parse(bytes) else { return nil }
        return Status(value)
    }

    package func write(_ status: Status) throws(SystemError) {
        try Posix.mkdirIfMissing(directory, mode: 0o700)
        try Posix.writeFileAtomically(directory: directory, name: status.erasureID + ".status", bytes: status.jsonValue.serialized(), mode: 0o640)
    }

    /// Every erasure with a status file, by seq.
    package func all() -> [Status] {
        listDirectory(directory).filter { $0.hasSuffix(".status") }.compactMap { status(String($0.dropLast(".status".count))) }
            .sorted { ($0.seq, $0.erasureID) < ($1.seq, $1.erasureID) }
    }
}

/// The body of an `erasure` journal record: `{"kind":"erasure","erasureId":…,"scope":…,
/// "subject":<keyed hash>}`. The records it covers are those below its own seq.
package enum ErasureRecord {
    package static func body(erasureID: String, scope: ErasureScope, subjectHash: String, requestedAt: String) -> [UInt8] {
        JSONValue.object(["kind": .string("erasure"), "erasureId": .string(erasureID), "scope": .string(scope.rawValue),
                          "subject": .string(subjectHash), "requestedAt": .string(requestedAt)]).serialized()
    }

    /// The erasure a record announces, or nil for any other record.
    package static func parse(_ record: JournalRecord) -> (erasureID: String, scope: ErasureScope, subject: String)? {
        parse(key: record.key, body: record.body)
    }

    /// The erasure a record keyed `key` with `body` announces (a journal record, or a stream
    /// message whose `Nats-Msg-Id` carries the key), or nil for any other. The key must be
    /// `erasure:<the body's erasureId>`: a body alone could be anyone's.
    package static func parse(key: String, body bytes: [UInt8]) -> (erasureID: String, scope: ErasureScope, subject: String)? {
        // Most records are not erasures: known by the key without decoding the body.
        guard key.hasPrefix("erasure:") else { return nil }
        return parse(key: key, body: RecordBody(decoding: bytes))
    }

    /// ``parse(key:body:)`` of a body the follower runtime decoded.
    package static func parse(key: String, body: RecordBody) -> (erasureID: String, scope: ErasureScope, subject: String)? {
        switch body {
        case .erasure(let erasure):
            guard key == "erasure:" + erasure.erasureID else { return nil }
            return (erasure.erasureID, erasure.scope, erasure.subject)
        case .notification, .event, .tombstone, .undecodable:
            return nil
        }
    }
}

/// The eraser: a follower in pushspoold that performs each `erasure` record it reads
/// (docs/design/erasure.md, "What each part does"), through the same steps as the offline
/// `pushspoolctl user erase` (``UserDataErasure`` with a ``LiveErasureJournal``).
///
/// Before it starts an erasure it waits until every other follower (inbox index, outbox,
/// exporter) has passed the record: then none of them can apply one of the erased records
/// after its store was cleaned, so nothing erased is re-created. A step that fails (the index
/// busy, NATS unreachable) throws; the runner backs off and the erasure is redone from its
/// plan, which every step tolerates. Its cursor is durable only past completed erasures, so a
/// crash redoes at most the one in progress.
///
/// `Sendable`: the position is behind a lock; the rest is immutable.
package final class EraserFollower: Follower, Sendable {
    package let name = "erase"
    private let sources: UserDataSources
    private let requests: ErasureRequests
    private let stream: ExportOptions?
    private let journal: LiveErasureJournalFactory
    private let position: Locked<UInt64>
    /// The reader kept from step to step (a fresh one would scan its segment from the start
    /// at every commit), and an erasure record read but not yet performed (waiting for the
    /// other followers). `@unchecked Sendable`: touched only by ``step(_:)``, which the
    /// runner calls on its one thread.
    private final class Cursor: @unchecked Sendable {
        var reader: JournalReader?
        var held: JournalRecord?
        /// The seq last written to the cursor file.
        var persisted: UInt64 = 0
    }
    private let cursor = Cursor()
    /// Records turned into tombstones by the erasures completed since start.
    private let erased = Locked<UInt64>(0)
    /// Test seam: called after each step of a live erasure (a crash test kills the daemon there).
    private let hook: @Sendable (String) -> Void
    /// Records read per step, so a stop is noticed between batches.
    private static let batch = 4096

    /// What the eraser needs from the daemon to build a ``LiveErasureJournal`` for one record.
    package struct LiveErasureJournalFactory: Sendable {
        package var seal: @Sendable () throws(ErasureError) -> UInt64
        package var replaceFingerprints: @Sendable ([UInt64: String]) throws(ErasureError) -> Void
        package var retentionGate: Locked<Void>

        package init(seal: @escaping @Sendable () throws(ErasureError) -> UInt64,
                     replaceFingerprints: @escaping @Sendable ([UInt64: String]) throws(ErasureError) -> Void, retentionGate: Locked<Void>) {
            self.seal = seal
            self.replaceFingerprints = replaceFingerprints
            self.retentionGate = retentionGate
        }
    }

    /// `journalLastSeq`: where a fresh eraser starts when no erasure was ever requested (it
    /// has nothing to do below it); with a subject file waiting it reads from the start.
    /// `requests`: the value the intake writes subject files through (its count of them is
    /// the one ``durableSeq()`` reads); by default one of its own.
    package init(sources: UserDataSources, stream: ExportOptions?, journal: LiveErasureJournalFactory, journalLastSeq: UInt64,
                 requests: ErasureRequests? = nil, hook: @escaping @Sendable (String) -> Void = { _ in }) throws(UserDataError) {
        self.sources = sources
        let requests = requests ?? ErasureRequests(stateDirectory: sources.stateDirectory)
        self.requests = requests
        self.stream = stream
        self.journal = journal
        self.hook = hook
        do { try Posix.mkdirIfMissing(requests.directory, mode: 0o700) } catch {
            throw UserDataError(.journal, "creating \(requests.directory): \(error)")
        }
        requests.removeLeftoverTemps()
        // Start: the subject files a previous run left are counted from the directory.
        requests.refreshPending()
        let stored: UInt64
        do { stored = try CursorFile.read(directory: requests.directory) } catch {
            throw UserDataError(.journal, "\(error)")
        }
        let exists = access(requests.directory + "/cursor", F_OK) == 0
        let start = exists ? stored : (requests.hasPendingSubjects ? 0 : journalLastSeq)
        if !exists {
            do { try CursorFile.write(start, directory: requests.directory) } catch { throw UserDataError(.journal, "\(error)") }
        }
        position = Locked(start)
        cursor.persisted = start
    }

    /// Holds retention back only while an erasure is owed: a subject file is written before
    /// its record is journaled and removed once it is performed, so without one no unread
    /// record needs the eraser, and retention must not wait for it to read them.
    package func durableSeq() -> UInt64? {
        requests.hasPendingSubjects ? position.withLock { $0 } : nil
    }

    /// The position written at stop, so that a restart does not read the journal again from
    /// an old cursor (safe: the position never passes an erasure not yet performed).
    package func finish() {
        let seq = position.withLock { $0 }
        if seq > cursor.persisted { try? CursorFile.write(seq, directory: requests.directory) }
    }

    package var statusDetail: String? {
        let pending = requests.pendingCount
        return pending > 0 ? "erasing \(pending)" : nil
    }

    /// What the metrics and status.json show of the erasures. `Sendable`: a value.
    package struct Stats: Sendable, Equatable {
        /// Erasures requested and not complete (`pushspool_erasures_pending`).
        package var pending: Int
        /// Records tombstoned by the erasures completed since start (`pushspool_erasure_records_total`).
        package var recordsErased: UInt64
    }

    package var stats: Stats {
        Stats(pending: requests.pendingCount, recordsErased: erased.withLock { $0 })
    }

    package func step(_ context: FollowerContext) throws(FollowerError) -> FollowerNext {
        let from = position.withLock { $0 }
        guard cursor.held != nil || context.journalLastSeq > from else { return .commitAfter(from, atMost: nil) }
        let reader: JournalReader
        if let kept = cursor.reader {
            reader = kept
        } else {
            do { reader = try JournalReader(directory: sources.journalDirectory, fromSeq: from + 1) } catch {
                throw FollowerError("journal_read", "reading the journal: \(error)")
            }
            cursor.reader = reader
        }
        reader.announcedLastSeq = context.announcedLastSeq
        var read = 0
        var last = from
        while read < Self.batch, !context.stopRequested() {
            let record: JournalRecord?
            if let held = cursor.held {
                record = held
                cursor.held = nil
            } else {
                do { record = try reader.next() } catch {
                    cursor.reader = nil
                    throw FollowerError("journal_read", "reading the journal: \(error)")
                }
            }
            guard let record else { break }
            read += 1
            if let erasure = ErasureRecord.parse(record) {
                // Every other follower of the group must have applied what the erasure covers
                // first. Not a commit: the others' progress is what this waits for, and the
                // runner wakes this step when one of them advances.
                if let others = context.othersDurable(), others &+ 1 < record.seq {
                    cursor.held = record
                    return .othersReach(record.seq - 1)
                }
                do {
                    try perform(record: record, erasureID: erasure.erasureID, scope: erasure.scope, subjectHash: erasure.subject)
                    try CursorFile.write(record.seq, directory: requests.directory)
                    cursor.persisted = record.seq
                } catch let error as FollowerError {
                    cursor.held = record
                    throw error
                } catch {
                    cursor.held = record
                    throw FollowerError("erase_cursor", "\(error)")
                }
            }
            last = record.seq
            position.withLock { $0 = last }
        }
        // Now and then, so a crash does not send a restart far back (a stop writes it too).
        if last >= cursor.persisted &+ 100_000 {
            try? CursorFile.write(last, directory: requests.directory)
            cursor.persisted = last
        }
        return read == 0 ? .commitAfter(last, atMost: nil) : .again
    }

    /// Runs (or finishes) one erasure; returns once it is complete.
    private func perform(record: JournalRecord, erasureID: String, scope: ErasureScope, subjectHash: String) throws(FollowerError) {
        var status = requests.status(erasureID)
            ?? ErasureRequests.Status(erasureID: erasureID, scope: scope.rawValue, subject: subjectHash, seq: record.seq)
        status.seq = record.seq
        guard let subject = requests.subject(erasureID) else {
            // Complete (the subject file goes last), or a duplicate record of one: nothing owed.
            if !status.complete {
                status.complete = true
                try? requests.write(status)
            }
            return
        }
        try? requests.write(status)
        // The rewrite reads and writes whole segments, archives and the index: at the lowest
        // best-effort level its I/O yields to ingest's fsyncs (on a scheduler that honours
        // priorities), and only while it rewrites; the thread's nice 10 stays as it is. Not
        // idle: under steady ingest an idle-class erasure could wait indefinitely.
        try PosixThread.withIOPriority(Self.rewriteIOPriority) { () throws(FollowerError) in
            try rewrite(record: record, erasureID: erasureID, subject: subject, status: status)
        }
    }

    /// The eraser thread's I/O priority while it performs an erasure.
    package static let rewriteIOPriority = IOPriority.bestEffort(level: 7)

    /// The steps of ``perform(record:erasureID:scope:subjectHash:)`` once the subject is known.
    private func rewrite(record: JournalRecord, erasureID: String, subject: DataSubject, status: ErasureRequests.Status) throws(FollowerError) {
        var status = status
        hook("started")
        let factory = journal
        let live = LiveErasureJournal(before: record.seq, erasureID: erasureID, seal: factory.seal,
                                      replaceFingerprints: factory.replaceFingerprints, retentionGate: factory.retentionGate)
        let erasure = UserDataErasure(subject: subject, sources: sources, stream: stream, live: live)
        let steps = Locked(status.steps)
        do throws(UserDataError) {
            let (_, counts) = try erasure.run { step throws(UserDataError) in
                var coarse = "\(step)"
                if case .journal = step { coarse = "" }
                if !coarse.isEmpty {
                    let done = steps.withLock { list -> [String] in
                        if !list.contains(coarse) { list.append(coarse) }
                        return list
                    }
                    var snapshot = status
                    snapshot.steps = done
                    try? requests.write(snapshot)
                }
                hook("\(step)")
            }
            status.journalRecords = counts.journalRecords
        } catch {
            status.steps = steps.withLock { $0 }
            // The message may name paths, never the subject: the steps' errors name files and stores.
            status.lastError = error.shortDescription
            try? requests.write(status)
            throw FollowerError("erase_\(error.shortDescription)", "erasure \(erasureID): \(error)")
        }
        status.steps = steps.withLock { $0 }
        status.complete = true
        status.lastError = nil
        // The plain id goes first: "complete" must never be said while it is still on disk.
        // A crash between the two leaves no subject file, which the rerun takes as complete.
        do {
            try requests.removeSubject(erasureID)
            hook("subject-removed")
            try requests.write(status)
        } catch {
            throw FollowerError("erase_status", "erasure \(erasureID): \(error)")
        }
        erased.withLock { $0 &+= UInt64(clamping: status.journalRecords) }
    }
}
