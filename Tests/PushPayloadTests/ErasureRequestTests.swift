import PushPayload
import PushSystem
import Testing

/// The erasure envelope (docs/design/erasure.md, "The request and the erasure record"):
/// checked strictly, never taken for a push, round-tripped by what pushspoolctl and
/// pushspool-inbox write.
@Suite struct ErasureRequestTests {
    static let id = "0123456789abcdef0123456789abcdef"

    @Test(arguments: [ErasureRequest.Scope.user, .device])
    func theEnvelopeWrittenIsTheRequestRead(_ scope: ErasureRequest.Scope) {
        let request = ErasureRequest(scope: scope, id: "alice@example.com", erasureId: ErasureRequestTests.id)
        #expect(Normalizer.classify(request.envelopeBytes()) == .erasure(request))
        #expect(request.dedupKey == "erasure:" + ErasureRequestTests.id)
        #expect(ErasureRequest.isValidErasureId(ErasureRequest.newErasureId()))
    }

    @Test(arguments: [
        #"{"pushspool":1,"erase":{"user":"a","erasureId":"0123"}}"#,
        #"{"pushspool":1,"erase":{"user":"a","erasureId":"0123456789ABCDEF0123456789ABCDEF"}}"#,
        #"{"pushspool":1,"erase":{"user":"a","device":"d","erasureId":"0123456789abcdef0123456789abcdef"}}"#,
        #"{"pushspool":1,"erase":{"erasureId":"0123456789abcdef0123456789abcdef"}}"#,
        #"{"pushspool":1,"erase":{"user":"","erasureId":"0123456789abcdef0123456789abcdef"}}"#,
        #"{"pushspool":1,"erase":{"user":7,"erasureId":"0123456789abcdef0123456789abcdef"}}"#,
        #"{"pushspool":1,"erase":{"user":"a\u0000","erasureId":"0123456789abcdef0123456789abcdef"}}"#,
        #"{"pushspool":1,"erase":{"user":"a","erasureId":"0123456789abcdef0123456789abcdef","extra":1}}"#,
        #"{"pushspool":1,"user":"a","erase":{"user":"a","erasureId":"0123456789abcdef0123456789abcdef"}}"#,
        #"{"pushspool":2,"erase":{"user":"a","erasureId":"0123456789abcdef0123456789abcdef"}}"#,
        #"{"pushspool":1,"erase":"alice"}"#,
    ])
    func aMalformedRequestIsRefused(_ json: String) {
        guard case .refused(let refusal) = Normalizer.classify(Array(json.utf8)) else {
            Issue.record("accepted: \(json)")
            return
        }
        // A control character in the id has its own code, as everywhere else.
        #expect([.invalidEnvelope, .controlCharacter].contains(refusal.code), "\(json): \(refusal)")
    }

    @Test func aPushWithAnEraseMemberStaysAPush() {
        let bare = #"{"aps":{"alert":{"body":"b"}},"erase":{"user":"a"}}"#
        guard case .notification = Normalizer.classify(Array(bare.utf8)) else {
            Issue.record("a bare payload with an erase key is not a push any more")
            return
        }
        let envelope = #"{"pushspool":1,"erase":{"user":"a","erasureId":"0123456789abcdef0123456789abcdef"}}"#
        if case .refused = Normalizer.normalize(Array(envelope.utf8)) {} else { Issue.record("normalize took an erasure for a push") }
    }
}
