@preconcurrency import Glibc
import Testing
import PushExport
import PushSystem
import TestSupport
import TestTraits

/// The erasure's scan of the export stream against a real nats-server: it reads the stream in
/// batches through an ephemeral consumer, so it must cross batch boundaries, skip interior
/// holes (messages erased before), stop at the last seq it saw at the start, and erase exactly
/// the chosen messages — no more, no fewer.
@Suite(.tags(.nats)) struct StreamErasureScanTests {
    @Test(arguments: [1, 64, 1024])
    func everyChosenMessageGoesAndEveryOtherStays(batch: Int) throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let client = try NatsClient(urls: [server.url], name: "scan-test")
        defer { client.close() }
        try client.ensureStream(name: "SCAN", subjects: ["s.*"], replicas: 1, duplicateWindow: .seconds(60))
        let total = 1_500
        for i in 1...total {
            let owner = i % 3 == 0 ? "gone" : "kept"
            _ = try client.publish(subject: i % 2 == 0 ? "s.a" : "s.b", msgId: "m\(i)",
                                   body: Array(#"{"user":"\#(owner)","n":\#(i)}"#.utf8), headers: [])
        }
        // Holes inside the stream and at both ends: removed earlier, never delivered again.
        let holes: [UInt64] = [1, 2, 3, 700, 701, 1499, 1500]
        let first = try client.eraseMessages(stream: "SCAN", batch: batch) { holes.contains(UInt64($0.msgId.dropFirst()) ?? 0) }
        #expect(first.erased == holes.count)
        #expect(first.scanned == total)

        let report = try client.eraseMessages(stream: "SCAN", batch: batch) { String(decoding: $0.body, as: UTF8.self).contains("gone") }
        #expect(report.scanned == total - holes.count)
        let chosen = (1...total).filter { $0 % 3 == 0 && !holes.contains(UInt64($0)) }
        #expect(report.erased == chosen.count)
        let left = try client.readStream("SCAN")
        #expect(left.count == total - holes.count - chosen.count)
        #expect(left.allSatisfy { String(decoding: $0.body, as: UTF8.self).contains("kept") })

        // Nothing left to choose: a rerun erases nothing and reads what is there.
        let again = try client.eraseMessages(stream: "SCAN", batch: batch) { String(decoding: $0.body, as: UTF8.self).contains("gone") }
        #expect(again.erased == 0 && again.scanned == left.count)
    }

    @Test func anEmptyOrWhollyErasedStreamIsReadAtOnce() throws {
        let temp = TempDir()
        let server = try NatsServer(storeDirectory: temp.appending("nats"))
        try server.start()
        defer { server.stop() }
        let client = try NatsClient(urls: [server.url], name: "scan-empty")
        defer { client.close() }
        try client.ensureStream(name: "EMPTY", subjects: ["e.*"], replicas: 1, duplicateWindow: .seconds(60))
        #expect(try client.eraseMessages(stream: "EMPTY") { _ in true } == StreamErasureReport())
        for i in 1...5 { _ = try client.publish(subject: "e.x", msgId: "e\(i)", body: Array("x".utf8), headers: []) }
        #expect(try client.eraseMessages(stream: "EMPTY") { _ in true }.erased == 5)
        let start = Posix.monotonicNanos()
        #expect(try client.eraseMessages(stream: "EMPTY") { _ in true } == StreamErasureReport())
        // Not a wait for a fetch to time out: the stream says it holds nothing.
        #expect(Posix.monotonicNanos() - start < 4_000_000_000)
    }
}
