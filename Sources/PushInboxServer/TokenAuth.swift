internal import CCrypto
@preconcurrency import Glibc
import PushSystem

/// Per-user bearer tokens: `token = hex(HMAC-SHA256(secret, user id))`, made by the app's back
/// end with the same secret. Nothing is stored per user; a token names no user by itself, so
/// the request says whose inbox in `X-Pushspool-User` and the token proves it.
///
/// `Sendable`: immutable after init.
package struct TokenAuth: Sendable {
    private let secret: [UInt8]

    /// `secret`: the key bytes, as `Configuration.InboxSecrets` read them from
    /// `[Inbox] TokenSecretFile=` or the credential (the start-up check's one reader).
    package init(secret: [UInt8]) {
        self.secret = secret
    }

    /// The token of `user`: lowercase hex of HMAC-SHA256(secret, UTF-8 of the user id).
    /// Wraps `EVP_Q_mac(3)`.
    package func token(user: String) -> String {
        var out = [UInt8](repeating: 0, count: 64)
        var length = 0
        let bytes = Array(user.utf8)
        let ok = secret.withUnsafeBytes { key in
            bytes.withUnsafeBufferPointer { data in
                out.withUnsafeMutableBufferPointer { buffer in
                    EVP_Q_mac(nil, "HMAC", nil, "SHA256", nil, key.baseAddress, key.count,
                              data.baseAddress, data.count, buffer.baseAddress, buffer.count, &length) != nil
                }
            }
        }
        // HMAC-SHA256 with the default provider fails only when libcrypto is broken: refuse all.
        guard ok, length == 32 else { return "" }
        return hexString(out.prefix(32))
    }

    /// Whether `token` is `user`'s: compared in time independent of where they differ.
    package func verify(user: String, token: String) -> Bool {
        let expected = Array(self.token(user: user).utf8)
        let given = Array(token.utf8)
        guard !expected.isEmpty, expected.count == given.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<expected.count { difference |= expected[index] ^ given[index] }
        return difference == 0
    }
}
