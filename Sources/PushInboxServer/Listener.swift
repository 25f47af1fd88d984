@preconcurrency import Glibc
internal import CSystemd
import PushSystem

/// The listening socket: one passed by systemd (socket activation) or one bound here for
/// `--listen ADDR:PORT`. `Sendable`: case-less namespace.
package enum Listener {
    /// The first socket systemd passed (`sd_listen_fds(3)`), or `nil` when none was.
    package static func fromSystemd() throws(SystemError) -> Int32? {
        let count = sd_listen_fds(1)
        if count < 0 { throw SystemError(call: "sd_listen_fds", errno: -count) }
        return count >= 1 ? SD_LISTEN_FDS_START : nil
    }

    /// Parses `ADDR:PORT` (`127.0.0.1:8080`, `[::1]:0`, `0.0.0.0:8080`); `nil` when malformed.
    package static func parse(_ text: String) -> (host: String, port: UInt16)? {
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = String(text[..<colon])
        guard let port = UInt16(text[text.index(after: colon)...]) else { return nil }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host.isEmpty ? nil : (host, port)
    }

    /// Binds and listens on `host:port` (an IPv4 or IPv6 literal). Returns the fd and the port
    /// bound (the kernel's choice for port 0).
    package static func bind(host: String, port: UInt16) throws(SystemError) -> (fd: Int32, port: UInt16) {
        var v4 = in_addr()
        var v6 = in6_addr()
        let family: Int32
        if inet_pton(AF_INET, host, &v4) == 1 { family = AF_INET } else if inet_pton(AF_INET6, host, &v6) == 1 { family = AF_INET6 } else {
            throw SystemError(call: "inet_pton", errno: EINVAL, subject: host)
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        if fd < 0 { throw SystemError(call: "socket", errno: errno, subject: host) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var result: Int32
        if family == AF_INET {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            address.sin_addr = v4
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        } else {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            address.sin6_addr = v6
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        }
        if result != 0 {
            let saved = errno
            close(fd)
            throw SystemError(call: "bind", errno: saved, subject: "\(host):\(port)")
        }
        if listen(fd, 1024) != 0 {
            let saved = errno
            close(fd)
            throw SystemError(call: "listen", errno: saved, subject: "\(host):\(port)")
        }
        return (fd, boundPort(fd) ?? port)
    }

    /// The local port of a bound socket (`getsockname(2)`).
    package static func boundPort(_ fd: Int32) -> UInt16? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) == 0 }
        }
        guard ok else { return nil }
        switch Int32(truncatingIfNeeded: storage.ss_family) {
        case AF_INET: return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) } }
        case AF_INET6: return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) } }
        default: return nil
        }
    }

    /// Sends `state` to the service manager (`sd_notify(3)`); a no-op without `$NOTIFY_SOCKET`.
    package static func notify(_ state: String) {
        _ = sd_notify(0, state)
    }
}
