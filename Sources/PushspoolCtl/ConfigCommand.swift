import PushConfig

/// `pushspoolctl config show|check|reference`.
package struct ConfigCommand: CtlSubcommand {
    package static let name = "config"
    package static let summary = "show the effective configuration, check a file, or print the key reference"
    package static let help = """
        usage: pushspoolctl config show
               pushspoolctl config check [FILE]
               pushspoolctl config reference --markdown | --man

        show   the configuration pushspoold would run with (defaults, the main file, drop-ins in
               name order, then --spool/--state-dir), each value preceded by where it came from
        check  load FILE and its drop-ins FILE.d/*.conf (default: the main file and its
               drop-ins) and report the first error with file and line; exit 0 when it is
               valid. A FILE (or --config) that does not exist is an error; only the default
               main file may be absent.
        reference  every key with its default, range, whether a reload applies it and what
               it does: the table of docs/configuration.md (--markdown) or the key list of
               pushspool.conf(5) in scdoc (--man), between the markers scripts/gen-docs.sh
               replaces

        Exit status: 0 success, 1 invalid configuration, 64 usage error.
        """

    var check: Bool
    var file: String?
    /// `config reference`: print this rendering and read no configuration.
    var reference: ConfigReference.Format?

    package init(arguments: [String]) throws(UsageError) {
        switch arguments.first {
        case "show":
            guard arguments.count == 1 else { throw UsageError("config show takes no arguments") }
            check = false
        case "check":
            guard arguments.count <= 2 else { throw UsageError("config check takes at most one FILE") }
            check = true
            file = arguments.count == 2 ? arguments[1] : nil
        case "reference":
            check = false
            guard arguments.count == 2, let format = ConfigReference.Format.allCases.first(where: { "--\($0.rawValue)" == arguments[1] }) else {
                throw UsageError("config reference takes one of --markdown, --man")
            }
            reference = format
        case nil: throw UsageError("missing config action (show, check, reference)")
        case let other?: throw UsageError("unknown config action '\(other)' (show, check, reference)")
        }
    }

    package func run(_ context: CtlContext) -> Int32 {
        if let reference {
            context.out(ConfigReference.render(reference))
            return ExitStatus.ok
        }
        var context = context
        if let file { context.globals.config = file }
        do {
            let (configuration, provenance) = try context.loadConfiguration()
            if check {
                // The daemon's own start-up check. Key-file ownership is left to the daemon
                // when this runs as another user than the file's (an operator, not the service).
                let problems = configuration.deploymentProblems(keyFileOwner: nil)
                guard problems.isEmpty else {
                    for problem in problems { context.err("pushspoolctl: \(problem)\n") }
                    context.err("pushspoolctl: configuration is not valid: pushspoold would refuse to start (exit 78)\n")
                    return ExitStatus.failure
                }
                context.out("configuration is valid\n")
            } else {
                context.out(renderEffectiveConfiguration(configuration, provenance: provenance))
            }
            return ExitStatus.ok
        } catch {
            context.err("pushspoolctl: \(error)\n")
            return ExitStatus.failure
        }
    }
}
