import PushInbox
import Testing

/// A cursor has one text form, the one the index writes: docs/openapi.yaml's pattern for
/// `cursor` says exactly which are taken, and Schemathesis checks both ways.
@Suite struct InboxCursorTests {
    @Test(arguments: [("c1.1", 1, false), ("c2.ff", 255, true), ("c1.7fffffffffffffff", Int64.max, false)])
    func theIndexsFormIsTaken(text: String, seq: Int64, pinned: Bool) throws {
        let parsed = try #require(InboxCursor.parse(text))
        #expect(parsed.seq == seq && parsed.pinned == pinned)
    }

    @Test(arguments: ["", "c1.", "c1.0", "c1.01", "c2.00ff", "c1.8000000000000000", "c1.FF", "c3.1", "x1.1", "c1.1 "])
    func anyOtherTextIsRefused(text: String) {
        #expect(InboxCursor.parse(text) == nil)
    }
}
