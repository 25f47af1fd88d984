@preconcurrency import Glibc
import Dispatch
import Foundation
import PushJournal
import PushSystem
import PushConfig
import PushModuleOptions

/// `pushspool-bench journal [--records N] [--baseline-records N] [--size BYTES] [--dir PATH]`
///
/// Records/s for `--size` records: a baseline of `write` + `fdatasync` per record on a plain
/// file, then the journal with one record in flight, and with many in flight (group commit),
/// all in the same run on the same file system, printed as ratios to the baseline.
/// Then start-up recovery time with and without the dedup checkpoint, and verify throughput.
func runJournalBench(arguments: [String]) {
    var records = 20_000
    var baselineRecords = 2_000
    var size = 1024
    var parent = FileManager.default.temporaryDirectory.path
    var index = 0
    while index < arguments.count {
        let value = index + 1 < arguments.count ? arguments[index + 1] : ""
        switch arguments[index] {
        case "--records": records = Int(value) ?? records
        case "--baseline-records": baselineRecords = Int(value) ?? baselineRecords
        case "--size": size = Int(value) ?? size
        case "--dir": parent = value
        default:
            print("unknown option \(arguments[index])")
            return
        }
        index += 2
    }
    let root = parent + "/pushspool-journal-bench-\(getpid())"
    try? FileManager.default.removeItem(atPath: root)
    try! FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: root) }
    let payload = [UInt8](repeating: UInt8(ascii: "x"), count: size - 40)
    print("journal bench: \(size)-byte records in \(root)")

    // Baseline: what a naive durable append costs.
    let fd = open(root + "/baseline", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
    let frame = [UInt8](repeating: 7, count: size)
    let baseStart = Posix.monotonicNanos()
    for _ in 0..<baselineRecords {
        _ = frame.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        fdatasync(fd)
    }
    let baseRate = Double(baselineRecords) / seconds(since: baseStart)
    close(fd)
    print(row("baseline write+fdatasync per record", baseRate, baseRate, extra: "\(baselineRecords) records"))

    func journalRun(name: String, count: Int, inFlight: Int, delay: Duration, segmentBytes: Int64 = 64 << 20, quiet: Bool = false) -> String {
        let dir = root + "/" + name
        var options = JournalOptions(settings: Configuration().journal)
        options.maxBatchDelay = delay
        options.segmentBytes = segmentBytes
        let (writer, _) = try! JournalWriter.open(directory: dir, options: options)
        let window = DispatchSemaphore(value: inFlight)
        let group = DispatchGroup()
        let latencies = Locked<[UInt64]>([])
        latencies.withLock { $0.reserveCapacity(count) }
        let start = Posix.monotonicNanos()
        for i in 0..<count {
            window.wait()
            group.enter()
            let submitted = Posix.monotonicNanos()
            writer.submit(key: "\(name)-\(i)", body: payload, ingestMillis: 0) { result in
                if case .committed = result {} else { fatalError("bench append failed: \(result)") }
                let took = Posix.monotonicNanos() - submitted
                latencies.withLock { $0.append(took) }
                window.signal()
                group.leave()
            }
        }
        group.wait()
        let rate = Double(count) / seconds(since: start)
        let stats = writer.stats
        try! writer.close()
        let sorted = latencies.withLock { $0.sorted() }
        let p50 = Double(sorted[sorted.count / 2]) / 1e6
        let p99 = Double(sorted[sorted.count * 99 / 100]) / 1e6
        if quiet { return dir }
        let delayMillis = Double(delay.components.seconds) * 1000 + Double(delay.components.attoseconds) / 1e15
        print(row("journal, \(inFlight) in flight, delay \(String(format: "%g", delayMillis)) ms", rate, baseRate,
                  extra: "\(stats.fsyncs) syncs, \(String(format: "%.1f", Double(count) / Double(max(1, stats.fsyncs)))) rec/sync, "
                      + "ack p50 \(String(format: "%.2f", p50)) ms p99 \(String(format: "%.2f", p99)) ms"))
        return dir
    }

    _ = journalRun(name: "single", count: baselineRecords, inFlight: 1, delay: .zero)
    _ = journalRun(name: "window64", count: records, inFlight: 64, delay: .zero)
    _ = journalRun(name: "window1024-d0", count: records, inFlight: 1024, delay: .zero)
    _ = journalRun(name: "window1024-d2", count: records, inFlight: 1024, delay: .milliseconds(2))

    // Start-up cost on a journal of many segments: recovery with the checkpoint (reads only the
    // checkpoint's segment onwards), then with it removed (every frame of every segment).
    let recoveryRecords = records * 5
    let big = journalRun(name: "recovery", count: recoveryRecords, inFlight: 1024, delay: .zero, segmentBytes: 4 << 20, quiet: true)
    print("recovery journal: \(recoveryRecords) records in \((try? journalStats(directory: big).segments) ?? 0) segments of 4 MiB")
    for useCheckpoint in [true, false] {
        if !useCheckpoint { try? FileManager.default.removeItem(atPath: big + "/dedup.ckpt") }
        let start = Posix.monotonicNanos()
        let (writer, report) = try! JournalWriter.open(directory: big, options: JournalOptions(settings: Configuration().journal))
        let took = seconds(since: start)
        try! writer.close()
        print("open with recovery, \(useCheckpoint ? "with" : "without") checkpoint: \(String(format: "%.1f", took * 1000)) ms, "
              + "of which recovery \(String(format: "%.1f", Double(report.durationNanos) / 1e6)) ms "
              + "(\(report.records) records scanned, \(report.dedupKeys) keys, checkpoint used: \(report.checkpointUsed))")
    }
    let verifyStart = Posix.monotonicNanos()
    let verify = JournalVerifier.verify(directory: big)
    let verifySeconds = seconds(since: verifyStart)
    print("verify: \(verify.records) records, \(String(format: "%.0f", Double(verify.bytes) / verifySeconds / 1e6)) MB/s, exit \(verify.exitCode)")
}

private func seconds(since start: UInt64) -> Double {
    Double(Posix.monotonicNanos() - start) / 1e9
}

private func row(_ name: String, _ rate: Double, _ base: Double, extra: String) -> String {
    let padded = name.padding(toLength: 46, withPad: " ", startingAt: 0)
    return "\(padded) \(String(format: "%9.0f", rate)) rec/s  x\(String(format: "%.1f", rate / base)) vs baseline  (\(extra))"
}
