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

/// Options accepted before the subcommand; subcommands read them from ``CtlContext``.
package struct GlobalOptions: Sendable, Equatable {
    package var spool: String?
    package var stateDir: String?
    package var config: String?
    /// `--instance NAME`: resolved into the three paths above by `parse`.
    package var instance: String?
    /// `--root DIR`: the instance's paths are looked up under DIR (an image, a container's
    /// root, a test's scratch tree) instead of /, like `systemctl --root=`.
    package var root: String?

    package init(spool: String? = nil, stateDir: String? = nil, config: String? = nil, instance: String? = nil,
                 root: String? = nil) {
        self.spool = spool
        self.stateDir = stateDir
        self.config = config
        self.instance = instance
        self.root = root
    }

    /// systemd's instance names allow more, but these are the ones that are safe as a path
    /// component and a file name without escaping.
    static func isValidInstance(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64 && !name.hasPrefix(".")
            && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "_.-".contains($0)) }
    }
}

/// A bad command line: printed to stderr with the relevant usage, exit 64.
package struct UsageError: Error, Sendable, Equatable {
    package var message: String
    /// The subcommand whose usage should be shown, or `nil` for the global usage.
    package var subcommand: String?

    package init(_ message: String, subcommand: String? = nil) {
        self.message = message
        self.subcommand = subcommand
    }
}

/// One `pushspoolctl` subcommand. To add one: a new file with a type conforming to this
/// protocol, and one line in ``PushspoolCtl/subcommands``.
package protocol CtlSubcommand {
    /// The word on the command line, e.g. `validate`.
    static var name: String { get }
    /// One line for the global help.
    static var summary: String { get }
    /// Full help text: synopsis, options, exit statuses.
    static var help: String { get }
    /// Parses the arguments after the subcommand name (`--help` is handled before this).
    init(arguments: [String]) throws(UsageError)
    /// Runs and returns the exit status.
    func run(_ context: CtlContext) -> Int32
}

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
    /// Every subcommand, in help order. One line per subcommand.
    package static var subcommands: [any CtlSubcommand.Type] { [
        ValidateCommand.self,
        DropCommand.self,
        JournalCommand.self,
        FailedCommand.self,
        OutboxCommand.self,
        ExportCommand.self,
        StatsCommand.self,
        MediaCommand.self,
        ConfigCommand.self,
        NcCommand.self,
        UserCommand.self,
    ] }

    package static let usage = """
        usage: pushspoolctl [--spool DIR] [--state-dir DIR] [--config FILE | --instance NAME [--root DIR]] <subcommand> [options] [args]
               pushspoolctl help [<subcommand>] | --help | --version
        """

    /// Runs `pushspoolctl` with `arguments` (without the program name); returns the exit status.
    package static func main(_ arguments: [String]) -> Int32 {
        let context = CtlContext(globals: GlobalOptions())
        let command: CtlCommand
        do throws(UsageError) {
            command = try parse(arguments)
        } catch {
            context.err("pushspoolctl: \(error.message)\n\n\(usageText(for: error.subcommand))\n")
            return ExitStatus.usage
        }
        switch command {
        case .version:
            context.out("pushspoolctl \(pushspoolVersion)\n")
            return ExitStatus.ok
        case .help(let topic):
            context.out(helpText(for: topic) + "\n")
            return ExitStatus.ok
        case .run(let subcommand, let globals):
            return subcommand.run(CtlContext(globals: globals))
        }
    }

    /// Parses the whole command line; throws ``UsageError`` for anything malformed.
    package static func parse(_ arguments: [String]) throws(UsageError) -> CtlCommand {
        var globals = GlobalOptions()
        var i = 0
        func value(_ option: String, inline: String?) throws(UsageError) -> String {
            if let inline { return inline }
            i += 1
            guard i < arguments.count, !arguments[i].isEmpty else { throw UsageError("option \(option) needs a value") }
            return arguments[i]
        }
        while i < arguments.count {
            let arg = arguments[i]
            let (name, inline) = splitOption(arg)
            switch name {
            case "-h", "--help": return .help(topic: nil)
            case "--version": return .version
            case "--spool": globals.spool = try value(name, inline: inline)
            case "--state-dir": globals.stateDir = try value(name, inline: inline)
            case "--config": globals.config = try value(name, inline: inline)
            case "--instance":
                // The paths pushspoold@NAME.service gives its daemon (systemd/pushspoold@.service).
                let instance = try value(name, inline: inline)
                guard GlobalOptions.isValidInstance(instance) else {
                    throw UsageError("--instance takes a unit instance name of [A-Za-z0-9_.-] (not starting with '.'), got '\(instance)'")
                }
                globals.instance = instance
            case "--root":
                let root = try value(name, inline: inline)
                guard root.hasPrefix("/") else { throw UsageError("--root takes an absolute directory, got '\(root)'") }
                globals.root = root
            case "help":
                let topic = i + 1 < arguments.count ? arguments[i + 1] : nil
                if let topic, lookup(topic) == nil { throw UsageError("no such subcommand: \(topic)") }
                return .help(topic: topic)
            default:
                if arg.hasPrefix("-") { throw UsageError("unknown option: \(arg)") }
                guard let type = lookup(arg) else { throw UsageError("no such subcommand: \(arg)") }
                let rest = Array(arguments[(i + 1)...])
                let beforeDashDash = rest.prefix { $0 != "--" }
                if beforeDashDash.contains("-h") || beforeDashDash.contains("--help") { return .help(topic: arg) }
                try applyInstance(&globals)
                do throws(UsageError) {
                    return .run(try type.init(arguments: rest), globals)
                } catch {
                    throw UsageError(error.message, subcommand: arg)
                }
            }
            i += 1
        }
        throw UsageError("missing subcommand")
    }

    /// `--instance NAME` stands for the three paths of `pushspoold@NAME.service`; given with
    /// any of them it would be ambiguous which one wins.
    static func applyInstance(_ globals: inout GlobalOptions) throws(UsageError) {
        guard let instance = globals.instance else {
            if globals.root != nil { throw UsageError("--root applies to --instance only") }
            return
        }
        guard globals.config == nil, globals.spool == nil, globals.stateDir == nil else {
            throw UsageError("--instance sets --config, --spool and --state-dir; do not combine them")
        }
        // "/" and "" both mean the real root; no doubled slash in what is printed.
        var root = globals.root ?? ""
        while root.hasSuffix("/") { root.removeLast() }
        globals.config = "\(root)/etc/pushspool/\(instance).conf"
        globals.spool = "\(root)/var/spool/pushspool/\(instance)"
        globals.stateDir = "\(root)/var/lib/pushspool/\(instance)"
    }

    static func lookup(_ name: String) -> (any CtlSubcommand.Type)? {
        subcommands.first { $0.name == name }
    }

    /// `--name=value` → (`--name`, `value`); anything else → (arg, nil).
    package static func splitOption(_ arg: String) -> (String, String?) {
        guard arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") else { return (arg, nil) }
        return (String(arg[..<eq]), String(arg[arg.index(after: eq)...]))
    }

    static func usageText(for subcommand: String?) -> String {
        if let subcommand, let type = lookup(subcommand) { return type.help }
        return usage + "\nRun 'pushspoolctl --help' for the list of subcommands."
    }

    static func helpText(for topic: String?) -> String {
        if let topic, let type = lookup(topic) { return type.help }
        var lines = [usage, "", "Global options:",
                     "  --spool DIR       spool root (default from the configuration, /var/spool/pushspool)",
                     "  --state-dir DIR   state directory holding the journal (default /var/lib/pushspool)",
                     "  --config FILE     configuration file (default /etc/pushspool/pushspool.conf)",
                     "  --instance NAME   the pushspoold@NAME instance: /etc/pushspool/NAME.conf,",
                     "                    /var/spool/pushspool/NAME, /var/lib/pushspool/NAME",
                     "  --root DIR        with --instance: those paths under DIR (an image, a container)",
                     "  -h, --help        show this help; 'help <subcommand>' for one subcommand",
                     "  --version         print the version", "", "Subcommands:"]
        let width = subcommands.map { $0.name.count }.max() ?? 0
        for type in subcommands {
            lines.append("  " + type.name + String(repeating: " ", count: width - type.name.count + 2) + type.summary)
        }
        lines.append("")
        lines.append("Exit status: 0 success, 1 runtime failure, 64 usage error, 65 input refused.")
        return lines.joined(separator: "\n")
    }
}

/// Walks a subcommand's arguments: options (`--name value` or `--name=value`), operands
/// (`-` is an operand: stdin), and `--`, after which everything is an operand.
package struct ArgumentCursor {
    package enum Item: Equatable {
        case option(String, inline: String?)
        case operand(String)
    }

    private let arguments: [String]
    private var index = 0
    private var optionsDone = false

    package init(_ arguments: [String]) {
        self.arguments = arguments
    }

    package mutating func next() -> Item? {
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if optionsDone || argument == "-" || !argument.hasPrefix("-") { return .operand(argument) }
            if argument == "--" {
                optionsDone = true
                continue
            }
            let (name, inline) = PushspoolCtl.splitOption(argument)
            return .option(name, inline: inline)
        }
        return nil
    }

    /// The value of `option`: its `=value`, else the next argument.
    package mutating func value(of option: String, inline: String?) throws(UsageError) -> String {
        if let inline { return inline }
        guard index < arguments.count else { throw UsageError("option \(option) needs a value") }
        defer { index += 1 }
        return arguments[index]
    }

    /// A positive integer value of `option`.
    package mutating func positiveInteger(of option: String, inline: String?, allowZero: Bool = false) throws(UsageError) -> Int {
        let text = try value(of: option, inline: inline)
        guard let number = Int(text), number > 0 || (allowZero && number == 0) else {
            throw UsageError("option \(option) needs a \(allowZero ? "non-negative" : "positive") integer, not '\(text)'")
        }
        return number
    }
}
