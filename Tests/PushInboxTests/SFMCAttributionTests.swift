import PushInbox
import PushSystem
import Testing
import TestSupport

/// Issue 37: an SFMC push's request and hash ids (`_r`, `_h`, in the record as `requestId`,
/// `hashId`) reach its item, so an app or forwarder can attribute an open to the send.
@Suite struct SFMCAttributionTests {
    @Test func theItemCarriesTheRequestAndHashIds() async throws {
        let f = try InboxFixture()
        let sfmc = try await f.notification(title: "sale", vendor: "sfmc", extra: ["requestId": .string("req-1"), "hashId": .string("hash-1")])
        let plain = try await f.notification(title: "plain", vendor: "sfmc")
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        let item = try #require(try index.item(.user("alice"), seq: sfmc))
        #expect(item.jsonValue()["requestId"] == .string("req-1") && item.jsonValue()["hashId"] == .string("hash-1"))
        let listed = try index.list(.user("alice"), limit: 10).items
        #expect(listed.first { $0.seq == sfmc }?.jsonValue()["hashId"] == .string("hash-1"))
        let other = try #require(try index.item(.user("alice"), seq: plain))
        #expect(other.jsonValue()["requestId"] == nil && other.jsonValue()["hashId"] == nil)
    }
}
