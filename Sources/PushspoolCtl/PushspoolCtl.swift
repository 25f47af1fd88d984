import PushCLI
import PushPayload
import PushSystem

/// Process exit statuses (sysexits.h where one fits).
package enum ExitStatus {
    package static let ok: Int32 = 0
    /// A runtime failure: unreadable file, I/O error.
    package static let failure: Int32 = 1
    /// EX_USAGE: bad command line.
    package static let usage: Int32 = 64
    /// EX_DATAERR: the input was read but refused (e.g. `validate` refused a payload).
    package static let dataError: Int32 = 65
}

/// Options accepted before the subcommand (the path options every program shares);
/// subcommands read them from ``CtlContext``.
package typealias GlobalOptions = PathOptions

/// A bad command line: printed to stderr with the relevant usage, exit 64.
package typealias UsageError = CLIError

/// One `pushspoolctl` command as the table builds it. To add one: a type conforming to this
/// protocol with a `static var command: CtlCommandSpec`, and one line in
/// ``PushspoolCtl/program``.
package protocol CtlSubcommand {
    /// Runs and returns the exit status.
    func run(_ context: CtlContext) -> Int32
}

/// A command's entry in pushspoolctl's table.
package typealias CtlCommandSpec = Command<any CtlSubcommand>

/// What a running subcommand may use: the global options and the standard streams.
package struct CtlContext: Sendable {
    package var globals: GlobalOptions

    package init(globals: GlobalOptions) {
        self.globals = globals
    }

    /// Writes `text` to stdout. A closed stdout (EPIPE) is not worth a crash report.
    package func out(_ text: String) {
        try? Posix.writeAll(1, Array(text.utf8), subject: "stdout")
    }

    package func err(_ text: String) {
        try? Posix.writeAll(2, Array(text.utf8), subject: "stderr")
    }
}

/// The parsed command line, before anything runs.
package enum CtlCommand {
    case help(topic: String?)
    case version
    case run(any CtlSubcommand, GlobalOptions)
}

/// The `pushspoolctl` program: parse into a ``CtlCommand``, then dispatch.
package enum PushspoolCtl {
    /// The whole command line in one table, subcommands in help order.
    package static var program: Program<any CtlSubcommand> {
        Program("pushspoolctl", root: Command(
            "pushspoolctl", summary: "drop payloads into the spool and inspect the daemon's journal",
            options: PathOptions.options,
            subcommands: [
                ValidateCommand.command,
                DropCommand.command,
                JournalCommand.command,
                FailedCommand.command,
                OutboxCommand.command,
                ExportCommand.command,
                StatsCommand.command,
                MediaCommand.command,
                ConfigCommand.command,
                NcCommand.command,
                UserCommand.command,
            ],
            exitStatus: "Exit status: 0 success, 1 runtime failure, 64 usage error, 65 input refused."))
    }

    /// Runs `pushspoolctl` with `arguments` (without the program name); returns the exit status.
    package static func main(_ arguments: [String]) -> Int32 {
        switch program.resolve(arguments, version: pushspoolVersion) {
        case .exit(let status):
            return status
        case .run(let command, let invocation):
            do throws(CLIError) {
                return command.run(CtlContext(globals: try PathOptions.resolve(invocation)))
            } catch {
                CtlContext(globals: GlobalOptions()).err("\(error)\n\n\(program.usage([]))\n")
                return ExitStatus.usage
            }
        }
    }

    /// Parses the whole command line; throws ``UsageError`` for anything malformed.
    package static func parse(_ arguments: [String]) throws(UsageError) -> CtlCommand {
        switch try program.parse(arguments) {
        case .run(let command, let invocation): return .run(command, try PathOptions.resolve(invocation))
        case .help(let path): return .help(topic: path.isEmpty ? nil : path.joined(separator: " "))
        case .version, .generate: return .version
        }
    }
}
