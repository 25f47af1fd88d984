@preconcurrency import Glibc
import Foundation
import Synchronization
import PushSystem
import PushJournal
import TestSupport

/// The deployed shape on loopback, for the benches that need the real binaries: nats-server
/// (JetStream, its own store), a receiver standing in for Mindbox, `pushspoold` with the inbox
/// follower (and the outbox and the exporter unless left out) and `pushspool-inbox`, all
/// started here and all stopped by ``stop()``. Media is off unless asked for; with it on,
/// `[Media]` keeps the shipped defaults and pushspoold spawns `pushspool-fetch` beside it.
///
/// Not `Sendable`: one bench drives it.
final class LiveStack {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    let spool: ExternalSpool
    let secret: [UInt8]
    let outbox: Bool
    let export: Bool
    let media: Bool
    let connectionsPerIP: Int?
    private(set) var nats: NatsServer?
    private(set) var receiver: LoopbackHTTPServer?
    private(set) var daemon: DaemonProcess?
    private(set) var inbox: InboxServerProcess?

    /// The path the outbox POSTs Mindbox events to.
    static let mindboxPath = "/v3/operations/async"

    var inboxPort: Int { inbox?.port ?? 0 }
    var state: String { spool.state }

    /// Starts everything; on a failure what started is stopped again and the error says what
    /// did not start.
    /// `connectionsPerIP`: pushspool-inbox's `MaxConnectionsPerIP=` when the bench opens more
    /// streams from loopback than its default allows (`nil`: the default).
    init(label: String, outbox: Bool = true, export: Bool = true, media: Bool = false, connectionsPerIP: Int? = nil) throws(Failure) {
        spool = ExternalSpool(label: label)
        self.outbox = outbox
        self.export = export
        self.media = media
        self.connectionsPerIP = connectionsPerIP
        // 32 random bytes as 64 hex characters: printable, so the file needs no trimming care.
        secret = Array(hexString((0..<32).map { _ in UInt8.random(in: 0...255) }).utf8)
        do {
            try start()
        } catch {
            stop()
            throw error
        }
    }

    private func start() throws(Failure) {
        do {
            try Posix.writeFileAtomically(directory: spool.root, name: "inbox-secret", bytes: secret, mode: 0o600)
            try Posix.writeFileAtomically(directory: spool.root, name: "mindbox-key", bytes: Array("bench-mindbox-key\n".utf8), mode: 0o600)
        } catch {
            throw Failure(description: "cannot write the secrets: \(error)")
        }
        // Media on means the shipped `[Media]` defaults (Enabled=yes): nothing written.
        var config = (media ? "" : "[Media]\nEnabled=no\n") + "[Inbox]\nEnabled=yes\nTokenSecretFile=\(spool.root)/inbox-secret\n"
        if let connectionsPerIP { config += "MaxConnectionsPerIP=\(connectionsPerIP)\n" }
        if outbox {
            let server: LoopbackHTTPServer
            do { server = try LoopbackHTTPServer() } catch { throw Failure(description: "cannot start the receiver: \(error)") }
            server.route(Self.mindboxPath, .ok([]))
            receiver = server
            config += "[Outbox]\nEnabled=yes\nAllowHTTP=yes\nAllowNetworks=127.0.0.0/8\nMindboxURL=\(server.url(""))\n"
                + "MindboxEndpointId=bench-app\nMindboxSecretKeyFile=\(spool.root)/mindbox-key\n"
        } else {
            config += "[Outbox]\nEnabled=no\n"
        }
        if export {
            let server: NatsServer
            do {
                server = try NatsServer(storeDirectory: spool.root + "/nats")
                nats = server
                try server.start()
            } catch {
                throw Failure(description: "cannot start \(NatsServer.executable): \(error)")
            }
            config += "[Export]\nEnabled=yes\nURL=\(server.url)\nReplicas=1\nHostId=bench\n"
        } else {
            config += "[Export]\nEnabled=no\n"
        }
        do {
            try (config + benchConfigFromEnvironment()).write(toFile: spool.config, atomically: true, encoding: .utf8)
        } catch {
            throw Failure(description: "cannot write \(spool.config): \(error)")
        }
        do {
            let started = try DaemonProcess(spool: spool)
            daemon = started
            guard started.waitReady() else { throw Failure(description: "pushspoold did not report READY=1 (is it built next to pushspool-bench?)") }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(description: "cannot start pushspoold: \(error)")
        }
        do {
            let started = try InboxServerProcess(spool: spool)
            inbox = started
            guard started.waitReady() else {
                throw Failure(description: "pushspool-inbox did not report READY=1: \(started.stderr.suffix(500))")
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw Failure(description: "cannot start pushspool-inbox: \(error)")
        }
    }

    /// Stops pushspool-inbox, pushspoold, nats-server and the receiver (each with SIGTERM and a
    /// wait), then removes the spool. Safe to call twice.
    func stop() {
        inbox?.stop()
        inbox = nil
        daemon?.stop()
        daemon = nil
        nats?.stop()
        nats = nil
        receiver?.stop()
        receiver = nil
        spool.remove()
    }

    /// SIGTERM to pushspool-inbox and then to pushspoold, as systemd stops the units (the
    /// inbox is ordered after the daemon): seconds from each signal to its process's exit,
    /// `nil` for a process that was not running.
    func stopServersTimed() -> (inbox: Double?, daemon: Double?) {
        // Foundation's waitUntilExit looks every 50 ms; the process's state in /proc shows
        // its exit (a zombie until reaped) to the millisecond.
        func timed(_ process: Process) -> Double? {
            guard process.isRunning else { return nil }
            let pid = process.processIdentifier
            let start = Posix.monotonicNanos()
            kill(pid, SIGTERM)
            while let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")"), stat[stat.index(after: close)...].dropFirst().first != "Z" {
                usleep(1_000)
            }
            let seconds = Double(Posix.monotonicNanos() - start) / 1e9
            process.waitUntilExit()
            return seconds
        }
        let inboxSeconds = inbox.flatMap { timed($0.process) }
        inbox = nil
        let daemonSeconds = daemon.flatMap { timed($0.process) }
        daemon = nil
        return (inboxSeconds, daemonSeconds)
    }

    /// `user`'s bearer token: lowercase hex of HMAC-SHA256(secret, user), as the app's back
    /// end makes it (see PushInboxServer's TokenAuth).
    func token(user: String) -> String {
        hexString(hmacSHA256(key: secret, message: Array(user.utf8)))
    }

    /// Writes `bytes` into the staging directory and renames it into `incoming/` as a producer
    /// does; returns the monotonic time just before the rename (as `produceSteadily` stamps).
    func drop(name: String, bytes: [UInt8]) -> UInt64? { spool.dropTimed(name: name, bytes: bytes) }

    /// The journal's last seq (0 when empty or unreadable).
    var journalLastSeq: UInt64 { ((try? JournalReader.lastSeq(directory: StateLayout(root: state).journal)) ?? nil) ?? 0 }

    /// One request to pushspool-inbox signed for `user`: the status and the body, nil when the
    /// connection failed.
    func request(_ method: String, _ path: String, user: String, body: [UInt8] = []) -> (status: Int, body: String)? {
        guard let fd = connectLoopback(port: inboxPort) else { return nil }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(inboxPort)\r\nConnection: close\r\n"
            + "X-Pushspool-User: \(user)\r\nAuthorization: Bearer \(token(user: user))\r\n"
        if !body.isEmpty || method == "POST" { head += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n" }
        guard sendAll(fd, Array((head + "\r\n").utf8) + body) else { return nil }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        // Bounded: a response over 1 MiB is not one this bench asks for.
        while response.count < 1 << 20 {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            response.append(contentsOf: buffer[0..<n])
        }
        let text = String(decoding: response, as: UTF8.self)
        let statusLine = text.prefix { $0 != "\r" && $0 != "\n" }.split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else { return nil }
        let bodyText = text.range(of: "\r\n\r\n").map { String(text[$0.upperBound...]) } ?? ""
        return (status, bodyText)
    }
}

/// A `pushspool-inbox` child on 127.0.0.1 (port chosen by the kernel) with its own
/// notification socket; the port comes from its `STATUS=serving on 127.0.0.1:PORT`.
final class InboxServerProcess {
    let process = Process()
    let notify: NotifySocket
    private let stderrPath: String
    private(set) var port = 0

    convenience init(spool: ExternalSpool) throws {
        try self.init(spool: spool.root + "/spool", state: spool.state, config: spool.config, stderr: spool.root + "/inbox.err")
    }

    /// pushspool-inbox on these directories and configuration, its stderr into `stderr`.
    init(spool: String, state: String, config: String, stderr: String) throws {
        notify = try NotifySocket()
        stderrPath = stderr
        _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: siblingBinary("pushspool-inbox"))
        process.arguments = ["--listen", "127.0.0.1:0", "--spool", spool, "--state-dir", state, "--config", config]
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = notify.path
        process.environment = environment
        process.standardError = FileHandle(forWritingAtPath: stderrPath)
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }
    var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

    /// Waits for READY=1 with the port; false when the server exited or `timeout` passed.
    func waitReady(timeout: Duration = .seconds(60)) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let message = notify.receive(timeout: .milliseconds(100)) {
                let lines = message.split(separator: "\n")
                if let status = lines.first(where: { $0.hasPrefix("STATUS=serving on 127.0.0.1:") }) {
                    port = Int(status.dropFirst("STATUS=serving on 127.0.0.1:".count)) ?? 0
                }
                if lines.contains("READY=1") { return port > 0 }
            } else if !process.isRunning {
                return false
            }
        }
        return false
    }

    func stop() {
        guard process.isRunning else { return }
        kill(pid, SIGTERM)
        process.waitUntilExit()
    }
}

/// A client of `GET /v1/inbox/stream` on a thread of its own: hands each Server-Sent Event
/// (its `event:` name and `data:` text) to `onEvent` with the monotonic time the bytes that
/// completed it were received. Decodes chunked transfer coding.
///
/// `Sendable`: the socket is written once before the thread starts; the thread owns the rest.
final class InboxStreamReader: Sendable {
    private let fd: Int32
    private let finished = DispatchSemaphore(value: 0)
    private let stopped = Atomic<Bool>(false)
    /// The HTTP status of the response once its head arrived.
    let status = Locked<Int?>(nil)

    init(port: Int, user: String, token: String, onEvent: @escaping @Sendable (_ event: String, _ data: String, _ at: UInt64) -> Void) throws(LiveStack.Failure) {
        guard let fd = connectLoopback(port: port) else { throw LiveStack.Failure(description: "cannot connect to 127.0.0.1:\(port): errno \(errno)") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        let request = "GET /v1/inbox/stream HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAccept: text/event-stream\r\n"
            + "X-Pushspool-User: \(user)\r\nAuthorization: Bearer \(token)\r\n\r\n"
        guard sendAll(fd, Array(request.utf8)) else {
            close(fd)
            throw LiveStack.Failure(description: "cannot send the stream request")
        }
        self.fd = fd
        let finished = finished, status = status
        Thread { Self.read(fd: fd, status: status, onEvent: onEvent); finished.signal() }.start()
    }

    /// Ends the connection and waits for the thread. Safe to call twice.
    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        shutdown(fd, Int32(SHUT_RDWR))
        finished.wait()
        close(fd)
    }

    /// Waits until the response head arrived (or `timeout` passed): its status.
    func waitStatus(timeout: Duration = .seconds(10)) -> Int? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let code = status.withLock({ $0 }) { return code }
            usleep(5_000)
        }
        return nil
    }

    private static func read(fd: Int32, status: Locked<Int?>, onEvent: (String, String, UInt64) -> Void) {
        var raw: [UInt8] = []        // received, not yet decoded
        var sse: [UInt8] = []        // decoded body, not yet split into events
        var chunked: Bool?           // nil until the head arrived
        var buffer = [UInt8](repeating: 0, count: 65_536)
        reading: while true {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            let at = Posix.monotonicNanos()
            raw.append(contentsOf: buffer[0..<n])
            if chunked == nil {
                guard let end = find([13, 10, 13, 10], in: raw) else { continue }
                let head = String(decoding: raw[0..<end], as: UTF8.self)
                let statusLine = head.prefix { $0 != "\r" }.split(separator: " ")
                status.withLock { $0 = statusLine.count >= 2 ? Int(statusLine[1]) ?? 0 : 0 }
                chunked = head.lowercased().contains("transfer-encoding: chunked")
                raw.removeFirst(end + 4)
            }
            if chunked == true {
                while let lineEnd = find([13, 10], in: raw) {
                    let sizeText = String(decoding: raw[0..<lineEnd], as: UTF8.self).prefix { $0 != ";" }
                    guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0 else { break reading }
                    if size == 0 { break reading }
                    guard raw.count >= lineEnd + 2 + size + 2 else { break }
                    sse.append(contentsOf: raw[(lineEnd + 2)..<(lineEnd + 2 + size)])
                    raw.removeFirst(lineEnd + 2 + size + 2)
                }
            } else {
                sse.append(contentsOf: raw)
                raw.removeAll(keepingCapacity: true)
            }
            while let end = find([10, 10], in: sse) {
                var event = "message", data = ""
                for line in String(decoding: sse[0..<end], as: UTF8.self).split(separator: "\n") {
                    if line.hasPrefix("event:") { event = line.dropFirst(6).trimmingCharacters(in: .whitespaces) }
                    if line.hasPrefix("data:") { data += line.dropFirst(5).trimmingCharacters(in: .whitespaces) }
                }
                // A comment block (`: keep-alive`) is handed on as event ":" (the idle bench counts them).
                if !sse[0..<end].isEmpty, sse[0] == UInt8(ascii: ":") { event = ":" }
                sse.removeFirst(end + 2)
                onEvent(event, data, at)
            }
        }
        status.withLock { if $0 == nil { $0 = 0 } }
    }
}

/// The first index of `needle` in `haystack`.
private func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
    guard haystack.count >= needle.count else { return nil }
    for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
        var match = true
        for offset in 1..<needle.count where haystack[start + offset] != needle[offset] {
            match = false
            break
        }
        if match { return start }
    }
    return nil
}

/// The 1-minute load average: latency figures on a shared machine mean little without it.
func loadAverage() -> String {
    var load = [Double](repeating: 0, count: 3)
    return getloadavg(&load, 3) > 0 ? String(format: "%.1f", load[0]) : "unknown"
}

/// A TCP connection to 127.0.0.1:`port`, or nil.
func connectLoopback(port: Int) -> Int32? {
    guard let port16 = UInt16(exactly: port) else { return nil }
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return nil }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = port16.bigEndian
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
    if !connected {
        close(fd)
        return nil
    }
    return fd
}

private func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    var sent = 0
    while sent < bytes.count {
        let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
        if n < 0, errno == EINTR { continue }
        guard n > 0 else { return false }
        sent += n
    }
    return true
}

/// HMAC-SHA256 (RFC 2104) over PushSystem's SHA256.
func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
    let blockSize = 64
    var block = key.count > blockSize ? key.withUnsafeBytes { SHA256.digest(of: $0) } : key
    block += [UInt8](repeating: 0, count: blockSize - block.count)
    let hasher = SHA256()
    hasher.update(block.map { $0 ^ 0x36 })
    hasher.update(message)
    let inner = hasher.finalize()
    hasher.update(block.map { $0 ^ 0x5c })
    hasher.update(inner)
    return hasher.finalize()
}

/// Context switches (voluntary + involuntary) of every thread of `pid`, by thread id, with
/// the thread's name and the system call it sleeps in now (/proc/PID/task/TID/syscall): each
/// voluntary switch is a sleep the thread later woke from.
/// The pids of `parent`'s children whose command name is `name` (from `/proc/*/stat`).
func childProcesses(of parent: Int32, named name: String) -> [Int32] {
    ExternalSpool.names(in: "/proc").compactMap { entry -> Int32? in
        guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
              let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")") else { return nil }
        // "pid (comm) state ppid ...": comm may hold spaces, so split after the last ')'.
        let comm = stat[stat.index(after: open)..<close]
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 1, Int32(fields[1]) == parent, comm == name.prefix(15) else { return nil }
        return pid
    }
}

func threadContextSwitches(pid: Int32) -> [Int32: (name: String, switches: Int)] {
    var result: [Int32: (name: String, switches: Int)] = [:]
    // Unnamed threads carry the process's name: the call each sleeps in tells them apart.
    let calls: [Int: String] = [0: "read", 7: "poll", 23: "select", 35: "nanosleep", 45: "recvfrom", 47: "recvmsg", 202: "futex",
                                230: "clock_nanosleep", 232: "epoll_wait", 270: "pselect6", 271: "ppoll", 281: "epoll_pwait", 288: "accept4"]
    for entry in ExternalSpool.names(in: "/proc/\(pid)/task") {
        guard let tid = Int32(entry),
              let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(entry)/status", encoding: .utf8) else { continue }
        var name = "?", switches = 0
        for line in status.split(separator: "\n") {
            if line.hasPrefix("Name:") {
                name = line.dropFirst(5).trimmingCharacters(in: .whitespaces)
            } else if line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") {
                switches += Int(line.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? 0
            }
        }
        if let syscall = try? String(contentsOfFile: "/proc/\(pid)/task/\(entry)/syscall", encoding: .utf8),
           let number = Int(syscall.prefix { $0 != " " && $0 != "\n" }) {
            name += " in " + (calls[number] ?? "syscall \(number)")
        }
        result[tid] = (name, switches)
    }
    return result
}
