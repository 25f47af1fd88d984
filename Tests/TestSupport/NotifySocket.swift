@preconcurrency import Glibc
import Foundation
import PushSystem
import Synchronization

/// A bound AF_UNIX datagram socket standing in for systemd's notification socket
/// (`NOTIFY_SOCKET`). A thread reads it all the time: the kernel queues only
/// `net.unix.max_dgram_qlen` (often 10) datagrams, and a full queue would block the sender's
/// `sd_notify`.
///
/// `Sendable`: what the reading thread shares is behind a lock and a semaphore.
package final class NotifySocket: Sendable {
    package let path: String
    private let reader: Reader

    /// What the reading thread owns; the socket object itself is not captured, so its
    /// `deinit` can stop the thread.
    private final class Reader: Sendable {
        let fd: Int32
        /// Every datagram, in order, and how many `receive` has handed out.
        let received = Locked<(all: [String], taken: Int)>(([], 0))
        /// Counts datagrams not yet handed out by `receive`.
        let available = DispatchSemaphore(value: 0)
        let stopping = Atomic<Bool>(false)
        let finished = DispatchSemaphore(value: 0)

        init(fd: Int32) { self.fd = fd }

        func loop() {
            defer { finished.signal() }
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !stopping.load(ordering: .relaxed) {
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&pfd, 1, 50) == 1 else { continue }
                let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
                if n > 0 {
                    let message = String(decoding: buffer[0..<n], as: UTF8.self)
                    received.withLock { $0.all.append(message) }
                    available.signal()
                }
            }
        }
    }

    package init() throws(SystemError) {
        // sun_path holds 108 bytes: keep the name short, directly under /tmp.
        path = "/tmp/pn-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SystemError(call: "socket", errno: errno) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { [path] raw in
            raw.copyBytes(from: Array(path.utf8) + [0])
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw SystemError(call: "bind", errno: code, subject: path)
        }
        let reader = Reader(fd: fd)
        self.reader = reader
        Thread { reader.loop() }.start()
    }

    deinit {
        reader.stopping.store(true, ordering: .relaxed)
        reader.finished.wait()
        close(reader.fd)
        unlink(path)
    }

    /// Every datagram received so far, including those `receive` handed out.
    package var messages: [String] { reader.received.withLock { $0.all } }

    /// The next datagram not yet handed out, or nil when none arrives within `timeout`.
    package func receive(timeout: Duration = .seconds(2)) -> String? {
        let (seconds, attoseconds) = timeout.components
        let nanos = Int(clamping: seconds).multipliedReportingOverflow(by: 1_000_000_000)
        let deadline: DispatchTime = nanos.overflow ? .distantFuture
            : .now() + .nanoseconds(nanos.partialValue + Int(attoseconds / 1_000_000_000))
        guard reader.available.wait(timeout: deadline) == .success else { return nil }
        return reader.received.withLock { state in
            defer { state.taken += 1 }
            return state.all[state.taken]
        }
    }

    /// The datagrams not yet handed out, waiting until none arrives for 50 ms.
    package func drain() -> [String] {
        var all: [String] = []
        while let message = receive(timeout: .milliseconds(50)) { all.append(message) }
        return all
    }
}
