import PushCLI
import PushJournal
import PushSystem

/// `pushspoolctl user hash USER`: the `PUSH_USER_HASH=` value pushspoold's journald events
/// carry for USER under `[Log] UserIds=hash`, so an operator can find a user's events
/// (`journalctl PUSH_USER_HASH=…`) without the journal naming anyone.
struct UserHashCommand: CtlSubcommand {
    static var command: CtlCommandSpec {
        Command("hash", summary: "the keyed hash pushspoold's journald events carry for USER ([Log] UserIds=hash)",
                options: [.flag("--json", help: "one JSON object with the user and the hash")],
                positionals: [Positional("USER")], discussion: """
                    Prints the value of the PUSH_USER_HASH= field pushspoold gives the events of USER's
                    pushes and Notification Center events: the first 16 hex digits of HMAC-SHA256 under
                    the instance's <state>/erase.key, which pushspoold creates at its first start. Use
                    it as `journalctl PUSH_USER_HASH=$(pushspoolctl user hash USER)`. Another instance,
                    or a state directory created afresh, has another key, so its hashes differ. Reads
                    the key only; safe while pushspoold runs.
                    """,
                exitStatus: """
                    Exit status: 0 success, 1 no key yet (pushspoold has not started on this state
                    directory) or an unreadable key, 64 usage error.
                    """) { invocation throws(CLIError) in
            try UserHashCommand(invocation)
        }
    }

    var user: String
    var json = false

    init(_ invocation: Invocation) throws(CLIError) {
        guard let user = invocation.operands.first, !user.isEmpty else { throw invocation.error("USER must not be empty") }
        self.user = user
        json = invocation.flag("--json")
    }

    func run(_ context: CtlContext) -> Int32 {
        guard let configuration = context.configurationOrReport() else { return ExitStatus.failure }
        let stateDirectory = configuration.journal.stateDirectory
        let secret: ErasureSecret?
        do throws(ErasureError) {
            secret = try ErasureSecret.load(stateDirectory: stateDirectory)
        } catch {
            context.err("pushspoolctl: user hash: \(error)\n")
            return ExitStatus.failure
        }
        guard let secret else {
            context.err("pushspoolctl: user hash: \(stateDirectory)/\(ErasureSecret.fileName) does not exist yet: pushspoold "
                        + "creates it at its first start; until then no event carries a hash\n")
            return ExitStatus.failure
        }
        let hash = secret.logUserHash(user)
        if json {
            context.out(String(decoding: JSONValue.object(["user": .string(user), "hash": .string(hash)]).serialized(), as: UTF8.self) + "\n")
        } else {
            context.out(hash + "\n")
        }
        return ExitStatus.ok
    }
}
