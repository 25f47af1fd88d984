import Foundation

/// `pushspool-bench all [--full] [--write-readme-table docs/performance.md]`
///
/// The performance suite: burst against the C loop (from outside and in process), latency at
/// 1,000 and 5,000 files/s, backlogs of 20,000 and 200,000 files (and 1,000,000 with
/// `--full`), normaliser payloads/s, a big journal (5,000,000 records with `--full`,
/// 1,000,000 otherwise) for start-up, verify and cat, and export to a local JetStream
/// (records/s beside a 10,000-file burst and alone, lag and drop to PubAck at 1,000 files/s
/// beside the C loop's drop to durable), then the real pushspoold and pushspool-inbox: wake-ups
/// while idle and drop-to-visible at 200 files/s beside the C loop; the same across a
/// fleet (host a to two inbox nodes through a 3-node R3 cluster) beside the PubAck and the C
/// loop; and the fleet outbox's events/s through two nodes to a stand-in vendor. Prints a table of
/// results, ratios and the machine; `--write-readme-table FILE` replaces the table between
/// the `<!-- bench-table:begin -->` and `<!-- bench-table:end -->` markers in FILE.
func runAllBench(arguments: [String]) {
    var full = false
    var readme: String?
    var index = 0
    while index < arguments.count {
        switch arguments[index] {
        case "--full": full = true
        case "--write-readme-table" where index + 1 < arguments.count:
            readme = arguments[index + 1]
            index += 1
        default:
            print("usage: pushspool-bench all [--full] [--write-readme-table docs/performance.md]")
            exit(64)
        }
        index += 1
    }
    print("machine: \(machineDescription())")
    runIngestBench(arguments: ["--files", "20000", "--rounds", "3", "--rates", "1000,5000", "--seconds", "5"])
    runBacklogBench(arguments: ["--sizes", full ? "20000,200000,1000000" : "20000,200000"])
    runPayloadBench(arguments: ["spool-examples", "--seconds", "1"])
    runBigJournalBench(arguments: ["--records", full ? "5000000" : "1000000"])
    // 10,000 files and 5 s per steady run keep the export part near a minute; the lag
    // percentiles still rest on 5,000 records each.
    _ = exportBench(arguments: ["--files", "10000", "--rate", "1000", "--seconds", "5"])
    _ = idleBench(seconds: 10, settle: 10, perThread: false)
    _ = visibleBench(rate: 200, seconds: 10, inboxOnly: false)
    _ = fleetOutboxBench(events: 5_000, nodes: 2)
    _ = fleetBench(rate: 200, seconds: 10, natsNodes: 3)
    let note = full ? "`pushspool-bench all --full`" : "`pushspool-bench all` (without `--full`: no 1,000,000-file backlog, a 1,000,000-record journal)"
    let table = BenchResults.shared.markdown(note: "Suite: " + note + ". The machine is shared: compare ratios from one run, not absolute figures across runs.")
    print("\n" + table)
    if let readme {
        let begin = "<!-- bench-table:begin -->", end = "<!-- bench-table:end -->"
        guard let text = try? String(contentsOfFile: readme, encoding: .utf8),
              let from = text.range(of: begin), let to = text.range(of: end), from.upperBound <= to.lowerBound else {
            print("\(readme) has no \(begin) … \(end) markers")
            exit(1)
        }
        let updated = text[..<from.upperBound] + "\n" + table + text[to.lowerBound...]
        try! String(updated).write(toFile: readme, atomically: true, encoding: .utf8)
        print("table written to \(readme)")
    }
}
