import PushCLI
import PushPayload
import PushSystem

/// `pushspoolctl stats [--json]`: the running daemon's counts, from `<state>/status.json`
/// (rewritten by pushspoold every metrics interval and at shutdown).
package struct StatsCommand: CtlSubcommand {
    package static var command: CtlCommandSpec {
        Command("stats", summary: "show the daemon's live counters",
                options: [.flag("--json", help: "the status file as one line")], discussion: """
                    Prints the counters pushspoold last wrote to STATE_DIR/status.json: ingested, refused,
                    duplicates, backlog, files in flight, media stored/failed/skipped, journal sequence and
                    bytes, when they were written and the last error.
                    """,
                exitStatus: "Exit status: 0 success, 1 no status file (the daemon has not run yet), 64 usage error."
        ) { invocation throws(CLIError) in StatsCommand(json: invocation.flag("--json")) }
    }

    var json = false

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
