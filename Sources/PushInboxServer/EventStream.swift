@preconcurrency import Glibc
import PushFollow
import PushInbox
import PushJournal
import PushPayload
import PushSpool
import PushSystem
import Foundation
import Synchronization

/// Where a stream's events come from: runs on the libmicrohttpd worker thread that serves
/// the stream's connection (it reads that thread's index connection).
package protocol EventFeed: AnyObject, Sendable {
    /// Appends to `stream.pending` what happened for its owner since `stream.lastSeq`, and
    /// advances `lastSeq`.
    func fill(_ stream: EventStream)
}

/// One `GET /v1/inbox/stream` (Server-Sent Events). Its content reader runs on the worker
/// thread that owns its connection; with nothing to send it suspends its connection, and ``EventHub`` resumes it when
/// the index applied more records (or a keep-alive is due), so an idle stream costs no CPU.
///
/// `Sendable`: every member but `connection` is touched only on its connection's worker thread;
/// `connection` is set there before the hub can see the stream.
package final class EventStream: @unchecked Sendable {
    package let owner: InboxOwner
    /// The language of the predefined action titles in the items sent (the stream request's
    /// `Accept-Language`, which a browser's EventSource sends by itself).
    package let language: TitleLanguage
    /// The seq up to which the owner's items have been sent: the SSE `id:` of the last event.
    package var lastSeq: UInt64
    /// The id of the last timed transition (an expiry, a snooze's end) sent: those happen at
    /// a moment, not at a journal seq (``InboxIndex/timedChanges(_:afterId:limit:)``).
    package var lastTimed: Int64 = 0
    package var lastCounts: JSONValue?
    /// Bytes not yet handed to libmicrohttpd.
    package var pending: [UInt8] = []
    private var offset = 0
    private var lastWriteNanos = Posix.monotonicNanos()
    var connection: OpaquePointer?
    private let feed: any EventFeed
    private let hub: EventHub
    /// The client hung up (``hungUp()``): the next read ends the response.
    private let gone = Atomic(false)

    init(owner: InboxOwner, lastSeq: UInt64, feed: any EventFeed, hub: EventHub, language: TitleLanguage = .english) {
        self.owner = owner
        self.language = language
        self.lastSeq = lastSeq
        self.feed = feed
        self.hub = hub
        // Reconnect after 1 s; the client resends Last-Event-ID.
        pending = Array("retry: 1000\n\n".utf8)
        hub.opened()
    }

    /// Appends one event.
    package func append(id: UInt64, event: String, data: String) {
        pending.append(contentsOf: "id: \(id)\nevent: \(event)\ndata: \(data)\n\n".utf8)
    }

    /// The content reader: copies pending bytes, else asks the feed, else suspends (0).
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        // MHD_CONTENT_READER_END_WITH_ERROR: libmicrohttpd closes the connection at once.
        if gone.load(ordering: .acquiring) { return -2 }
        if offset >= pending.count {
            pending.removeAll(keepingCapacity: true)
            offset = 0
            while pending.isEmpty {
                if hub.isStopping { return -1 }  // MHD_CONTENT_READER_END_OF_STREAM
                // Taken before the fill: a wake-up after it (the hub read more) must not be
                // lost to a suspend that comes after the hub resumed everyone.
                let generation = hub.generation
                feed.fill(self)
                if pending.isEmpty, Posix.monotonicNanos() &- lastWriteNanos >= EventHub.keepAliveNanos {
                    pending.append(contentsOf: ": keep-alive\n\n".utf8)
                }
                if pending.isEmpty {
                    guard let connection else { return -1 }
                    switch hub.suspend(self, connection, ifGeneration: generation) {
                    case .suspended:
                        // A hang-up between the check above and the suspension found nothing to resume.
                        if gone.load(ordering: .acquiring) { hub.wake(self) }
                        return 0
                    case .stopping: return -1
                    case .changed: continue  // fill again
                    }
                }
            }
        }
        let count = min(buffer.count, pending.count - offset)
        pending.withUnsafeBytes { source in
            buffer.baseAddress!.copyMemory(from: source.baseAddress! + offset, byteCount: count)
        }
        offset += count
        lastWriteNanos = Posix.monotonicNanos()
        return count
    }

    /// libmicrohttpd freed the response: the client is gone or the server stops.
    func closed() { hub.closedStream(self) }

    /// The client closed its socket (HTTPServer's guard saw it): a suspended stream would hold
    /// its connection slot until its next keep-alive write found the socket gone, up to 15 s
    /// and more. Resumes it so its reader ends the response now.
    func hungUp() {
        gone.store(true, ordering: .releasing)
        hub.wake(self)
    }
}

/// Reads the journal's inbox changes into a ring and wakes suspended streams, without a timer:
/// its thread blocks on inotify on the index's directory and wakes when the daemon's
/// follower rewrites `APPLIED` after a batch (so the batch is visible to readers), when the
/// index file is replaced, or when a keep-alive is due (15 s). An idle server does not wake
/// it otherwise.
///
/// The ring holds the last ``changeCapacity`` state changes read from the *journal*, seeded at
/// start by reading back the newest segments: a stream resuming after a restart of either
/// process gets the changes after its `Last-Event-ID`. ``window`` says which seqs the ring
/// covers; a stream never moves past `window.readSeq` (what the hub has read), so no change
/// is skipped because the index got ahead of the hub, and a position before `coveredAfter`
/// gets `event: refresh` instead of silence.
///
/// `Sendable`: state behind locks.
package final class EventHub: Sendable {
    static let keepAliveNanos: UInt64 = 15_000_000_000

    /// One journaled event about a user's inbox: `item` for one item, `nil` for a bulk change
    /// (read-all, archive-read). `Sendable` value.
    package struct Change: Sendable, Equatable {
        package var seq: UInt64
        package var user: String
        package var item: UInt64?
        package var type: String
    }

    /// The journal seqs the ring speaks for: every change with `coveredAfter < seq <= readSeq`
    /// is in it. `Sendable` value.
    package struct Window: Sendable, Equatable {
        package var coveredAfter: UInt64
        package var readSeq: UInt64
    }

    /// How many recent changes are kept for streams that catch up or resume.
    static let changeCapacity = 16_384
    /// At most this many segments (64 MiB each by default) are read back at start: a journal
    /// of notifications with few state changes must not be read whole. A position before
    /// them gets `event: refresh`.
    static let seedSegments = 5

    package enum SuspendOutcome: Sendable, Equatable {
        case suspended
        /// The hub woke streams since the caller's generation: fill again instead.
        case changed
        case stopping
    }

    private struct State {
        var changes: [Change] = []
        /// `nil` until the ring was seeded from the journal.
        var window: Window?
        /// Bumped each time streams are woken.
        var generation: UInt64 = 0
        // Connection addresses (Int bit patterns: pointers are not Sendable). A suspended
        // connection is never freed by libmicrohttpd until resumed, so the address stays valid.
        var suspended: [ObjectIdentifier: Int] = [:]
        var stopping = false
        var open = 0
    }

    /// The hub's journal reader; one reader at a time (the hub thread, a resuming stream).
    private struct Reading {
        var reader: JournalReader?
    }

    private let state = Locked(State())
    private let reading = Locked(Reading())
    private let indexPath: String
    private let journalDirectory: String?
    /// Test hook: runs before each read of the journal (to make the hub lag on purpose).
    private let beforeRead: (@Sendable () -> Void)?
    private let inotifyWakeups = Atomic<Int>(0)
    /// How often the hub's thread woke for inotify events, relevant or not (tests).
    package var wakeups: Int { inotifyWakeups.load(ordering: .relaxed) }

    /// Where the hub learns of state changes. `Sendable` value.
    package enum ChangeSource: Sendable {
        /// Nowhere: streams get items and counts only.
        case none
        /// Event records read (read-only) from this journal directory.
        case journal(String)
        /// What the index's stream follower (`[Inbox] Source=nats`) reports it applied:
        /// ``followerResumed(at:)`` and ``followerApplied(_:appliedSeq:)``. Seqs are stream
        /// seqs, like the index's.
        case follower
    }

    /// `journalDirectory`: where the hub reads event records from (read-only) to tell streams
    /// which items changed state; `nil` = items and counts only.
    package convenience init(indexPath: String, journalDirectory: String? = nil, beforeRead: (@Sendable () -> Void)? = nil) {
        self.init(indexPath: indexPath, changes: journalDirectory.map { .journal($0) } ?? .none, beforeRead: beforeRead)
    }

    package init(indexPath: String, changes: ChangeSource, beforeRead: (@Sendable () -> Void)? = nil) {
        self.indexPath = indexPath
        self.beforeRead = beforeRead
        switch changes {
        case .none:
            journalDirectory = nil
            state.withLock { $0.window = Window(coveredAfter: 0, readSeq: .max) }
        case .journal(let directory):
            journalDirectory = directory
        case .follower:
            // No window until the follower says where the index stands: streams wait.
            journalDirectory = nil
        }
    }

    /// The stream follower opened the index at `appliedSeq` (at start, or after the file was
    /// replaced by `nc reindex --from-stream`). The ring knows nothing of what was applied
    /// before: when that is not where the ring ends, it starts over there, and a stream
    /// behind it gets `event: refresh` rather than a silent gap.
    package func followerResumed(at appliedSeq: UInt64) {
        let moved = state.withLock { state -> Bool in
            if let window = state.window, window.readSeq == appliedSeq { return false }
            state.changes.removeAll(keepingCapacity: true)
            state.window = Window(coveredAfter: appliedSeq, readSeq: appliedSeq)
            return true
        }
        if moved { wakeStreams() }
    }

    /// The stream follower committed `records` to the index, which now stands at
    /// `appliedSeq`: their state changes join the ring and streams wake. Called after the
    /// commit, so a stream never reads a change the index has not applied.
    package func followerApplied(_ records: [JournalRecord], appliedSeq: UInt64) {
        followerApplied(records.map(FollowedRecord.init), appliedSeq: appliedSeq)
    }

    /// ``followerApplied(_:appliedSeq:)`` of the records the follower decoded.
    package func followerApplied(_ records: [FollowedRecord], appliedSeq: UInt64) {
        record(records.compactMap { Self.change($0) }, readSeq: appliedSeq)
        wakeStreams()
    }

    /// Drops `user`'s changes from the ring (an erasure applied on an inbox node): the ring
    /// must not keep naming someone the index no longer holds. The window stays as it is; a
    /// stream resuming there simply gets no changes of that user.
    package func forget(user: String) {
        state.withLock { state in state.changes.removeAll { IdBytes.equal($0.user, user) } }
    }

    /// What the ring covers; `nil` until it was seeded from the journal (streams wait).
    package var window: Window? { state.withLock { $0.window } }

    package var generation: UInt64 { state.withLock { $0.generation } }

    /// `user`'s changes with `after < seq <= upTo`, oldest first.
    package func changes(user: String, after: UInt64, upTo: UInt64) -> [Change] {
        state.withLock { state in
            // Newest last: walk back from the end to the first one past `after`.
            var result: [Change] = []
            for change in state.changes.reversed() {
                if change.seq <= after { break }
                if change.seq <= upTo, IdBytes.equal(change.user, user) { result.append(change) }
            }
            return result.reversed()
        }
    }

    /// Adds changes read up to `readSeq`; the oldest beyond the capacity leave the window.
    func record(_ new: [Change], readSeq: UInt64, coveredAfter: UInt64? = nil) {
        state.withLock { state in
            state.changes.append(contentsOf: new)
            var window = state.window ?? Window(coveredAfter: coveredAfter ?? 0, readSeq: 0)
            if let coveredAfter { window.coveredAfter = coveredAfter }
            if state.changes.count > Self.changeCapacity {
                let drop = state.changes.count - Self.changeCapacity
                window.coveredAfter = max(window.coveredAfter, state.changes[drop - 1].seq)
                state.changes.removeFirst(drop)
            }
            window.readSeq = max(window.readSeq, readSeq)
            state.window = window
        }
    }

    /// The inbox change a record is, if any. An event record is known by its body's
    /// `"kind": "event"`: records read back from the stream carry no journal key.
    static func change(_ record: JournalRecord) -> Change? { change(FollowedRecord(record)) }

    /// The inbox change a record decoded by the follower runtime is, if any: the index's
    /// rule (``InboxIndex/change(_:)``), the one that fills its `changes` table.
    static func change(_ record: FollowedRecord) -> Change? {
        InboxIndex.change(record).map { Change(seq: $0.seq, user: $0.user, item: $0.item, type: $0.type) }
    }

    /// Reads what the journal committed since the last call into the ring (seeding it first,
    /// from the newest segments back, up to ``changeCapacity`` changes); returns the window.
    /// Blocking file reads: call from the hub's thread or a worker thread.
    @discardableResult
    package func readJournal() -> Window? {
        guard let journalDirectory else { return window }
        beforeRead?()
        reading.withLock { reading in
            if reading.reader == nil {
                reading.reader = seed(journalDirectory)
                guard reading.reader != nil else { return }
            }
            guard let reader = reading.reader else { return }
            var changes: [Change] = []
            var last: UInt64 = 0
            while let record = try? reader.next() {
                last = record.seq
                if let change = Self.change(record) { changes.append(change) }
            }
            if last > 0 || !changes.isEmpty { record(changes, readSeq: last) }
        }
        return window
    }

    /// Fills the ring from the newest segments back (at most ``seedSegments``); returns the
    /// reader positioned after the last committed record, or `nil` when the journal cannot be
    /// read yet.
    private func seed(_ directory: String) -> JournalReader? {
        guard let names = try? RealFileSystem().listDirectory(directory) else { return nil }
        let firstSeqs = names.compactMap(JournalFiles.firstSeq(ofSegment:)).sorted()
        var collected: [[Change]] = []
        var count = 0
        var coveredAfter = firstSeqs.first.map { $0 - min($0, 1) } ?? 0
        var liveReader: JournalReader?
        var readSeq: UInt64 = 0
        for (position, first) in firstSeqs.enumerated().reversed() {
            let end = position + 1 < firstSeqs.count ? firstSeqs[position + 1] : UInt64.max
            guard let reader = try? JournalReader(directory: directory, fromSeq: first) else { return nil }
            var changes: [Change] = []
            while let record = try? reader.next(), record.seq < end {
                if end == .max { readSeq = record.seq }
                if let change = Self.change(record) { changes.append(change) }
                if record.seq == end - 1 { break }
            }
            if end == .max {
                liveReader = reader
                if readSeq == 0 { readSeq = first - min(first, 1) }
            }
            collected.insert(changes, at: 0)
            count += changes.count
            if count >= Self.changeCapacity || firstSeqs.count - position >= Self.seedSegments {
                coveredAfter = first - min(first, 1)
                break
            }
        }
        if liveReader == nil { liveReader = try? JournalReader(directory: directory, fromSeq: 1) }
        guard let liveReader else { return nil }
        record(collected.flatMap { $0 }, readSeq: readSeq, coveredAfter: coveredAfter)
        return liveReader
    }

    package var isStopping: Bool { state.withLock { $0.stopping } }
    package var openStreams: Int { state.withLock { $0.open } }

    /// Called when a stream opens or closes (the status reporter's count of streams).
    package let onStreamsChanged = CallbackSlot<Void>()

    func opened() {
        state.withLock { $0.open += 1 }
        onStreamsChanged()
    }

    func closedStream(_ stream: EventStream) {
        state.withLock {
            $0.open -= 1
            $0.suspended[ObjectIdentifier(stream)] = nil
        }
        onStreamsChanged()
    }

    /// Suspends `connection` and remembers it, under the lock so a wake-up cannot slip
    /// between the two — unless streams were woken since `generation` (`.changed`: the
    /// caller fills again) or the hub is stopping.
    func suspend(_ stream: EventStream, _ connection: OpaquePointer, ifGeneration generation: UInt64) -> SuspendOutcome {
        state.withLock {
            if $0.stopping { return .stopping }
            if $0.generation != generation { return .changed }
            HTTPServer.suspend(connection)
            $0.suspended[ObjectIdentifier(stream)] = Int(bitPattern: connection)
            return .suspended
        }
    }

    /// Resumes `stream`'s connection if it is suspended (its client hung up).
    func wake(_ stream: EventStream) {
        state.withLock {
            if let address = $0.suspended.removeValue(forKey: ObjectIdentifier(stream)), let connection = OpaquePointer(bitPattern: address) {
                HTTPServer.resume(connection)
            }
        }
    }

    /// Resumes every suspended stream (they fill again).
    package func wakeStreams() {
        state.withLock {
            $0.generation &+= 1
            for (_, address) in $0.suspended { if let connection = OpaquePointer(bitPattern: address) { HTTPServer.resume(connection) } }
            $0.suspended.removeAll(keepingCapacity: true)
        }
    }

    /// Ends every stream (they return end-of-stream once resumed). Call before
    /// ``HTTPServer/stop()``.
    package func shutdown() {
        state.withLock { $0.stopping = true }
        wakeStreams()
    }

    /// What the hub's thread watches in the index's directory: entries created, renamed or
    /// removed (a replaced index, a new `APPLIED`). Not writes: a directory watch with
    /// `IN_MODIFY` woke the thread for every write to `index.sqlite-wal`, three or more per
    /// commit, only to throw the events away.
    static let directoryMask = UInt32(IN_CREATE) | UInt32(IN_MOVED_TO) | UInt32(IN_MOVED_FROM) | UInt32(IN_DELETE)
        | UInt32(IN_DELETE_SELF) | UInt32(IN_MOVE_SELF) | UInt32(IN_ONLYDIR)
    /// `APPLIED` itself, rewritten in place after each commit: one event when the writer closes it.
    static let appliedMask = UInt32(IN_CLOSE_WRITE)

    /// Whether an event can mean new data for streams: `APPLIED` rewritten (its own watch,
    /// `appliedWatch`), created or replaced, the index file itself replaced, or a watch in
    /// trouble.
    static func matters(_ event: Inotify.Event, indexName: String, appliedWatch: Int32?) -> Bool {
        if event.overflow || event.watchLost || event.mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF) != 0 { return true }
        if let appliedWatch, event.watch == appliedWatch { return true }
        guard let name = event.nameText else { return false }
        let entryChanged = event.mask & (UInt32(IN_CREATE) | UInt32(IN_MOVED_TO) | UInt32(IN_DELETE) | UInt32(IN_MOVED_FROM)) != 0
        return entryChanged && (name == "APPLIED" || name == indexName)
    }

    /// Starts the hub's thread (a dedicated thread, off the cooperative pool) until
    /// ``shutdown()``.
    package func start() {
        let hub = self
        do {
            try PosixThread.detach(name: "sse-hub") { hub.run() }
        } catch {
            preconditionFailure("cannot start the sse-hub thread: \(error)")
        }
    }

    private func run() {
        let appliedPath = InboxIndex.appliedMarkPath(indexPath: indexPath)
        let directory = String(appliedPath.dropLast("/APPLIED".count))
        let indexName = String(indexPath.split(separator: "/").last ?? "")
        let handle = InboxIndexHandle(path: indexPath, readOnly: true)
        var inotify: Int32 = -1
        var watching = false
        var directoryWatch: Int32?
        /// The watch on `APPLIED` itself; `nil` until the file exists (the directory's watch
        /// sees it created) or after the kernel dropped it (the file was replaced).
        var appliedWatch: Int32?
        defer { if inotify >= 0 { Posix.close(inotify) } }
        var lastApplied: UInt64?
        var lastTimed: Int64?
        var lastRead: UInt64?
        var lastGeneration = handle.generation
        var lastWake = Posix.monotonicNanos()
        while !isStopping {
            if inotify < 0 { inotify = (try? Inotify.initialize()) ?? -1 }
            if inotify >= 0, !watching {
                // Before reading: a commit between the read and the watch would be missed.
                directoryWatch = try? Inotify.addWatch(inotify, path: directory, mask: Self.directoryMask)
                watching = directoryWatch != nil
            }
            if watching, appliedWatch == nil {
                appliedWatch = try? Inotify.addWatch(inotify, path: appliedPath, mask: Self.appliedMask)
            }
            let window = readJournal()
            let applied = try? handle.current().appliedSeq()
            if applied == nil { handle.close() }
            // A timed transition (an expiry, a snooze's end) rewrites APPLIED without a new seq.
            let timed = applied == nil ? nil : try? handle.current().lastTimedChange()
            let now = Posix.monotonicNanos()
            if applied != lastApplied || timed != lastTimed || window?.readSeq != lastRead || handle.generation != lastGeneration
                || now &- lastWake >= Self.keepAliveNanos {
                lastApplied = applied
                lastTimed = timed
                lastRead = window?.readSeq
                lastGeneration = handle.generation
                lastWake = now
                wakeStreams()
            }
            // Sleep until the directory changes or the next keep-alive; without a watch (the
            // directory is not there yet, or inotify is out of instances) look again in 1 s.
            guard inotify >= 0, watching else {
                usleep(1_000_000)
                continue
            }
            let deadline = lastWake &+ Self.keepAliveNanos
            waiting: while !isStopping {
                let left = deadline > Posix.monotonicNanos() ? deadline - Posix.monotonicNanos() : 0
                var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0)]
                guard let ready = try? Posix.poll(&fds, timeoutMillis: Int32(clamping: left / 1_000_000 + 1)), ready > 0 else { break }
                inotifyWakeups.add(1, ordering: .relaxed)
                let events = (try? Inotify.readEvents(inotify)) ?? []
                var relevant = false
                for event in events where Self.matters(event, indexName: indexName, appliedWatch: appliedWatch) {
                    relevant = true
                    let gone = event.watchLost || event.mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF) != 0
                    if event.watch == appliedWatch, gone { appliedWatch = nil }
                    // APPLIED made anew (another inode): watch the new file, at the loop's top.
                    if event.watch == directoryWatch, event.nameText == "APPLIED" { appliedWatch = nil }
                    if event.watch == directoryWatch, gone {
                        // The directory went away or moved: start over with a new instance.
                        Posix.close(inotify)
                        inotify = -1
                        watching = false
                        directoryWatch = nil
                        appliedWatch = nil
                    }
                }
                if relevant { break waiting }
            }
        }
    }
}
