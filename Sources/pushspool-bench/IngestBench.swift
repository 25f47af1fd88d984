@preconcurrency import Glibc
import Foundation
import Synchronization
import CBenchBaseline
import PushConfig
import PushSystem
import PushSystemd
import PushJournal
import PushspoolDaemon

/// `pushspool-bench ingest [--files N] [--rounds K] [--rates R,R] [--seconds S] [--inbox-compare]`
///
/// 1. Burst, timed from outside: N files staged, the real `pushspoold` started and READY,
///    then all renamed into `incoming/`; the clock stops when `incoming/` and `processing/`
///    are empty. Against it, in alternating rounds and timed the same way with the same
///    producer, two C loops (`CBenchBaseline`, its own fixed 256 records per `fdatasync`) run
///    as processes: (a) with today's rename claim, (b) with no claim. The ratios are the
///    medians of the rounds' ratios (targets ≥ 1.0× (a), ≥ 0.8× (b)), with CPU a file for each.
/// 2. The same burst in process: the daemon library drains files already in `incoming/`,
///    counted by its commit callback, against the C loop called in process.
/// 3. Drop-to-durable latency p50/p99/p999 at each steady rate (target at 1,000/s: p99 ≤ 5 ms,
///    p999 ≤ 10 ms), measured from the rename into `incoming/` to the commit callback.
/// 4. `--inbox-compare`: the burst with the inbox index on and off (issue 9: within 10 %).
func runIngestBench(arguments: [String]) {
    var files = 20_000
    var rates = [1_000, 5_000]
    var seconds = 5
    var rounds = 3
    var inboxCompare = false
    var external = true, inProcess = true
    var index = 0
    while index < arguments.count {
        let value = index + 1 < arguments.count ? Int(arguments[index + 1]) : nil
        switch (arguments[index], value) {
        case ("--files", let v?) where v > 0: files = v
        case ("--rate", let v?) where v > 0: rates = [v]
        case ("--rates", _) where index + 1 < arguments.count:
            rates = arguments[index + 1].split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 }
        case ("--seconds", let v?) where v > 0: seconds = v
        case ("--rounds", let v?) where v > 0: rounds = v
        case ("--inbox-compare", _): inboxCompare = true; index -= 1
        case ("--external-only", _): inProcess = false; index -= 1
        case ("--in-process-only", _): external = false; index -= 1
        default:
            print("usage: pushspool-bench ingest [--files N] [--rounds K] [--rates R,R] [--seconds S] [--inbox-compare] [--external-only|--in-process-only]")
            exit(64)
        }
        index += 2
    }
    MemoryPolicy.apply()  // as pushspoold's main does
    if external { externalBurst(files: files, rounds: rounds) }
    if inProcess { inProcessBurst(files: files, rounds: rounds) }
    if inboxCompare { inboxComparison(files: files, rounds: rounds) }
    for rate in rates { steadyLatency(rate: rate, seconds: seconds) }
}

/// `pushspool-bench c-loop [--no-claim] [--burst N] INCOMING PROCESSING LOG`: the C baseline
/// as its own process, so the burst bench can time it from outside like the daemon. Loop (a)
/// renames each file into `processing/` first; `--no-claim` runs loop (b), which reads it in
/// `incoming/` and unlinks it there. Without `--burst` it drains what `incoming/` holds; with
/// it, it arms a watch, prints `ready`, and follows the spool until N files are durable.
func runCLoop(arguments: [String]) {
    var arguments = arguments
    var claim = BASELINE_RENAME_CLAIM
    var burst: Int?
    while let first = arguments.first, first.hasPrefix("--") {
        if first == "--no-claim" {
            claim = BASELINE_NO_CLAIM
            arguments.removeFirst()
        } else if first == "--burst", arguments.count > 1, let count = Int(arguments[1]), count > 0 {
            burst = count
            arguments.removeFirst(2)
        } else {
            break
        }
    }
    guard arguments.count == 3 else {
        print("usage: pushspool-bench c-loop [--no-claim] [--burst N] INCOMING PROCESSING LOG")
        exit(64)
    }
    let moved: Int
    if let burst {
        let watch = baseline_watch(arguments[0])
        guard watch >= 0 else {
            print("cannot watch \(arguments[0]): errno \(errno)")
            exit(1)
        }
        print("ready")
        fflush(stdout)
        moved = baseline_burst(watch, arguments[0], arguments[1], arguments[2], claim, burst)
    } else {
        moved = baseline_ingest_protocol(arguments[0], arguments[1], arguments[2], claim)
    }
    print(moved)
    exit(moved < 0 ? 1 : 0)
}

/// Drains `spool`'s `incoming/` with the C loop (a) as its own process; returns the seconds taken.
func runCLoopProcess(on spool: ExternalSpool) -> Double {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: siblingBinary("pushspool-bench"))
    process.arguments = ["c-loop", spool.incoming, spool.processing, spool.root + "/loop.log"]
    process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
    let start = Posix.monotonicNanos()
    try! process.run()
    process.waitUntilExit()
    precondition(process.terminationStatus == 0 && ExternalSpool.isEmpty(spool.incoming), "the C loop failed")
    return Double(Posix.monotonicNanos() - start) / 1e9
}

/// The two C loops of the burst comparison.
enum CLoopProtocol: CaseIterable {
    /// (a): rename into `processing/`, read, batch write + fdatasync, unlink.
    case renameClaim
    /// (b): read in `incoming/`, batch write + fdatasync, unlink: the fewest operations that
    /// keep the guarantee with one reader per spool.
    case noClaim

    var label: String { self == .renameClaim ? "C loop (a)" : "C loop (b)" }
    var arguments: [String] { self == .renameClaim ? [] : ["--no-claim"] }
}

/// One burst of the C loop timed exactly as the daemon's: the loop runs as its own process
/// and says `ready` once its watch is armed; then the same producer renames the staged files
/// into `incoming/` and the clock stops when `incoming/` and `processing/` are empty. Returns
/// the seconds taken.
func runCLoopBurst(_ loop: CLoopProtocol, on spool: ExternalSpool, files: Int) -> Double {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: siblingBinary("pushspool-bench"))
    process.arguments = ["c-loop"] + loop.arguments + ["--burst", String(files), spool.incoming, spool.processing, spool.root + "/loop.log"]
    let output = Pipe()
    process.standardOutput = output
    try! process.run()
    var line: [UInt8] = []
    while line.last != UInt8(ascii: "\n") {
        let chunk = output.fileHandleForReading.readData(ofLength: 1)
        precondition(!chunk.isEmpty, "\(loop.label) did not start")
        line += chunk
    }
    let start = Posix.monotonicNanos()
    spool.renameStagedIntoIncoming()
    spool.waitDrained(pollMillis: 10)
    let seconds = Double(Posix.monotonicNanos() - start) / 1e9
    process.waitUntilExit()
    precondition(process.terminationStatus == 0, "\(loop.label) failed")
    return seconds
}

private func externalBurst(files: Int, rounds: Int) {
    print("== burst from outside: \(files) files renamed into incoming/ by one producer, the clock stopping when incoming/ and processing/ "
          + "are empty; a running pushspoold vs C loop (a) (rename claim) and C loop (b) (no claim), each a process with "
          + "\(BASELINE_RECORDS_PER_SYNC) records per fdatasync; \(rounds) alternating rounds")
    var daemonRates: [Double] = [], daemonCPU: [Double] = []
    var loopRates: [CLoopProtocol: [Double]] = [:], loopCPU: [CLoopProtocol: [Double]] = [:], ratios: [CLoopProtocol: [Double]] = [:]
    for round in 1...rounds {
        let spool = ExternalSpool(label: "burst")
        spool.write(count: files, into: spool.stage)
        let cpuBefore = childrenCPUSeconds()
        guard let daemon = try? DaemonProcess(spool: spool), daemon.waitReady() else {
            print("  pushspoold did not start (is it built next to pushspool-bench?)")
            spool.remove()
            return
        }
        let start = Posix.monotonicNanos()
        spool.renameStagedIntoIncoming()
        spool.waitDrained(pollMillis: 10)
        let daemonSeconds = Double(Posix.monotonicNanos() - start) / 1e9
        let quarantined = ExternalSpool.names(in: spool.root + "/spool/failed").count
        daemon.stop()
        daemonCPU.append((childrenCPUSeconds() - cpuBefore) / Double(files) * 1e6)
        spool.remove()
        precondition(quarantined == 0, "pushspoold quarantined \(quarantined) bench files")
        daemonRates.append(Double(files) / daemonSeconds)
        var line = String(format: "  round %d: pushspoold %7.0f files/s (%.1f µs CPU a file)", round, daemonRates.last!, daemonCPU.last!)

        // Alternate which loop goes first, so neither always runs on a disk the other just warmed.
        let order = round % 2 == 1 ? CLoopProtocol.allCases : CLoopProtocol.allCases.reversed()
        var roundRates: [CLoopProtocol: Double] = [:]
        for protocolKind in order {
            let loop = ExternalSpool(label: "cloop")
            loop.write(count: files, into: loop.stage)
            let loopCPUBefore = childrenCPUSeconds()
            let seconds = runCLoopBurst(protocolKind, on: loop, files: files)
            loopCPU[protocolKind, default: []].append((childrenCPUSeconds() - loopCPUBefore) / Double(files) * 1e6)
            loop.remove()
            roundRates[protocolKind] = Double(files) / seconds
            loopRates[protocolKind, default: []].append(Double(files) / seconds)
            ratios[protocolKind, default: []].append(daemonRates.last! / (Double(files) / seconds))
        }
        for protocolKind in CLoopProtocol.allCases {
            line += String(format: ", %@ %7.0f files/s (%.1f µs), ratio %.2f", protocolKind.label, roundRates[protocolKind]!,
                           loopCPU[protocolKind]!.last!, ratios[protocolKind]!.last!)
        }
        print(line)
    }
    let a = CLoopProtocol.renameClaim, b = CLoopProtocol.noClaim
    let ratioA = median(ratios[a]!), ratioB = median(ratios[b]!)
    print(String(format: "median: pushspoold %.0f files/s, C loop (a) %.0f files/s, C loop (b) %.0f files/s; ratio %.2f to (a) (target ≥ 1.0), "
                 + "%.2f to (b) (target ≥ 0.8)", median(daemonRates), median(loopRates[a]!), median(loopRates[b]!), ratioA, ratioB))
    print(String(format: "CPU a file (user+sys, all threads, start-up included): pushspoold %.1f µs, C loop (a) %.1f µs, C loop (b) %.1f µs",
                 median(daemonCPU), median(loopCPU[a]!), median(loopCPU[b]!)))
    BenchResults.shared.add("CPU per file in the burst",
                            String(format: "pushspoold %.1f µs, C loop (a) %.1f µs, (b) %.1f µs", median(daemonCPU), median(loopCPU[a]!), median(loopCPU[b]!)),
                            ratio: String(format: "%.2f× (a), %.2f× (b)", median(daemonCPU) / max(0.001, median(loopCPU[a]!)),
                                          median(daemonCPU) / max(0.001, median(loopCPU[b]!))))
    BenchResults.shared.add("burst \(files) files, from outside",
                            String(format: "%.0f files/s (C loop (a) %.0f, (b) %.0f)", median(daemonRates), median(loopRates[a]!), median(loopRates[b]!)),
                            ratio: String(format: "%.2f× (a), %.2f× (b) (median of %d)", ratioA, ratioB, rounds),
                            target: "≥ 1.0× (a), ≥ 0.8× (b)", met: ratioA >= 1.0 && ratioB >= 0.8)
}

private func inProcessBurst(files: Int, rounds: Int) {
    print("== burst in process: drain \(files) files already in incoming/ (daemon, C loop (a) and C loop (b) alternate, \(rounds) rounds)")
    var ratios: [Double] = [], daemonRates: [Double] = [], loopRates: [Double] = []
    var noClaimRatios: [Double] = [], noClaimRates: [Double] = []
    for round in 1...rounds {
        let burst = BenchSpool()
        burst.fill(count: files, payload: benchPayload)
        if let pause = ProcessInfo.processInfo.environment["PUSHSPOOL_BENCH_PAUSE"].flatMap(UInt32.init) {
            // Time to attach a profiler to the drain alone: `perf record -p <pid>`.
            print("filled; pid \(getpid()); draining in \(pause) s")
            fflush(stdout)
            sleep(pause)
        }
        let done = Atomic<Int>(0)
        let daemon = burst.makeDaemon { _, _ in done.add(1, ordering: .relaxed) }
        let start = Posix.monotonicNanos()
        let thread = Thread { _ = daemon.run() }
        thread.start()
        while done.load(ordering: .relaxed) < files { usleep(1_000) }
        let daemonSeconds = Double(Posix.monotonicNanos() - start) / 1e9
        let stats = daemon.journalStats
        daemon.requestStop()
        while !daemon.hasReturned { usleep(5_000) }
        burst.remove()
        var loopSeconds: [Int32: Double] = [:]
        for claim in [BASELINE_RENAME_CLAIM, BASELINE_NO_CLAIM] {
            let baseline = BenchSpool()
            baseline.fill(count: files, payload: benchPayload)
            let baselineStart = Posix.monotonicNanos()
            let moved = baseline_ingest_protocol(baseline.incoming, baseline.processing, baseline.root + "/baseline.log", claim)
            loopSeconds[claim] = Double(Posix.monotonicNanos() - baselineStart) / 1e9
            precondition(moved == files, "baseline moved \(moved) of \(files) files")
            baseline.remove()
        }
        daemonRates.append(Double(files) / daemonSeconds)
        loopRates.append(Double(files) / loopSeconds[BASELINE_RENAME_CLAIM]!)
        noClaimRates.append(Double(files) / loopSeconds[BASELINE_NO_CLAIM]!)
        ratios.append(daemonRates.last! / loopRates.last!)
        noClaimRatios.append(daemonRates.last! / noClaimRates.last!)
        print(String(format: "  round %d: pushspoold %7.0f files/s (%llu fsyncs, %.0f per sync), C loop (a) %7.0f files/s, ratio %.2f, "
                     + "C loop (b) %7.0f files/s, ratio %.2f",
                     round, daemonRates.last!, stats.fsyncs, Double(stats.records) / Double(max(1, stats.fsyncs)), loopRates.last!, ratios.last!,
                     noClaimRates.last!, noClaimRatios.last!))
    }
    let ratio = median(ratios), noClaimRatio = median(noClaimRatios)
    print(String(format: "median: pushspoold %.0f files/s, C loop (a) %.0f files/s, ratio %.2f (target ≥ 1.0); C loop (b) %.0f files/s, ratio %.2f",
                 median(daemonRates), median(loopRates), ratio, median(noClaimRates), noClaimRatio))
    BenchResults.shared.add("burst \(files) files, in process",
                            String(format: "%.0f files/s (C loop (a) %.0f, (b) %.0f)", median(daemonRates), median(loopRates), median(noClaimRates)),
                            ratio: String(format: "%.2f× (a), %.2f× (b) (median of %d)", ratio, noClaimRatio, rounds),
                            target: "≥ 1.0× (a)", met: ratio >= 1.0)
}

/// The inbox index follows the journal on its own thread: ingest must not wait on SQLite.
/// The same burst with the index on and off, alternating, in this run (issue 9: within 10 %).
private func inboxComparison(files: Int, rounds: Int) {
    var withIndex: [Double] = [], withoutIndex: [Double] = []
    for _ in 1...rounds {
        for inbox in [true, false] {
            let burst = BenchSpool()
            burst.fill(count: files, payload: benchPayload)
            let done = Atomic<Int>(0)
            let daemon = burst.makeDaemon(inbox: inbox) { _, _ in done.add(1, ordering: .relaxed) }
            let start = Posix.monotonicNanos()
            let thread = Thread { _ = daemon.run() }
            thread.start()
            while done.load(ordering: .relaxed) < files { usleep(1_000) }
            let rate = Double(files) / (Double(Posix.monotonicNanos() - start) / 1e9)
            daemon.requestStop()
            while !daemon.hasReturned { usleep(5_000) }
            burst.remove()
            if inbox { withIndex.append(rate) } else { withoutIndex.append(rate) }
        }
    }
    let onMedian = median(withIndex), offMedian = median(withoutIndex)
    print(String(format: "inbox index: ingest %.0f files/s with it, %.0f without, ratio %.2f (target ≥ 0.90)",
                 onMedian, offMedian, onMedian / offMedian))
}

private func steadyLatency(rate: Int, seconds: Int) {
    print("== steady: \(rate) files/s for \(seconds) s, drop-to-durable latency (pushspoold, then the C loop on the same disk)")
    let total = rate * seconds
    let steady = BenchSpool()
    let dropTimes = Locked<[String: UInt64]>([:])
    let latencies = Locked<[UInt64]>([])
    let steadyDaemon = steady.makeDaemon { name, _ in
        let now = Posix.monotonicNanos()
        if let dropped = dropTimes.withLock({ $0.removeValue(forKey: name) }) {
            latencies.withLock { $0.append(now - dropped) }
        }
    }
    let steadyThread = Thread { _ = steadyDaemon.run() }
    steadyThread.start()
    while !steadyDaemon.isReady { usleep(1_000) }
    produceSteadily(into: steady, rate: rate, count: total) { name, dropped in dropTimes.withLock { $0[name] = dropped } }
    while latencies.withLock({ $0.count }) < total { usleep(2_000) }
    let stats = steadyDaemon.journalStats
    steadyDaemon.requestStop()
    while !steadyDaemon.hasReturned { usleep(5_000) }
    // `PUSHSPOOL_BENCH_KEEP`: leave the state directory, to see what the followers wrote.
    if ProcessInfo.processInfo.environment["PUSHSPOOL_BENCH_KEEP"] != nil { print("kept: \(steady.root)") } else { steady.remove() }
    let daemon = LatencyPercentiles(latencies.withLock { $0 })
    print(String(format: "pushspoold: latency p50 %.2f ms, p99 %.2f ms, p999 %.2f ms, max %.2f ms over %d files (target at 1,000/s: p99 ≤ 5 ms, p999 ≤ 10 ms)",
                 daemon.p50, daemon.p99, daemon.p999, daemon.max, daemon.count))
    // What the tail is made of: the journal's own fdatasync times beside the latencies.
    let bounds = JournalWriterStats.syncBucketBoundsMicros
    let buckets = stats.fsyncLatencyBuckets.enumerated().filter { $0.element > 0 }.map { index, count in
        (index < bounds.count ? "≤\(bounds[index]) µs" : ">\(bounds.last ?? 0) µs") + ": \(count)"
    }
    print(String(format: "journal: %llu fsyncs, %.1f records a sync; fdatasync times ", stats.fsyncs,
                 Double(stats.records) / Double(max(1, stats.fsyncs))) + buckets.joined(separator: ", "))

    // The floor this disk sets: the C loop following the same kind of spool at the same rate.
    let loop = cLoopLatency(rate: rate, count: total)
    if let loop {
        print(String(format: "C loop:     latency p50 %.2f ms, p99 %.2f ms, p999 %.2f ms, max %.2f ms; pushspoold's p99 is %.2f× the loop's",
                     loop.p50, loop.p99, loop.p999, loop.max, daemon.p99 / max(0.001, loop.p99)))
    }
    let met: Bool? = rate <= 1_000 ? (daemon.p99 <= 5 && daemon.p999 <= 10) : nil
    BenchResults.shared.add("drop-to-durable at \(rate)/s", String(format: "p50 %.2f ms, p99 %.2f ms, p999 %.2f ms", daemon.p50, daemon.p99, daemon.p999),
                            ratio: loop.map { String(format: "p99 %.2f× the C loop's (%.2f ms; p999 %.2f ms)", daemon.p99 / max(0.001, $0.p99), $0.p99, $0.p999) } ?? "",
                            target: rate <= 1_000 ? "p99 ≤ 5 ms, p999 ≤ 10 ms" : "", met: met)
}

/// Stages and publishes `count` files named s<i>.json at `rate` a second; `published` gets
/// each name and the moment of the rename that makes it visible, as a producer's would be.
func produceSteadily(into spool: BenchSpool, rate: Int, count: Int, published: (String, UInt64) -> Void) {
    let interval = 1_000_000_000 / UInt64(rate)
    let begin = Posix.monotonicNanos()
    for i in 0..<count {
        sleepUntil(monotonicNanos: begin + UInt64(i) * interval)
        let name = "s\(i).json"
        spool.stage(name: name, bytes: benchPayload(1_000_000 + i))
        published(name, Posix.monotonicNanos())
        spool.publish(name: name)
    }
}

/// The C loop (`baseline_follow`) at the same rate on its own thread; nil (and a line saying
/// why) when it failed or did not finish within 30 s of the last file.
func cLoopLatency(rate: Int, count: Int) -> LatencyPercentiles? {
    let spool = BenchSpool()
    defer { spool.remove() }
    let watch = baseline_watch(spool.incoming)
    guard watch >= 0 else {
        print("C loop: cannot watch \(spool.incoming): errno \(errno)")
        return nil
    }
    let durable = UnsafeMutablePointer<UInt64>.allocate(capacity: count)
    durable.initialize(repeating: 0, count: count)
    let durableAddress = UInt(bitPattern: durable)
    let result = Locked<Int?>(nil)
    let incoming = spool.incoming, processing = spool.processing, log = spool.root + "/follow.log"
    let follower = Thread {
        let moved = baseline_follow(watch, incoming, processing, log, count, UnsafeMutablePointer(bitPattern: durableAddress))
        result.withLock { $0 = moved }
    }
    follower.start()
    var dropped = [UInt64](repeating: 0, count: count)
    var index = 0
    produceSteadily(into: spool, rate: rate, count: count) { _, at in
        dropped[index] = at
        index += 1
    }
    let deadline = Posix.monotonicNanos() + 30_000_000_000
    while result.withLock({ $0 }) == nil && Posix.monotonicNanos() < deadline { usleep(2_000) }
    guard let moved = result.withLock({ $0 }) else {
        // The loop is still blocked reading its watch: its fd and stamp buffer stay allocated
        // for it rather than be freed under it.
        print("C loop: \(count) files published, not all durable within 30 s")
        return nil
    }
    close(watch)
    defer { durable.deallocate() }
    guard moved == count else {
        print("C loop: stopped by an I/O error (baseline_follow returned \(moved) for \(count) files)")
        return nil
    }
    return LatencyPercentiles((0..<count).map { durable[$0] &- dropped[$0] })
}

/// Percentiles of latencies given in nanoseconds, in milliseconds.
struct LatencyPercentiles {
    let p50, p99, p999, max: Double
    let count: Int

    init(_ nanos: [UInt64]) {
        let sorted = nanos.sorted()
        func percentile(_ p: Double) -> Double {
            guard !sorted.isEmpty else { return 0 }
            // p is bounded to [0, 1], so the product is at most count and always fits an Int.
            let rank = Int((Double(sorted.count) * Swift.min(Swift.max(p, 0), 1)).rounded(.down))
            return Double(sorted[Swift.min(sorted.count - 1, rank)]) / 1e6
        }
        p50 = percentile(0.50)
        p99 = percentile(0.99)
        p999 = percentile(0.999)
        max = Double(sorted.last ?? 0) / 1e6
        count = sorted.count
    }
}

/// A throw-away spool and state directory on the same file system as the real ones would be.
final class BenchSpool: @unchecked Sendable {
    let root: String
    var incoming: String { root + "/spool/incoming" }
    var processing: String { root + "/spool/processing" }
    private var tmp: String { root + "/spool/tmp" }
    private var finished = Set<ObjectIdentifier>()

    init() {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("pushspool-bench-\(UUID().uuidString.prefix(8))").path
        for dir in ["tmp", "incoming", "processing", "failed"] {
            try! FileManager.default.createDirectory(atPath: root + "/spool/" + dir, withIntermediateDirectories: true)
        }
    }

    func fill(count: Int, payload: (Int) -> [UInt8]) {
        for i in 0..<count { drop(name: "b\(i).json", bytes: payload(i)) }
    }

    func drop(name: String, bytes: [UInt8]) {
        stage(name: name, bytes: bytes)
        publish(name: name)
    }

    /// Writes `tmp/NAME.tmp`; `publish` renames it into `incoming/`.
    func stage(name: String, bytes: [UInt8]) {
        let temp = tmp + "/" + name + ".tmp"
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        precondition(fd >= 0)
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    func publish(name: String) {
        precondition(rename(tmp + "/" + name + ".tmp", incoming + "/" + name) == 0)
    }

    /// `inbox`: whether the Notification Center index follows the journal during the run.
    /// `extraConfig`: more sections appended to the file (the export benchmark's `[Export]`).
    func makeDaemon(inbox: Bool = true, extraConfig: String = "", onCommitted: @escaping @Sendable (String, UInt64) -> Void) -> Daemon {
        let config = root + "/pushspool.conf"
        try! ("[Spool]\nStableAgeSec=0\n[Media]\nEnabled=no\n[Metrics]\nIntervalSec=1h\n[Inbox]\nEnabled=\(inbox ? "yes" : "no")\n" + extraConfig
              + benchConfigFromEnvironment())
            .write(toFile: config, atomically: true, encoding: .utf8)
        let store = try! ConfigurationStore(mainFile: config, overrides: ConfigOverride.paths(spool: root + "/spool", stateDirectory: root + "/state"))
        let events = EventLog(identifier: "pushspool-bench", destination: .lines(fd: open("/dev/null", O_WRONLY)))
        return try! Daemon(arguments: DaemonArguments(), store: store, events: events,
                           notifier: SystemdNotifier(), metrics: Metrics(), onCommitted: onCommitted)
    }

    func remove() { try? FileManager.default.removeItem(atPath: root) }
}

/// User + system CPU seconds of every child reaped so far (getrusage RUSAGE_CHILDREN).
func childrenCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_CHILDREN.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
}

/// Paces a fixed-rate producer: sleeps until the monotonic clock reaches `due` (usleep steps of
/// at least 20 µs, each bounded so the conversion cannot trap).
func sleepUntil(monotonicNanos due: UInt64) {
    while true {
        let now = Posix.monotonicNanos()
        if now >= due { return }
        usleep(UInt32(clamping: max(20, (due - now) / 1000)))
    }
}
