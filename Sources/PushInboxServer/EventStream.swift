@preconcurrency import Glibc
import PushInbox
import PushJournal
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
    /// The seq up to which the owner's items have been sent: the SSE `id:` of the last event.
    package var lastSeq: UInt64
    package var lastCounts: InboxCounts?
    /// Bytes not yet handed to libmicrohttpd.
    package var pending: [UInt8] = []
    private var offset = 0
    private var lastWriteNanos = Posix.monotonicNanos()
    var connection: OpaquePointer?
    private let feed: any EventFeed
    private let hub: EventHub
    /// The client hung up (``hungUp()``): the next read ends the response.
    private let gone = Atomic(false)

    init(owner: InboxOwner, lastSeq: UInt64, feed: any EventFeed, hub: EventHub) {
        self.owner = owner
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
            if hub.isStopping { return -1 }  // MHD_CONTENT_READER_END_OF_STREAM
            feed.fill(self)
            if pending.isEmpty, Posix.monotonicNanos() &- lastWriteNanos >= EventHub.keepAliveNanos {
                pending.append(contentsOf: ": keep-alive\n\n".utf8)
            }
            if pending.isEmpty {
                guard let connection, hub.suspend(self, connection) else { return -1 }
                // A hang-up between the check above and the suspension found nothing to resume.
                if gone.load(ordering: .acquiring) { hub.wake(self) }
                return 0
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

/// Wakes suspended streams: a thread polls the index's applied seq (its own read-only
/// connection) every `pollInterval` and resumes every suspended stream when it moved, or
/// when a keep-alive is due. Also counts open streams.
///
/// `Sendable`: state behind a lock.
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

    /// How many recent changes are kept for streams that catch up or resume.
    static let changeCapacity = 16_384

    private struct State {
        var changes: [Change] = []
        // Connection addresses (Int bit patterns: pointers are not Sendable). A suspended
        // connection is never freed by libmicrohttpd until resumed, so the address stays valid.
        var suspended: [ObjectIdentifier: Int] = [:]
        var stopping = false
        var open = 0
    }

    private let state = Locked(State())
    private let indexPath: String
    private let journalDirectory: String?
    private let pollInterval: Duration

    /// `journalDirectory`: where the poller reads event records from (read-only) to tell
    /// streams which items changed state; `nil` = counts only.
    package init(indexPath: String, journalDirectory: String? = nil, pollInterval: Duration = .milliseconds(20)) {
        self.indexPath = indexPath
        self.journalDirectory = journalDirectory
        self.pollInterval = pollInterval
    }

    /// `user`'s changes with `after < seq <= upTo`, oldest first.
    package func changes(user: String, after: UInt64, upTo: UInt64) -> [Change] {
        state.withLock { state in
            // Newest last: walk back from the end to the first one past `after`.
            var result: [Change] = []
            for change in state.changes.reversed() {
                if change.seq <= after { break }
                if change.seq <= upTo, change.user == user { result.append(change) }
            }
            return result.reversed()
        }
    }

    private func record(_ new: [Change]) {
        guard !new.isEmpty else { return }
        state.withLock {
            $0.changes.append(contentsOf: new)
            if $0.changes.count > Self.changeCapacity { $0.changes.removeFirst($0.changes.count - Self.changeCapacity) }
        }
    }

    private static let parser = JSONParser(maxDepth: 16)

    /// The inbox changes among the records `reader` has past its position (non-blocking).
    private static func readChanges(_ reader: JournalReader) -> [Change] {
        var changes: [Change] = []
        while let record = try? reader.next() {
            guard record.key.hasPrefix("event:"), let body = try? parser.parse(record.body),
                  let user = body["user"]?.stringValue, let type = body["type"]?.stringValue else { continue }
            let item = body["item"]?.numberLexeme.flatMap { UInt64($0) }
            switch type {
            case "nc.seen", "nc.read", "nc.open", "nc.archive", "nc.action", "nc.inapp-shown":
                if let item { changes.append(Change(seq: record.seq, user: user, item: item, type: type)) }
            case "nc.read-all", "nc.archive-read":
                changes.append(Change(seq: record.seq, user: user, item: nil, type: type))
            default:
                continue
            }
        }
        return changes
    }

    package var isStopping: Bool { state.withLock { $0.stopping } }
    package var openStreams: Int { state.withLock { $0.open } }

    func opened() { state.withLock { $0.open += 1 } }

    func closedStream(_ stream: EventStream) {
        state.withLock {
            $0.open -= 1
            $0.suspended[ObjectIdentifier(stream)] = nil
        }
    }

    /// Suspends `connection` and remembers it, under the lock so a wake-up cannot slip
    /// between the two. `false` when stopping (the stream should end).
    func suspend(_ stream: EventStream, _ connection: OpaquePointer) -> Bool {
        state.withLock {
            if $0.stopping { return false }
            HTTPServer.suspend(connection)
            $0.suspended[ObjectIdentifier(stream)] = Int(bitPattern: connection)
            return true
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

    private func resumeAll() {
        state.withLock {
            for (_, address) in $0.suspended { if let connection = OpaquePointer(bitPattern: address) { HTTPServer.resume(connection) } }
            $0.suspended.removeAll(keepingCapacity: true)
        }
    }

    /// Ends every stream (they return end-of-stream once resumed). Call before
    /// ``HTTPServer/stop()``.
    package func shutdown() {
        state.withLock { $0.stopping = true }
        resumeAll()
    }

    /// Runs the poller on a thread of its own until ``shutdown()``.
    package func startPolling() {
        let hub = self
        let thread = Thread {
            var index: InboxIndex?
            var reader: JournalReader?
            var lastApplied: UInt64 = 0
            var lastWake = Posix.monotonicNanos()
            let pollNanos = UInt64(clamping: max(1, hub.pollInterval.clampedNanoseconds))
            while !hub.isStopping {
                var ts = timespec(tv_sec: Int(pollNanos / 1_000_000_000), tv_nsec: Int(pollNanos % 1_000_000_000))
                nanosleep(&ts, nil)
                if index == nil { index = try? InboxIndex(path: hub.indexPath, readOnly: true) }
                let applied = (try? index?.appliedSeq()) ?? lastApplied
                if reader == nil, let directory = hub.journalDirectory, let index {
                    // From what the index has applied when the server starts: older changes are
                    // in the items' state already.
                    reader = try? JournalReader(directory: directory, fromSeq: ((try? index.appliedSeq()) ?? 0) + 1)
                }
                // Before waking the streams: a change they may see applied is in the list.
                if let reader { hub.record(Self.readChanges(reader)) }
                let now = Posix.monotonicNanos()
                if applied != lastApplied || now &- lastWake >= EventHub.keepAliveNanos {
                    lastApplied = applied
                    lastWake = now
                    hub.resumeAll()
                }
            }
        }
        thread.start()
    }
}
