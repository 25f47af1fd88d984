@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem

/// Notification Center events enter through the spool like payloads: `pushspoolctl nc …`
/// writes an envelope, the daemon journals it under `event:<eventId>` (once, however often it
/// is dropped) with where it came from.
@Suite struct NcEventDaemonTests {
    @Test func anEventIsJournaledOnceUnderItsId() throws {
        let harness = try DaemonHarness(name: "ncevent")
        try harness.start()
        try harness.drop(generatedPayload(index: 1, tag: "nc"), name: "push.json")
        try waitUntil(timeout: 30, "the push") { (try harness.records().count) == 1 }
        let item = try #require(try harness.records().first).seq

        for _ in 0..<2 {
            let (status, out, err) = try harness.ctl(["nc", "read", "--user", "user-1", "--event-id", "ev-read-1", String(item)])
            #expect(status == 0, "\(out) \(err)")
            try waitUntil(timeout: 30, "the event file to be taken") {
                harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty
            }
        }
        let records = try harness.records()
        #expect(records.count == 2, "the replayed event is a duplicate")
        let event = try #require(records.last)
        #expect(event.key == "event:ev-read-1")
        let body = try JSONParser().parse(event.body)
        #expect(body["kind"]?.stringValue == "event")
        #expect(body["type"]?.stringValue == "nc.read")
        #expect(body["user"]?.stringValue == "user-1")
        #expect(body["item"]?.numberLexeme == String(item))
        #expect(body["ingestedAt"]?.stringValue != nil && body["sha256"]?.stringValue != nil)
        #expect(harness.daemonStderr.contains("PUSH_EVENT=nc.read"))
        #expect(harness.files(in: "failed").isEmpty)
        #expect(harness.stop() == 0)
    }
}
