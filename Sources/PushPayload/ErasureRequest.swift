import PushSystem

/// An erasure request as it travels through the spool (docs/design/erasure.md, "The request
/// and the erasure record"): `{"pushspool":1,"erase":{"user":"…","erasureId":"<32 hex>"}}`, or
/// with `"device"` in place of `"user"`. pushspoold journals it as an `erasure` record that
/// names only the subject's keyed hash, under ``dedupKey``, so a request dropped twice is
/// journaled once.
///
/// `Sendable`: a value.
package struct ErasureRequest: Sendable, Equatable {
    package enum Scope: String, Sendable {
        case user
        case device
    }

    package var scope: Scope
    /// The plain user or device id. It lives in the spool file and in the daemon's memory
    /// until the erasure is complete, never in the journal.
    package var id: String
    /// 32 lower-case hex digits, drawn by whoever dropped the request.
    package var erasureId: String

    package init(scope: Scope, id: String, erasureId: String) {
        self.scope = scope
        self.id = id
        self.erasureId = erasureId
    }

    /// The journal key: one record per request id.
    package var dedupKey: String { "erasure:" + erasureId }

    /// Whether `id` is 32 lower-case hex digits (what ``newErasureId()`` draws).
    package static func isValidErasureId(_ id: String) -> Bool {
        id.utf8.count == 32 && id.utf8.allSatisfy { ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "f")) }
    }

    /// A fresh request id: 128 random bits as hex.
    package static func newErasureId() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in
            let byte = UInt8.random(in: 0...255, using: &generator)
            return String(byte >> 4, radix: 16) + String(byte & 0xf, radix: 16)
        }.joined()
    }

    /// The envelope a producer drops: compact JSON and a newline.
    package func envelopeBytes() -> [UInt8] {
        JSONValue.object(["pushspool": .number("1"),
                          "erase": .object([scope.rawValue: .string(id), "erasureId": .string(erasureId)])]).serialized() + [0x0a]
    }

    /// Envelope members an erasure envelope may have.
    static let envelopeMembers: Set<String> = ["pushspool", "erase"]

    /// `top` is an object with `"pushspool": 1` (checked by the caller) and an `erase` member.
    /// Strict, like an event: an erasure that is misspelt must not be guessed at.
    static func parse(_ top: JSONObject) throws(PayloadRefusal) -> ErasureRequest {
        for key in top.keys.sorted() where !envelopeMembers.contains(key) {
            throw invalid("an erasure envelope has only \"pushspool\" and \"erase\"; found \"\(key)\"", key)
        }
        guard case .object(let erase)? = top["erase"] else {
            throw invalid("envelope member \"erase\" must be an object, found \(top["erase"]?.typeName ?? "nothing")", "erase")
        }
        for key in erase.keys.sorted() where !["user", "device", "erasureId"].contains(key) {
            throw invalid("erase has only \"user\" or \"device\", and \"erasureId\"; found \"\(key)\"", "erase.\(key)")
        }
        guard case .string(let erasureId)? = erase["erasureId"], isValidErasureId(erasureId) else {
            throw invalid("erase.erasureId must be 32 lower-case hex digits", "erase.erasureId")
        }
        let named: [(Scope, JSONValue)] = [(.user, erase["user"]), (.device, erase["device"])].compactMap { scope, value in
            value.map { (scope, $0) }
        }
        guard named.count == 1, let (scope, value) = named.first else {
            throw invalid("erase names exactly one of \"user\" and \"device\"", "erase")
        }
        guard case .string(let id) = value, !id.isEmpty, id.utf8.count <= PushEvent.maxNameBytes else {
            throw invalid("erase.\(scope.rawValue) must be a string of 1-\(PushEvent.maxNameBytes) bytes", "erase.\(scope.rawValue)")
        }
        try ControlCharacters.check(id, "erase.\(scope.rawValue)", path: "erase.\(scope.rawValue)")
        return ErasureRequest(scope: scope, id: id, erasureId: erasureId)
    }

    static func invalid(_ message: String, _ path: String) -> PayloadRefusal {
        PayloadRefusal(.invalidEnvelope, message, path: path)
    }
}
