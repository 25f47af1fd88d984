/// What `pushspoold` was asked to do on its command line. Flags override the configuration
/// file, which overrides the built-in defaults.
package struct DaemonArguments: Sendable, Equatable {
    package var configFile = "/etc/pushspool/pushspool.conf"
    /// `--config` was given: the file must then exist (a mistyped path must not run on
    /// defaults silently); only the default path may be absent.
    package var configFileGiven = false
    package var spoolDirectory: String?
    package var stateDirectory: String?
    /// Start even when a sealed segment is damaged, moving it to `journal/quarantine/`.
    package var quarantineCorruptSegments = false
    package var showHelp = false
    package var showVersion = false

    package init() {}

    package static let usage = """
        Usage: pushspoold [--spool DIR] [--state-dir DIR] [--config FILE] [--quarantine-corrupt-segment]

        Ingests push-notification payloads dropped into DIR/incoming/ and appends them to the
        journal under the state directory. Runs in the foreground; systemd (Type=notify) or a
        terminal supervises it.

        Options:
          --spool DIR                   spool root (default /var/spool/pushspool)
          --state-dir DIR               journal and media store (default /var/lib/pushspool)
          --config FILE                 configuration (default /etc/pushspool/pushspool.conf,
                                        drop-ins from FILE.d/*.conf); a FILE given here must
                                        exist, only the default may be absent (exit 78)
          --quarantine-corrupt-segment  move a damaged journal segment aside instead of
                                        refusing to start
          -h, --help                    show this help
          --version                     show the version
        """

    /// Parses `arguments` (without the program name).
    package static func parse(_ arguments: [String]) throws(UsageError) -> DaemonArguments {
        var result = DaemonArguments()
        var remaining = arguments[...]
        func value(for flag: String) throws(UsageError) -> String {
            guard let next = remaining.popFirst(), !next.hasPrefix("--") else {
                throw UsageError("\(flag) needs a value")
            }
            return next
        }
        func inlineOrNext(_ inline: String?, _ flag: String) throws(UsageError) -> String {
            if let inline { return inline }
            return try value(for: flag)
        }
        while let argument = remaining.popFirst() {
            var flag = argument
            var inline: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                flag = String(argument[..<equals])
                inline = String(argument[argument.index(after: equals)...])
            }
            switch flag {
            case "--spool": result.spoolDirectory = try inlineOrNext(inline, flag)
            case "--state-dir": result.stateDirectory = try inlineOrNext(inline, flag)
            case "--config":
                result.configFile = try inlineOrNext(inline, flag)
                result.configFileGiven = true
            case "--quarantine-corrupt-segment": result.quarantineCorruptSegments = true
            case "-h", "--help": result.showHelp = true
            case "--version": result.showVersion = true
            default: throw UsageError("unknown option '\(argument)'")
            }
        }
        return result
    }
}

/// A command line that cannot be understood; exit status 64 (EX_USAGE).
package struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    package var message: String
    package init(_ message: String) { self.message = message }
    package var description: String { message }
}
