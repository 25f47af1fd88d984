// Benchmarks, one per file, each `run<Name>Bench(arguments:)`; not tests (see BRIEF.md).
let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "journal": runJournalBench(arguments: Array(arguments.dropFirst()))
default:
    print("usage: pushspool-bench <journal> [options]")
}
