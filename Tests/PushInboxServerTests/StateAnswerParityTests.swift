import Foundation
import PushInbox
import PushPayload
import PushSpool
import PushSystem
import Testing
@testable import PushInboxServer

/// Issue 35: a state change's 202 answer is the item as the index will hold it, because both
/// apply ``InboxItemState/applying(_:)``. Each request's event is journaled and applied, and
/// the item the index then serves must have the state the answer said, including where the
/// old prediction had drifted (an unsnooze of an item that is not snoozed).
@Suite struct StateAnswerParityTests {
    @Test func eachAnswerIsTheStateTheIndexThenHolds() async throws {
        let setup = try await PathDecodingTests.Setup()
        let index = try InboxIndex(path: setup.journal.indexPath)
        let item = String(setup.item)
        let until = Timestamp.iso8601(millis: Posix.wallClockMillis() + 3_600_000)
        let steps: [(method: String, path: String, body: String)] = [
            ("POST", "/v1/inbox/\(item)/seen", ""), ("POST", "/v1/inbox/\(item)/read", ""),
            ("POST", "/v1/inbox/\(item)/unsnooze", ""),  // not snoozed: changes nothing, it stays read
            ("POST", "/v1/inbox/\(item)/unread", ""), ("POST", "/v1/inbox/\(item)/open", ""), ("POST", "/v1/inbox/\(item)/unread", ""),
            ("POST", "/v1/inbox/\(item)/archive", ""), ("POST", "/v1/inbox/\(item)/pin", ""),
            ("POST", "/v1/inbox/\(item)/unarchive", ""), ("POST", "/v1/inbox/\(item)/unpin", ""),
            ("POST", "/v1/inapp/\(item)/shown", ""), ("POST", "/v1/inbox/\(item)/read", ""),
            ("POST", "/v1/inbox/\(item)/snooze", #"{"until":"\#(until)"}"#), ("POST", "/v1/inbox/\(item)/unsnooze", ""),
        ]
        for (n, step) in steps.enumerated() {
            let response = setup.api.handle(HTTPRequest(method: step.method, path: step.path,
                                                        headers: PathDecodingTests.credentials(user: "alice"), body: Array(step.body.utf8)))
            #expect(response.status == 202, "\(step.path)")
            guard case .bytes(let bytes) = response.body, let answered = try JSONParser().parse(bytes)["item"]?["state"] else {
                Issue.record("\(step.path): no item in the answer")
                continue
            }
            // Journal what the request dropped, as pushspoold would, and let the index apply it.
            for name in try FileManager.default.contentsOfDirectory(atPath: setup.spool.incoming) {
                let path = setup.spool.incoming + "/" + name
                guard case .event(let event) = Normalizer.classify(try Posix.readFile(path)) else { continue }
                var body = event.jsonValue().objectValue ?? [:]
                body["eventId"] = .string("e\(n)")
                _ = try await setup.journal.append(body, key: "event:e\(n)")
                try FileManager.default.removeItem(atPath: path)
            }
            try index.catchUp(journalDirectory: setup.journal.journal)
            let held = try #require(try index.item(.user("alice"), seq: setup.item))
            #expect(held.jsonValue()["state"] == answered, "\(step.path)")
        }
    }
}
