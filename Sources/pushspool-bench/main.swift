import Foundation

// Benchmarks, not tests: one per file, each exposing `run<Name>Bench(arguments:)`, one line here.
let benchmarks: [(String, ([String]) -> Void)] = [
    ("payload", runPayloadBench),
    ("journal", runJournalBench),
    ("media", runMediaBench),
    ("spool", runSpoolBench),
    ("ingest", runIngestBench),
    ("backlog", runBacklogBench),
    ("bigjournal", runBigJournalBench),
    ("erase", runEraseBench),
    ("nc", runInboxBench),
    ("export", runExportBench),
    ("idle", runIdleBench),
    ("visible", runVisibleBench),
    ("fleet-outbox", runFleetOutboxBench),
    ("fleet", runFleetBench),
    ("all", runAllBench),
    ("c-loop", runCLoop),
    // Not a benchmark: the durable pull consumer of scripts/systemd-integration/instances-live.sh.
    ("nats-consume", runNatsConsume),
]
let benchArguments = Array(CommandLine.arguments.dropFirst())
if let name = benchArguments.first, let bench = benchmarks.first(where: { $0.0 == name }) {
    bench.1(Array(benchArguments.dropFirst()))
} else {
    FileHandle.standardError.write(Data("usage: pushspool-bench <\(benchmarks.map(\.0).joined(separator: "|"))> [options]\n".utf8))
    exit(64)
}
