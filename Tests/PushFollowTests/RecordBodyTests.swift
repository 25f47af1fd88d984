import PushFollow
import PushJournal
import PushPayload
import PushSystem
import Testing

/// The one decoder of record bodies: what each kind of record the journal holds decodes to,
/// and what a body nothing can apply decodes to.
@Suite struct RecordBodyTests {
    static func decode(_ text: String) -> RecordBody { RecordBody(decoding: Array(text.utf8)) }

    /// Every event type, as the daemon journals it (``PushEvent/recordBody``), decodes to
    /// that type with its members.
    @Test(arguments: EventType.allCases)
    func everyEventTypeDecodes(_ type: EventType) {
        var event = PushEvent(type: type, eventId: "ev-1", user: "alice", item: 7, action: "reply")
        event.until = "2030-01-01T00:00:00Z"
        let bytes = event.recordBody(ingestMillis: 1_700_000_000_000, sourceFile: "f", envelopeSHA256: "00", envelopeSize: 10)
        guard case .event(let decoded) = RecordBody(decoding: bytes) else {
            Issue.record("\(type.rawValue) did not decode as an event: \(RecordBody(decoding: bytes))")
            return
        }
        #expect(decoded.type == type)
        #expect(decoded["eventId"] == .string("ev-1"))
        #expect(decoded["item"]?.numberLexeme == "7")
    }

    @Test func aPushDecodesWithOrWithoutItsKind() {
        let current = Self.decode(#"{"kind":"notification","vendor":"mindbox","id":"n1","user":"alice"}"#)
        guard case .notification(let push) = current else {
            Issue.record("\(current)")
            return
        }
        #expect(push["vendor"] == .string("mindbox"))
        // Records journaled before kinds existed carry none: they are pushes.
        guard case .notification(let old) = Self.decode(#"{"vendor":"generic","id":"n2"}"#) else {
            Issue.record("a body without kind is a push")
            return
        }
        #expect(old["id"] == .string("n2"))
    }

    @Test func anErasureDecodesOnlyWithValidFields() {
        let id = String(repeating: "a", count: 32), subject = String(repeating: "0f", count: 32)
        let good = Self.decode(#"{"kind":"erasure","erasureId":"\#(id)","scope":"user","subject":"\#(subject)","requestedAt":"x"}"#)
        #expect(good == .erasure(ErasureBody(["erasureId": .string(id), "scope": .string("user"), "subject": .string(subject)])!))
        guard case .erasure(let erasure) = good else { return }
        #expect(erasure.erasureID == id && erasure.scope == .user && erasure.subject == subject)
        #expect(Self.decode(#"{"kind":"erasure","erasureId":"\#(id)","scope":"planet","subject":"\#(subject)"}"#) == .undecodable(.malformedErasure))
        #expect(Self.decode(#"{"kind":"erasure","erasureId":"XYZ","scope":"user","subject":"\#(subject)"}"#) == .undecodable(.malformedErasure))
        #expect(Self.decode(#"{"kind":"erasure","erasureId":"\#(id)","scope":"device","subject":"AB"}"#) == .undecodable(.malformedErasure))
    }

    @Test func aTombstoneNamesItsErasureWhenItCan() {
        #expect(Self.decode(#"{"kind":"erased","erasure":"e1"}     "#) == .tombstone(TombstoneBody(erasureID: "e1")))
        #expect(Self.decode(#"{"kind":"erased"}"#) == .tombstone(TombstoneBody(erasureID: "")))
    }

    /// What no follower applies, and why: each follower passes over these as it always has.
    @Test func whatNothingAppliesSaysWhy() {
        #expect(Self.decode("not json") == .undecodable(.notJSON("invalid_json")))
        #expect(Self.decode("[1,2]") == .undecodable(.notAnObject))
        #expect(Self.decode(#"{"kind":"receipt"}"#) == .undecodable(.unknownKind("receipt")))
        #expect(Self.decode(#"{"kind":7}"#) == .undecodable(.unknownKind("number")))
        #expect(Self.decode(#"{"kind":"event","eventId":"e"}"#) == .undecodable(.eventWithoutType))
        #expect(Self.decode(#"{"kind":"event","type":"nc.teleport","eventId":"e"}"#) == .undecodable(.unknownEventType("nc.teleport")))
    }

    /// A follower's record carries its place in the journal and the body decoded from its bytes.
    @Test func aFollowedRecordKeepsTheRecord() {
        let record = JournalRecord(seq: 9, ingestMillis: 5, key: "event:e", body: Array(#"{"kind":"event","type":"nc.read","eventId":"e"}"#.utf8),
                                   segment: "s", offset: 3)
        let followed = FollowedRecord(record)
        #expect(followed.seq == 9 && followed.ingestMillis == 5 && followed.key == "event:e" && followed.record == record)
        guard case .event(let event) = followed.body else {
            Issue.record("\(followed.body)")
            return
        }
        #expect(event.type == .read)
    }
}
