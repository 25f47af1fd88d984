@preconcurrency import Glibc
import Testing
import PushExport
import PushFollow
import PushJournal
import PushSystem
import TestSupport
import PushConfig
import PushModuleOptions
import TestTraits

/// A state directory with a journal written by the real writer, and a real nats-server.
final class ExportFixture {
    let temp: TempDir
    let writer: JournalWriter
    let server: NatsServer
    var stateDirectory: String { temp.appending("state") }
    private var counter = 0

    init(_ label: String = #function) throws {
        temp = TempDir(label)
        try Posix.mkdirs(temp.appending("state/journal"))
        writer = try JournalWriter.open(directory: temp.appending("state/journal"), options: JournalOptions(settings: Configuration().journal)).0
        server = try NatsServer(storeDirectory: temp.appending("nats"))
    }

    deinit {
        try? writer.close()
        server.stop(signal: SIGKILL)
    }

    func options(stream: String = "PUSHTEST") -> ExportOptions {
        var options = ExportOptions(stateDirectory: stateDirectory, instance: nil)
        options.urls = [server.url]
        options.stream = stream
        options.hostId = "testhost"
        options.ackTimeout = .seconds(2)
        options.lagWarnRecords = 50
        return options
    }

    /// Appends `count` records with fresh keys `mindbox:rec-N`; returns their keys.
    @discardableResult
    func append(_ count: Int) async throws -> [String] {
        var keys: [String] = []
        for _ in 0..<count {
            counter += 1
            let key = "mindbox:rec-\(counter)"
            let result = await writer.append(key: key, body: Array(#"{"platform":"ios","n":\#(counter)}"#.utf8), ingestMillis: 1)
            guard case .committed = result else { throw NatsServerError(description: "append: \(result)") }
            keys.append(key)
        }
        return keys
    }

    /// Appends one record per key, as the journal holds them (records from before intake
    /// refused control characters included).
    func append(keys: [String]) async throws {
        for key in keys {
            counter += 1
            let result = await writer.append(key: key, body: Array(#"{"platform":"ios","n":\#(counter)}"#.utf8), ingestMillis: 1)
            guard case .committed = result else { throw NatsServerError(description: "append: \(result)") }
        }
    }

    func stored(stream: String = "PUSHTEST") throws -> [NatsClient.StoredMessage] {
        let client = try NatsClient(urls: [server.url], name: "test-reader")
        defer { client.close() }
        return try client.readStream(stream)
    }
}

func waitFor(_ what: String, timeout: Double = 30, _ condition: () throws -> Bool) throws {
    if try eventually(within: timeout, condition) { return }
    Issue.record("timed out after \(timeout) s waiting for \(what)")
    throw NatsServerError(description: "timeout: \(what)")
}

/// Against a real single-node JetStream on 127.0.0.1. Serialized: each test runs its own
/// nats-server, and the machine's cores are few.
@Suite(.serialized, .tags(.nats)) struct ExporterLiveTests {
    @Test func everyRecordIsExportedExactlyOnceEvenWhenTheCursorIsLost() async throws {
        let f = try ExportFixture()
        try f.server.start()
        let keys = try await f.append(500)
        let notices = NoticeLog()
        let exporter = try Exporter(options: f.options(), notify: { notices.add($0) })
        let exporterRunner = FollowerRunner(exporter, commits: f.writer.commits)
        try exporterRunner.start()
        try waitFor("all acknowledged") { exporter.status.acknowledgedSeq == 500 }
        exporterRunner.stop()
        #expect(try ExportCursor.read(stateDirectory: f.stateDirectory) == 500)
        #expect(exporter.acknowledgedSeq() == 500)
        var stored = try f.stored()
        #expect(stored.count == 500)
        #expect(Set(stored.map(\.msgId)) == Set(keys.map { "testhost:" + $0 }))
        #expect(stored.map(\.journalSeq) == (1...500).map { Optional(UInt64($0)) })
        #expect(Set(stored.map(\.subject)) == ["pushspool.mindbox.ios"])

        // Lose the cursor: the exporter sends everything again and the server drops it all.
        _ = unlink(f.stateDirectory + "/export/cursor")
        try await f.append(20)
        let again = try Exporter(options: f.options())
        #expect(again.acknowledgedSeq() == 0)
        let againRunner = FollowerRunner(again, commits: f.writer.commits)
        try againRunner.start()
        try waitFor("all acknowledged again") { again.status.acknowledgedSeq == 520 }
        againRunner.stop()
        stored = try f.stored()
        #expect(stored.count == 520)
        #expect(Set(stored.map(\.msgId)).count == 520)
    }

    @Test func natsDownLagGrowsThenExportCatchesUp() async throws {
        let f = try ExportFixture()
        try f.server.start()
        let notices = NoticeLog()
        let exporter = try Exporter(options: f.options(), notify: { notices.add($0) })
        let exporterRunner = FollowerRunner(exporter, commits: f.writer.commits)
        try exporterRunner.start()
        defer { exporterRunner.stop() }
        try await f.append(100)
        try waitFor("first batch") { exporter.status.acknowledgedSeq == 100 }

        f.server.stop()
        try await f.append(300)  // the journal takes records while NATS is away
        try waitFor("disconnected seen") { !exporter.status.connected }
        try waitFor("lag of the 300 unsent") { exporter.status.lag == 300 }
        let down = exporter.status
        #expect(down.acknowledgedSeq == 100)
        #expect(down.lag == 300)
        try waitFor("lag event") { notices.all.contains { if case .lagHigh = $0 { true } else { false } } }

        try f.server.start()
        try waitFor("caught up", timeout: 60) { exporter.status.acknowledgedSeq == 400 }
        try waitFor("lag recovered event") { notices.all.contains { if case .lagRecovered = $0 { true } else { false } } }
        let stored = try f.stored()
        #expect(stored.count == 400)
        #expect(Set(stored.map(\.msgId)).count == 400)
    }

    @Test func startsWithNatsAbsentAndExportsWhenItArrives() async throws {
        let f = try ExportFixture()
        try await f.append(50)
        let exporter = try Exporter(options: f.options())
        let exporterRunner = FollowerRunner(exporter, commits: f.writer.commits)
        try exporterRunner.start()
        defer { exporterRunner.stop() }
        // The recorded connect failure is the signal that an attempt was made and failed.
        try waitFor("a failed connect") { exporter.status.lastError != nil }
        #expect(exporter.status.acknowledgedSeq == 0)
        try f.server.start()
        try waitFor("exported", timeout: 60) { exporter.status.acknowledgedSeq == 50 }
        #expect(try f.stored().count == 50)
    }

    @Test func anExistingStreamIsUsedAsItIs() async throws {
        let f = try ExportFixture()
        try f.server.start()
        let admin = try NatsClient(urls: [f.server.url], name: "admin")
        #expect(try admin.ensureStream(name: "PUSHTEST", subjects: ["pushspool.>"], replicas: 1, duplicateWindow: .seconds(60)))
        #expect(try !admin.ensureStream(name: "PUSHTEST", subjects: ["other.*"], replicas: 1, duplicateWindow: .seconds(1)))
        admin.close()
        try await f.append(10)
        let exporter = try Exporter(options: f.options())
        let exporterRunner = FollowerRunner(exporter, commits: f.writer.commits)
        try exporterRunner.start()
        try waitFor("exported") { exporter.status.acknowledgedSeq == 10 }
        exporterRunner.stop()
        #expect(try f.stored().count == 10)
    }

    /// Issue 21 #2: users that differ only in CR/LF versus spaces, or after a NUL, got one
    /// `Nats-Msg-Id`; the stream kept the first and the exporter counted the rest acknowledged.
    @Test func recordsWhoseKeysDifferOnlyInControlCharactersAreAllInTheStream() async throws {
        let f = try ExportFixture()
        try f.server.start()
        let keys = ["mindbox@7:a\r\nX: 1:p1", "mindbox@7:a  X: 1:p1", "mindbox@8:z\u{0}one:p1", "mindbox@8:z\u{0}two:p1",
                    "apns:trailing ", "apns:trailing", "apns:100%", "apns:100%25", "mindbox@10:Борис:p1"]
        try await f.append(keys: keys)
        let exporter = try Exporter(options: f.options())
        let exporterRunner = FollowerRunner(exporter, commits: f.writer.commits)
        try exporterRunner.start()
        try waitFor("all acknowledged") { exporter.status.acknowledgedSeq == UInt64(keys.count) }
        exporterRunner.stop()
        let stored = try f.stored()
        #expect(stored.count == keys.count)
        #expect(stored.map(\.msgId) == keys.map { ExportMessage.messageId(hostId: "testhost", key: $0) })
        #expect(Set(stored.map(\.msgId)).count == keys.count)

        // A replay makes the same ids: the stream drops every record as a duplicate.
        let replayed = try Exporter.replay(options: f.options(), fromSeq: 1, toSeq: nil)
        #expect(replayed.published == UInt64(keys.count) && replayed.duplicates == UInt64(keys.count))
        #expect(try f.stored().count == keys.count)
    }

    /// Issue 21 #11: with its stream deleted every publish fails ("no responders"), also
    /// after a nats-server restart; the exporter must create the stream again by itself.
    @Test func aDeletedStreamIsCreatedAgainWithoutRestartingTheExporter() async throws {
        let f = try ExportFixture()
        try f.server.start()
        let exporter = try Exporter(options: f.options())
        let exporterRunner = FollowerRunner(exporter, commits: f.writer.commits)
        try exporterRunner.start()
        defer { exporterRunner.stop() }
        try await f.append(10)
        try waitFor("first batch") { exporter.status.acknowledgedSeq == 10 }

        let admin = try NatsClient(urls: [f.server.url], name: "admin")
        try admin.deleteStream("PUSHTEST")
        admin.close()
        let second = try await f.append(20)
        try waitFor("second batch", timeout: 60) { exporter.status.acknowledgedSeq == 30 }
        #expect(try f.stored().map(\.msgId) == second.map { "testhost:" + $0 })

        // Deleted again, and the server restarted while the exporter waits for it.
        let again = try NatsClient(urls: [f.server.url], name: "admin")
        try again.deleteStream("PUSHTEST")
        again.close()
        f.server.stop()
        try f.server.start()
        let third = try await f.append(15)
        try waitFor("third batch", timeout: 60) { exporter.status.acknowledgedSeq == 45 }
        #expect(try f.stored().map(\.msgId) == third.map { "testhost:" + $0 })
        #expect(exporter.status.running)
    }

    /// Issue 21 #11: "NATS connection lost" stayed the last error after libnats reconnected
    /// when nothing was left to publish (lag 0), so `export status` showed it indefinitely.
    @Test func theConnectionLossIsForgottenOnceReconnectedWithNothingToPublish() async throws {
        let f = try ExportFixture()
        try f.server.start()
        let exporter = try Exporter(options: f.options())
        let exporterRunner = FollowerRunner(exporter, commits: f.writer.commits)
        try exporterRunner.start()
        defer { exporterRunner.stop() }
        try await f.append(5)
        try waitFor("exported") { exporter.status.acknowledgedSeq == 5 }

        f.server.stop()
        try waitFor("loss seen") { exporter.status.lastError?.contains("connection lost") == true }
        try f.server.start()
        try waitFor("reconnected, no error", timeout: 60) {
            let status = exporter.status
            return status.connected && status.lag == 0 && status.lastError == nil
        }
        // What `pushspoolctl export status` shows: the status file, rewritten every second.
        try waitFor("status file without the error") {
            guard let bytes = try? Posix.readFile(f.stateDirectory + "/export/status.json", limit: 1 << 16),
                  let object = try? JSONParser().parse(bytes).objectValue else { return false }
            return object["connected"]?.boolValue == true && object["lastError"] == nil
        }
    }

    @Test func replayRepublishesARangeAndTheServerDropsDuplicates() async throws {
        let f = try ExportFixture()
        try f.server.start()
        try await f.append(30)
        let exporter = try Exporter(options: f.options())
        let exporterRunner = FollowerRunner(exporter, commits: f.writer.commits)
        try exporterRunner.start()
        try waitFor("exported") { exporter.status.acknowledgedSeq == 30 }
        exporterRunner.stop()
        let result = try Exporter.replay(options: f.options(), fromSeq: 5, toSeq: 14)
        #expect(result.published == 10)
        #expect(result.duplicates == 10)
        #expect(try f.stored().count == 30)
    }
}

final class NoticeLog: Sendable {
    private let notices = Locked<[ExportNotice]>([])
    func add(_ notice: ExportNotice) { notices.withLock { $0.append(notice) } }
    var all: [ExportNotice] { notices.withLock { $0 } }
}
