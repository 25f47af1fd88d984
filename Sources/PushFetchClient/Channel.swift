@preconcurrency import Glibc
import PushSystem

/// One end of the daemon–fetcher connection: an AF_UNIX SOCK_SEQPACKET socket, so each
/// message arrives whole or not at all and no framing of our own can be confused.
///
/// Not `Sendable` by itself; users wrap the fd. Every call here is one system call.
package enum SeqPacket {
    /// `socketpair(2)` with close-on-exec on both ends.
    package static func pair() throws(SystemError) -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        _ = try Posix.call("socketpair") { socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) }
        return (fds[0], fds[1])
    }

    /// `connect(2)` to a SOCK_SEQPACKET socket at `path` (e.g. systemd's pushspool-fetch.socket).
    package static func connect(path: String) throws(SystemError) -> Int32 {
        let fd = try Posix.call("socket", path) { socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            Posix.close(fd)
            throw SystemError(call: "connect", errno: ENAMETOOLONG, subject: path)
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        do {
            _ = try Posix.call("connect", path) {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
            }
        } catch {
            Posix.close(fd)
            throw error
        }
        return fd
    }

    /// `send(2)` one message. `wait: false` adds MSG_DONTWAIT: a peer that stopped reading must
    /// not block the caller (the daemon's intake); EAGAIN is then thrown.
    package static func send(_ fd: Int32, _ message: [UInt8], wait: Bool) throws(SystemError) {
        let flags = Int32(MSG_NOSIGNAL) | (wait ? 0 : Int32(MSG_DONTWAIT))
        let sent = try Posix.call("send") { message.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, flags) } }
        guard sent == message.count else { throw SystemError(call: "send", errno: EMSGSIZE) }
    }

    /// What `receive` got.
    package enum Received {
        case message([UInt8])
        /// Larger than the protocol allows (cut by the kernel): a broken or hostile peer.
        case oversized(Int)
        /// The peer closed its end (exit, crash, kill).
        case closed
    }

    /// `recv(2)` one message, blocking. MSG_TRUNC makes the kernel report the real length of an
    /// oversized message instead of silently cutting it.
    package static func receive(_ fd: Int32) throws(SystemError) -> Received {
        var buffer = [UInt8](repeating: 0, count: FetchMessage.maxMessageBytes + 1)
        let count = try Posix.call("recv") {
            buffer.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, Int32(MSG_TRUNC)) }
        }
        if count == 0 { return .closed }
        if count > FetchMessage.maxMessageBytes { return .oversized(count) }
        return .message(Array(buffer[0..<count]))
    }

    /// `poll(2)` for input on `fd`; true when a message (or the peer's close) is waiting.
    package static func readable(_ fd: Int32, timeoutMillis: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let result = poll(&entry, 1, timeoutMillis)
        return result > 0 && entry.revents != 0
    }

    /// Sets SO_SNDBUF (the kernel doubles it); room for the backlog of requests.
    package static func setSendBuffer(_ fd: Int32, bytes: Int32) {
        var value = bytes
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &value, socklen_t(MemoryLayout<Int32>.size))
    }
}
