@preconcurrency import Glibc

/// An IPv4 or IPv6 network in CIDR form (`127.0.0.1/32`, `fd00::/8`); a bare address means
/// a single host.
///
/// `Sendable`: a plain value.
package struct IPNetwork: Sendable, Hashable, CustomStringConvertible {
    /// 4 bytes for IPv4, 16 for IPv6.
    package var address: [UInt8]
    package var prefixLength: Int

    package init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = IPNetwork.parseAddress(String(parts[0])) else { return nil }
        let maxPrefix = address.count * 8
        var prefix = maxPrefix
        if parts.count == 2 {
            guard let value = Int(parts[1]), value >= 0, value <= maxPrefix else { return nil }
            prefix = value
        }
        self.address = address
        self.prefixLength = prefix
    }

    package var description: String {
        let text: String
        if address.count == 4 {
            text = address.map(String.init).joined(separator: ".")
        } else {
            text = IPNetwork.format(address)
        }
        return "\(text)/\(prefixLength)"
    }

    /// True when `candidate` (4 or 16 bytes, same family) lies in this network.
    package func contains(_ candidate: [UInt8]) -> Bool {
        guard candidate.count == address.count else { return false }
        var remaining = prefixLength
        for index in 0..<address.count where remaining > 0 {
            let bits = min(8, remaining)
            let mask: UInt8 = bits == 8 ? 0xFF : ~(0xFF >> UInt8(bits))
            if candidate[index] & mask != address[index] & mask { return false }
            remaining -= bits
        }
        return true
    }

    /// Parses a numeric IPv4 or IPv6 address with `inet_pton`.
    package static func parseAddress(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    package static func format(_ address: [UInt8]) -> String {
        if address.count == 4 { return address.map(String.init).joined(separator: ".") }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        var v6 = in6_addr()
        withUnsafeMutableBytes(of: &v6) { $0.copyBytes(from: address) }
        guard inet_ntop(AF_INET6, &v6, &buffer, socklen_t(buffer.count)) != nil else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The SSRF guard: which peer addresses a media download may connect to. Checked on the
/// address curl is about to connect to (after DNS, for every redirect hop), so a public name
/// that resolves to 127.0.0.1 or a redirect to `http://169.254.169.254/` is refused.
///
/// `Sendable`: a plain value.
package struct AddressPolicy: Sendable {
    /// Networks refused unless allow-listed: unspecified, "this network", private (RFC 1918,
    /// ULA), shared CGNAT space, loopback, link-local, multicast, reserved and broadcast.
    package static let refusedByDefault: [IPNetwork] = [
        "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
        "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/4", "240.0.0.0/4",
        "::/128", "::1/128", "fe80::/10", "fec0::/10", "fc00::/7", "ff00::/8", "100::/64",
    ].map { IPNetwork($0)! }

    package var allowed: [IPNetwork]

    package init(allowed: [IPNetwork]) {
        self.allowed = allowed
    }

    /// Why `address` is refused, or `nil` when a connection may be made. IPv4-mapped
    /// (`::ffff:a.b.c.d`), IPv4-compatible and NAT64 (`64:ff9b::/96`) addresses are judged by the
    /// IPv4 address inside them, since that is where the packets end up.
    package func refusal(for address: [UInt8]) -> String? {
        if allowed.contains(where: { $0.contains(address) }) { return nil }
        if address.count == 16, let embedded = AddressPolicy.embeddedIPv4(address) {
            return refusal(for: embedded)
        }
        if let network = AddressPolicy.refusedByDefault.first(where: { $0.contains(address) }) {
            return "\(IPNetwork.format(address)) is in \(network), which media downloads may not reach; add it to AllowNetworks= if this is intended"
        }
        return nil
    }

    private static func embeddedIPv4(_ address: [UInt8]) -> [UInt8]? {
        let tail = Array(address[12..<16])
        if address[0..<10].allSatisfy({ $0 == 0 }) && address[10] == 0xFF && address[11] == 0xFF { return tail }
        if address[0..<12] == [0x00, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0] { return tail }
        // IPv4-compatible (deprecated) ::a.b.c.d, but not :: and ::1 themselves.
        if address[0..<12].allSatisfy({ $0 == 0 }) && !(tail[0] == 0 && tail[1] == 0 && tail[2] == 0) { return tail }
        return nil
    }
}
