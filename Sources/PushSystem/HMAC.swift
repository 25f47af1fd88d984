/// HMAC-SHA256 (RFC 2104) over ``SHA256``: the keyed hash erasure uses so that a tombstone,
/// an erasure record or a log line can name a user or a dedup key without revealing it.
package enum HMACSHA256 {
    private static let blockSize = 64

    /// The 32-byte MAC of `message` under `key`.
    package static func mac(key: [UInt8], message: some Sequence<UInt8>) -> [UInt8] {
        var block = key.count > blockSize ? SHA256.digest(of: key) : key
        block += [UInt8](repeating: 0, count: blockSize - block.count)
        let inner = SHA256()
        inner.update(block.map { $0 ^ 0x36 })
        inner.update(Array(message))
        let innerDigest = inner.finalize()
        let outer = SHA256()
        outer.update(block.map { $0 ^ 0x5c })
        outer.update(innerDigest)
        return outer.finalize()
    }

    /// The MAC as lowercase hex.
    package static func hex(key: [UInt8], message: some Sequence<UInt8>) -> String { hexString(mac(key: key, message: message)) }
}

extension SHA256 {
    /// The 32-byte SHA-256 of `bytes`.
    package static func digest(of bytes: [UInt8]) -> [UInt8] { bytes.withUnsafeBytes { digest(of: $0) } }
}
