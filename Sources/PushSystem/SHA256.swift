internal import CCrypto

/// Incremental SHA-256 through OpenSSL's libcrypto (EVP), for spool file digests and the
/// content-addressed media store.
///
/// Not `Sendable`: it owns an `EVP_MD_CTX`; use one per thread.
package final class SHA256 {
    private let context: OpaquePointer

    /// SHA-256 fetched from the default provider once. `EVP_sha256()` is a legacy handle that
    /// OpenSSL 3 looks up in the provider store on every `EVP_DigestInit_ex` (a name lookup
    /// under a read lock): twice a spool file, it was most of the digest's cost in the burst
    /// profile (libcrypto 29 % of the lanes' samples).
    static let algorithm = FetchedDigest()

    package init() {
        guard let context = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
        self.context = context
        EVP_DigestInit_ex(context, Self.algorithm.md, nil)
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
        EVP_DigestInit_ex(context, Self.algorithm.md, nil)
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

/// The process's one fetched SHA-256 implementation. `@unchecked Sendable`: an `EVP_MD` is
/// immutable once fetched, and OpenSSL allows one to be shared by any number of threads; it
/// is never freed (it lives as long as the process).
struct FetchedDigest: @unchecked Sendable {
    let md: OpaquePointer

    init() {
        guard let md = EVP_MD_fetch(nil, "SHA256", nil) else { fatalError("EVP_MD_fetch(SHA256): libcrypto has no SHA-256") }
        self.md = md
    }
}

private let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

/// Lowercase hex of bytes.
package func hexString(_ bytes: some Sequence<UInt8>) -> String {
    let digits = hexDigits
    var out = [UInt8]()
    out.reserveCapacity(64)
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0x0f)])
    }
    return String(decoding: out, as: UTF8.self)
}
