@preconcurrency import Glibc
import Foundation
import Synchronization
import PushSystem
import PushExport
import PushFollow
import PushJournal
import PushspoolDaemon
import TestSupport

/// `pushspool-bench export [--files N] [--rate R] [--seconds S] [--steady-only]`, against a
/// local single-node JetStream (Debian's nats-server, started here on a free loopback port).
///
/// 1. Burst: N files drained by pushspoold with `[Export] Enabled=yes`: ingest files/s, and
///    export records/s from the first commit until the cursor holds the last seq. Ratio export
///    / ingest (≥ 1 means export keeps up with ingest at full speed).
/// 2. Export alone: a fresh exporter over the same journal (another stream), records/s.
/// 3. Steady: R files/s for S seconds with export on; export lag from journal commit to
///    PubAck (p50/p99) and drop to PubAck (p50/p99/p999; issue 21's target at 1,000/s: p99
///    ≤ 5 ms), each PubAck stamped in its callback (``ExportTrace``); beside it, in the same
///    run, the C loop's drop-to-durable latency at the same rate. `--steady-only` runs only this.
func runExportBench(arguments: [String]) {
    if !exportBench(arguments: arguments) { exit(1) }
}

/// The export benchmark; `false` when nats-server cannot be started. `pushspool-bench all`
/// records that as a row and goes on, so one missing server does not cost the whole table.
func exportBench(arguments: [String]) -> Bool {
    var files = 20_000
    var rate = 1_000
    var seconds = 10
    var steadyOnly = false
    var index = 0
    while index < arguments.count {
        let value = index + 1 < arguments.count ? Int(arguments[index + 1]) : nil
        switch (arguments[index], value) {
        case ("--files", let v?) where v > 0: files = v
        case ("--rate", let v?) where v > 0: rate = v
        case ("--seconds", let v?) where v > 0: seconds = v
        case ("--steady-only", _): steadyOnly = true; index -= 1
        default:
            print("usage: pushspool-bench export [--files N] [--rate R] [--seconds S] [--steady-only]")
            exit(64)
        }
        index += 2
    }
    let payload = { (i: Int) -> [UInt8] in
        Array("""
            {"pushspool":1,"user":"u\(i % 1000)","platform":"ios","payload":{"aps":{"alert":{"title":"Flash sale \(i)","body":"Everything −20% today only, item \(i)"},"mutable-content":1},"clickUrl":"https://shop.example/p/\(i)","uniqueKey":"exp-\(i)","payload":"{\\"pushName\\":\\"sale\\"}"}}
            """.utf8)
    }
    let natsRoot = FileManager.default.temporaryDirectory.appendingPathComponent("pushspool-bench-nats-\(UUID().uuidString.prefix(8))").path
    defer { try? FileManager.default.removeItem(atPath: natsRoot) }
    let server: NatsServer
    do {
        server = try NatsServer(storeDirectory: natsRoot + "/store")
        try server.start()
    } catch {
        print("cannot start nats-server: \(error)")
        BenchResults.shared.add("export", "not measured: cannot start \(NatsServer.executable)")
        return false
    }
    defer { server.stop() }

    if !steadyOnly { exportBurstAndAlone(server: server, natsRoot: natsRoot, files: files, payload: payload) }
    exportSteady(server: server, rate: rate, seconds: seconds, payload: payload)
    return true
}

/// Burst and export alone (parts 1 and 2 of `runExportBench`).
private func exportBurstAndAlone(server: NatsServer, natsRoot: String, files: Int, payload: (Int) -> [UInt8]) {
    let exportConfig = { (stream: String) in
        "[Export]\nEnabled=yes\nURL=\(server.url)\nHostId=bench\nStream=\(stream)\n"
    }
    print("== burst: \(files) files drained by pushspoold with export on (nats-server \(server.url))")
    let burst = BenchSpool()
    defer { burst.remove() }
    burst.fill(count: files, payload: payload)
    let done = Atomic<Int>(0)
    let firstCommit = Atomic<UInt64>(0)
    let daemon = burst.makeDaemon(inbox: false, extraConfig: exportConfig("BURST")) { _, _ in
        _ = firstCommit.compareExchange(expected: 0, desired: Posix.monotonicNanos(), ordering: .relaxed)
        done.add(1, ordering: .relaxed)
    }
    let start = Posix.monotonicNanos()
    Thread { _ = daemon.run() }.start()
    while done.load(ordering: .relaxed) < files { usleep(1_000) }
    let ingestEnd = Posix.monotonicNanos()
    let lastSeq = daemon.journalStats.lastSeq
    let state = burst.root + "/state"
    while ((try? ExportCursor.read(stateDirectory: state)) ?? 0) < lastSeq { usleep(2_000) }
    let exportEnd = Posix.monotonicNanos()
    daemon.requestStop()
    while !daemon.hasReturned { usleep(5_000) }
    let ingestRate = Double(files) / (Double(ingestEnd - start) / 1e9)
    let exportRate = Double(lastSeq) / (Double(exportEnd - firstCommit.load(ordering: .relaxed)) / 1e9)
    print(String(format: "ingest %.0f files/s; export %.0f records/s (commit of the first to PubAck of the last, cursor polled), ratio %.2f",
                 ingestRate, exportRate, exportRate / ingestRate))
    print(String(format: "  export finished %.0f ms after ingest", Double(exportEnd - ingestEnd) / 1e6))
    BenchResults.shared.add("export beside a burst of \(files) files", String(format: "%.0f records/s (ingest %.0f files/s)", exportRate, ingestRate),
                            ratio: String(format: "%.2f× ingest", exportRate / ingestRate))

    print("== export alone: a fresh exporter over the same \(lastSeq) records into another stream, niced 10 (as in pushspoold) and not")
    for (run, niceness, sendAsap) in [(1, Int32(10), true), (2, Int32(0), true), (3, Int32(0), false)] {
        do {
            let aloneState = natsRoot + "/alone\(run)"
            try FileManager.default.createDirectory(atPath: aloneState, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: StateLayout(root: aloneState).journal, withDestinationPath: StateLayout(root: state).journal)
            var options = ExportOptions(stateDirectory: aloneState, instance: nil)
            options.urls = [server.url]
            options.stream = "ALONE\(run)"
            options.subject = "alone\(run).{vendor}.{platform}"
            options.hostId = "bench"
            options.niceness = niceness
            options.sendAsap = sendAsap
            // The journal does not grow here: an adaptive exporter would run at 0 in both runs.
            options.adaptiveNiceness = false
            let exporter = try Exporter(options: options)
            // Our process's CPU (exporter thread and libnats' threads; nothing else runs here
            // now) per record: the exporter's cost, whatever the machine's load.
            var before = rusage(), after = rusage()
            getrusage(RUSAGE_SELF.rawValue, &before)
            let aloneStart = Posix.monotonicNanos()
            let exporterRunner = FollowerRunner(exporter, commits: CommitFeed())
            try exporterRunner.start()
            while exporter.acknowledgedInMemory < lastSeq { usleep(500) }
            let elapsed = Double(Posix.monotonicNanos() - aloneStart) / 1e9
            getrusage(RUSAGE_SELF.rawValue, &after)
            exporterRunner.stop()
            func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
            let cpu = seconds(after.ru_utime) + seconds(after.ru_stime) - seconds(before.ru_utime) - seconds(before.ru_stime)
            let aloneRate = Double(lastSeq) / elapsed
            print(String(format: "  nice %d%@: export alone %.0f records/s (MaxPending %d), ratio to this run's ingest %.2f; %.1f µs CPU per record in pushspool (≈ %.0f records/s per core)",
                         niceness, sendAsap ? "" : ", buffered by libnats' flusher", aloneRate, options.maxPending, aloneRate / ingestRate, cpu / Double(lastSeq) * 1e6,
                         Double(lastSeq) / max(cpu, 1e-9)))
            BenchResults.shared.add("export alone, \(lastSeq) records, nice \(niceness)\(sendAsap ? "" : ", flusher")",
                                    String(format: "%.0f records/s, %.1f µs CPU per record", aloneRate, cpu / Double(lastSeq) * 1e6),
                                    ratio: String(format: "%.2f× burst ingest", aloneRate / ingestRate))
        } catch {
            print("export alone failed: \(error)")
        }
    }
}

/// Steady (part 3 of `runExportBench`): the C loop first, then the exporter as in pushspoold
/// (nice 0 while ingest is steady, 10 in a burst) and fixed at nice 10 (before that). Each
/// run prints where the time goes, stage by stage (``ExportTrace``).
private func exportSteady(server: NatsServer, rate: Int, seconds: Int, payload: (Int) -> [UInt8]) {
    // The floor the disk sets at this rate, measured in this run: drop to PubAck includes a
    // drop to durable.
    print("== steady: the C loop's drop-to-durable latency at \(rate) files/s for \(seconds) s, beside drop to PubAck below")
    let loop = cLoopLatency(rate: rate, count: rate * seconds)
    if let loop {
        print(String(format: "C loop drop to durable: p50 %.2f ms, p99 %.2f ms, p999 %.2f ms, max %.2f ms", loop.p50, loop.p99, loop.p999, loop.max))
    }
    for (mode, adaptive) in [("adaptive", true), ("fixed nice 10", false)] {
        let label = mode.replacingOccurrences(of: " ", with: "")
        print("== steady: \(rate) files/s for \(seconds) s, export lag from journal commit to PubAck, exporter \(mode)")
        let steady = BenchSpool()
        defer { steady.remove() }
        let commits = Locked<[UInt64: UInt64]>([:])
        // seq -> the spool file's index, for drop-to-PubAck.
        let dropped = Locked<[UInt64: Int]>([:])
        let steadyDaemon = steady.makeDaemon(inbox: false) { name, seq in
            let now = Posix.monotonicNanos()
            commits.withLock { $0[seq] = now }
            if let index = Int(name.dropFirst().prefix { $0 != "." }) { dropped.withLock { $0[seq] = index } }
        }
        Thread { _ = steadyDaemon.run() }.start()
        while !steadyDaemon.isReady { usleep(1_000) }
        // The exporter runs in-process beside the daemon (the daemon's own is off) so its
        // acknowledged seq can be polled without the cursor file's checkpoint interval.
        var options = ExportOptions(stateDirectory: steady.root + "/state", instance: nil)
        options.urls = [server.url]
        options.hostId = "bench"
        options.adaptiveNiceness = adaptive
        options.stream = "STEADY\(label.uppercased())"
        options.subject = "steady\(label).{vendor}.{platform}"
        let trace = ExportTrace()
        // The journal's last seq from the writer, as pushspoold passes it (without it, status
        // reads the newest segment's headers at every step).
        guard let exporter = try? Exporter(options: options, journalLastSeq: { steadyDaemon.journalStats.lastSeq }, trace: trace) else {
            print("cannot create the exporter")
            exit(1)
        }
        trace.observe(steadyDaemon.commits)
        var usageBefore = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usageBefore)
        let exporterRunner = FollowerRunner(exporter, commits: steadyDaemon.commits)
        do {
            try exporterRunner.start()
        } catch {
            print("cannot start the exporter: \(error)")
            exit(1)
        }
        let total = rate * seconds
        let interval = 1_000_000_000 / UInt64(rate)
        let begin = Posix.monotonicNanos()
        var dropTimes = [UInt64](repeating: 0, count: total)
        for i in 0..<total {
            let due = begin + UInt64(i) * interval
            sleepUntil(monotonicNanos: due)
            steady.drop(name: "s\(i).json", bytes: payload(1_000_000 + i))
            dropTimes[i] = Posix.monotonicNanos()
        }
        // Completion only: each record's PubAck time is stamped in the PubAck callback
        // (``ExportTrace``), so this wait's period does not enter any figure.
        while exporter.acknowledgedInMemory < UInt64(total) { usleep(5_000) }
        var usageAfter = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usageAfter)
        var load = [Double](repeating: 0, count: 3)
        _ = getloadavg(&load, 3)
        exporterRunner.stop()
        steadyDaemon.requestStop()
        while !steadyDaemon.hasReturned { usleep(5_000) }
        let committed = commits.withLock { $0 }
        // When the exporter's acknowledged seq reached each record (all before it acked too),
        // stamped in libnats' PubAck callback.
        let acked = trace.stamps.compactMapValues { $0.cursor > 0 ? $0.cursor : nil }
        let lags = LatencyPercentiles(committed.compactMap { seq, at in acked[seq].map { $0 > at ? $0 - at : 0 } })
        let indexes = dropped.withLock { $0 }
        let dropToAck = LatencyPercentiles(indexes.compactMap { seq, index in
            acked[seq].map { $0 > dropTimes[index] ? $0 - dropTimes[index] : 0 }
        })
        print(String(format: "export lag (commit to PubAck) p50 %.2f ms, p99 %.2f ms, max %.2f ms over %d records (woken by the commit)",
                     lags.p50, lags.p99, lags.max, lags.count))
        // Where the time goes: the trace's stamps are taken where each stage happens.
        func cpu(_ u: rusage) -> Double {
            Double(u.ru_utime.tv_sec) + Double(u.ru_utime.tv_usec) / 1e6 + Double(u.ru_stime.tv_sec) + Double(u.ru_stime.tv_usec) / 1e6
        }
        print(String(format: "  load average %.2f; this process (daemon, exporter, libnats, producer) used %.1f µs CPU per record",
                     load[0], (cpu(usageAfter) - cpu(usageBefore)) / Double(total) * 1e6))
        func pad(_ text: String) -> String { text + String(repeating: " ", count: max(1, 45 - text.count)) }
        let dropToCommit = LatencyPercentiles(indexes.compactMap { seq, index in
            committed[seq].map { $0 > dropTimes[index] ? $0 - dropTimes[index] : 0 }
        })
        print("  " + pad("drop -> committed (daemon callback)") + String(format: "p50 %6.2f ms  p99 %6.2f ms  max %6.2f ms",
                     dropToCommit.p50, dropToCommit.p99, dropToCommit.max))
        for stage in trace.stages {
            let p = LatencyPercentiles(stage.nanos)
            print("  " + pad(stage.name) + String(format: "p50 %6.2f ms  p99 %6.2f ms  max %6.2f ms", p.p50, p.p99, p.max))
        }
        print(String(format: "drop to PubAck (stamped in the PubAck callback) p50 %.2f ms, p99 %.2f ms, p999 %.2f ms, max %.2f ms over %d records", dropToAck.p50, dropToAck.p99,
                     dropToAck.p999, dropToAck.max, dropToAck.count)
              + (loop.map { String(format: "; p99 %.2f× the C loop's drop to durable (%.2f ms)", dropToAck.p99 / max(0.001, $0.p99), $0.p99) } ?? "")
              + (rate == 1_000 ? " (target at 1,000/s: p99 ≤ 5 ms)" : ""))
        BenchResults.shared.add("export lag at \(rate)/s, \(mode)",
                                String(format: "commit→PubAck p50 %.2f ms, p99 %.2f ms; drop→PubAck p50 %.2f ms, p99 %.2f ms, p999 %.2f ms",
                                       lags.p50, lags.p99, dropToAck.p50, dropToAck.p99, dropToAck.p999),
                                ratio: loop.map { String(format: "drop→PubAck p99 %.2f× the C loop's drop-to-durable (%.2f ms; p999 %.2f ms)",
                                                         dropToAck.p99 / max(0.001, $0.p99), $0.p99, $0.p999) } ?? "",
                                target: rate == 1_000 ? "drop→PubAck p99 ≤ 5 ms" : "",
                                met: rate == 1_000 ? dropToAck.p99 <= 5 : nil)
    }
}
