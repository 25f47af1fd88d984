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

/// Wakes suspended streams when the index applied more, without a timer: the one source of a
/// stream's events is the index (items, counts, and the `changes` log of state changes its
/// writer keeps in the same transaction as each change, InboxChanges.swift), read by seq on
/// the stream's own worker thread. The hub only tells streams *when* to read:
///
/// - in-process, ``indexApplied()``: the index's `Source=nats` follower committed a batch;
/// - across processes, the applied-seq signal (`APPLIED` beside the index, rewritten by the
///   writer after each commit, InboxIndex.swift): the hub's thread blocks in poll(2) on
///   inotify on the index's directory and wakes when `APPLIED` is rewritten or created, when
///   the index file is replaced, or when a keep-alive is due (15 s).
///
/// Journal and `Source=nats` nodes take the same path: there is no copy of the changes here
/// to reconcile with the index. An idle server does not wake it but for the keep-alives.
///
/// `Sendable`: state behind a lock; the stop pipe's fds are fixed at init.
package final class EventHub: Sendable {
    static let keepAliveNanos: UInt64 = 15_000_000_000

    package enum SuspendOutcome: Sendable, Equatable {
        case suspended
        /// The hub woke streams since the caller's generation: fill again instead.
        case changed
        case stopping
    }

    private struct State {
        /// Bumped each time streams are woken: a stream that filled before a wake-up and
        /// suspends after it fills again instead (no lost wake-up).
        var generation: UInt64 = 0
        // Connection addresses (Int bit patterns: pointers are not Sendable). A suspended
        // connection is never freed by libmicrohttpd until resumed, so the address stays valid.
        var suspended: [ObjectIdentifier: Int] = [:]
        var stopping = false
        var open = 0
        /// The hub's thread, until ``join()`` took it.
        var thread: pthread_t?
    }

    private let state = Locked(State())
    private let indexPath: String
    private let source: ChangeSource
    /// Rung by ``shutdown()`` to end the thread's poll at once (no sleep, no timeout to wait out).
    private let stopPipe: (read: Int32, write: Int32)?
    private let inotifyWakeups = Atomic<Int>(0)
    /// How often the hub's thread woke for inotify events, relevant or not (tests).
    package var wakeups: Int { inotifyWakeups.load(ordering: .relaxed) }

    /// Whose seqs the index holds, for telling a `Last-Event-ID` of another journal from one
    /// the index has not reached yet. `Sendable` value.
    package enum ChangeSource: Sendable {
        /// Nobody's: an id is never taken for another journal's.
        case none
        /// This journal directory's (pushspoold's index).
        case journal(String)
        /// The export stream's, applied by the index's stream follower (`[Inbox] Source=nats`),
        /// which calls ``indexApplied()`` after each commit.
        case follower
    }

    /// `journalDirectory`: the journal the index follows; `nil` = ids are never taken for
    /// another journal's.
    package convenience init(indexPath: String, journalDirectory: String? = nil) {
        self.init(indexPath: indexPath, changes: journalDirectory.map { .journal($0) } ?? .none)
    }

    package init(indexPath: String, changes: ChangeSource) {
        self.indexPath = indexPath
        source = changes
        stopPipe = try? Posix.selfPipe()
    }

    deinit {
        if let stopPipe {
            Posix.close(stopPipe.read)
            Posix.close(stopPipe.write)
        }
    }

    /// The last seq of the journal the index follows (``ChangeSource``): a `Last-Event-ID`
    /// past both it and the index's applied seq is another journal's. `.max` when ids are
    /// never another's; `nil` when unknown (then the applied seq decides).
    package func journalLastSeq() -> UInt64? {
        switch source {
        case .none: .max
        case .journal(let directory): (try? JournalReader.lastSeq(directory: directory)) ?? nil
        case .follower: nil
        }
    }

    /// The state change a stream reports for a record: the index's rule
    /// (``InboxIndex/change(_:)``), which fills the `changes` log streams read.
    static func change(_ record: FollowedRecord) -> InboxIndex.Change? { InboxIndex.change(record) }

    /// The index committed more (the in-process signal: the stream follower's commit, an
    /// erasure, the index replaced): streams read it now.
    package func indexApplied() { wakeStreams() }

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

    package var generation: UInt64 { state.withLock { $0.generation } }

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

    /// Ends every stream (they return end-of-stream once resumed) and the hub's thread (its
    /// poll returns at once). Call before ``HTTPServer/stop()``; ``join()`` after.
    package func shutdown() {
        state.withLock { $0.stopping = true }
        if let stopPipe {
            var byte: UInt8 = 1
            _ = Glibc.write(stopPipe.write, &byte, 1)
        }
        wakeStreams()
    }

    /// Waits for the hub's thread to end, stopping the hub first if ``shutdown()`` was not
    /// called (a join must not wait for ever); returns at once when it was not started or
    /// already joined.
    package func join() {
        if !isStopping { shutdown() }
        guard let thread = state.withLock({ state -> pthread_t? in
            defer { state.thread = nil }
            return state.thread
        }) else { return }
        pthread_join(thread, nil)
    }

    /// The applied-seq signal's watch masks (PushFollow's ``AppliedSignal``).
    static let directoryMask = AppliedSignal.directoryMask
    static let appliedMask = AppliedSignal.markMask

    /// Whether an event can mean new data for streams (``AppliedSignal/matters(_:markName:stateName:markWatch:)``).
    static func matters(_ event: Inotify.Event, indexName: String, appliedWatch: Int32?) -> Bool {
        AppliedSignal.matters(event, markName: "APPLIED", stateName: indexName, markWatch: appliedWatch)
    }

    /// Starts the hub's thread (a named, joinable thread, off the cooperative pool) until
    /// ``shutdown()``.
    package func start() {
        let hub = self
        do {
            let thread = try PosixThread.spawn(name: "sse-hub") { hub.run() }
            state.withLock { $0.thread = thread }
        } catch {
            preconditionFailure("cannot start the sse-hub thread: \(error)")
        }
    }

    /// What a look at the files says when no watch can be had (``run()``'s fallback): the
    /// index file's inode and `APPLIED`'s change time. `Sendable` value.
    private struct Marks: Equatable {
        var index: UInt64?
        var applied: Int64?
    }

    private func marks(appliedPath: String) -> Marks {
        var st = stat()
        let index = stat(indexPath, &st) == 0 ? UInt64(st.st_ino) : nil
        let applied = stat(appliedPath, &st) == 0 ? Int64(st.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_mtim.tv_nsec) : nil
        return Marks(index: index, applied: applied)
    }

    /// Waits until the stop pipe is readable or `millis` passed; whether the stop came.
    private func waitForStop(millis: Int32) -> Bool {
        guard let stopPipe else {
            usleep(UInt32(clamping: Int(millis) * 1000))
            return isStopping
        }
        var fds = [pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0)]
        _ = try? Posix.poll(&fds, timeoutMillis: millis)
        return isStopping
    }

    private func run() {
        let appliedPath = InboxIndex.appliedMarkPath(indexPath: indexPath)
        let directory = String(appliedPath.dropLast("/APPLIED".count))
        let indexName = String(indexPath.split(separator: "/").last ?? "")
        var inotify: Int32 = -1
        var watching = false
        var directoryWatch: Int32?
        /// The watch on `APPLIED` itself; `nil` until the file exists (the directory's watch
        /// sees it created) or after the kernel dropped it (the file was replaced).
        var appliedWatch: Int32?
        defer { if inotify >= 0 { Posix.close(inotify) } }
        var lastWake = Posix.monotonicNanos()
        var lastMarks: Marks?
        while !isStopping {
            if inotify < 0 { inotify = (try? Inotify.initialize()) ?? -1 }
            if inotify >= 0, !watching {
                directoryWatch = try? Inotify.addWatch(inotify, path: directory, mask: Self.directoryMask)
                watching = directoryWatch != nil
            }
            if watching, appliedWatch == nil {
                appliedWatch = try? Inotify.addWatch(inotify, path: appliedPath, mask: Self.appliedMask)
            }
            // The fallback where the kernel refuses a watch (the directory is not there yet,
            // or inotify is out of instances): look at the files once a second, and try the
            // watch again. Streams wake only when they changed or a keep-alive is due.
            guard inotify >= 0, watching else {
                let seen = marks(appliedPath: appliedPath)
                let now = Posix.monotonicNanos()
                if seen != lastMarks || now &- lastWake >= Self.keepAliveNanos {
                    lastMarks = seen
                    lastWake = now
                    wakeStreams()
                }
                if waitForStop(millis: 1000) { return }
                continue
            }
            // The watches are in place: whatever the index committed before them, streams
            // read now (a stream reads the index by seq, so an extra wake-up costs one read).
            lastMarks = nil
            lastWake = Posix.monotonicNanos()
            wakeStreams()
            let deadline = lastWake &+ Self.keepAliveNanos
            waiting: while !isStopping {
                let now = Posix.monotonicNanos()
                let left = deadline > now ? deadline - now : 0
                var fds = [pollfd(fd: inotify, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: stopPipe?.read ?? -1, events: Int16(POLLIN), revents: 0)]
                guard let ready = try? Posix.poll(&fds, timeoutMillis: Int32(clamping: left / 1_000_000 + 1)), ready > 0 else { break }
                if fds[1].revents != 0 { return }
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
