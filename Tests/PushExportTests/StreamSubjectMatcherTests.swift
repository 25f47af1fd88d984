import Testing
import PushExport

/// Which export-stream messages `user erase` takes: by the record's `user`/`device`, or by the
/// user inside the `Nats-Msg-Id` key as the exporter encodes it. Pure.
@Suite struct StreamSubjectMatcherTests {
    let alice = StreamSubjectMatcher(scope: .user, id: "alice")

    @Test func aBodyNamingTheUserMatchesAndOneNamingAnotherDoesNot() {
        #expect(alice.matches(msgId: "event:e1", body: Array(#"{"kind":"event","user":"alice"}"#.utf8)))
        #expect(!alice.matches(msgId: "event:e2", body: Array(#"{"kind":"event","user":"alicex"}"#.utf8)))
        #expect(!alice.matches(msgId: "h:mindbox:n1", body: Array(#"{"title":"alice"}"#.utf8)))
        // A tombstone exported after an erasure names nobody.
        #expect(!alice.matches(msgId: "h:erased:00ff", body: Array(#"{"kind":"erased","erasure":"x"}"#.utf8)))
    }

    @Test func theKeyInTheMessageIdMatchesWhenTheBodyDoesNotParse() {
        #expect(alice.matches(msgId: "host-a:mindbox@5:alice:n1", body: Array("not json".utf8)))
        #expect(!alice.matches(msgId: "host-a:mindbox@6:alicex:n1", body: []))
        #expect(!alice.matches(msgId: "host-a:mindbox@5:alicf:n1", body: []))
        // The user's length in the key is what delimits it, not a guess at colons.
        #expect(!alice.matches(msgId: "host-a:mindbox@7:x:alice:n1", body: []))
        // Encoded as the exporter writes it into the header.
        let odd = StreamSubjectMatcher(scope: .user, id: "a%b\nc")
        let id = ExportMessage.messageId(hostId: "host-a", key: "mindbox@5:a%b\nc:n1")
        #expect(odd.matches(msgId: id, body: []))
        #expect(!StreamSubjectMatcher(scope: .user, id: "a%b c").matches(msgId: id, body: []))
    }

    @Test func aDeviceMatchesByItsBodyOnly() {
        let device = StreamSubjectMatcher(scope: .device, id: "dev-1")
        #expect(device.matches(msgId: "h:k", body: Array(#"{"device":"dev-1","user":"bob"}"#.utf8)))
        #expect(!device.matches(msgId: "h:mindbox@5:dev-1:n1", body: Array(#"{"device":"dev-2"}"#.utf8)))
    }
}
