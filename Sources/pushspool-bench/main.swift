// One benchmark per file, each exposing `run<Name>Bench(arguments:)`; add one line per bench here.
let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "media": runMediaBench(arguments: Array(arguments.dropFirst()))
default:
    print("usage: pushspool-bench <bench> [options]; benches: media")
}
