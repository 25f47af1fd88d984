@preconcurrency import Glibc
import PushConfig
import PushExport
import PushInbox
import PushJournal
import PushPayload
import PushSpool
import PushSystem
import Testing
import TestSupport
@testable import PushInboxMain
@testable import PushInboxServer
import PushModuleOptions

/// The live stream's feed without HTTP: a real journal, an index applying it and a hub reading
/// it, with the streams filled at moments the test chooses.
@Suite struct EventHubTests {
    final class Setup {
        let temp: TempDir
        let writer: JournalWriter
        var state: String { temp.appending("state") }
        var journal: String { state + "/journal" }
        var indexPath: String { InboxIndex.path(stateDirectory: state) }
        private var counter = 0

        init(_ label: String = #function, segmentBytes: Int64? = nil) throws {
            temp = TempDir(label)
            try Posix.mkdirs(temp.appending("state/journal"))
            var options = JournalOptions(settings: Configuration().journal)
            if let segmentBytes { options.segmentBytes = segmentBytes }
            writer = try JournalWriter.open(directory: temp.appending("state/journal"), options: options).0
        }

        deinit { try? writer.close() }

        func append(_ body: JSONObject, key: String) async throws -> UInt64 {
            let result = await writer.append(key: key, body: JSONValue.object(body).serialized(), ingestMillis: Posix.wallClockMillis())
            guard case .committed(let seq) = result else { throw SetupError(description: "append: \(result)") }
            return seq
        }

        func notification(_ title: String) async throws -> UInt64 {
            counter += 1
            return try await append(["vendor": .string("mindbox"), "id": .string("n\(counter)"), "user": .string("alice"),
                                     "title": .string(title), "buttons": .array([])], key: "n\(counter)")
        }

        func event(_ type: String, item: UInt64) async throws -> UInt64 {
            counter += 1
            return try await append(["kind": .string("event"), "type": .string(type), "eventId": .string("e\(counter)"),
                                     "user": .string("alice"), "item": .integer(item)], key: "event:e\(counter)")
        }

        func api(_ hub: EventHub, events: (any EventSink)? = nil) -> InboxAPI {
            InboxAPI(settings: .init(indexPath: indexPath, mediaDirectory: state + "/media", spool: SpoolLayout(root: temp.appending("spool")),
                                     retention: nil, journalDirectory: journal, events: events),
                     auth: TokenAuth(secret: Array("a-secret-of-some-length".utf8)), hub: hub, stats: ServerStats())
        }
    }

    struct SetupError: Error { var description: String }

    /// The events in a stream's pending bytes: (id, event).
    static func events(_ stream: EventStream) -> [(id: UInt64, event: String)] {
        String(decoding: stream.pending, as: UTF8.self).components(separatedBy: "\n\n").compactMap { block in
            var id: UInt64?, event: String?
            for line in block.split(separator: "\n") {
                if line.hasPrefix("id: ") { id = UInt64(line.dropFirst(4)) }
                if line.hasPrefix("event: ") { event = String(line.dropFirst(7)) }
            }
            guard let id, let event else { return nil }
            return (id, event)
        }
    }

    /// 20 streams, 300 state changes, the index applying them now and then and the streams
    /// filled at other moments: each stream reads the index by seq (items and the `changes`
    /// log), so it gets every change in order, whenever it reads.
    @Test func everyStreamGetsEveryStateChangeInOrderFromTheIndex() async throws {
        let setup = try Setup()
        var items: [UInt64] = []
        for i in 0..<10 { items.append(try await setup.notification("n\(i)")) }
        let index = try InboxIndex(path: setup.indexPath)
        try index.catchUp(journalDirectory: setup.journal)
        let hub = EventHub(indexPath: setup.indexPath, journalDirectory: setup.journal)
        let api = setup.api(hub)
        let streams = (0..<20).map { _ in EventStream(owner: .user("alice"), lastSeq: items.last!, feed: api, hub: hub) }
        var expected: [UInt64] = []
        let types = ["nc.seen", "nc.read", "nc.archive", "nc.action", "nc.inapp-shown"]
        for round in 0..<300 {
            expected.append(try await setup.event(types[round % types.count], item: items[round % items.count]))
            if round % 3 == 2 { try index.catchUp(journalDirectory: setup.journal) }
            for (n, stream) in streams.enumerated() where (n + round) % 4 == 0 { api.fill(stream) }
        }
        try index.catchUp(journalDirectory: setup.journal)
        for stream in streams {
            api.fill(stream)
            api.fill(stream)
            let states = Self.events(stream).filter { $0.event == "state" }.map(\.id)
            #expect(states == expected, "missed \(expected.count - Set(states).count) of \(expected.count)")
            #expect(stream.lastSeq == expected.last)
        }
    }

    /// A position older than the index's `changes` log reaches back (pruned) gets one
    /// `event: refresh` (refetch), then the stream goes on from there.
    @Test func aPositionBeforeTheLogGetsOneRefresh() async throws {
        let setup = try Setup()
        let item = try await setup.notification("x")
        var changes: [UInt64] = []
        for type in ["nc.seen", "nc.read", "nc.archive", "nc.unarchive"] { changes.append(try await setup.event(type, item: item)) }
        let index = try InboxIndex(path: setup.indexPath)
        index.changesKept = 2
        try index.catchUp(journalDirectory: setup.journal, batchSize: 1)
        #expect(try index.changesCoveredAfter() == changes[1])
        let hub = EventHub(indexPath: setup.indexPath, journalDirectory: setup.journal)
        let api = setup.api(hub)
        let stream = EventStream(owner: .user("alice"), lastSeq: item, feed: api, hub: hub)
        api.fill(stream)
        api.fill(stream)
        #expect(Self.events(stream).map(\.event).filter { $0 != "counts" } == ["refresh"])
        #expect(Self.events(stream).first { $0.event == "refresh" }?.id == changes.last)
        #expect(String(decoding: stream.pending, as: UTF8.self).contains("event: refresh\ndata: {\"type\":\"resync\"}"))
        #expect(stream.lastSeq == changes.last)
        // Within the log: its changes, one by one.
        let more = try await setup.event("nc.read", item: item)
        try index.catchUp(journalDirectory: setup.journal)
        api.fill(stream)
        #expect(Self.events(stream).filter { $0.event == "state" }.map(\.id) == [more])
        #expect(Self.events(stream).filter { $0.event == "refresh" }.count == 1)
        // A stream within the log (it keeps two: it starts after changes[2] now) is told every
        // change after its position.
        #expect(try index.changesCoveredAfter() == changes[2])
        let inside = EventStream(owner: .user("alice"), lastSeq: changes[2], feed: api, hub: hub)
        api.fill(inside)
        #expect(Self.events(inside).filter { $0.event == "state" }.map(\.id) == [changes[3], more])
    }

    /// The hub's thread wakes for `APPLIED` and a replaced index, not for the writes to the
    /// index's WAL that every commit makes (a directory watch with `IN_MODIFY` woke it three
    /// or more times a commit to discard the events).
    @Test func theHubSleepsThroughWritesToTheWAL() async throws {
        let setup = try Setup()
        _ = try await setup.notification("x")
        let index = try InboxIndex(path: setup.indexPath)
        try index.catchUp(journalDirectory: setup.journal)
        let hub = EventHub(indexPath: setup.indexPath, journalDirectory: setup.journal)
        hub.start()
        defer {
            hub.shutdown()
            hub.join()
        }
        let settle = { (what: String) throws in
            let deadline = Posix.monotonicNanos() + 5_000_000_000
            var seen = hub.wakeups
            while Posix.monotonicNanos() < deadline {
                // why: the measuring window: 100 ms without a wake-up is what "asleep" means
                // here; no event can report an absence of wake-ups (after the WAL writes, the
                // absence is what the test checks).
                usleep(100_000)
                let now = hub.wakeups
                if now == seen { return }
                seen = now
            }
            throw SetupError(description: "the hub kept waking: \(what)")
        }
        try settle("after start")
        let before = hub.wakeups
        let wal = setup.indexPath + "-wal"
        let fd = try Posix.open(wal, O_WRONLY | O_CREAT | O_APPEND, mode: 0o644)
        for _ in 0..<50 {
            try Posix.writeAll(fd, [UInt8](repeating: 7, count: 64), subject: "wal")
        }
        Posix.close(fd)
        try settle("after WAL writes")
        #expect(hub.wakeups == before, "writes to \(wal) woke the hub \(hub.wakeups - before) times")

        // A commit rewrites APPLIED: that wakes it.
        _ = try await setup.notification("y")
        try index.catchUp(journalDirectory: setup.journal)
        try settle("after a commit")
        #expect(hub.wakeups > before)
    }

    /// The hub's stop ends its thread at once: its poll wakes on the stop, not on a timeout,
    /// and ``EventHub/join()`` waits for it (no sleep).
    @Test func aStoppedHubsThreadEndsAndIsJoined() async throws {
        let setup = try Setup()
        _ = try await setup.notification("x")
        try InboxIndex(path: setup.indexPath).catchUp(journalDirectory: setup.journal)
        let hub = EventHub(indexPath: setup.indexPath, journalDirectory: setup.journal)
        hub.start()
        let started = Posix.monotonicNanos()
        hub.shutdown()
        hub.join()
        // Far below the 15 s keep-alive the poll would otherwise wait out.
        #expect(Posix.monotonicNanos() - started < 5_000_000_000)
        hub.join()  // a second join returns at once
    }

    /// `Last-Event-ID` resumes over the index's `changes` log: the changes after the id, in
    /// order, and nothing before it, from a hub that just started (no journal read).
    @Test func aResumedStreamGetsTheChangesAfterItsIdFromTheIndex() async throws {
        let setup = try Setup()
        let item = try await setup.notification("x")
        var events: [UInt64] = []
        for n in 0..<12 { events.append(try await setup.event(n % 2 == 0 ? "nc.seen" : "nc.read", item: item)) }
        try InboxIndex(path: setup.indexPath).catchUp(journalDirectory: setup.journal)
        let hub = EventHub(indexPath: setup.indexPath, journalDirectory: setup.journal)
        let api = setup.api(hub)
        let token = TokenAuth(secret: Array("a-secret-of-some-length".utf8)).token(user: "alice")
        let resumeAt = events[7]
        let response = api.handle(HTTPRequest(method: "GET", path: "/v1/inbox/stream", headers: [
            "authorization": "Bearer " + token, "x-pushspool-user": "alice", "last-event-id": String(resumeAt),
        ]))
        guard case .stream(let stream) = response.body else { Issue.record("no stream: \(response.status)"); return }
        api.fill(stream)
        #expect(Self.events(stream).filter { $0.event == "state" }.map(\.id) == events.filter { $0 > resumeAt })
        #expect(!Self.events(stream).contains { $0.event == "refresh" })
        #expect(stream.lastSeq == events.last)
    }

    /// `[Inbox] Source=nats`: the stream follower applies records without journal keys,
    /// numbered by stream seq, through the same ``InboxIndex/apply(_:)``, and tells the hub
    /// (``EventHub/indexApplied()``); streams read the index's `changes` as on a journal node.
    @Test func aStreamFollowersIndexTellsStreamsOfStateChanges() throws {
        let setup = try Setup()
        let index = try InboxIndex(path: setup.indexPath)
        func record(_ seq: UInt64, _ body: JSONObject) -> JournalRecord {
            JournalRecord(seq: seq, ingestMillis: Posix.wallClockMillis(), key: "", body: JSONValue.object(body).serialized(), segment: "", offset: 0)
        }
        func event(_ seq: UInt64, _ type: String, user: String, item: UInt64) -> JournalRecord {
            record(seq, ["kind": .string("event"), "type": .string(type), "eventId": .string("e\(seq)"), "user": .string(user),
                         "item": .integer(item)])
        }
        try index.apply((1...3).map {
            record($0, ["vendor": .string("mindbox"), "id": .string("s\($0)"), "user": .string("alice"), "title": .string("t"),
                        "buttons": .array([])])
        })
        let hub = EventHub(indexPath: setup.indexPath, changes: .follower)
        let api = setup.api(hub)
        let stream = EventStream(owner: .user("alice"), lastSeq: 3, feed: api, hub: hub)
        let generation = hub.generation
        try index.apply([event(4, "nc.read", user: "alice", item: 2), event(5, "nc.seen", user: "bob", item: 1)])
        hub.indexApplied()
        #expect(hub.generation != generation, "suspended streams woke")
        api.fill(stream)
        #expect(Self.events(stream).filter { $0.event == "state" }.map(\.id) == [4])
        #expect(stream.lastSeq == 5)
        // An index started over past the stream's position (nc reindex --from-stream at a
        // later seq): one refresh, not a silent gap.
        let replaced = try InboxIndex(path: setup.temp.appending("replaced.sqlite"))
        try replaced.startAfter(9)
        #expect(try replaced.changesCoveredAfter() == 9)
    }

    /// Where a state change goes on a `Source=nats` node: to the stream through the sink,
    /// not into the spool. When NATS is out of reach: 503 `stream_unavailable` with
    /// Retry-After, one line in the log for the outage, and the Idempotency-Key free again,
    /// so the same request retried later is accepted.
    @Test func eventsGoToTheSinkAnd503WithRetryAfterWhenNATSIsAway() async throws {
        final class Switched: EventSink, Sendable {
            let down: StreamEventSink
            let up = Locked(false)
            let accepted = Locked<[PushEvent]>([])
            init(_ down: StreamEventSink) { self.down = down }
            func accept(_ event: PushEvent, fingerprint: String?) -> EventSinkFailure? {
                guard up.withLock({ $0 }) else { return down.accept(event, fingerprint: fingerprint) }
                accepted.withLock { $0.append(event) }
                return nil
            }
        }
        var settings = ExportSettings()
        settings.urls = ["nats://127.0.0.1:\(try NatsServer.freePort())"]
        let logged = Locked<[String]>([])
        let publisher = try EventPublisher(options: ExportOptions(settings: settings, stateDirectory: "/tmp", instance: nil))
        let sink = Switched(StreamEventSink(publisher: publisher) { line in logged.withLock { $0.append(line) } })
        let setup = try Setup()
        let item = try await setup.notification("x")
        try InboxIndex(path: setup.indexPath).catchUp(journalDirectory: setup.journal)
        let api = setup.api(EventHub(indexPath: setup.indexPath, changes: .follower), events: sink)
        let token = TokenAuth(secret: Array("a-secret-of-some-length".utf8)).token(user: "alice")
        func post(key: String) -> (HTTPResponse, JSONValue?) {
            let response = api.handle(HTTPRequest(method: "POST", path: "/v1/inbox/\(item)/read",
                                                  headers: ["authorization": "Bearer \(token)", "x-pushspool-user": "alice",
                                                            "idempotency-key": key]))
            guard case .bytes(let body) = response.body else { return (response, nil) }
            return (response, try? JSONParser().parse(body))
        }
        for _ in 0..<2 {
            let (refused, json) = post(key: "k1")
            #expect(refused.status == 503)
            #expect(refused.headers.contains { $0 == ("Retry-After", "5") })
            #expect(json?["error"] == .string("stream_unavailable"))
            #expect(json?["message"]?.stringValue?.contains("out of reach") == true)
        }
        #expect(logged.withLock { $0.count } == 1, "one line for the outage: \(logged.withLock { $0 })")
        #expect(((try? RealFileSystem().listDirectory(setup.temp.appending("spool/incoming"))) ?? []).isEmpty, "nothing in the spool")

        sink.up.withLock { $0 = true }
        let (accepted, json) = post(key: "k1")
        #expect(accepted.status == 202, "the key was freed by the refusals")
        let events = sink.accepted.withLock { $0 }
        #expect(events.map(\.type) == [.read] && events.first?.item == item)
        #expect(json?["eventId"]?.stringValue == events.first?.eventId)
        #expect(((try? RealFileSystem().listDirectory(setup.temp.appending("spool/incoming"))) ?? []).isEmpty, "nothing in the spool")
    }
}
