@preconcurrency import Glibc

/// The outbox's peer-address guard: private, loopback, link-local and other non-public
/// networks are refused unless `AllowNetworks=` lists them. The endpoints come from the
/// operator, not from payloads, but a DNS answer or a typo pointing the outbox at a metadata
/// service or an internal admin port should fail loudly rather than POST secrets there.
/// (PushMedia has the same policy; PushOutbox does not depend on PushMedia, which would pull
/// libvips and the media fetcher into a module that only needs these few lines.)
///
/// `Sendable`: a plain value.
struct AddressCheck: Sendable {
    struct Network: Sendable {
        var bytes: [UInt8]
        var prefix: Int

        init?(_ text: String) {
            let parts = text.split(separator: "/", omittingEmptySubsequences: false)
            guard parts.count <= 2, let address = AddressCheck.parse(String(parts[0])) else { return nil }
            let maximum = address.count * 8
            let prefix = parts.count == 2 ? Int(parts[1]) : maximum
            guard let prefix, (0...maximum).contains(prefix) else { return nil }
            bytes = address
            self.prefix = prefix
        }

        func contains(_ candidate: [UInt8]) -> Bool {
            guard candidate.count == bytes.count else { return false }
            var left = prefix
            for index in bytes.indices where left > 0 {
                let bits = min(8, left)
                let mask = UInt8(truncatingIfNeeded: 0xFF << (8 - bits))
                if candidate[index] & mask != bytes[index] & mask { return false }
                left -= bits
            }
            return true
        }
    }

    static let refusedByDefault: [Network] = [
        "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
        "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
        "::/128", "::1/128", "fe80::/10", "fec0::/10", "fc00::/7", "ff00::/8", "100::/64",
    ].map { Network($0)! }

    var allowed: [Network]

    /// `networks`: canonical CIDRs from the configuration (already validated there).
    init(allowing networks: [String]) {
        allowed = networks.compactMap(Network.init)
    }

    /// Why `address` (4 or 16 bytes) is refused, or `nil`. IPv4-mapped IPv6 is judged as IPv4.
    func refusal(for address: [UInt8]) -> String? {
        if allowed.contains(where: { $0.contains(address) }) { return nil }
        if address.count == 16, address[0..<10].allSatisfy({ $0 == 0 }), address[10] == 0xFF, address[11] == 0xFF {
            return refusal(for: Array(address[12..<16]))
        }
        if AddressCheck.refusedByDefault.contains(where: { $0.contains(address) }) {
            return "the endpoint resolved to a private, loopback or link-local address; add it to [Outbox] AllowNetworks= if this is intended"
        }
        return nil
    }

    static func parse(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}
