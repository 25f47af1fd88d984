import Foundation
import Testing
import PushJournal
import TestSupport
import PushPayload
import PushConfig
import PushModuleOptions

/// The normaliser's dedup-key limit (`DedupKey.maxBytes`) must never let through a key the
/// journal refuses: issue 8 defect 6, a 248-byte Mindbox `uniqueKey` that `validate` accepted
/// and the daemon quarantined as `record_too_large`. PushPayload does not depend on
/// PushJournal, so the agreement is checked here, where both are visible, against the real
/// writer and reader rather than a copied constant.
@Suite struct KeyLimitAgreementTests {
    /// A temp directory owned by one test.
    final class TempDir {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("keylimit-\(UUID().uuidString)").path
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    static func accepted(_ json: String) throws -> PushNotification {
        switch Normalizer.normalize(Array(json.utf8)) {
        case .accepted(let n): return n
        case .refused(let r): throw r
        }
    }

    /// Mindbox Android payloads whose dedup keys are exactly `DedupKey.maxBytes` long: one
    /// without a user (`vendor:id`), one with a multi-byte user (`vendor@N:user:id`).
    static func longestKeys() throws -> [PushNotification] {
        let plainId = String(repeating: "k", count: DedupKey.maxBytes - "mindbox:".utf8.count)
        let user = "пользователь"  // 24 bytes of UTF-8
        let userPrefix = "mindbox@\(user.utf8.count):\(user):"
        let userId = String(repeating: "k", count: DedupKey.maxBytes - userPrefix.utf8.count)
        return [
            try accepted(#"{"data": {"uniqueKey": ""# + plainId + #"", "message": "m"}}"#),
            try accepted(#"{"pushspool": 1, "user": ""# + user + #"", "payload": {"data": {"uniqueKey": ""# + userId + #"", "message": "m"}}}"#),
        ]
    }

    @Test func theJournalHoldsTheLongestKeyTheNormaliserAccepts() async throws {
        let notifications = try Self.longestKeys()
        #expect(notifications.map { $0.dedupKey.utf8.count } == [DedupKey.maxBytes, DedupKey.maxBytes])
        let temp = TempDir()
        let (writer, _) = try JournalWriter.open(directory: temp.path + "/journal", options: JournalOptions(settings: Configuration().journal))
        for n in notifications {
            let result = await writer.append(key: n.dedupKey, body: n.jsonValue().serialized(), ingestMillis: 1)
            guard case .committed = result else {
                Issue.record("the journal refused a key the normaliser accepted (\(n.dedupKey.utf8.count) bytes): \(result)")
                continue
            }
        }
        try writer.close()
        let reader = try JournalReader(directory: temp.path + "/journal")
        var keys: [String] = []
        while let record = try reader.next() { keys.append(record.key) }
        #expect(keys == notifications.map(\.dedupKey))
    }

    @Test func oneByteMoreIsRefusedByTheNormaliserNotTheJournal() {
        let id = String(repeating: "k", count: DedupKey.maxBytes - "mindbox:".utf8.count + 1)
        let json = #"{"data": {"uniqueKey": ""# + id + #"", "message": "m"}}"#
        guard case .refused(let r) = Normalizer.normalize(Array(json.utf8)) else {
            Issue.record("a key over DedupKey.maxBytes was accepted")
            return
        }
        #expect(r.code.rawValue == "id_too_long")
    }
}
