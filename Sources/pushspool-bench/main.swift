import Foundation

// One benchmark per file, each exposing `run<Name>Bench(arguments:)`; one line per benchmark here.
let benchArguments = Array(CommandLine.arguments.dropFirst())
switch benchArguments.first {
case "payload": runPayloadBench(arguments: Array(benchArguments.dropFirst()))
default:
    FileHandle.standardError.write(Data("usage: pushspool-bench <payload> [args]\n".utf8))
    exit(64)
}
