@preconcurrency import Glibc
import PushCLI
import PushConfig

/// `pushspoolctl config show|check|reference`.
package struct ConfigCommand: CtlSubcommand {
    package static var command: CtlCommandSpec {
        let status = "Exit status: 0 success, 1 invalid configuration, 64 usage error."
        return Command("config", summary: "show the effective configuration, check a file, or print the key reference", subcommands: [
            Command("show", summary: "the configuration pushspoold would run with, each value with where it came from",
                    discussion: "Defaults, the main file, drop-ins in name order, then --spool/--state-dir.",
                    exitStatus: status) { _ throws(CLIError) in ConfigCommand(check: false) },
            Command("check", summary: "load FILE and its drop-ins FILE.d/*.conf and report the first error",
                    options: [.value("--for", placeholder: "PROGRAM",
                                     help: "check for pushspoold (the default) or pushspool-inbox",
                                     completion: .words(Configuration.DeploymentProgram.allCases.map(\.rawValue)))],
                    positionals: [Positional("FILE", optional: true, completion: .file(suffix: "conf"))], discussion: """
                        Default: the main file and its drop-ins. Reports the first error with file and line;
                        exit 0 when it is valid. A FILE (or --config) that does not exist is an error; only
                        the default main file may be absent. Then runs the start-up check of the program
                        named by --for, the function that program runs at its start (key files, vendor URLs,
                        pushspool-inbox's token secret and admin token): the two differ on an inbox node
                        ([Inbox] Source=nats), where pushspool-inbox runs the fleet outbox and pushspoold
                        refuses [Outbox] Enabled=yes. Files left to the unit's LoadCredential= are checked
                        only with $CREDENTIALS_DIRECTORY set (systemd-run -p LoadCredential=…); set empty,
                        the check is that of a program run without credentials.
                        """, exitStatus: status) { invocation throws(CLIError) in
                let name = invocation.value("--for") ?? Configuration.DeploymentProgram.pushspoold.rawValue
                guard let program = Configuration.DeploymentProgram(rawValue: name) else {
                    throw invocation.error("--for: expected pushspoold or pushspool-inbox, got '\(name)'")
                }
                return ConfigCommand(check: true, file: invocation.operands.first, program: program)
            },
            Command("reference", summary: "every key with its default, range, reload behaviour and meaning",
                    options: [.flag("--markdown", help: "the table of docs/configuration.md"),
                              .flag("--man", help: "the key list of pushspool.conf(5), in scdoc")],
                    groups: [OptionGroup(["--markdown", "--man"], .exactlyOne)], discussion: """
                        Rendered from the configuration schema, between the markers scripts/gen-docs.sh
                        replaces. Reads no configuration.
                        """, exitStatus: "Exit status: 0 success, 64 usage error.") { invocation throws(CLIError) in
                ConfigCommand(check: false, reference: invocation.flag("--man") ? .man : .markdown)
            },
        ])
    }

    var check: Bool
    var file: String?
    /// `config check --for`: whose start-up check runs.
    var program = Configuration.DeploymentProgram.pushspoold
    /// `config reference`: print this rendering and read no configuration.
    var reference: ConfigReference.Format?

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
                // The program's own start-up check. Key-file ownership is left to the daemon
                // when this runs as another user than the file's (an operator, not the service);
                // without $CREDENTIALS_DIRECTORY (not run as `systemd-run -p LoadCredential=…`),
                // what the unit's LoadCredential= provides cannot be seen, and is not checked.
                let problems = configuration.deploymentCheck(keyFileOwner: nil, for: program,
                                                             credentials: .fromEnvironment(unset: .unseen)).problems
                guard problems.isEmpty else {
                    for problem in problems { context.err("pushspoolctl: \(problem)\n") }
                    context.err("pushspoolctl: configuration is not valid: \(program.rawValue) would refuse to start (exit 78)\n")
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
