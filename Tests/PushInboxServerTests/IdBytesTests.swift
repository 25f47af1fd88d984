import Foundation
import PushInbox
import PushJournal
import PushSystem
import Testing
import TestSupport
@testable import PushInboxServer

/// Issue 33, defect 3: ids are bytes. NFC `josé` (U+00E9) and NFD `josé` (e + U+0301) are two
/// users, though Swift's `String ==` (and its hashing) equates them.
@Suite struct IdBytesTests {
    static let nfc = "jos\u{e9}"
    static let nfd = "jose\u{301}"

    @Test func theTwoFormsAreEqualStringsButDifferentIds() {
        #expect(Self.nfc == Self.nfd, "the premise: Swift's == equates them")
        #expect(!IdBytes.equal(Self.nfc, Self.nfd))
        #expect(InboxOwner.user(Self.nfc) != InboxOwner.user(Self.nfd))
        #expect(InboxOwner.user(Self.nfc) == InboxOwner.user("jos\u{e9}"))
        #expect(InboxOwner.user("a") != InboxOwner.device("a"))
        #expect(IdBytes.unique([Self.nfc, Self.nfd, Self.nfc]).map { Array($0.utf8) } == [Array(Self.nfc.utf8), Array(Self.nfd.utf8)])
    }

    /// With `SelfErase=yes` the token of NFC `josé` erased NFD `josé`.
    @Test func selfEraseErasesOnlyTheSameBytes() async throws {
        let setup = try await PathDecodingTests.Setup(selfErase: true)
        let (other, _) = PathDecodingTests.send(setup.api, "POST", "/v1/admin/users/jose%CC%81/erase", user: Self.nfc)
        #expect(other == 403)
        #expect(try setup.dropped().erasures.isEmpty)
        let (own, _) = PathDecodingTests.send(setup.api, "POST", "/v1/admin/users/jos%C3%A9/erase", user: Self.nfc)
        #expect(own == 202)
        #expect(try setup.dropped().erasures.map { Array($0.id.utf8) } == [Array(Self.nfc.utf8)])
    }

    /// The index applies an event only to an item of the event's own user, by bytes: NFD
    /// `josé` cannot read, pin or snooze NFC `josé`'s item; and an erasure resolving a keyed
    /// hash sees both users.
    @Test func theIndexKeepsTheTwoUsersApart() async throws {
        let setup = try EventHubTests.Setup()
        let item = try await setup.append(["vendor": .string("mindbox"), "id": .string("n1"), "user": .string(Self.nfc),
                                           "title": .string("t"), "buttons": .array([])], key: "n1")
        _ = try await setup.append(["vendor": .string("mindbox"), "id": .string("n2"), "user": .string(Self.nfd),
                                    "title": .string("t"), "buttons": .array([])], key: "n2")
        for (n, type) in ["nc.read", "nc.pin", "nc.snooze"].enumerated() {
            var body: JSONObject = ["kind": .string("event"), "type": .string(type), "eventId": .string("e\(n)"),
                                             "user": .string(Self.nfd), "item": .integer(Int64(item))]
            if type == "nc.snooze" {
                body["until"] = .string(Timestamp.iso8601(millis: Posix.wallClockMillis() + 3_600_000))
            }
            _ = try await setup.append(body, key: "event:e\(n)")
        }
        let index = try InboxIndex(path: setup.indexPath)
        try index.catchUp(journalDirectory: setup.journal)
        let mine = try #require(try index.item(.user(Self.nfc), seq: item))
        #expect(!mine.read && !mine.pinned)
        #expect(try index.list(.user(Self.nfc)).items.map(\.seq) == [item], "not snoozed")
        #expect(try index.item(.user(Self.nfd), seq: item) == nil)

        let candidates = try InboxIndex.erasureCandidates(path: setup.indexPath, device: false)
        #expect(Set(candidates.map { Array($0.utf8) }) == [Array(Self.nfc.utf8), Array(Self.nfd.utf8)])
    }

    /// The index's `changes` log that streams read: one user's changes are not another's.
    @Test func theChangesLogKeepsTheTwoUsersApart() throws {
        let temp = TempDir(#function)
        let index = try InboxIndex(path: temp.appending("index.sqlite"))
        func event(_ seq: UInt64, user: String) -> JournalRecord {
            let body = JSONValue.object(["kind": .string("event"), "type": .string("nc.read"), "eventId": .string("e\(seq)"),
                                         "user": .string(user), "item": .integer(1)])
            return JournalRecord(seq: seq, ingestMillis: 0, key: "", body: body.serialized(), segment: "", offset: 0)
        }
        try index.apply([event(1, user: Self.nfc), event(2, user: Self.nfd)])
        #expect(try index.changes(user: Self.nfc, after: 0, upTo: .max).map(\.seq) == [1])
        #expect(try index.changes(user: Self.nfd, after: 0, upTo: .max).map(\.seq) == [2])
    }
}
