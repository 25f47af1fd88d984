import PushPayload
import PushSystem

/// `pushspoolctl stats [--json]`: the running daemon's counts, from `<state>/status.json`
/// (rewritten by pushspoold every metrics interval and at shutdown).
package struct StatsCommand: CtlSubcommand {
    package static let name = "stats"
    package static let summary = "show the daemon's live counters"
    package static let help = """
        usage: pushspoolctl stats [--json]

        Prints the counters pushspoold last wrote to STATE_DIR/status.json: ingested, refused,
        duplicates, backlog, files in flight, media stored/failed/skipped, journal sequence and
        bytes, when they were written and the last error. With --json, the file as one line.

        Exit status: 0 success, 1 no status file (the daemon has not run yet), 64 usage error.
        """

    var json = false

    package init(arguments: [String]) throws(UsageError) {
        for argument in arguments {
            guard argument == "--json" else { throw UsageError("unknown option: \(argument)") }
            json = true
        }
    }

    package func run(_ context: CtlContext) -> Int32 {
        guard let configuration = context.configurationOrReport() else { return ExitStatus.failure }
        let path = StateLayout(root: configuration.journal.stateDirectory).status
        let bytes: [UInt8]
        do {
            bytes = try Posix.readFile(path, limit: 1 << 20)
        } catch {
            context.err("pushspoolctl: cannot read \(path): \(error); has pushspoold run with this state directory?\n")
            return ExitStatus.failure
        }
        if json {
            context.out(String(decoding: bytes, as: UTF8.self).trimmingSpaces + "\n")
            return ExitStatus.ok
        }
        guard case .object(let object)? = try? JSONParser().parse(bytes) else {
            context.err("pushspoolctl: \(path) is not a JSON object\n")
            return ExitStatus.failure
        }
        for key in object.keys.sorted() {
            let text: String = switch object[key]! {
            case .string(let s), .number(let s): s
            case .bool(let b): b ? "yes" : "no"
            default: String(decoding: object[key]!.serialized(), as: UTF8.self)
            }
            context.out("\(key): \(text)\n")
        }
        return ExitStatus.ok
    }
}
