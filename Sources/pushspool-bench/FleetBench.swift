@preconcurrency import Glibc
import Foundation
import PushSystem
import PushExport
import TestSupport

/// `pushspool-bench fleet [--rate R] [--seconds S] [--single]`
///
/// Drop-to-visible across the fleet (issue 23): a 3-node JetStream cluster on loopback with an
/// R3 stream (`--single`: one node, R1), an ingest host `a` (the real `pushspoold`, exporting)
/// and two inbox nodes (the real `pushspool-inbox` with `[Inbox] Source=nats`, each its own
/// index), all started here as plain processes — no systemd. One `GET /v1/inbox/stream` is
/// open on each node for a user; files for that user are renamed into host a's `incoming/` at
/// R a second (default 200) for S seconds (default 10). The latency of each is from just
/// before its rename until its `event: item` arrived on node 1, on node 2, and on both (the
/// later of the two). In the same run, two floors beside it: a raw NATS publish waiting for
/// its PubAck on the same cluster and replication, one at a time at the same rate (what the
/// stream itself costs), and the C loop's drop-to-durable at the same rate (what the disk
/// costs). The fleet path is the sum of both plus the nodes' fetch, apply and SSE.
func runFleetBench(arguments: [String]) {
    var rate = 200
    var seconds = 10
    var single = false
    var index = 0
    while index < arguments.count {
        let value = index + 1 < arguments.count ? Int(arguments[index + 1]) : nil
        switch (arguments[index], value) {
        case ("--rate", let v?) where v > 0 && v <= 10_000: rate = v
        case ("--seconds", let v?) where v > 0 && v <= 3_600: seconds = v
        case ("--single", _): single = true; index -= 1
        default:
            print("usage: pushspool-bench fleet [--rate R] [--seconds S] [--single]")
            exit(64)
        }
        index += 2
    }
    if !fleetBench(rate: rate, seconds: seconds, natsNodes: single ? 1 : 3) { exit(1) }
}

/// The fleet bench; false (and a results row saying why) when it could not measure.
func fleetBench(rate: Int, seconds: Int, natsNodes: Int) -> Bool {
    print("== fleet: \(rate) files/s for \(seconds) s, drop on host a (rename into incoming/) to `event: item` on both inbox nodes' "
          + "GET /v1/inbox/stream (\(natsNodes)-node JetStream, R\(natsNodes)); then a raw NATS publish to PubAck and the C loop's "
          + "drop-to-durable at the same rate")
    let rowName = "fleet drop-to-visible on both nodes at \(rate)/s (R\(natsNodes))"
    let stack: FleetStack
    do { stack = try FleetStack(natsNodes: natsNodes) } catch {
        print("fleet: \(error)")
        BenchResults.shared.add(rowName, "not measured: \(error)")
        return false
    }
    var stopped = false
    defer { if !stopped { stack.stop() } }
    let loadBefore = loadAverage()

    let total = rate * seconds
    let user = "bench-fleet"
    // Arrival by node and file index (0 = not yet); warm-up files carry no index.
    let arrivals = [Locked<(at: [UInt64], count: Int)>(([UInt64](repeating: 0, count: total), 0)),
                    Locked<(at: [UInt64], count: Int)>(([UInt64](repeating: 0, count: total), 0))]
    let warm = [Locked<Int>(0), Locked<Int>(0)]
    var readers: [InboxStreamReader] = []
    defer { for reader in readers { reader.stop() } }
    for node in 0..<2 {
        let arrived = arrivals[node], warmed = warm[node]
        do {
            readers.append(try InboxStreamReader(port: stack.ports[node], user: user, token: stack.token(user: user)) { event, data, at in
                guard event == "item" else { return }
                guard let number = fileNumber(in: data, prefix: "flt-") else {
                    warmed.withLock { $0 += 1 }
                    return
                }
                arrived.withLock { state in
                    guard number < state.at.count, state.at[number] == 0 else { return }
                    state.at[number] = at
                    state.count += 1
                }
            })
        } catch {
            print("fleet: \(error)")
            BenchResults.shared.add(rowName, "not measured: \(error)")
            return false
        }
        guard readers[node].waitStatus() == 200 else {
            print("fleet: node \(node + 1)'s GET /v1/inbox/stream was not answered 200")
            BenchResults.shared.add(rowName, "not measured: a node refused the stream")
            return false
        }
    }
    func payload(_ title: String, _ i: Int) -> [UInt8] {
        Array("""
            {"pushspool":1,"user":"\(user)","platform":"ios","payload":{"aps":{"alert":{"title":"\(title)","body":"Everything −20% today only, item \(i)"},"mutable-content":1},"clickUrl":"https://shop.example/p/\(i)","uniqueKey":"\(title)","payload":"{\\"pushName\\":\\"sale\\",\\"pushDate\\":\\"2026-11-29T10:00:00Z\\"}"}}
            """.utf8)
    }
    // Warm-up: the stream created, the consumers delivering, the indexes and streams open.
    let warmCount = 20
    for i in 0..<warmCount { _ = stack.host.dropTimed(name: "w\(i).json", bytes: payload("warm-\(i)", i)) }
    guard waitTimed(seconds: 90, "  the warm-up items on both nodes' streams", { warm.allSatisfy { $0.withLock { $0 } >= warmCount } }) else {
        print("fleet: the warm-up items did not reach both nodes: \(stack.diagnostics)")
        BenchResults.shared.add(rowName, "not measured: the warm-up items did not reach both nodes")
        return false
    }

    // When host a's exporter sent each file's record: splits the path at the stream.
    let published = Locked<[UInt64]>([UInt64](repeating: 0, count: total))
    let tap: NatsTap?
    do {
        tap = try NatsTap(url: stack.urls[0], subject: "pushspool.>") { data, at in
            guard let number = fileNumber(in: String(decoding: data, as: UTF8.self), prefix: "flt-") else { return }
            published.withLock { if number < $0.count, $0[number] == 0 { $0[number] = at } }
        }
    } catch {
        print("  \(error): the split at the stream is not measured")
        tap = nil
    }

    var dropped = [UInt64](repeating: 0, count: total)
    let interval = 1_000_000_000 / UInt64(clamping: rate)
    let begin = Posix.monotonicNanos()
    var failedDrops = 0
    for i in 0..<total {
        sleepUntil(monotonicNanos: begin + UInt64(clamping: i) * interval)
        if let at = stack.host.dropTimed(name: "f\(i).json", bytes: payload("flt-\(i)", i)) { dropped[i] = at } else { failedDrops += 1 }
    }
    _ = waitTimed(seconds: 60, "  every file's item on both nodes' streams") {
        arrivals.allSatisfy { $0.withLock { $0.count } >= total - failedDrops }
    }
    tap?.stop()
    let at = arrivals.map { $0.withLock { $0.at } }
    let sent = published.withLock { $0 }
    for reader in readers { reader.stop() }
    readers = []
    let loadAfter = loadAverage()

    func latencies(_ arrival: (Int) -> UInt64) -> [UInt64] {
        (0..<total).compactMap { i in
            let a = arrival(i)
            guard dropped[i] > 0, a > 0 else { return nil }
            return a > dropped[i] ? a - dropped[i] : 0
        }
    }
    let node1 = LatencyPercentiles(latencies { at[0][$0] })
    let node2 = LatencyPercentiles(latencies { at[1][$0] })
    // Visible on both: the later arrival, only for files both nodes showed.
    let both = LatencyPercentiles(latencies { at[0][$0] > 0 && at[1][$0] > 0 ? max(at[0][$0], at[1][$0]) : 0 })
    let missing = total - failedDrops - both.count

    // Floor 1: the stream alone, on the same cluster, while it is quiet again.
    stack.stopProcesses()
    let pubAck = stack.publishLatency(rate: rate, count: total)
    stack.stop()
    stopped = true
    // Floor 2: the disk alone.
    let loop = cLoopLatency(rate: rate, count: total)

    print("  load average \(loadBefore) before the fleet's run, \(loadAfter) after (\(Posix.usableCPUs()) usable CPUs)")
    for (name, figures) in [("node 1", node1), ("node 2", node2), ("both nodes", both)] {
        print(String(format: "drop to visible on %@: p50 %.2f ms, p99 %.2f ms, p999 %.2f ms, max %.2f ms over %d files",
                     name, figures.p50, figures.p99, figures.p999, figures.max, figures.count))
    }
    if missing > 0 || failedDrops > 0 { print("  \(missing) files never reached both nodes, \(failedDrops) not dropped") }
    if tap != nil {
        let visibleBoth = (0..<total).map { at[0][$0] > 0 && at[1][$0] > 0 ? max(at[0][$0], at[1][$0]) : 0 }
        let split = StageSplit(dropped: dropped, published: sent, visible: visibleBoth)
        print(split.report(firstHalf: "drop to published (host a: ingest, journal, export)",
                           secondHalf: "published to visible on both (JetStream store and replication, the nodes' fetch, apply, stream)"))
    }
    if let pubAck {
        print(String(format: "NATS publish to PubAck (R%d, one at a time): p50 %.2f ms, p99 %.2f ms, p999 %.2f ms, max %.2f ms",
                     natsNodes, pubAck.p50, pubAck.p99, pubAck.p999, pubAck.max))
    }
    if let loop {
        print(String(format: "C loop drop to durable: p50 %.2f ms, p99 %.2f ms, p999 %.2f ms, max %.2f ms",
                     loop.p50, loop.p99, loop.p999, loop.max))
    }
    var ratio: [String] = []
    if let loop, let pubAck {
        ratio.append(String(format: "p99 %.2f× the C loop's drop-to-durable p99 + the R%d PubAck p99 (%.2f + %.2f ms)",
                            both.p99 / max(0.001, loop.p99 + pubAck.p99), natsNodes, loop.p99, pubAck.p99))
    }
    BenchResults.shared.add(rowName,
                            String(format: "p50 %.2f ms, p99 %.2f ms, p999 %.2f ms (node 1 p99 %.2f, node 2 p99 %.2f)",
                                   both.p50, both.p99, both.p999, node1.p99, node2.p99)
                                + (missing > 0 ? " (\(missing) missing)" : ""),
                            ratio: ratio.joined(separator: "; "))
    return missing == 0 && failedDrops == 0
}

/// Waits until `done` or `seconds` passed, printing `label` and how long it took; whether
/// `done` came true.
private func waitTimed(seconds: Int, _ label: String, _ done: () -> Bool) -> Bool {
    let start = Posix.monotonicNanos()
    let deadline = start &+ UInt64(clamping: seconds) &* 1_000_000_000
    while !done() {
        guard Posix.monotonicNanos() < deadline else {
            print("\(label): not within \(seconds) s")
            return false
        }
        usleep(5_000)
    }
    print(String(format: "%@: %.2f s", label, Double(Posix.monotonicNanos() - start) / 1e9))
    return true
}

/// The fleet on loopback as plain processes: `natsNodes` nats-servers (clustered when more
/// than one), an ingest pushspoold exporting into stream `FLEETBENCH` with `natsNodes`
/// replicas, and two pushspool-inbox nodes following that stream. ``stop()`` ends all of it.
///
/// Not `Sendable`: one bench drives it.
final class FleetStack {
    static let stream = "FLEETBENCH"
    static let baselineStream = "FLEETBASE"

    /// Host a's spool, state and configuration; the servers' stores and the nodes live under
    /// its root too.
    let host: ExternalSpool
    let secret: [UInt8]
    private(set) var servers: [NatsServer] = []
    private var daemon: DaemonProcess?
    private var nodes: [InboxServerProcess] = []
    private(set) var ports: [Int] = []

    var urls: [String] { servers.map(\.url) }

    init(natsNodes: Int) throws(LiveStack.Failure) {
        host = ExternalSpool(label: "fleet")
        secret = Array(hexString((0..<32).map { _ in UInt8.random(in: 0...255) }).utf8)
        do {
            try start(natsNodes: natsNodes)
        } catch {
            stop()
            throw error
        }
    }

    private func start(natsNodes: Int) throws(LiveStack.Failure) {
        do {
            servers = natsNodes == 1 ? [try NatsServer(storeDirectory: host.root + "/nats/n1")]
                                     : try NatsServer.cluster(count: natsNodes, in: host.root + "/nats")
            for server in servers { try server.start() }
        } catch {
            throw LiveStack.Failure(description: "cannot start \(NatsServer.executable): \(error)")
        }
        // The streams made before anything publishes: a cluster answers JetStream requests only
        // once it elected a meta leader, and the exporter would otherwise wait out its retries.
        try ensureStreams(replicas: natsNodes)
        do {
            try Posix.writeFileAtomically(directory: host.root, name: "inbox-secret", bytes: secret, mode: 0o600)
        } catch {
            throw LiveStack.Failure(description: "cannot write the secret: \(error)")
        }
        let url = urls.joined(separator: " ")
        let hostConfig = "[Spool]\nStableAgeSec=0\n[Media]\nEnabled=no\n[Metrics]\nIntervalSec=1h\n[Inbox]\nEnabled=no\n[Outbox]\nEnabled=no\n"
            + "[Export]\nEnabled=yes\nURL=\(url)\nStream=\(Self.stream)\nReplicas=\(natsNodes)\nHostId=bench-a\n"
        do {
            try (hostConfig + benchConfigFromEnvironment()).write(toFile: host.config, atomically: true, encoding: .utf8)
            let started = try DaemonProcess(spool: host)
            daemon = started
            guard started.waitReady() else { throw LiveStack.Failure(description: "pushspoold did not report READY=1") }
        } catch let failure as LiveStack.Failure {
            throw failure
        } catch {
            throw LiveStack.Failure(description: "cannot start pushspoold: \(error)")
        }
        for node in 1...2 {
            let root = host.root + "/node\(node)"
            let config = root + "/pushspool.conf"
            do {
                for directory in ["/spool/incoming", "/spool/tmp", "/state"] { try Posix.mkdirs(root + directory) }
                try ("[Media]\nEnabled=no\n[Outbox]\nEnabled=no\n[Export]\nURL=\(url)\nStream=\(Self.stream)\nHostId=bench-node\(node)\n"
                     + "[Inbox]\nEnabled=yes\nSource=nats\nTokenSecretFile=\(host.root)/inbox-secret\n")
                    .write(toFile: config, atomically: true, encoding: .utf8)
                let started = try InboxServerProcess(spool: root + "/spool", state: root + "/state", config: config, stderr: root + "/inbox.err")
                nodes.append(started)
                guard started.waitReady() else {
                    throw LiveStack.Failure(description: "pushspool-inbox node \(node) did not report READY=1: \(started.stderr.suffix(500))")
                }
                ports.append(started.port)
            } catch let failure as LiveStack.Failure {
                throw failure
            } catch {
                throw LiveStack.Failure(description: "cannot start pushspool-inbox node \(node): \(error)")
            }
        }
    }

    private func ensureStreams(replicas: Int) throws(LiveStack.Failure) {
        var lastError = ""
        for _ in 0..<60 {
            do throws(ExportError) {
                let client = try NatsClient(urls: urls, name: "pushspool-bench-fleet")
                defer { client.close() }
                try client.ensureStream(name: Self.stream, subjects: ["pushspool.*.*"], replicas: replicas, duplicateWindow: .seconds(120))
                try client.ensureStream(name: Self.baselineStream, subjects: ["fleetbase.>"], replicas: replicas, duplicateWindow: .seconds(120))
                return
            } catch {
                lastError = "\(error)"
                usleep(500_000)
            }
        }
        throw LiveStack.Failure(description: "the JetStream cluster did not create the streams within 30 s: \(lastError)")
    }

    /// What the nodes wrote on stderr, for a bench that could not measure.
    var diagnostics: String { nodes.map { String($0.stderr.suffix(400)) }.joined(separator: " | ") }

    /// `user`'s bearer token (HMAC-SHA256 of the user with the nodes' secret, hex).
    func token(user: String) -> String {
        hexString(hmacSHA256(key: secret, message: Array(user.utf8)))
    }

    /// Publishes `count` messages of about a record's size to the baseline stream, one at a
    /// time at `rate` a second, each waiting for its PubAck; their latencies, or nil (and a
    /// line saying why) when a publish failed.
    func publishLatency(rate: Int, count: Int) -> LatencyPercentiles? {
        let client: NatsClient
        do { client = try NatsClient(urls: urls, name: "pushspool-bench-fleet") } catch {
            print("fleet: cannot connect for the PubAck floor: \(error)")
            return nil
        }
        defer { client.close() }
        let body = Array(String(repeating: "x", count: 700).utf8)
        var latencies: [UInt64] = []
        latencies.reserveCapacity(count)
        let interval = 1_000_000_000 / UInt64(clamping: rate)
        let begin = Posix.monotonicNanos()
        for i in 0..<count {
            sleepUntil(monotonicNanos: begin + UInt64(clamping: i) * interval)
            let start = Posix.monotonicNanos()
            do {
                _ = try client.publish(subject: "fleetbase.bench", msgId: "base-\(i)", body: body, headers: [])
            } catch {
                print("fleet: baseline publish \(i) failed: \(error)")
                return nil
            }
            latencies.append(Posix.monotonicNanos() - start)
        }
        return LatencyPercentiles(latencies)
    }

    /// Stops the nodes and pushspoold (SIGTERM and a wait); the servers stay up.
    func stopProcesses() {
        for node in nodes { node.stop() }
        nodes = []
        daemon?.stop()
        daemon = nil
    }

    /// Stops everything and removes the tree. Safe to call twice.
    func stop() {
        stopProcesses()
        for server in servers { server.stop() }
        servers = []
        host.remove()
    }
}

/// Drop-to-visible cut in two at the moment host a's exporter published a file's record:
/// percentiles of each half over every file, and for the slowest 1 % of files (at or above
/// the whole path's p99) the mean of each half, which names the half that holds the tail.
struct StageSplit {
    var first: LatencyPercentiles
    var second: LatencyPercentiles
    var tailFiles = 0
    var tailFirstMillis = 0.0
    var tailSecondMillis = 0.0

    init(dropped: [UInt64], published: [UInt64], visible: [UInt64]) {
        var whole: [(total: UInt64, first: UInt64, second: UInt64)] = []
        for i in 0..<min(dropped.count, published.count, visible.count) {
            let d = dropped[i], p = published[i], v = visible[i]
            guard d > 0, p > 0, v > 0 else { continue }
            let first = p > d ? p - d : 0
            let second = v > p ? v - p : 0
            whole.append((first + second, first, second))
        }
        first = LatencyPercentiles(whole.map(\.first))
        second = LatencyPercentiles(whole.map(\.second))
        let sorted = whole.sorted { $0.total < $1.total }
        let tail = sorted.suffix(max(1, sorted.count / 100))
        tailFiles = tail.count
        if !tail.isEmpty {
            tailFirstMillis = Double(tail.reduce(0) { $0 + $1.first }) / Double(tail.count) / 1e6
            tailSecondMillis = Double(tail.reduce(0) { $0 + $1.second }) / Double(tail.count) / 1e6
        }
    }

    func report(firstHalf: String, secondHalf: String) -> String {
        let share = tailFirstMillis + tailSecondMillis > 0 ? tailFirstMillis / (tailFirstMillis + tailSecondMillis) : 0
        return String(format: "  %@: p50 %.2f ms, p99 %.2f ms\n  %@: p50 %.2f ms, p99 %.2f ms\n"
                      + "  the slowest 1 %% (%d files): %.2f ms before the stream, %.2f ms after it (%.0f %% before)",
                      firstHalf, first.p50, first.p99, secondHalf, second.p50, second.p99,
                      tailFiles, tailFirstMillis, tailSecondMillis, share * 100)
    }
}
