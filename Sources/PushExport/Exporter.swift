@preconcurrency import Glibc
import Dispatch
import PushSystem
import PushFollow
import PushJournal
import Synchronization

/// What the exporter reports for STATUS=, metrics and `pushspoolctl export status`. `Sendable` value.
package struct ExporterStatus: Sendable, Equatable {
    /// In memory: the highest seq acknowledged with all earlier ones.
    package var acknowledgedSeq: UInt64
    /// What `export/cursor` holds (≤ `acknowledgedSeq`).
    package var checkpointedSeq: UInt64
    package var journalLastSeq: UInt64
    package var lag: UInt64 { journalLastSeq > acknowledgedSeq ? journalLastSeq - acknowledgedSeq : 0 }
    package var connected: Bool
    /// Publishes waiting for a PubAck.
    package var pending: Int
    package var running: Bool
    /// Records published since start (resends included).
    package var published: UInt64
    /// The last failure (`nil` once export is flowing again).
    package var lastError: String?

    /// `export lag 0 (connected)` for STATUS=.
    package var summary: String {
        "export lag \(lag) (\(connected ? "connected" : "disconnected"))"
    }

    /// One JSON object, for `export/status.json` and `pushspoolctl export status --json`.
    package var jsonValue: JSONValue {
        var o: JSONObject = [
            "acknowledgedSeq": .integer(acknowledgedSeq), "checkpointedSeq": .integer(checkpointedSeq),
            "journalLastSeq": .integer(journalLastSeq), "lag": .integer(lag), "connected": .bool(connected),
            "pending": .integer(pending), "running": .bool(running), "published": .integer(published),
        ]
        if let lastError { o["lastError"] = .string(lastError) }
        return .object(o)
    }
}

/// Something the exporter wants an operator to hear about; the daemon routes it to journald.
package enum ExportNotice: Sendable, Equatable {
    /// Lag rose to `threshold` or past it (NATS down or slower than ingest).
    case lagHigh(lag: UInt64, threshold: UInt64, error: String?)
    /// Lag fell back under half the threshold.
    case lagRecovered(lag: UInt64)
}

/// Follows the journal from `export/cursor` and publishes every record to NATS JetStream, on a
/// dedicated thread (niced, never on the ingest path: it only reads the journal).
///
/// Exactly once: each message carries `Nats-Msg-Id` = `<host id>:<key>` (the key made
/// header-safe: ``ExportMessage/messageId(hostId:key:)``); the cursor moves only over
/// PubAck'ed records (``AckWindow``), so after a crash or a failed publish the exporter
/// sends again from the cursor and the stream's duplicate window drops what it already holds.
/// At most `maxPending` publishes are in flight. NATS down: the exporter retries, lag grows,
/// ingest is untouched; it catches up when NATS returns. A stream deleted under it is
/// created again after the first failed publish.
///
/// Runs on a ``FollowerRunner``: it sleeps until the journal commits past what it read, a
/// PubAck or a connection change arrives (libnats' callbacks wake it), or a checkpoint is due.
///
/// `Sendable`: state behind locks; the connection and the journal reader belong to the
/// stepping thread (`Session`, behind its own lock).
package final class Exporter: Follower, Sendable {
    package let options: ExportOptions
    private let hostId: String
    private let template: SubjectTemplate
    private let sink: AckSink
    private let trace: ExportTrace?
    private let journalLastSeq: (@Sendable () -> UInt64?)?
    private let notify: @Sendable (ExportNotice) -> Void

    /// What one step leaves for the next: the connection, the reader and the timers.
    private struct Session {
        var client: NatsClient?
        var reader: JournalReader?
        var nextCheckpoint: UInt64 = 0
        var lastStatusFile: ExporterStatus?
        var lastStatusWrite: UInt64 = 0
        /// Whether the thread's niceness follows ``BurstDetector`` (decided at the first step).
        var adaptive: Bool?
        var burst: BurstDetector
        /// The nice value this thread was last given (`nil` = not read yet).
        var niceness: Int32?
    }
    private let session: Locked<Session>
    /// ``Session/niceness`` for readers that must not wait for a step to end.
    private let nicenessNow = Atomic<Int32>(0)
    /// `export/cursor` and `export/status.json` are written here, in order, off the exporter's
    /// thread: each write has two fsyncs, milliseconds on a busy disk, and a record committed
    /// meanwhile would wait for them before its publish.
    private let writes = SerialWorker(name: "export-writes")

    private struct Control {
        var running = false
        var connected = false
        var published: UInt64 = 0
        var checkpointed: UInt64 = 0
        var lastError: String?
        var lagWarned = false
    }
    private let control: Locked<Control>

    /// Reads the cursor and the host id; connects only in `start()`.
    /// - Parameters:
    ///   - journalLastSeq: the writer's last committed seq (the daemon passes
    ///     `{ writer.stats.lastSeq }`); without it status reads the newest segment's headers.
    ///   - notify: lag events, called on the exporter thread; must not block.
    ///   - trace: stage timestamps for every record (the benchmark's breakdown); `nil` = none.
    package init(options: ExportOptions, journalLastSeq: (@Sendable () -> UInt64?)? = nil, trace: ExportTrace? = nil,
                 notify: @escaping @Sendable (ExportNotice) -> Void = { _ in }) throws(ExportError) {
        guard let template = SubjectTemplate(options.subject) else {
            throw ExportError(.config, "subject '\(options.subject)' \(SubjectTemplate.validate(options.subject) ?? "is invalid")")
        }
        self.options = options
        self.template = template
        hostId = try options.resolvedHostId()
        let cursor = try ExportCursor.read(stateDirectory: options.stateDirectory)
        sink = AckSink(acknowledged: cursor, trace: trace)
        self.trace = trace
        self.journalLastSeq = journalLastSeq
        self.notify = notify
        control = Locked(Control(checkpointed: cursor))
        session = Locked(Session(burst: BurstDetector(enterRecords: options.burstRecords)))
    }

    /// The seq recorded in `export/cursor`: it and every earlier record are in the stream, and
    /// a restart resumes after it. Journal retention must keep every record above it.
    package func acknowledgedSeq() -> UInt64 { control.withLock { $0.checkpointed } }

    /// The highest seq PubAck'ed with all earlier ones, in memory (ahead of the cursor file by
    /// at most one checkpoint interval). Cheap: for tight polling (benchmark, tests).
    package var acknowledgedInMemory: UInt64 { sink.window.withLock { $0.acknowledged } }

    /// A snapshot for STATUS=, metrics and the status file. Without a `journalLastSeq`
    /// closure it reads the newest segment's frame headers: not for tight loops.
    package var status: ExporterStatus {
        let last = journalLastSeq?() ?? ((try? JournalReader.lastSeq(directory: options.journalDirectory)) ?? nil) ?? 0
        let (acked, pending) = sink.window.withLock { ($0.acknowledged, $0.pending) }
        return control.withLock { c in
            ExporterStatus(acknowledgedSeq: acked, checkpointedSeq: c.checkpointed, journalLastSeq: max(last, acked), connected: c.connected,
                           pending: pending, running: c.running, published: c.published, lastError: c.lastError)
        }
    }

    // MARK: Follower

    package var name: String { "export" }

    /// Spawned at nice 0: the exporter sets its own niceness from the ingest rate
    /// (``BurstDetector``), and libnats' threads, started from it, keep the value it had then.
    package var threadNiceness: Int32? { 0 }

    /// The checkpointed cursor: every record up to it is in the stream.
    package func durableSeq() -> UInt64? { acknowledgedSeq() }

    package var statusDetail: String? { status.summary }

    /// PubAcks, failures and connection changes come on libnats' threads: they wake the step.
    package func attached(wake: @escaping @Sendable () -> Void) {
        sink.onChange.set(wake)
        control.withLock { $0.running = true }
    }

    private func setError(_ text: String?) { control.withLock { $0.lastError = text } }

    package func step(_ context: FollowerContext) throws(FollowerError) -> FollowerNext {
        session.withLock { session in
            let next = step(&session, context)
            // After the step, so that a connection made in it started libnats' threads (its
            // reader and PubAck delivery) while this thread was still at its steady niceness.
            pace(&session, journalSeq: context.journalLastSeq)
            return next
        }
    }

    /// Nice 0 while ingest is steady, `options.niceness` during a burst; a fixed
    /// `options.niceness` when adapting is off or the thread may not lower its niceness
    /// again (no `LimitNICE=+0`, no CAP_SYS_NICE): it would stay niced after the first burst.
    private func pace(_ session: inout Session, journalSeq: UInt64) {
        let adaptive = session.adaptive ?? (options.adaptiveNiceness && PosixThread.mayLowerNiceness(to: 0))
        session.adaptive = adaptive
        let wanted = adaptive && !session.burst.observe(journalSeq: journalSeq, now: Posix.monotonicNanos()) ? 0 : options.niceness
        if session.niceness == nil { session.niceness = try? PosixThread.currentNiceness() }
        defer { nicenessNow.store(session.niceness ?? 0, ordering: .relaxed) }
        guard wanted != session.niceness else { return }
        do {
            try PosixThread.setCurrentNiceness(wanted)
            // What the kernel now holds, for status and tests.
            session.niceness = (try? PosixThread.currentNiceness()) ?? wanted
        } catch {
            // Refused to go back down after all: stay niced for good rather than retry on
            // every step.
            session.adaptive = false
            session.niceness = (try? PosixThread.currentNiceness()) ?? wanted
        }
    }

    /// The nice value the exporter last gave its thread, as read back from the kernel (tests).
    package var currentNiceness: Int32 { nicenessNow.load(ordering: .relaxed) }

    /// Publishes what the window allows, then says what to wait for. One turn of what used to
    /// be the exporter thread's loop, without its sleeps.
    private func step(_ session: inout Session, _ context: FollowerContext) -> FollowerNext {
        let maxPending = max(1, options.maxPending)
        let now = Posix.monotonicNanos()
        let checkpointEvery = options.checkpointInterval.clampedUInt64Nanoseconds
        if now >= session.nextCheckpoint {
            writes.submit { [self] in checkpoint() }
            session.nextCheckpoint = now &+ checkpointEvery
        }
        let reportPending = reportIfChanged(&session)
        if session.client == nil || session.client!.isClosed {
            session.client = nil
            control.withLock { $0.connected = false }
            if session.adaptive == true, (session.niceness ?? 0) != 0 {
                // libnats' threads inherit this thread's niceness: start them at 0, so that
                // PubAcks are not delivered by threads niced for the rest of their life.
                if (try? PosixThread.setCurrentNiceness(0)) != nil { session.niceness = 0 }
            }
            do {
                let fresh = try NatsClient(urls: options.urls, credentialsFile: options.credentialsFile, tlsCAFile: options.tlsCAFile,
                                           tlsCertFile: options.tlsCertFile, tlsKeyFile: options.tlsKeyFile, maxPending: maxPending,
                                           ackTimeout: options.ackTimeout, sink: sink, sendAsap: options.sendAsap)
                try ensureStream(fresh)
                session.client = fresh
                resync(client: fresh, reader: &session.reader)
            } catch {
                setError(error.description)
                return .wake(atMost: .seconds(1))
            }
        }
        guard let client = session.client else { return .again }
        let connected = client.isConnected
        control.withLock { c in
            c.connected = connected
            // libnats reconnects by itself: once it has, the loss is no longer news, even
            // when nothing is left to publish that would clear it.
            if connected, c.lastError == Self.connectionLost { c.lastError = nil }
        }
        let failed = sink.window.withLock { $0.failed }
        if failed || !connected {
            if let text = sink.lastFailure.withLock({ $0 }) { setError(text) }
            if !connected { setError(Self.connectionLost) }
            // A stream deleted under us answers every publish with "no responders", also
            // after libnats reconnects on its own (the stream is only ensured for a new
            // client), so export would stall for good: look it up again, re-creating it
            // when it is gone. One lookup per failed round.
            if failed, connected {
                do { try ensureStream(client) } catch { setError(error.description) }
            }
            // Start over from the cursor: what was acknowledged stays, the rest is sent
            // again and dropped by the server if it had arrived.
            resync(client: client, reader: &session.reader)
            reportIfChanged(&session)
            // The reconnect callback wakes the step; the bound only paces failed rounds.
            return .wake(atMost: connected ? .milliseconds(100) : .milliseconds(250))
        }
        if session.reader == nil {
            resync(client: client, reader: &session.reader)
            if session.reader == nil { return .wake(atMost: .seconds(1)) }
        }
        var published = 0
        let stepStarted = trace == nil ? 0 : now
        session.reader!.announcedLastSeq = context.announcedLastSeq
        while sink.window.withLock({ $0.pending }) < maxPending, published < maxPending, !context.stopRequested() {
            let record: JournalRecord?
            do { record = try session.reader!.next() } catch {
                setError("reading the journal: \(error)")
                session.reader = nil
                return .wake(atMost: .seconds(1))
            }
            guard let record else { break }
            trace?.read(record.seq, stepStarted: stepStarted, at: Posix.monotonicNanos())
            let message = ExportMessage(record: record, hostId: hostId, template: template)
            sink.window.withLock { $0.published(record.seq) }
            do {
                try client.publishAsync(message)
                trace?.published(record.seq, at: Posix.monotonicNanos())
                published += 1
                control.withLock { c in
                    c.published &+= 1
                    if c.lastError != nil, sink.lastFailure.withLock({ $0 }) == nil { c.lastError = nil }
                }
            } catch {
                setError(error.description)
                sink.window.withLock { $0.failed(record.seq) }
                return .again
            }
        }
        let (stillPending, acknowledged, lastPublished) = sink.window.withLock { ($0.pending, $0.acknowledged, $0.lastPublished) }
        if stillPending >= maxPending {
            // The window is full: the next PubAck wakes the step.
            return .wake(atMost: options.ackTimeout)
        }
        if published > 0 { return .again }
        // Caught up. Acks still to come wake the step; a checkpoint of what they moved is due
        // within one interval; with nothing in flight and nothing to write, sleep until a commit.
        let checkpointDue = acknowledged != acknowledgedSeq() || stillPending > 0
        if checkpointDue { return .commitAfter(lastPublished, atMost: options.checkpointInterval) }
        return .commitAfter(lastPublished, atMost: reportPending ? .seconds(1) : nil)
    }

    /// After the last step: waits briefly for the PubAcks in flight, checkpoints, closes.
    package func finish() {
        session.withLock { session in
            if let client = session.client {
                try? client.waitForAcks(timeout: .seconds(2))
                client.close()
            }
            session.client = nil
            session.reader = nil
        }
        control.withLock { c in
            c.connected = false
            c.running = false
        }
        // After what is queued, and done when finish returns: the cursor a restart reads.
        writes.sync { [self] in
            checkpoint()
            writeStatusFile(status)
        }
    }

    /// The lag check and `export/status.json`, at most once a second and only when what they
    /// would say changed: an idle exporter writes nothing. Returns true when a change is still
    /// to be written (the step must come back within a second).
    @discardableResult
    private func reportIfChanged(_ session: inout Session) -> Bool {
        let snapshot = status
        guard snapshot != session.lastStatusFile else { return false }
        let now = Posix.monotonicNanos()
        guard now &- session.lastStatusWrite >= 1_000_000_000 else { return true }
        checkLag(snapshot)
        writes.submit { [self] in writeStatusFile(snapshot) }
        session.lastStatusFile = snapshot
        session.lastStatusWrite = now
        return false
    }

    private static let connectionLost = "NATS connection lost; reconnecting"

    /// The configured stream, created when it does not exist.
    private func ensureStream(_ client: NatsClient) throws(ExportError) {
        try client.ensureExportStream(options)
    }

    /// Drops what is in flight and positions the reader after the acknowledged seq.
    private func resync(client: NatsClient, reader: inout JournalReader?) {
        client.dropPending()
        let acked = sink.window.withLock { window -> UInt64 in
            window.reset()
            return window.acknowledged
        }
        sink.lastFailure.withLock { $0 = nil }
        if reader == nil {
            do { reader = try JournalReader(directory: options.journalDirectory, fromSeq: acked + 1) } catch {
                setError("opening the journal: \(error)")
                return
            }
        }
        reader!.seek(toSeq: acked + 1)
    }

    /// On ``writes`` only: one writer, so the cursor never moves back.
    private func checkpoint() {
        let acked = sink.window.withLock { $0.acknowledged }
        guard acked != control.withLock({ $0.checkpointed }) else { return }
        do {
            try ExportCursor.write(acked, stateDirectory: options.stateDirectory)
            control.withLock { $0.checkpointed = acked }
        } catch {
            setError(error.description)
        }
    }

    private func checkLag(_ snapshot: ExporterStatus) {
        let threshold = max(1, options.lagWarnRecords)
        let notice: ExportNotice? = control.withLock { c in
            if !c.lagWarned, snapshot.lag >= threshold {
                c.lagWarned = true
                return .lagHigh(lag: snapshot.lag, threshold: threshold, error: c.lastError)
            }
            if c.lagWarned, snapshot.lag < threshold / 2 {
                c.lagWarned = false
                return .lagRecovered(lag: snapshot.lag)
            }
            return nil
        }
        if let notice { notify(notice) }
    }

    /// `export/status.json`, for `pushspoolctl export status` (best effort).
    private func writeStatusFile(_ snapshot: ExporterStatus) {
        var value = snapshot.jsonValue
        if case .object(var o) = value {
            o["updatedAt"] = .string(Timestamp.now())
            o["pid"] = .integer(getpid())
            value = .object(o)
        }
        let dir = ExportCursor.directory(stateDirectory: options.stateDirectory)
        try? Posix.mkdirIfMissing(dir)
        try? Posix.writeFileAtomically(directory: dir, name: StateLayout.statusFileName, bytes: value.serialized() + [0x0a], mode: 0o640)
    }

    // MARK: Replay

    /// Publishes journal records `from...to` (`to` = `nil`: through the last committed) again,
    /// one PubAck at a time, without touching the cursor. The server drops those still inside
    /// its duplicate window. Returns (published, duplicates).
    package static func replay(options: ExportOptions, fromSeq: UInt64, toSeq: UInt64?,
                               progress: (UInt64) -> Void = { _ in }) throws(ExportError) -> (published: UInt64, duplicates: UInt64) {
        guard let template = SubjectTemplate(options.subject) else { throw ExportError(.config, "subject '\(options.subject)' is invalid") }
        let hostId = try options.resolvedHostId()
        let client = try NatsClient(options, name: "pushspoolctl")
        defer { client.close() }
        try client.ensureExportStream(options)
        let reader: JournalReader
        do { reader = try JournalReader(directory: options.journalDirectory, fromSeq: fromSeq) } catch {
            throw ExportError(.journal, "\(error)")
        }
        var published: UInt64 = 0, duplicates: UInt64 = 0
        for record in reader.records(fromSeq: fromSeq) {
            if let toSeq, record.seq > toSeq { break }
            if try client.publish(ExportMessage(record: record, hostId: hostId, template: template)) { duplicates += 1 }
            published += 1
            progress(record.seq)
        }
        if let error = reader.lastError { throw ExportError(.journal, "\(error)") }
        return (published, duplicates)
    }
}
