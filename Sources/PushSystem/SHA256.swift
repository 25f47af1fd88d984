internal import CCrypto

/// Incremental SHA-256 through OpenSSL's libcrypto (EVP), for spool file digests and the
/// content-addressed media store.
///
/// Not `Sendable`: it owns an `EVP_MD_CTX`; use one per thread.
package final class SHA256 {
    private let context: OpaquePointer

    package init() {
        guard let context = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
        self.context = context
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    deinit { EVP_MD_CTX_free(context) }

    /// Adds bytes to the digest.
    package func update(_ bytes: UnsafeRawBufferPointer) {
        EVP_DigestUpdate(context, bytes.baseAddress, bytes.count)
    }

    package func update(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { update($0) }
    }

    /// Finishes and returns the 32-byte digest; the hasher then starts over.
    package func finalize() -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        EVP_DigestFinal_ex(context, &digest, &length)
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
        return digest
    }

    /// Finishes and returns the lowercase hex digest; the hasher then starts over.
    package func finalizeHex() -> String { hexString(finalize()) }

    /// The 32-byte SHA-256 of `bytes`.
    package static func digest(of bytes: UnsafeRawBufferPointer) -> [UInt8] {
        let hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// SHA-256 of `bytes` as lowercase hex.
    package static func hex(of bytes: [UInt8]) -> String {
        let hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalizeHex()
    }
}

/// Lowercase hex of bytes.
package func hexString(_ bytes: some Sequence<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out = [UInt8]()
    out.reserveCapacity(64)
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0x0f)])
    }
    return String(decoding: out, as: UTF8.self)
}
