@preconcurrency import Glibc
import Foundation
import Synchronization
import PushJournal
import PushSystem
import PushConfig
import PushModuleOptions

/// `pushspool-bench bigjournal [--records N]` (default 5,000,000)
///
/// Builds a journal of N records fast (one record by the real daemon for a real body, then
/// the journal writer directly in large batches), then measures: `pushspoold` start to READY
/// after a clean stop and after a kill -9 (target ≤ 2 s each); `pushspoolctl journal verify`
/// in GB/s on cached segments (target ≥ 1 GB/s); `journal cat --json` in records/s (target
/// ≥ 200,000/s).
func runBigJournalBench(arguments: [String]) {
    var records = 5_000_000
    if arguments.count == 2, arguments[0] == "--records", let n = Int(arguments[1]), n > 1 {
        records = n
    } else if !arguments.isEmpty {
        print("usage: pushspool-bench bigjournal [--records N]")
        exit(64)
    }
    let spool = ExternalSpool(label: "bigjournal")
    // PUSHSPOOL_BENCH_KEEP: leave the journal for a profiler (`perf record pushspoolctl … journal verify`).
    let keep = ProcessInfo.processInfo.environment["PUSHSPOOL_BENCH_KEEP"] != nil
    defer {
        if keep { print("kept: --config \(spool.config) --state-dir \(spool.state)") } else { spool.remove() }
    }
    // One real record, so the bodies are what the daemon writes.
    spool.write(count: 1, into: spool.incoming, prefix: "seed")
    guard let seed = try? DaemonProcess(spool: spool), seed.waitReady() else {
        print("  pushspoold did not start (is it built next to pushspool-bench?)")
        return
    }
    spool.waitDrained(pollMillis: 5)
    seed.stop()
    let journal = StateLayout(root: spool.state).journal
    guard let reader = try? JournalReader(directory: journal), let first = try? reader.next() else {
        print("  no seed record in \(journal)")
        return
    }
    let generateStart = Posix.monotonicNanos()
    var options = JournalOptions(settings: Configuration().journal)
    options.maxBatchRecords = 100_000
    options.maxBatchBytes = 64 << 20
    options.maxBatchDelay = .zero
    let (writer, _) = try! JournalWriter.open(directory: journal, options: options)
    let done = Atomic<Int>(0)
    let progress = Progress(label: "writing \(records) records", total: records)
    for i in 1..<records {
        writer.submit(key: "big-\(i)", body: first.body, ingestMillis: first.ingestMillis) { _ in done.add(1, ordering: .relaxed) }
        if i & 0xFFFF == 0 {
            // Keep the queue bounded so generating does not need gigabytes of memory.
            while i - done.load(ordering: .relaxed) > 200_000 { usleep(1_000) }
        }
        progress.tick(i)
    }
    while done.load(ordering: .relaxed) < records - 1 { usleep(1_000) }
    try! writer.close()
    progress.done()
    let bytes = directoryBytes(journal)
    print(String(format: "journal: %d records, %.2f GB, generated in %.1f s", records, Double(bytes) / 1e9,
                 Double(Posix.monotonicNanos() - generateStart) / 1e9))

    for crash in [false, true] {
        // The run before the measured one ends cleanly or by kill -9.
        guard let before = try? DaemonProcess(spool: spool), before.waitReady() else { print("  pushspoold did not start"); return }
        if crash { before.kill9() } else { before.stop() }
        let start = Posix.monotonicNanos()
        guard let measured = try? DaemonProcess(spool: spool), measured.waitReady() else { print("  pushspoold did not start"); return }
        let seconds = Double(Posix.monotonicNanos() - start) / 1e9
        measured.stop()
        let label = crash ? "after kill -9" : "after a clean stop"
        print(String(format: "start to READY on %d records %@: %.2f s (target ≤ 2 s)", records, label, seconds))
        BenchResults.shared.add("start-up, \(records) records, \(label)", String(format: "%.2f s", seconds),
                                target: "≤ 2 s", met: seconds <= 2)
    }

    // Once to warm the page cache, then timed.
    _ = runCtl(spool, ["journal", "verify"])
    let verifySeconds = runCtl(spool, ["journal", "verify"])
    let gbps = Double(bytes) / 1e9 / verifySeconds
    print(String(format: "journal verify: %.2f s, %.2f GB/s (target ≥ 1 GB/s)", verifySeconds, gbps))
    BenchResults.shared.add("journal verify, cached", String(format: "%.2f GB/s", gbps), target: "≥ 1 GB/s", met: gbps >= 1)
    let catSeconds = runCtl(spool, ["journal", "cat", "--json"])
    let perSecond = Double(records) / catSeconds
    print(String(format: "journal cat --json: %.2f s, %.0f records/s (target ≥ 200,000/s)", catSeconds, perSecond))
    BenchResults.shared.add("journal cat --json", String(format: "%.0f records/s", perSecond), target: "≥ 200,000/s",
                            met: perSecond >= 200_000)
}

/// Runs `pushspoolctl --state-dir … ARGS` with stdout to /dev/null; returns its wall time.
private func runCtl(_ spool: ExternalSpool, _ arguments: [String]) -> Double {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: siblingBinary("pushspoolctl"))
    process.arguments = ["--config", spool.config, "--state-dir", spool.state] + arguments
    process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
    let start = Posix.monotonicNanos()
    try! process.run()
    process.waitUntilExit()
    let seconds = Double(Posix.monotonicNanos() - start) / 1e9
    if process.terminationStatus != 0 { print("  pushspoolctl \(arguments.joined(separator: " ")) exited \(process.terminationStatus)") }
    return seconds
}

private func directoryBytes(_ dir: String) -> Int64 {
    var total: Int64 = 0
    for name in ExternalSpool.names(in: dir) {
        var st = stat()
        if stat(dir + "/" + name, &st) == 0 { total += Int64(st.st_size) }
    }
    return total
}
