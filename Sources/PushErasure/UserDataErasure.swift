@preconcurrency import Glibc
import PushExport
import PushInbox
import PushJournal
import PushOutboxStore
import PushSpool
import PushSystem

/// What an erasure removed, by store. `Sendable`: a plain value.
package struct UserDataErasureCounts: Sendable, Equatable {
    package var journalRecords = 0
    package var inboxItems = 0
    package var outboxDeliveries = 0
    package var quarantined = 0
    package var mediaFiles = 0
    /// Media files the subject's records pointed at that another subject's records still use.
    package var mediaShared = 0
    /// Status snapshots (`status.json`, `export/status.json`) deleted because they quoted the subject.
    package var statusFiles = 0
    /// Quarantined entries that could not be checked (a symlink, a FIFO, a file over the read
    /// limit, an unreadable one): left in place for an operator to review.
    package var quarantineUnchecked = 0
    /// Messages erased from the export stream (`nil`: no stream was configured, none reached).
    package var streamMessages: Int?

    package init() {}

    package var jsonValue: JSONValue {
        .object([
            "journalRecords": .integer(journalRecords), "inboxItems": .integer(inboxItems),
            "outboxDeliveries": .integer(outboxDeliveries), "quarantined": .integer(quarantined),
            "mediaFiles": .integer(mediaFiles), "mediaShared": .integer(mediaShared), "statusFiles": .integer(statusFiles),
            "quarantineUnchecked": .integer(quarantineUnchecked),
            "streamMessages": streamMessages.map { .integer($0) } ?? .null,
        ])
    }
}

/// A named step of `UserDataErasure.run`, where the crash tests stop it.
package enum UserDataErasureStep: Sendable, Equatable, CustomStringConvertible {
    /// The plan (`erase/<id>.plan`) is written; nothing is erased yet.
    case planned
    /// A step inside the journal's rewrite.
    case journal(ErasureStep)
    /// The journal is done; the inbox index not yet.
    case journalDone
    case inboxDone
    case outboxDone
    case quarantineDone
    /// Status snapshots quoting the subject deleted.
    case statusDone
    /// Media files deleted.
    case mediaDone
    /// The subject's messages erased from the export stream; the plan not yet removed.
    case streamDone

    package var description: String {
        switch self {
        case .planned: "planned"
        case .journal(let step): "journal \(step)"
        case .journalDone: "journal-done"
        case .inboxDone: "inbox-done"
        case .outboxDone: "outbox-done"
        case .quarantineDone: "quarantine-done"
        case .statusDone: "status-done"
        case .mediaDone: "media-done"
        case .streamDone: "stream-done"
        }
    }
}

/// What a live erasure (pushspoold running; docs/design/erasure.md, "The chosen design")
/// needs from the daemon: the erasure record's seq and id, the writer's seal and dedup
/// index, and the gate that keeps retention from archiving or retiring a segment while it
/// is rewritten. `Sendable`: closures and values.
package struct LiveErasureJournal: Sendable {
    /// The seq of the `erasure` record: records below it are the erasure's.
    package var before: UInt64
    package var erasureID: String
    /// Seals the active segment; returns the first seq of the new active segment.
    package var seal: @Sendable () throws(ErasureError) -> UInt64
    /// Points the writer's dedup index at the tombstone keys and writes `dedup.ckpt`.
    package var replaceFingerprints: @Sendable ([UInt64: String]) throws(ErasureError) -> Void
    /// Held while segments, archives and key files are rewritten; retention takes it too.
    package var retentionGate: Locked<Void>

    package init(before: UInt64, erasureID: String, seal: @escaping @Sendable () throws(ErasureError) -> UInt64,
                 replaceFingerprints: @escaping @Sendable ([UInt64: String]) throws(ErasureError) -> Void, retentionGate: Locked<Void>) {
        self.before = before
        self.erasureID = erasureID
        self.seal = seal
        self.replaceFingerprints = replaceFingerprints
        self.retentionGate = retentionGate
    }
}

/// `pushspoolctl user erase`: removes one user or device from every store pushspool keeps
/// (docs/design/erasure.md). The journal's records become same-length tombstones; the inbox
/// index loses the subject's rows (and is vacuumed); outbox deliveries and quarantined spool
/// files naming the subject are deleted; media files only the subject's records used are
/// deleted, shared ones kept; with ``stream`` set, the subject's messages in the JetStream
/// export stream are erased (securely overwritten by the server) last.
///
/// Offline (``live`` nil) it needs pushspoold stopped (the journal's `LOCK`); run by
/// pushspoold's eraser (``live`` set) it rewrites only sealed segments and covers only the
/// records below the erasure record. Crash-safe and idempotent: the erasure's
/// id and plan (the media to delete, as paths inside the content-addressed store; no plain
/// id) are written to `<state>/erase/` before anything is erased, under the subject's keyed
/// hash, so a rerun after a crash at any step reuses them and finishes; they are removed at
/// the end. `Sendable`: a plain value.
package struct UserDataErasure: Sendable {
    package var subject: DataSubject
    package var sources: UserDataSources
    /// The export stream to erase from (`[Export]`'s URLs, credentials and `Stream=`), when this
    /// host's records or events go there; `nil` = no stream step.
    package var stream: ExportOptions?
    /// Set when pushspoold runs the erasure (its eraser follower); `nil` = offline, holding
    /// the journal's `LOCK`.
    package var live: LiveErasureJournal?

    package init(subject: DataSubject, sources: UserDataSources, stream: ExportOptions? = nil, live: LiveErasureJournal? = nil) {
        self.subject = subject
        self.sources = sources
        self.stream = stream
        self.live = live
    }

    var eraseDirectory: String { sources.stateDirectory + "/erase" }

    private var journalSubject: ErasureSubject {
        switch subject {
        case .user(let id): .user(id)
        case .device(let id): .device(id)
        }
    }

    /// Runs (or finishes) the erasure. `hook` is a test seam called after each step;
    /// throwing from it stops the run there as a crash would.
    package func run(hook: (UserDataErasureStep) throws(UserDataError) -> Void = { _ throws(UserDataError) in })
        throws(UserDataError) -> (erasureID: String, counts: UserDataErasureCounts) {
        guard UserDataExport.isDirectory(sources.journalDirectory) else {
            throw UserDataError(.noJournal, "no journal at \(sources.journalDirectory); check --state-dir or the configuration's [Journal] StateDirectory=")
        }
        let secret: ErasureSecret
        do { secret = try ErasureSecret.loadOrCreate(stateDirectory: sources.stateDirectory) } catch {
            throw UserDataError(.journal, "\(error)")
        }
        let subjectHash = secret.subjectHash(journalSubject)
        do { try Posix.mkdirIfMissing(eraseDirectory, mode: 0o700) } catch {
            throw UserDataError(.journal, "creating \(eraseDirectory): \(error)")
        }
        // Offline, locked before the plan: records ingested between a plan and the rewrite
        // would escape the plan's media list. Live, the daemon holds the lock; records from
        // the erasure record on are new data, and the media step checks them again.
        let lock: JournalErasureLock?
        if live == nil {
            do { lock = try JournalErasureLock(directory: sources.journalDirectory) } catch {
                throw UserDataError(error.code == .busy ? .busy : .journal, "\(error)")
            }
        } else {
            lock = nil
        }
        var counts = UserDataErasureCounts()
        let plan = try loadOrMakePlan(subjectHash: subjectHash, secret: secret)
        try hook(.planned)

        let plainID = switch subject {
        case .user(let id): id
        case .device(let id): id
        }
        let target = ErasureTarget(erasureID: plan.erasureID, scope: journalSubject.scope, subjectHash: subjectHash,
                                   before: live?.before ?? .max, plain: plainID)
        do throws(ErasureError) {
            func journalHook(_ step: ErasureStep) throws(ErasureError) {
                do throws(UserDataError) { try hook(.journal(step)) } catch { throw ErasureError(.stopped, error.message) }
            }
            if let live {
                // The writer never touches a sealed segment again; retention waits at the gate.
                let sealedBelow = try live.seal()
                let rewritten = try live.retentionGate.withLock { (_: inout Void) throws(ErasureError) in
                    try JournalErasure.runLive(directory: sources.journalDirectory, targets: [target], secret: secret,
                                               sealedBelow: sealedBelow, hook: journalHook)
                }
                try journalHook(.beforeCheckpoint)
                try live.replaceFingerprints(rewritten.tombstones)
                counts.journalRecords = rewritten.report.records
            } else {
                let report = try JournalErasure.run(directory: sources.journalDirectory, targets: [target], secret: secret, lock: lock,
                                                    hook: journalHook)
                counts.journalRecords = report.records
            }
        } catch {
            throw UserDataError(error.code == .busy ? .busy : .journal, "\(error)")
        }
        try hook(.journalDone)

        if UserDataExport.isRegularFile(sources.inboxIndexPath) {
            do { counts.inboxItems = try InboxIndex.erase(path: sources.inboxIndexPath, subject: subject, before: live?.before ?? .max) } catch {
                throw UserDataError(.inbox, "erasing from the inbox index: \(error)")
            }
        }
        try hook(.inboxDone)

        let export = UserDataExport(subject: subject, sources: sources)
        let store = OutboxStore(stateDirectory: sources.stateDirectory)
        for directory in [store.pendingDirectory, store.parkedDirectory, store.retryDirectory] {
            let names: [String]
            do { names = try store.names(directory) } catch { throw UserDataError(.outbox, "listing \(directory): \(error)") }
            for name in names {
                guard let delivery = store.read(directory + "/" + name), export.names(delivery) else { continue }
                do { try store.remove(name, in: directory) } catch { throw UserDataError(.outbox, "\(error)") }
                counts.outboxDeliveries += 1
            }
        }
        try hook(.outboxDone)

        (counts.quarantined, counts.quarantineUnchecked) = try eraseQuarantine(export)
        try hook(.quarantineDone)

        counts.statusFiles = try eraseStatusFiles()
        try hook(.statusDone)

        // Live, a record journaled since the erasure record may point at a planned file
        // (the same image sent again): such a file is in use and stays.
        let inUse = try live.map { live throws(UserDataError) in try mediaReferenced(from: live.before) } ?? []
        for path in plan.media where !inUse.contains(path) {
            guard export.isInMediaStore(path) else { continue }
            // unlink(2) removes a symlink itself, never what it points at.
            if unlink(path) == 0 {
                counts.mediaFiles += 1
            } else if errno != ENOENT {
                throw UserDataError(.media, "removing \(path): \(SystemError(call: "unlink", errno: errno, subject: path))")
            }
        }
        counts.mediaShared = plan.shared
        try hook(.mediaDone)

        // Last of the stores, so that an unreachable server leaves every local store erased
        // and only this step owed: the plan stays, the run fails, and a rerun (which finds
        // the local stores clean) scans the stream again. A rescan is what makes it
        // idempotent: messages erased by the interrupted run are no longer there to find.
        if var stream {
            if let name = plan.stream { stream.stream = name }
            counts.streamMessages = try eraseFromStream(stream, erasureID: plan.erasureID)
        } else if let name = plan.stream {
            throw UserDataError(.stream, "erasure \(plan.erasureID) began with the export stream \(name), which the configuration "
                                + "no longer names ([Export] Enabled=no and [Inbox] Source=journal); restore it and run the command again")
        }
        try hook(.streamDone)

        // Done: the plan goes last, so a crash before this line redoes the (idempotent) steps.
        let planPath = eraseDirectory + "/" + subjectHash + ".plan"
        if unlink(planPath) != 0, errno != ENOENT {
            throw UserDataError(.journal, "removing \(planPath): \(SystemError(call: "unlink", errno: errno, subject: planPath))")
        }
        try? Posix.syncDirectory(eraseDirectory)
        withExtendedLifetime(lock) {}
        return (plan.erasureID, counts)
    }

    /// Media paths the records from `seq` on point at, up to the journal's end when the scan
    /// begins (ingest goes on; a record committed during the few milliseconds between this
    /// scan and the unlink that points at a planned file is the one case not covered: it
    /// would need the file fetched again).
    private func mediaReferenced(from seq: UInt64) throws(UserDataError) -> Set<String> {
        var paths: Set<String> = []
        do throws(JournalError) {
            let end = try JournalReader.lastSeq(directory: sources.journalDirectory) ?? 0
            let reader = try JournalReader(directory: sources.journalDirectory, fromSeq: seq)
            let mediaKey = Array(#""media":"#.utf8)
            while let record = try reader.next(), record.seq <= end {
                guard ErasureTarget.contains(record.body, mediaKey),
                      case .object(let body)? = try? JSONParser(maxDepth: 64).parse(record.body),
                      let media = body["media"]?.objectValue else { continue }
                for path in [media["path"]?.stringValue, media["thumbnail"]?["path"]?.stringValue].compactMap({ $0 }) { paths.insert(path) }
            }
        } catch {
            throw UserDataError(.journal, "reading the journal: \(error)")
        }
        return paths
    }

    /// Erases the subject's messages from the export stream; returns how many went.
    private func eraseFromStream(_ options: ExportOptions, erasureID: String) throws(UserDataError) -> Int {
        let matcher = switch subject {
        case .user(let id): StreamSubjectMatcher(scope: .user, id: id)
        case .device(let id): StreamSubjectMatcher(scope: .device, id: id)
        }
        let where_ = "the export stream \(options.stream) at \(options.urls.joined(separator: ","))"
        let rerun = "the local stores are erased; run the command again once NATS answers to finish erasure \(erasureID)"
        do throws(ExportError) {
            let client = try NatsClient(options, name: "pushspoolctl-erase", reconnects: false)
            defer { client.close() }
            return try client.eraseMessages(stream: options.stream, where: matcher.matches).erased
        } catch where error.code == .noStream {
            // No stream, no copies: nothing was ever exported there (or it was deleted whole).
            return 0
        } catch {
            throw UserDataError(.stream, "erasing from \(where_): \(error); \(rerun)")
        }
    }

    /// The erasure's id and the media only the subject uses.
    struct Plan {
        var erasureID: String
        var media: [String]
        var shared: Int
        /// The export stream the erasure owes, recorded when the plan is made, so that a rerun
        /// finishes it even if the configuration changed in between.
        var stream: String?
    }

    /// The plan a crashed run left, or a new one from a scan of the journal (archives first):
    /// the media paths the subject's records point at, minus those another record uses.
    private func loadOrMakePlan(subjectHash: String, secret: ErasureSecret) throws(UserDataError) -> Plan {
        let path = eraseDirectory + "/" + subjectHash + ".plan"
        if let bytes = try? Posix.readFile(path, limit: 64 << 20), case .object(let stored)? = try? JSONParser(maxDepth: 8).parse(bytes),
           let id = stored["erasureId"]?.stringValue, let media = stored["media"]?.arrayValue {
            return Plan(erasureID: id, media: media.compactMap(\.stringValue), shared: stored["shared"]?.intValue ?? 0,
                        stream: stored["stream"]?.stringValue)
        }
        let export = UserDataExport(subject: subject, sources: sources)
        var mine: [String] = []
        var seen: Set<String> = []
        var others: Set<String> = []
        let before = live?.before ?? .max
        // Only a record with media matters here; most have none, and are skipped unparsed.
        let mediaKey = Array(#""media":"#.utf8)
        func consider(_ record: JournalRecord) {
            guard ErasureTarget.contains(record.body, mediaKey),
                  case .object(let body)? = try? JSONParser(maxDepth: 64).parse(record.body),
                  let media = body["media"]?.objectValue else { return }
            let paths = [media["path"]?.stringValue, media["thumbnail"]?["path"]?.stringValue].compactMap { $0 }.filter { !$0.isEmpty }
            if record.seq < before, export.names(body) {
                for path in paths where seen.insert(path).inserted { mine.append(path) }
            } else {
                others.formUnion(paths)
            }
        }
        do throws(JournalError) {
            // Up to the erasure record: later records are new data, and chasing the end of a
            // journal that ingest keeps extending might never finish. The media step checks
            // what they point at.
            try JournalArchive.forEachRecord(directory: sources.journalDirectory, below: before) { record, _ in
                consider(record)
                return true
            }
        } catch {
            throw UserDataError(.journal, "reading the journal: \(error)")
        }
        let plan = Plan(erasureID: live?.erasureID ?? ErasureTarget.newID(), media: mine.filter { !others.contains($0) },
                        shared: mine.filter { others.contains($0) }.count, stream: stream?.stream)
        let document = JSONValue.object([
            "erasureId": .string(plan.erasureID), "media": .array(plan.media.map { .string($0) }), "shared": .integer(plan.shared),
            "stream": plan.stream.map { .string($0) } ?? .null,
        ]).serialized()
        do { try Posix.writeFileAtomically(directory: eraseDirectory, name: subjectHash + ".plan", bytes: document, mode: 0o600) } catch {
            throw UserDataError(.journal, "writing the erasure plan \(path): \(error)")
        }
        return plan
    }

    /// Snapshots the daemon and the exporter rewrite while they run (`status.json`,
    /// `export/status.json`): a free-text `lastError` may quote a key, and so the subject.
    /// One that holds the subject's id anywhere is deleted — the next run writes a fresh one.
    private func eraseStatusFiles() throws(UserDataError) -> Int {
        let id = switch subject {
        case .user(let id): id
        case .device(let id): id
        }
        // The id as JSON writes it (escaped) and as it is.
        let needles = Set([Array(id.utf8), Array(JSONValue.string(id).serialized().dropFirst().dropLast())]).filter { !$0.isEmpty }
        var removed = 0
        let layout = StateLayout(root: sources.stateDirectory)
        for path in [layout.status, layout.exportStatus] {
            guard case .bytes(let bytes) = UserDataExport.readRegularFile(path, limit: 16 << 20),
                  needles.contains(where: { Self.contains(bytes, $0) }) else { continue }
            if unlink(path) != 0, errno != ENOENT {
                throw UserDataError(.journal, "removing \(path): \(SystemError(call: "unlink", errno: errno, subject: path))")
            }
            removed += 1
        }
        return removed
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    /// Deletes quarantined spool files (and their reasons) that name the subject, as
    /// `user export` finds them; a symlink or FIFO is neither read nor followed.
    private func eraseQuarantine(_ export: UserDataExport) throws(UserDataError) -> (erased: Int, unchecked: Int) {
        var matched: [String] = []
        var unchecked = 0
        do throws(SpoolError) {
            try FailedQueue.forEach(layout: sources.spool) { entry in
                guard !entry.payloadMissing else { return }
                switch UserDataExport.readRegularFile(sources.spool.failed + "/" + entry.name, limit: 64 << 20) {
                case .bytes(let bytes): if export.quarantineMatch(bytes) != nil { matched.append(entry.name) }
                case .unread: unchecked += 1
                }
            }
        } catch {
            if UserDataExport.isDirectory(sources.spool.failed) { throw UserDataError(.spool, "reading \(sources.spool.failed): \(error)") }
            return (0, 0)
        }
        for name in matched {
            for file in [name, name + SpoolName.reasonSuffix] {
                let path = sources.spool.failed + "/" + file
                if unlink(path) != 0, errno != ENOENT {
                    throw UserDataError(.spool, "removing \(path): \(SystemError(call: "unlink", errno: errno, subject: path))")
                }
            }
        }
        if !matched.isEmpty { try? Posix.syncDirectory(sources.spool.failed) }
        return (matched.count, unchecked)
    }
}
