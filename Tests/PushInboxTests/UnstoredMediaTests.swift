import PushInbox
import PushSystem
import Testing
import TestSupport

/// Issue 37, rule 4: an image pushspool did not store (media off, fetch refused or failed)
/// or cannot decode leaves the item its source URL and the reason, never a path to show.
@Suite struct UnstoredMediaTests {
    static let url = "https://cdn.example/sale.jpg"

    static func media(_ status: String, _ extra: JSONObject = [:]) -> JSONValue {
        var o: JSONObject = ["url": .string(url), "status": .string(status), "attempts": .integer(1), "durationMs": .integer(3)]
        for (k, v) in extra { o[k] = v }
        return .object(o)
    }

    @Test func theItemKeepsTheSourceURLAndWhyItWasNotStored() async throws {
        let f = try InboxFixture()
        let skipped = try await f.notification(title: "off", extra: ["media": Self.media("skipped", ["reason": .string("media_disabled")])])
        let failed = try await f.notification(title: "failed", extra: ["media": Self.media("failed", [
            "error": .object(["code": .string("http_status"), "message": .string("HTTP 404"), "httpStatus": .integer(404)])])])
        let undecodable = try await f.notification(title: "broken", extra: ["media": Self.media("stored", [
            "path": .string("ab/cdef.jpg"), "sha256": .string("abcdef"), "decodable": .bool(false)])])
        let stored = try await f.notification(title: "ok", extra: ["media": Self.media("stored", [
            "path": .string("ab/c0de.jpg"), "decodable": .bool(true), "thumbnail": .object(["path": .string("ab/c0de.thumb320.jpg")])])])
        let plain = try await f.notification(title: "plain")
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        func item(_ seq: UInt64) throws -> InboxItem { try #require(try index.item(.user("alice"), seq: seq)) }

        #expect(try item(skipped).jsonValue()["media"] == .object(["sourceUrl": .string(Self.url), "stored": .bool(false),
                                                                     "reason": .string("media_disabled")]))
        #expect(try item(failed).jsonValue()["media"] == .object(["sourceUrl": .string(Self.url), "stored": .bool(false),
                                                                    "reason": .string("http_status")]))
        // Stored but undecodable: no path to show (its alt text may have replaced the body).
        let broken = try item(undecodable)
        #expect(!broken.mediaServed)
        #expect(broken.jsonValue()["media"] == .object(["sourceUrl": .string(Self.url), "stored": .bool(false),
                                                          "reason": .string("undecodable")]))
        let shown = try item(stored)
        #expect(shown.mediaServed)
        #expect(shown.jsonValue()["media"] == .object(["path": .string("ab/c0de.jpg"), "thumbnail": .string("ab/c0de.thumb320.jpg"),
                                                         "sourceUrl": .string(Self.url), "stored": .bool(true)]))
        #expect(try item(plain).jsonValue()["media"] == nil)
    }
}
