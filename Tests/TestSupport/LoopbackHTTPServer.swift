@preconcurrency import Glibc
import Foundation
import PushSystem
import Synchronization

/// A small HTTP/1.1 server on a loopback address for tests and benchmarks of media
/// downloads: real sockets, one thread per connection, a behaviour per path (serve, trickle,
/// never answer, redirect, fail first then succeed). Not for production traffic: it lives in
/// `TestSupport`, which neither pushspoold nor pushspoolctl links.
///
/// `Sendable`: routes and counters are behind a lock.
package final class LoopbackHTTPServer: Sendable {
    /// What the server does for a path.
    package indirect enum Behavior: Sendable {
        /// Answers with `status`, the extra `headers` and `body` (Content-Length set).
        case respond(status: Int, headers: [(String, String)], body: [UInt8])
        /// Sends the status line and headers, then the body one byte every `interval` seconds.
        case trickle(headers: [(String, String)], body: [UInt8], interval: Double)
        /// Reads the request and never answers.
        case silent
        /// A 302 to `location`.
        case redirect(location: String)
        /// Streams `chunk` forever without Content-Length (until the client hangs up).
        case endless(headers: [(String, String)], chunk: [UInt8])
        /// The n-th request gets the n-th behaviour; the last repeats.
        case sequence([Behavior])
        /// Holds the request (a vendor that hangs) until the gate is released, then behaves.
        case gated(HTTPGate, Behavior)

        package static func ok(_ body: [UInt8], contentType: String = "application/octet-stream") -> Behavior {
            .respond(status: 200, headers: [("Content-Type", contentType)], body: body)
        }

        package static func status(_ code: Int, headers: [(String, String)] = []) -> Behavior {
            .respond(status: code, headers: headers + [("Content-Type", "text/html")], body: Array("<html><body>\(code)</body></html>".utf8))
        }
    }

    /// One request as received (for checking what a client sent: the outbox's POSTs).
    package struct Request: Sendable, Equatable {
        package var method: String
        /// The request target as sent: path and query.
        package var target: String
        /// Header lines in order, names as sent.
        package var headers: [String]
        /// The body (read up to `Content-Length`).
        package var body: [UInt8]

        /// The value of the first header named `name` (case-insensitive).
        package func header(_ name: String) -> String? {
            for line in headers {
                let parts = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
                if parts.count == 2, parts[0].lowercased() == name.lowercased() {
                    return String(parts[1].drop { $0 == " " })
                }
            }
            return nil
        }
    }

    private struct State: ~Copyable {
        var routes: [String: Behavior] = [:]
        var hits: [String: Int] = [:]
        var requests: [String: [Request]] = [:]
        var connections = 0
        var open: Set<Int32> = []
    }

    package let host: String
    package let port: Int
    private let listener: Int32
    private let state = Locked(State())
    private let stopping = Atomic<Bool>(false)
    /// Signalled once as the accept thread ends: ``stop()`` joins the thread on it.
    private let acceptEnded = DispatchSemaphore(value: 0)

    /// Listens on `host` (an IPv4 loopback address such as 127.0.0.1 or 127.0.0.2), port 0
    /// (the kernel picks one), and starts accepting.
    package init(host: String = "127.0.0.1") throws(SystemError) {
        self.host = host
        let fd = try Posix.call("socket") { socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        inet_pton(AF_INET, host, &address.sin_addr)
        do throws(SystemError) {
            _ = try Posix.call("bind", host) {
                withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            }
            _ = try Posix.call("listen") { listen(fd, 1024) }
            var bound = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = try Posix.call("getsockname") {
                withUnsafeMutablePointer(to: &bound) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
            }
            port = Int(UInt16(bigEndian: bound.sin_port))
        } catch {
            Posix.close(fd)
            throw error
        }
        listener = fd
        Thread { [self] in acceptLoop() }.start()
    }

    deinit {
        stop()
    }

    /// `http://host:port/path`.
    package func url(_ path: String) -> String { "http://\(host):\(port)\(path)" }

    package func route(_ path: String, _ behavior: Behavior) {
        state.withLock { $0.routes[path] = behavior }
    }

    /// Requests received for `path`.
    package func hits(_ path: String) -> Int { state.withLock { $0.hits[path] ?? 0 } }

    /// The requests received for `path` (query not part of the path), in arrival order.
    package func requests(_ path: String) -> [Request] { state.withLock { $0.requests[path] ?? [] } }

    /// Connections accepted so far.
    package var connections: Int { state.withLock { $0.connections } }

    /// Stops accepting and ends every open connection.
    package func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        acceptEnded.wait()
        Posix.close(listener)
        let open = state.withLock { $0.open }
        for fd in open { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop() {
        defer { acceptEnded.signal() }
        while !stopping.load(ordering: .acquiring) {
            var pfd = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 50) > 0 else { continue }
            let client = accept(listener, nil, nil)
            guard client >= 0 else { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            state.withLock {
                $0.connections += 1
                $0.open.insert(client)
            }
            Thread { [self] in
                serve(client)
                state.withLock { _ = $0.open.remove(client) }
                Posix.close(client)
            }.start()
        }
    }

    private func serve(_ fd: Int32) {
        guard let request = readRequest(fd) else { return }
        let path = String(request.target.prefix { $0 != "?" })
        let behavior: Behavior? = state.withLock { state in
            let count = state.hits[path, default: 0]
            state.hits[path] = count + 1
            state.requests[path, default: []].append(request)
            guard let behavior = state.routes[path] else { return nil }
            if case .sequence(let steps) = behavior, !steps.isEmpty { return steps[min(count, steps.count - 1)] }
            return behavior
        }
        perform(behavior ?? .status(404), on: fd)
    }

    private func perform(_ behavior: Behavior, on fd: Int32) {
        switch behavior {
        case .respond(let status, let headers, let body):
            _ = send(fd, head(status, headers + [("Content-Length", "\(body.count)")]) + body)
        case .trickle(let headers, let body, let interval):
            guard send(fd, head(200, headers + [("Content-Length", "\(body.count)")])) else { return }
            for byte in body {
                guard sleepUnlessStopping(interval), send(fd, [byte]) else { return }
            }
        case .silent:
            var buffer = [UInt8](repeating: 0, count: 512)
            while !stopping.load(ordering: .acquiring) {
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                if poll(&pfd, 1, 50) > 0 {
                    // The client hung up (or sent more, which is ignored).
                    if recv(fd, &buffer, buffer.count, 0) <= 0 { return }
                }
            }
        case .redirect(let location):
            _ = send(fd, head(302, [("Location", location), ("Content-Length", "0")]))
        case .endless(let headers, let chunk):
            guard send(fd, head(200, headers)) else { return }
            while !stopping.load(ordering: .acquiring), send(fd, chunk) {}
        case .sequence(let steps):
            perform(steps.first ?? .status(404), on: fd)
        case .gated(let gate, let then):
            guard gate.pass(stopping: { stopping.load(ordering: .acquiring) }) else { return }
            perform(then, on: fd)
        }
    }

    private func head(_ status: Int, _ headers: [(String, String)]) -> [UInt8] {
        var text = "HTTP/1.1 \(status) \(status == 200 ? "OK" : "Status")\r\nConnection: close\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        return Array((text + "\r\n").utf8)
    }

    /// Sends everything; false when the peer is gone. `MSG_NOSIGNAL` keeps SIGPIPE away.
    private func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    private func sleepUnlessStopping(_ seconds: Double) -> Bool {
        var left = seconds
        while left > 0 {
            if stopping.load(ordering: .acquiring) { return false }
            let step = min(left, 0.05)
            // why: the behaviour's own delay (a trickle's pace), looking for a stop every 50 ms
            usleep(UInt32(step * 1_000_000))
            left -= step
        }
        return !stopping.load(ordering: .acquiring)
    }

    /// Reads the request head and, when it has a `Content-Length`, the body.
    private func readRequest(_ fd: Int32) -> Request? {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let terminator: [UInt8] = [13, 10, 13, 10]
        while received.count < 65536 {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&pfd, 1, 5000)
            if ready <= 0 || stopping.load(ordering: .acquiring) { return nil }
            let n = recv(fd, &buffer, buffer.count, 0)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            received.append(contentsOf: buffer[0..<n])
            if received.count >= 4, received.indices.dropLast(3).contains(where: { Array(received[$0..<$0 + 4]) == terminator }) { break }
        }
        guard let end = received.indices.dropLast(3).first(where: { Array(received[$0..<$0 + 4]) == terminator }) else { return nil }
        let lines = String(decoding: received[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let parts = (lines.first ?? "").split(separator: " ")
        guard parts.count >= 2 else { return nil }
        var request = Request(method: String(parts[0]), target: String(parts[1]), headers: Array(lines.dropFirst()), body: [])
        var body = Array(received[(end + 4)...])
        let length = request.header("Content-Length").flatMap { Int($0) } ?? 0
        while body.count < min(length, 1 << 20) {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            if poll(&pfd, 1, 5000) <= 0 || stopping.load(ordering: .acquiring) { return nil }
            let n = recv(fd, &buffer, buffer.count, 0)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return nil }
            body.append(contentsOf: buffer[0..<n])
        }
        request.body = Array(body.prefix(length))
        return request
    }
}

/// A gate a ``LoopbackHTTPServer/Behavior/gated(_:_:)`` route holds requests at: a test waits
/// until a request is held there (``waitForArrivals(_:seconds:)``), does what must happen
/// while the vendor hangs, then ``release()``s it.
///
/// `@unchecked Sendable`: every field is touched under `condition`.
package final class HTTPGate: @unchecked Sendable {
    private let condition = NSCondition()
    private var released = false
    private var arrivals = 0

    package init() {}

    /// Lets every held request (and every later one) through.
    package func release() {
        condition.lock()
        released = true
        condition.broadcast()
        condition.unlock()
    }

    /// Whether `count` requests reached the gate within `seconds`.
    package func waitForArrivals(_ count: Int, seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while arrivals < count {
            if !condition.wait(until: deadline) { return arrivals >= count }
        }
        return true
    }

    /// Holds the caller until released; `false` when the server stops first.
    func pass(stopping: () -> Bool) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        arrivals += 1
        condition.broadcast()
        while !released {
            // Woken by release(); the timed wait only notices the server stopping.
            if stopping() { return false }
            _ = condition.wait(until: Date().addingTimeInterval(0.05))
        }
        return true
    }
}
