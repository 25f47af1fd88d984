@preconcurrency import Glibc
import Foundation
import Synchronization
import Testing
import TestSupport
import PushSystem

/// A Server-Sent Events client on a plain TCP socket, in this process: a child `curl -N`
/// would hold pipe ends that leak into the other tests' children while it runs.
final class StreamClient: @unchecked Sendable {
    final class Buffer: Sendable {
        let text = Locked("")
        let stop = Atomic(false)
    }

    private let output = Buffer()
    private let fd: Int32
    private let done = DispatchSemaphore(value: 0)

    convenience init(server: InboxServerHarness, user: String = "alice", lastEventId: String? = nil) throws {
        try self.init(port: server.port, user: user, lastEventId: lastEventId)
    }

    /// A stream from the pushspool-inbox listening on 127.0.0.1:`port`.
    init(port: Int, user: String = "alice", lastEventId: String? = nil) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { Glibc.close(fd); throw TimeoutError(description: "connect: errno \(errno)") }
        var request = "GET /v1/inbox/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pushspool-User: \(user)\r\n"
            + "Authorization: Bearer \(InboxServerHarness.token(user))\r\nAccept: text/event-stream\r\n"
        if let lastEventId { request += "Last-Event-ID: \(lastEventId)\r\n" }
        request += "\r\n"
        let bytes = Array(request.utf8)
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        let output = self.output, done = self.done
        Thread {
            var buffer = [UInt8](repeating: 0, count: 16_384)
            while !output.stop.load(ordering: .relaxed) {
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                if poll(&pfd, 1, 50) <= 0 { continue }
                let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if n <= 0 { break }
                output.text.withLock { $0 += String(decoding: buffer[0..<n], as: UTF8.self) }
            }
            done.signal()
        }.start()
    }

    /// What arrived so far (chunked transfer framing included; events are parsed by line).
    var text: String { output.text.withLock { $0 } }

    /// The `item` events received so far: (id, title).
    var items: [(id: String, title: String)] {
        InboxIndexLifecycleTests.events(text).compactMap { event in
            guard event.event == "item", let json = try? JSONParser().parse(event.data) else { return nil }
            return (event.id, json["title"]?.stringValue ?? "")
        }
    }

    /// The id of the last event of any kind.
    var lastId: String? {
        text.split(whereSeparator: { $0 == "\n" || $0 == "\r\n" }).last { $0.hasPrefix("id: ") }
            .map { String($0.dropFirst(4)).trimmingCharacters(in: .whitespacesAndNewlines) }
    }

    func close() {
        output.stop.store(true, ordering: .relaxed)
        done.wait()
        Glibc.close(fd)
    }
}

@Suite struct InboxStreamTests {
    @Test func aJournaledPushArrivesLiveAndResumeMissesNothing() throws {
        let server = try InboxServerHarness(name: "inbox-sse")
        try server.push(user: "alice", title: "before")
        try waitUntil(timeout: 30, "the first push") { try server.counts().unread == 1 }

        let stream = try StreamClient(server: server)
        try waitUntil(timeout: 10, "the stream's first counts") { stream.text.contains("event: counts") }
        #expect(stream.items.isEmpty, "without Last-Event-ID only new items are sent")
        try server.push(user: "bob", title: "not for alice")
        try server.push(user: "alice", title: "live")
        // Latency from journaling to delivery: the record's ingest time to arrival.
        try waitUntil(timeout: 30, "the live push on the stream") { stream.items.map(\.title) == ["live"] }
        let arrived = Posix.wallClockMillis()
        let record = try #require(try server.daemon.records().last { String(decoding: $0.body, as: UTF8.self).contains("\"live\"") })
        let latency = arrived - record.ingestMillis
        #expect(latency < 1000, "journaled at \(record.ingestMillis), on the stream \(latency) ms later")
        let resumeFrom = try #require(stream.lastId)
        stream.close()

        // Disconnected: two pushes arrive; a reconnect with Last-Event-ID gets both, in order.
        try server.push(user: "alice", title: "missed-1")
        try server.push(user: "alice", title: "missed-2")
        try waitUntil(timeout: 30, "the missed pushes indexed") { try server.counts().unread == 4 }
        let resumed = try StreamClient(server: server, lastEventId: resumeFrom)
        try waitUntil(timeout: 30, "the missed pushes on the resumed stream") { resumed.items.count >= 2 }
        #expect(resumed.items.map(\.title) == ["missed-1", "missed-2"])
        resumed.close()
        #expect(!stream.text.contains("not for alice") && !resumed.text.contains("not for alice"))
    }

    @Test func aStateChangeUpdatesTheStreamsCounts() throws {
        let server = try InboxServerHarness(name: "inbox-sse-state")
        try server.push(user: "alice", title: "x")
        try waitUntil(timeout: 30, "the push") { try server.counts().unread == 1 }
        let item = try #require(try server.items().first?["item"]?.stringValue)
        let stream = try StreamClient(server: server)
        try waitUntil(timeout: 10, "the first counts") { stream.text.contains(#"data: {"unread":1,"unseen":1}"#) }
        _ = try server.request("POST", "/v1/inbox/\(item)/read")
        try waitUntil(timeout: 30, "the new counts on the stream") { stream.text.contains(#"data: {"unread":0,"unseen":0}"#) }
        // The item itself, in its new state, under the event's journal seq.
        try waitUntil(timeout: 10, "the state event") { stream.text.contains("event: state") }
        let block = try #require(stream.text.replacingOccurrences(of: "\r\n", with: "\n").components(separatedBy: "\n\n")
            .first { $0.contains("event: state") })
        let data = try #require(block.split(separator: "\n").first { $0.hasPrefix("data: ") }?.dropFirst(6))
        let json = try JSONParser().parse(String(data))
        #expect(json["item"]?.stringValue == item)
        #expect(json["state"]?["read"]?.boolValue == true)
        let eventRecord = try #require(try server.daemon.records().last { $0.key.hasPrefix("event:") })
        #expect(block.contains("id: \(eventRecord.seq)"))
        _ = try server.request("POST", "/v1/inbox/read-all")
        try waitUntil(timeout: 30, "the bulk change on the stream") { stream.text.contains("event: refresh") }
        stream.close()
    }
}
