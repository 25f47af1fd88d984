import Testing
import PushExport
@testable import PushJournal

/// Issue 35: the journal's erasure (`ErasureTarget`) and the export stream's
/// (`StreamSubjectMatcher`) read a record body's subject through one reader. Over every kind
/// of body, naming the user only, the device only, both or neither, both erasures take exactly
/// the records they took when each parsed the body itself. The key and the message id name
/// nobody here, so only the body decides.
@Suite struct RecordSubjectTableTests {
    static let secret = ErasureSecret(bytes: Array(0..<32))
    static let erasureID = String(repeating: "ab", count: 16)

    struct Row: CustomTestStringConvertible {
        var name: String
        var body: String
        /// Whether the body names user `alice`, and device `dev-1`.
        var user: Bool
        var device: Bool
        var testDescription: String { name }
    }

    /// The four kinds, each with the subject's members as the name says (`kind` first where
    /// there is one; a push without `kind` is a record from before kinds).
    static let rows: [Row] = {
        let kinds: [(String, String)] = [
            ("push without kind", #""platform":"ios","title":"Sale""#),
            ("notification", #""kind":"notification","platform":"android""#),
            ("event", #""kind":"event","type":"open","eventId":"e1""#),
            ("erasure", #""kind":"erasure","erasureId":"\#(erasureID)","scope":"user","subject":"\#(String(repeating: "0", count: 64))""#),
            ("tombstone", #""kind":"erased","erasure":"\#(erasureID)""#),
        ]
        let names: [(String, String, Bool, Bool)] = [
            ("user only", #","user":"alice""#, true, false),
            ("device only", #","device":"dev-1""#, false, true),
            ("both", #","user":"alice","device":"dev-1""#, true, true),
            ("neither", #","user":"bob","device":"dev-2""#, false, false),
            ("no members", "", false, false),
            // The ids the other way round: a user is not a device of the same id.
            ("crossed", #","user":"dev-1","device":"alice""#, false, false),
        ]
        var rows: [Row] = []
        for (kind, members) in kinds {
            for (who, named, user, device) in names {
                rows.append(Row(name: "\(kind), \(who)", body: "{\(members)\(named)}", user: user, device: device))
            }
        }
        // The edges of the one reading: only a top-level string member counts, and only in a
        // body that parses within 64 levels.
        func deeper(_ levels: Int) -> String { String(repeating: "[", count: levels) + String(repeating: "]", count: levels) }
        rows += [
            Row(name: "escaped id", body: #"{"kind":"event","user":"al\u0069ce","device":"dev\u002d1"}"#, user: true, device: true),
            Row(name: "ids as numbers", body: #"{"user":1,"device":2}"#, user: false, device: false),
            Row(name: "ids nested only", body: #"{"payload":{"user":"alice","device":"dev-1"}}"#, user: false, device: false),
            Row(name: "id in another member", body: #"{"title":"alice","body":"dev-1"}"#, user: false, device: false),
            Row(name: "not an object", body: #"["alice","dev-1"]"#, user: false, device: false),
            Row(name: "not JSON", body: #"user=alice device=dev-1"#, user: false, device: false),
            Row(name: "truncated", body: #"{"user":"alice","device":"dev-1""#, user: false, device: false),
            Row(name: "64 levels deep", body: #"{"user":"alice","device":"dev-1","x":\#(deeper(63))}"#, user: true, device: true),
            Row(name: "65 levels deep", body: #"{"user":"alice","device":"dev-1","x":\#(deeper(64))}"#, user: false, device: false),
            Row(name: "empty", body: "", user: false, device: false),
        ]
        return rows
    }()

    @Test(arguments: rows)
    func bothErasuresTakeTheSameRecords(_ row: Row) {
        let body = Array(row.body.utf8)
        let user = ErasureTarget(erasureID: Self.erasureID, subject: .user("alice"), secret: Self.secret)
        let device = ErasureTarget(erasureID: Self.erasureID, subject: .device("dev-1"), secret: Self.secret)
        #expect(user.matches(key: "event:1", json: body, secret: Self.secret) == row.user, "journal, user")
        #expect(device.matches(key: "event:1", json: body, secret: Self.secret) == row.device, "journal, device")
        // The needle path too: a caller that knows the plain id skips bodies without it.
        var plainUser = user
        plainUser.plain = "alice"
        var plainDevice = device
        plainDevice.plain = "dev-1"
        #expect(plainUser.matches(key: "event:1", json: body, secret: Self.secret) == (row.user && row.body.contains(#""alice""#)),
                "journal with the plain id, user")
        #expect(plainDevice.matches(key: "event:1", json: body, secret: Self.secret) == (row.device && row.body.contains(#""dev-1""#)),
                "journal with the plain id, device")
        #expect(StreamSubjectMatcher(scope: .user, id: "alice").matches(msgId: "", body: body) == row.user, "stream, user")
        #expect(StreamSubjectMatcher(scope: .device, id: "dev-1").matches(msgId: "", body: body) == row.device, "stream, device")
    }

    /// A real tombstone, as the rewrite writes it, names nobody.
    @Test func aTombstoneAsWrittenNamesNobody() throws {
        let tombstone = try Tombstone.body(bodyLength: 200, originalKey: "mindbox@5:alice:n1", erasureID: Self.erasureID, secret: Self.secret)
        #expect(!ErasureTarget(erasureID: Self.erasureID, subject: .user("alice"), secret: Self.secret)
            .matches(key: "event:1", json: tombstone.json, secret: Self.secret))
        #expect(!StreamSubjectMatcher(scope: .user, id: "alice").matches(msgId: "", body: tombstone.json))
        #expect(ErasureScope.user.subject(inBody: tombstone.json) == nil)
    }
}
