@preconcurrency import Glibc
import Foundation
import Testing
import PushConfig
import PushExport
import PushSystem
import PushErasure
import TestSupport
import TestTraits

/// Issue 26, the export stream: `user erase` with a stream configured erases the subject's
/// messages from a real nats-server's JetStream stream — records exported by pushspoold and
/// events published by an inbox node on `[Inbox] Source=nats` — with the server's secure
/// erase, so its store directory keeps no byte of them; the other user's messages stay.
@Suite(.tags(.nats)) struct UserDataStreamErasureTests {
    static let stream = "PUSHSPOOL"

    /// What the exporter and an inbox node publish, for `user`: exported push records
    /// (`<host>:mindbox@N:user:id`, `Pushspool-Seq`), an event without a seq, and (for alice)
    /// a message whose body does not parse but whose id names her.
    static func publish(_ client: NatsClient, user: String) throws {
        for i in 0..<4 {
            let body = #"{"kind":"push","vendor":"mindbox","user":"\#(user)","title":"\#(user)-stream-secret-\#(i)"}"#
            _ = try client.publish(subject: "pushspool.mindbox.ios", msgId: "host1:mindbox@\(user.utf8.count):\(user):n\(i)",
                                   body: Array(body.utf8), headers: [(ExportMessage.seqHeader, String(i + 1))])
        }
        let event = #"{"kind":"event","type":"opened","user":"\#(user)","eventId":"\#(user)-stream-event"}"#
        _ = try client.publish(subject: "pushspool.event.event", msgId: "event:\(user)-stream-event", body: Array(event.utf8),
                               headers: [(ExportMessage.ingestHeader, "1800000000000")])
        if user == "alice" {
            _ = try client.publish(subject: "pushspool.mindbox.ios", msgId: "host1:mindbox@5:alice:broken",
                                   body: Array("not json alice-stream-broken".utf8), headers: [])
        }
    }

    static let aliceMessages = 6

    func options(_ server: NatsServer) -> ExportOptions {
        var settings = ExportSettings()
        settings.enabled = true
        settings.urls = [server.url]
        settings.stream = Self.stream
        settings.ackTimeout = .seconds(5)
        return ExportOptions(settings: settings, stateDirectory: "/nonexistent", instance: nil)
    }

    /// Every regular file's bytes under `root`.
    func bytes(under root: String) throws -> [(path: String, bytes: [UInt8])] {
        var out: [(String, [UInt8])] = []
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let relative = enumerator?.nextObject() as? String {
            let path = root + "/" + relative
            var st = stat()
            guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { continue }
            out.append((path, try Posix.readFile(path, limit: 1 << 30)))
        }
        return out
    }

    func holding(_ needle: String, _ files: [(path: String, bytes: [UInt8])]) -> [String] {
        files.filter { Data($0.bytes).range(of: Data(needle.utf8)) != nil }.map(\.path)
    }

    func streamBodies(_ server: NatsServer) throws -> [String] {
        let client = try NatsClient(urls: [server.url], reconnects: false)
        defer { client.close() }
        return try client.readStream(Self.stream).map { String(decoding: $0.body, as: UTF8.self) }
    }

    @Test func erasingAUserErasesTheirStreamMessagesFromTheServersStore() async throws {
        let fixture = try await UserDataErasureTests().makeFixture()
        let server = try NatsServer(storeDirectory: fixture.temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        do {
            let client = try NatsClient(urls: [server.url], reconnects: false)
            defer { client.close() }
            try client.ensureStream(name: Self.stream, subjects: ["pushspool.>"], replicas: 1, duplicateWindow: .seconds(60))
            for user in ["alice", "bob"] { try Self.publish(client, user: user) }
        }
        let before = try bytes(under: server.storeDirectory)
        try #require(!holding("alice-stream-secret-0", before).isEmpty, "the store should hold alice's messages before")

        let erasure = UserDataErasure(subject: .user("alice"), sources: fixture.sources, stream: options(server))
        let (_, counts) = try erasure.run()
        #expect(counts.streamMessages == Self.aliceMessages)
        let left = try streamBodies(server)
        #expect(left.filter { $0.contains("alice") }.isEmpty, "\(left)")
        #expect(left.filter { $0.contains("bob") }.count == 5, "\(left)")

        // Stopped, so that everything the server keeps is on disk to be searched.
        server.stop()
        let after = try bytes(under: server.storeDirectory)
        for needle in ["alice-stream-secret", "alice-stream-event", "alice-stream-broken", "mindbox@5:alice"] {
            #expect(holding(needle, after).isEmpty, "\(needle) is still in \(holding(needle, after))")
        }
        for i in 0..<4 { #expect(!holding("bob-stream-secret-\(i)", after).isEmpty, "bob's message \(i) is gone") }
        #expect(!holding("bob-stream-event", after).isEmpty)

        // A rerun finds nothing more, in the stream as elsewhere.
        try server.start()
        let (_, again) = try erasure.run()
        #expect(again.streamMessages == 0)
        #expect(try streamBodies(server).count == 5)
    }

    @Test func anUnreachableServerLeavesTheErasureIncompleteUntilARerun() async throws {
        let fixture = try await UserDataErasureTests().makeFixture()
        let server = try NatsServer(storeDirectory: fixture.temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        do {
            let client = try NatsClient(urls: [server.url], reconnects: false)
            defer { client.close() }
            try client.ensureStream(name: Self.stream, subjects: ["pushspool.>"], replicas: 1, duplicateWindow: .seconds(60))
            for user in ["alice", "bob"] { try Self.publish(client, user: user) }
        }
        server.stop()
        let erasure = UserDataErasure(subject: .user("alice"), sources: fixture.sources, stream: options(server))
        let error = #expect(throws: UserDataError.self) { _ = try erasure.run() }
        #expect(error?.code == .stream)
        #expect(error?.message.contains("run the command again") == true, "\(String(describing: error))")
        // The plan stays: the erasure is owed.
        #expect(!((try? FileManager.default.contentsOfDirectory(atPath: fixture.state + "/erase")) ?? []).filter { $0.hasSuffix(".plan") }.isEmpty)

        try server.start()
        let (_, counts) = try erasure.run()
        #expect(counts.streamMessages == Self.aliceMessages)
        #expect(try streamBodies(server).filter { $0.contains("alice") }.isEmpty)
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: fixture.state + "/erase")) ?? []).filter { $0.hasSuffix(".plan") }.isEmpty)
    }

    /// Stopped after the media (the stream not yet erased) and after the stream (the plan not
    /// yet removed): the next run finishes, erasing what is left and no more.
    @Test(arguments: [UserDataErasureStep.mediaDone, .streamDone])
    func aStopAroundTheStreamStepIsFinishedByTheNextRun(stop: UserDataErasureStep) async throws {
        let fixture = try await UserDataErasureTests().makeFixture("stream-stop-\(stop)")
        let server = try NatsServer(storeDirectory: fixture.temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        do {
            let client = try NatsClient(urls: [server.url], reconnects: false)
            defer { client.close() }
            try client.ensureStream(name: Self.stream, subjects: ["pushspool.>"], replicas: 1, duplicateWindow: .seconds(60))
            for user in ["alice", "bob"] { try Self.publish(client, user: user) }
        }
        let erasure = UserDataErasure(subject: .user("alice"), sources: fixture.sources, stream: options(server))
        #expect(throws: UserDataError.self) {
            _ = try erasure.run { step throws(UserDataError) in
                if step == stop { throw UserDataError(.journal, "stopped at \(step)") }
            }
        }
        let (_, counts) = try erasure.run()
        #expect(counts.streamMessages == (stop == .mediaDone ? Self.aliceMessages : 0))
        let left = try streamBodies(server)
        #expect(left.filter { $0.contains("alice") }.isEmpty && left.count == 5, "\(left)")
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: fixture.state + "/erase")) ?? []).filter { $0.hasSuffix(".plan") }.isEmpty)
    }
}
