internal import CCrypto

/// HMAC-SHA256 (RFC 2104) over ``SHA256``: the keyed hash erasure uses so that a tombstone,
/// an erasure record or a log line can name a user or a dedup key without revealing it.
package enum HMACSHA256 {
    fileprivate static let blockSize = 64

    /// The 32-byte MAC of `message` under `key`.
    package static func mac(key: [UInt8], message: some Sequence<UInt8>) -> [UInt8] {
        Key(key).mac(Array(message))
    }

    /// The MAC as lowercase hex.
    package static func hex(key: [UInt8], message: some Sequence<UInt8>) -> String { hexString(mac(key: key, message: message)) }

    /// A key set up once: SHA-256 states that have already absorbed the key's inner and outer
    /// pads, copied for each MAC. The journal writer keys a tombstone lookup with the erasure
    /// secret for every record; padding the key and starting two digests from scratch each
    /// time was per-file work with the same result every time.
    ///
    /// `@unchecked Sendable`: the two states are written only by `init` and are then only
    /// read (`EVP_MD_CTX_copy_ex` takes its source `const`), which OpenSSL allows from any
    /// number of threads; every MAC works in a context of its own.
    package final class Key: @unchecked Sendable {
        private let inner: OpaquePointer
        private let outer: OpaquePointer

        package init(_ key: [UInt8]) {
            var block = key.count > HMACSHA256.blockSize ? SHA256.digest(of: key) : key
            block += [UInt8](repeating: 0, count: HMACSHA256.blockSize - block.count)
            inner = Self.absorbing(block.map { $0 ^ 0x36 })
            outer = Self.absorbing(block.map { $0 ^ 0x5c })
        }

        deinit {
            EVP_MD_CTX_free(inner)
            EVP_MD_CTX_free(outer)
        }

        private static func absorbing(_ pad: [UInt8]) -> OpaquePointer {
            guard let context = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
            EVP_DigestInit_ex(context, SHA256.algorithm.md, nil)
            pad.withUnsafeBytes { _ = EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
            return context
        }

        /// The 32-byte MAC of `message`.
        package func mac(_ message: UnsafeRawBufferPointer) -> [UInt8] {
            guard let context = EVP_MD_CTX_new() else { fatalError("EVP_MD_CTX_new: out of memory") }
            defer { EVP_MD_CTX_free(context) }
            var digest = [UInt8](repeating: 0, count: 32)
            var length: UInt32 = 0
            EVP_MD_CTX_copy_ex(context, inner)
            EVP_DigestUpdate(context, message.baseAddress, message.count)
            EVP_DigestFinal_ex(context, &digest, &length)
            EVP_MD_CTX_copy_ex(context, outer)
            EVP_DigestUpdate(context, digest, digest.count)
            EVP_DigestFinal_ex(context, &digest, &length)
            return digest
        }

        package func mac(_ message: [UInt8]) -> [UInt8] { message.withUnsafeBytes { mac($0) } }

        /// The MAC of `text`'s UTF-8 as lowercase hex.
        package func hex(_ text: String) -> String {
            var text = text
            return text.withUTF8 { hexString(mac(UnsafeRawBufferPointer($0))) }
        }
    }
}

extension SHA256 {
    /// The 32-byte SHA-256 of `bytes`.
    package static func digest(of bytes: [UInt8]) -> [UInt8] { bytes.withUnsafeBytes { digest(of: $0) } }
}
