import PushCLI
import PushInbox

/// `pushspoolctl nc <subcommand> …`: the Notification Center. One entry in the program's
/// table whose subcommands are the inbox queries (NcQueryCommands.swift) and the events an
/// app reports (NcEventCommands.swift); each builds its own command from the parsed line.
package enum NcCommand {
    package static var command: CtlCommandSpec {
        Command("nc", summary: "Notification Center: report inbox events, query a user's inbox",
                subcommands: NcQueryCommands.commands + NcEventCommand.commands,
                discussion: NcEventCommand.helpDetails,
                exitStatus: "Exit status: 0 success, 1 runtime failure (configuration, spool not writable), 64 usage error.")
    }

    /// `--user U` / `--device D`: whose inbox.
    static let owner: [Option] = [
        .value("--user", placeholder: "U", help: "the user whose inbox it is (at most 255 bytes)"),
        .value("--device", placeholder: "D", help: "the device (a shared-device inbox when there is no user)"),
    ]
}
