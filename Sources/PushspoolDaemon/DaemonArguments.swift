import PushCLI

/// What `pushspoold` was asked to do on its command line. Flags override the configuration
/// file, which overrides the built-in defaults.
package struct DaemonArguments: Sendable, Equatable {
    package var configFile = "/etc/pushspool/pushspool.conf"
    /// `--config` (or `--instance`) was given: the file must then exist (a mistyped path must
    /// not run on defaults silently); only the default path may be absent.
    package var configFileGiven = false
    package var spoolDirectory: String?
    package var stateDirectory: String?
    /// `--instance NAME`: the paths of `pushspoold@NAME`, and the export's host id suffix.
    package var instance: String?
    /// Start even when a sealed segment is damaged, moving it to `journal/quarantine/`.
    package var quarantineCorruptSegments = false

    package init() {}

    /// pushspoold's table: the shared path options and its own.
    package static var program: Program<DaemonArguments> {
        Program("pushspoold", root: Command(
            "pushspoold", summary: "ingest push-notification payloads from a spool into a durable journal",
            options: PathOptions.options + [
                .flag("--quarantine-corrupt-segment", help: "move a journal segment with a corrupt record aside instead of refusing to start "
                      + "(the same as [Journal] CorruptionPolicy=quarantine-segment)"),
            ],
            discussion: """
                Ingests push-notification payloads dropped into DIR/incoming/ and appends them to the
                journal under the state directory. Runs in the foreground; systemd (Type=notify) or a
                terminal supervises it. A --config FILE that does not exist is a configuration error
                (exit 78); only the default may be absent.
                """,
            exitStatus: "Exit status: 0 stopped cleanly, 1 runtime failure, 64 usage error, 78 configuration error."
        ) { invocation throws(CLIError) in try DaemonArguments(invocation) })
    }

    init(_ invocation: Invocation) throws(CLIError) {
        let paths = try PathOptions.resolve(invocation)
        if let config = paths.config {
            configFile = config
            configFileGiven = true
        }
        spoolDirectory = paths.spool
        stateDirectory = paths.stateDir
        instance = paths.instance
        quarantineCorruptSegments = invocation.flag("--quarantine-corrupt-segment")
    }

    /// Parses `arguments` (without the program name); help and version are the caller's.
    package static func parse(_ arguments: [String]) throws(CLIError) -> DaemonArguments {
        guard case .run(let parsed, _) = try program.parse(arguments) else {
            throw CLIError(.invalidValue, command: "pushspoold", "--help, --version and --generate are answered by main")
        }
        return parsed
    }
}

/// A command line that cannot be understood; exit status 64 (EX_USAGE).
package typealias UsageError = CLIError
