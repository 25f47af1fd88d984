@preconcurrency import Glibc
import Foundation
import Synchronization
import PushJournal
import PushSystem
import PushConfig
import PushModuleOptions

/// `pushspool-bench erase [--records N] [--user-records M] [--ingest K]`
/// (defaults 5,000,000, 100,000 and 20,000)
///
/// Builds a journal of N records, M of them one user's spread evenly over the whole history
/// (the worst case: every segment holds some), with the journal writer directly. Then, with
/// `pushspoold` running: the ingest throughput of K payloads dropped into the spool without an
/// erasure; and again while `pushspoolctl user erase` of that user runs (the daemon's eraser
/// rewrites the sealed segments meanwhile), with the erasure's wall time.
func runEraseBench(arguments: [String]) {
    var records = 5_000_000
    var userRecords = 100_000
    var ingest = 20_000
    var rest = arguments[...]
    while let flag = rest.popFirst() {
        guard let text = rest.popFirst(), let value = Int(text), value > 0 else {
            print("usage: pushspool-bench erase [--records N] [--user-records M] [--ingest K]")
            exit(64)
        }
        switch flag {
        case "--records": records = value
        case "--user-records": userRecords = value
        case "--ingest": ingest = value
        default:
            print("usage: pushspool-bench erase [--records N] [--user-records M] [--ingest K]")
            exit(64)
        }
    }
    guard userRecords < records else {
        print("--user-records must be below --records")
        exit(64)
    }
    let spool = ExternalSpool(label: "erase")
    defer { spool.remove() }
    spool.write(count: 1, into: spool.incoming, prefix: "seed")
    guard let seed = try? DaemonProcess(spool: spool), seed.waitReady() else {
        print("  pushspoold did not start (is it built next to pushspool-bench?)")
        return
    }
    spool.waitDrained(pollMillis: 5)
    seed.stop()
    let journal = StateLayout(root: spool.state).journal
    guard let reader = try? JournalReader(directory: journal), let first = try? reader.next(),
          case .object(var body)? = try? JSONParser().parse(first.body) else {
        print("  no seed record in \(journal)")
        return
    }
    // The same body as the daemon writes, naming the user the erasure is for.
    body["user"] = .string("erase-me")
    let victimBody = JSONValue.object(body).serialized()
    let generateStart = Posix.monotonicNanos()
    var options = JournalOptions(settings: Configuration().journal)
    options.maxBatchRecords = 100_000
    options.maxBatchBytes = 64 << 20
    options.maxBatchDelay = .zero
    let (writer, _) = try! JournalWriter.open(directory: journal, options: options)
    let done = Atomic<Int>(0)
    let stride = records / userRecords
    let progress = Progress(label: "writing \(records) records", total: records)
    for i in 1..<records {
        let victim = i % stride == 0 && i / stride <= userRecords
        let key = victim ? "mindbox@8:erase-me:v-\(i)" : "big-\(i)"
        writer.submit(key: key, body: victim ? victimBody : first.body, ingestMillis: first.ingestMillis) { _ in
            done.add(1, ordering: .relaxed)
        }
        if i & 0xFFFF == 0 {
            while i - done.load(ordering: .relaxed) > 200_000 { usleep(1_000) }
        }
        progress.tick(i)
    }
    while done.load(ordering: .relaxed) < records - 1 { usleep(1_000) }
    try! writer.close()
    progress.done()
    print(String(format: "journal: %d records, %d of the user's, generated in %.1f s", records, min(userRecords, (records - 1) / stride),
                 Double(Posix.monotonicNanos() - generateStart) / 1e9))

    // The seed run's eraser started its cursor at the empty journal; a daemon that had run
    // all along would have it at the end. Without it, a fresh eraser starts at the end.
    unlink(spool.state + "/erase/cursor")
    guard let daemon = try? DaemonProcess(spool: spool), daemon.waitReady() else { print("  pushspoold did not start"); return }
    defer { daemon.stop() }
    let baseline = timedIngest(spool, count: ingest, tag: "before")
    print(String(format: "ingest without an erasure: %d payloads in %.2f s, %.0f/s", ingest, baseline, Double(ingest) / baseline))

    let eraseSeconds = Locked<Double?>(nil)
    let eraser = Thread {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: siblingBinary("pushspoolctl"))
        process.arguments = ["--config", spool.config, "--spool", spool.root + "/spool", "--state-dir", spool.state, "user", "erase", "erase-me"]
        process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
        let start = Posix.monotonicNanos()
        try! process.run()
        process.waitUntilExit()
        if process.terminationStatus != 0 { print("  pushspoolctl user erase exited \(process.terminationStatus)") }
        eraseSeconds.withLock { $0 = Double(Posix.monotonicNanos() - start) / 1e9 }
    }
    eraser.start()
    // Ingest while the eraser works: batches until the erasure ends, so the figure covers it.
    var during = 0
    var duringSeconds = 0.0
    var batch = 0
    while eraseSeconds.withLock({ $0 }) == nil {
        duringSeconds += timedIngest(spool, count: ingest, tag: "during\(batch)")
        during += ingest
        batch += 1
    }
    let erase = eraseSeconds.withLock { $0 } ?? 0
    print(String(format: "erasure of %d records in a %d-record journal: %.1f s", min(userRecords, (records - 1) / stride), records, erase))
    print(String(format: "ingest during the erasure: %d payloads in %.2f s, %.0f/s (%.0f%% of without)", during, duringSeconds,
                 Double(during) / duringSeconds, 100 * (Double(during) / duringSeconds) / (Double(ingest) / baseline)))
    BenchResults.shared.add("erase \(userRecords) of \(records) records", String(format: "%.1f s", erase))
    BenchResults.shared.add("ingest during an erasure", String(format: "%.0f/s", Double(during) / duringSeconds),
                            ratio: String(format: "%.0f%% of %.0f/s", 100 * (Double(during) / duringSeconds) / (Double(ingest) / baseline),
                                          Double(ingest) / baseline))
}

/// Drops `count` unique payloads straight into `incoming/` and times until the spool is drained.
private func timedIngest(_ spool: ExternalSpool, count: Int, tag: String) -> Double {
    let start = Posix.monotonicNanos()
    let dirfd = open(spool.incoming, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    precondition(dirfd >= 0, "cannot open \(spool.incoming)")
    for i in 0..<count {
        let bytes = Array(String(decoding: benchPayload(i), as: UTF8.self).replacingOccurrences(of: "\"bench-\(i)\"", with: "\"\(tag)-\(i)\"").utf8)
        let fd = openat(dirfd, "\(tag)-\(i).json", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        precondition(fd >= 0)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }
    close(dirfd)
    spool.waitDrained(pollMillis: 2)
    return Double(Posix.monotonicNanos() - start) / 1e9
}
