@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushSystem

/// The inbox index as derived data, through the real pushspoold, pushspool-inbox and
/// pushspoolctl: a damaged file never stops ingest, a replaced file is noticed by every
/// reader, and live streams lose no state change across restarts.
@Suite struct InboxIndexLifecycleTests {
    /// One Server-Sent Event: (id, event, data).
    static func events(_ text: String) -> [(id: String, event: String, data: String)] {
        text.replacingOccurrences(of: "\r\n", with: "\n").components(separatedBy: "\n\n").compactMap { block in
            var id: String?, event: String?, data: String?
            for line in block.split(separator: "\n") {
                if line.hasPrefix("id: ") { id = String(line.dropFirst(4)) }
                if line.hasPrefix("event: ") { event = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") { data = String(line.dropFirst(6)) }
            }
            guard let id, let event, let data else { return nil }
            return (id, event, data)
        }
    }

    /// Overwrites the start of the index with garbage and removes its -wal and -shm, as a
    /// disk fault or a stray write would leave it.
    static func damage(_ state: String) throws {
        let path = state + "/inbox/index.sqlite"
        let fd = open(path, O_WRONLY)
        guard fd >= 0 else { throw TimeoutError(description: "open \(path): errno \(errno)") }
        let garbage = [UInt8](repeating: 0x5a, count: 8192)
        _ = garbage.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        close(fd)
        unlink(path + "-wal")
        unlink(path + "-shm")
    }

    /// `count` parallel `GET /v1/inbox/counts` over up to 16 connections (so every worker
    /// thread answers some): the bodies, one a line.
    static func countsBurst(_ server: InboxServerHarness, count: Int = 64) throws -> [String] {
        var arguments = ["-s", "--parallel", "--parallel-immediate", "--parallel-max", "16"]
        for index in 0..<count {
            if index > 0 { arguments.append("--next") }
            arguments += ["-H", "X-Pushspool-User: alice", "-H", "Authorization: Bearer \(InboxServerHarness.token("alice"))",
                          "\(server.base)/v1/inbox/counts?n=\(index)"]
        }
        let result = try ProcessRunner.run("/usr/bin/curl", arguments)
        return result.stdout.split(separator: "\n").map(String.init)
    }

    @Test func aDamagedIndexNeverStopsIngestAndReindexRepairsAnyFile() throws {
        let metrics = NSTemporaryDirectory() + "pushspool-damaged-\(UUID().uuidString).prom"
        defer { unlink(metrics) }
        let server = try InboxServerHarness(name: "inbox-damaged", extraConfig: "[Metrics]\nIntervalSec=1s\nTextfilePath=\(metrics)\n")
        try server.push(user: "alice", title: "p1")
        try server.push(user: "alice", title: "p2")
        try waitUntil(timeout: 30, "two pushes indexed") { try server.counts().unread == 2 }
        #expect(server.daemon.stop() == 0)
        try Self.damage(server.daemon.state)

        // pushspoold starts anyway: the file is moved aside and rebuilt from the journal.
        try server.daemon.start()
        try waitUntil(timeout: 30, "the inboxIndexCorrupt event") {
            guard server.daemon.process?.isRunning == true else {
                throw TimeoutError(description: "pushspoold exited: \(server.daemon.daemonStderr)")
            }
            return server.daemon.daemonStderr.contains("EVENT=inboxIndexCorrupt")
        }
        let event = try #require(server.daemon.daemonStderr.split(separator: "\n").first { $0.contains("EVENT=inboxIndexCorrupt") })
        #expect(event.contains("INBOX_INDEX_MOVED_TO=\(server.daemon.state)/inbox/index.sqlite.corrupt-"))
        try server.push(user: "alice", title: "p3")
        // pushspool-inbox, which had the damaged file's predecessor open, follows the new one.
        try waitUntil(timeout: 30, "the rebuilt index with the new push") { try server.counts().unread == 3 }
        let inbox = try FileManager.default.contentsOfDirectory(atPath: server.daemon.state + "/inbox")
        #expect(inbox.filter { $0.hasPrefix("index.sqlite.corrupt-") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") }.count == 1,
                "\(inbox)")
        #expect(server.daemon.process?.isRunning == true)
        try waitUntil(timeout: 30, "the metric") {
            ((try? String(contentsOfFile: metrics, encoding: .utf8)) ?? "").contains("pushspool_inbox_index_corrupt_total 1\n")
        }
        #expect(try String(contentsOfFile: metrics, encoding: .utf8).contains("pushspool_inbox_index_rebuilding 0\n"))

        // `nc reindex` rebuilds whatever the file holds, without the daemon.
        #expect(server.daemon.stop() == 0)
        try Self.damage(server.daemon.state)
        let (status, out, err) = try server.daemon.ctl(["nc", "reindex"])
        #expect(status == 0, "\(out) \(err)")
        let (_, count, _) = try server.daemon.ctl(["nc", "count", "--user", "alice", "--json"])
        #expect(count.contains(#""unread":3"#), "\(count)")
        try server.daemon.start()
        try server.push(user: "alice", title: "p4")
        try waitUntil(timeout: 30, "the push after the reindex") { try server.counts().unread == 4 }
        #expect(server.daemon.daemonStderr.split(separator: "\n").filter { $0.contains("EVENT=inboxIndexCorrupt") }.isEmpty,
                "a reindexed file is not damaged")
    }

    @Test func everyReaderSeesAReplacedIndex() throws {
        let server = try InboxServerHarness(name: "inbox-replaced", arguments: ["--threads", "4"])
        for i in 1...3 { try server.push(user: "alice", title: "p\(i)") }
        try waitUntil(timeout: 30, "three pushes") { try server.counts().unread == 3 }
        // Every worker thread opens its connection to the current file.
        #expect(try Self.countsBurst(server).allSatisfy { $0 == #"{"unread":3,"unseen":3}"# })

        // Deleted under both processes: the daemon rebuilds it, pushspool-inbox follows.
        let path = server.daemon.state + "/inbox/index.sqlite"
        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
        try server.push(user: "alice", title: "p4")
        try waitUntil(timeout: 30, "the rebuilt index") { try server.counts().unread == 4 }
        let afterDelete = try Self.countsBurst(server)
        #expect(afterDelete.count == 64)
        #expect(afterDelete.allSatisfy { $0 == #"{"unread":4,"unseen":4}"# }, "\(Set(afterDelete))")
        // A new stream gets the next push from the new file.
        let stream = try StreamClient(server: server)
        defer { stream.close() }
        try waitUntil(timeout: 10, "the stream's first counts") { stream.text.contains("event: counts") }
        try server.push(user: "alice", title: "p5")
        try waitUntil(timeout: 10, "p5 on the stream") { stream.items.map(\.title) == ["p5"] }

        // Replaced by `nc reindex` (a rename) under both: the same.
        let (status, _, err) = try server.daemon.ctl(["nc", "reindex"])
        #expect(status == 0, "\(err)")
        try server.push(user: "alice", title: "p6")
        try waitUntil(timeout: 30, "p6 indexed") { try server.counts().unread == 6 }
        let afterReindex = try Self.countsBurst(server)
        #expect(afterReindex.allSatisfy { $0 == #"{"unread":6,"unseen":6}"# }, "\(Set(afterReindex))")
        try waitUntil(timeout: 10, "p6 on the stream") { stream.items.map(\.title) == ["p5", "p6"] }
    }

    @Test func aStreamResumedAfterARestartGetsTheStateChangesItMissed() throws {
        let server = try InboxServerHarness(name: "inbox-resume-restart")
        try server.push(user: "alice", title: "x")
        try server.push(user: "alice", title: "y")
        try waitUntil(timeout: 30, "the pushes") { try server.counts().unread == 2 }
        let ids = try server.items().compactMap { $0["item"]?.stringValue }
        let stream = try StreamClient(server: server)
        try waitUntil(timeout: 10, "the first counts") { stream.text.contains("event: counts") }
        let resumeFrom = try #require(stream.lastId)
        stream.close()

        // Disconnected: two state changes, then pushspool-inbox restarts.
        _ = try server.request("POST", "/v1/inbox/\(ids[0])/read")
        _ = try server.request("POST", "/v1/inbox/\(ids[1])/seen")
        try waitUntil(timeout: 30, "both applied") { try server.counts() == (0, 1) }
        try server.restart()
        let events = try server.daemon.records().filter { $0.key.hasPrefix("event:") }.map { String($0.seq) }
        #expect(events.count == 2)

        let resumed = try StreamClient(server: server, lastEventId: resumeFrom)
        defer { resumed.close() }
        try waitUntil(timeout: 30, "both state changes on the resumed stream") {
            Self.events(resumed.text).filter { $0.event == "state" }.count >= 2
        }
        let states = Self.events(resumed.text).filter { $0.event == "state" }
        #expect(states.map(\.id) == events)
        #expect(states.map { try? JSONParser().parse($0.data)["item"]?.stringValue } == [ids[0], ids[1]])

        // An id past the journal's end (another journal's) is told to refetch, not left silent.
        let stranger = try StreamClient(server: server, lastEventId: "999999")
        defer { stranger.close() }
        try waitUntil(timeout: 10, "the refresh") { stranger.text.contains("event: refresh") }
        #expect(stranger.text.contains(#"data: {"type":"resync"}"#))
    }

    /// Many streams and a burst of state changes through the real processes: each stream
    /// gets every change, once, in journal order (the hub wakes them on inotify, and a wake-up
    /// that comes while a stream fills is not lost).
    @Test func manyStreamsGetEveryStateChangeInOrder() throws {
        let server = try InboxServerHarness(name: "inbox-sse-burst", arguments: ["--threads", "4"])
        for i in 1...5 { try server.push(user: "alice", title: "p\(i)") }
        try waitUntil(timeout: 30, "the pushes") { try server.counts().unread == 5 }
        let ids = try server.items().compactMap { $0["item"]?.stringValue }
        let streams = try (0..<12).map { _ in try StreamClient(server: server) }
        defer { for stream in streams { stream.close() } }
        try waitUntil(timeout: 10, "every stream's first counts") { streams.allSatisfy { $0.text.contains("event: counts") } }
        // 150 POSTs from one curl over one connection, back to back.
        let total = 150
        var arguments = ["-s", "-o", "/dev/null", "-X", "POST", "-H", "X-Pushspool-User: alice",
                         "-H", "Authorization: Bearer \(InboxServerHarness.token("alice"))"]
        for n in 0..<total { arguments.append("\(server.base)/v1/inbox/\(ids[n % ids.count])/\(n % 2 == 0 ? "seen" : "read")") }
        _ = try ProcessRunner.run("/usr/bin/curl", arguments)
        try waitUntil(timeout: 60, "every change journaled") {
            try server.daemon.records().filter { $0.key.hasPrefix("event:") }.count == total
        }
        let expected = try server.daemon.records().filter { $0.key.hasPrefix("event:") }.map { String($0.seq) }
        try waitUntil(timeout: 60, "every change on every stream") {
            streams.allSatisfy { stream in Self.events(stream.text).filter { $0.event == "state" }.count >= total }
        }
        for stream in streams {
            #expect(Self.events(stream.text).filter { $0.event == "state" }.map(\.id) == expected)
        }
    }

    /// Voluntary and involuntary context switches of every thread of `pid` so far.
    static func contextSwitches(_ pid: Int32) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.reduce(0) { sum, task in
            let status = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)) ?? ""
            return sum + status.split(separator: "\n").filter { $0.hasSuffix("ctxt_switches") || $0.contains("ctxt_switches:") }
                .compactMap { Int($0.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") }.reduce(0, +)
        }
    }

    /// An idle pushspool-inbox with an open stream sleeps: no timer polls the index (it used to
    /// wake 50 times a second); the status thread's once-a-second STATUS= is what remains.
    @Test func anIdleServerDoesNotPoll() throws {
        let notify = try NotifySocket()
        let server = try InboxServerHarness(name: "inbox-idle", extraEnvironment: ["NOTIFY_SOCKET": notify.path])
        try server.push(user: "alice", title: "x")
        try waitUntil(timeout: 30, "the push") { try server.counts().unread == 1 }
        let stream = try StreamClient(server: server)
        defer { stream.close() }
        try waitUntil(timeout: 10, "the first counts") { stream.text.contains("event: counts") }
        // The status thread has reported the open stream: what the stream's start set in
        // motion is done, and the window below measures the idle server alone.
        try waitUntil(timeout: 10, "STATUS= counting the stream") {
            notify.messages.last { $0.contains("STATUS=") }?.contains(" 1 streams") == true
        }
        let pid = server.process.processIdentifier
        let before = Self.contextSwitches(pid)
        usleep(3_000_000) // why: the measuring window: context switches counted over 3 s idle
        let wakeups = Self.contextSwitches(pid) - before
        #expect(wakeups <= 12, "\(wakeups) context switches in 3 s")
        print("idle wake-ups in 3 s: \(wakeups)")
    }
}
