import PushCLI
import PushInbox
import PushSystem
import PushUserData

/// `pushspoolctl user export`: what pushspool holds about one person (an access or
/// portability request), gathered by PushUserData.
package struct UserCommand: CtlSubcommand {
    package static var command: CtlCommandSpec {
        Command("user", summary: "export everything held about a user or device (access requests)", subcommands: [
            Command("export", summary: "everything pushspool holds about USER, or with --device about a device",
                    options: [.value("--device", placeholder: "TOKEN", help: "the device (the envelopes' \"device\")"),
                              .flag("--include-media", help: "also the media files' bytes, base64"),
                              .flag("--json", help: "JSON Lines (the default and only format)")],
                    positionals: [Positional("USER", alternative: "--device")], discussion: """
                        USER is the envelopes' "user". Gathers the journal's records naming it (pushes and
                        Notification Center events, archived segments first, then the live ones), its inbox
                        index items with their states, its outbox deliveries still pending or parked,
                        quarantined spool files (failed/) whose payload names it, with their reasons, and the
                        media files its records point at (path, size, sha256).

                        The output is JSON Lines: one object per line with a "kind": header, journal,
                        inbox-owner, inbox-item, outbox, quarantine, media, warning, and last a summary with
                        the counts. A document without its summary line is incomplete. A subject with nothing
                        held gets a header and a summary with zero counts. Read-only; safe while pushspoold runs.
                        """,
                    exitStatus: """
                        Exit status: 0 success (also when nothing is held), 1 runtime failure (no journal,
                        an unreadable store; the summary line is then missing), 64 usage error.
                        """) { invocation throws(CLIError) in
                let user = invocation.operands.first
                if let user, user.isEmpty { throw invocation.error("USER must not be empty") }
                let subject: DataSubject = user.map { .user($0) } ?? .device(invocation.value("--device") ?? "")
                return UserCommand(subject: subject, includeMedia: invocation.flag("--include-media"))
            },
        ])
    }

    var subject: DataSubject
    var includeMedia = false

    package func run(_ context: CtlContext) -> Int32 {
        guard let configuration = context.configurationOrReport() else { return ExitStatus.failure }
        let export = UserDataExport(subject: subject,
                                    sources: UserDataSources(stateDirectory: configuration.journal.stateDirectory,
                                                             spool: context.spoolLayout(configuration)),
                                    includeMedia: includeMedia)
        var output = OutputBuffer()
        defer { output.flush() }
        do throws(UserDataError) {
            _ = try export.run { output.appendLine($0) }
            return ExitStatus.ok
        } catch {
            output.flush()
            context.err("pushspoolctl: user export: \(error)\n")
            return ExitStatus.failure
        }
    }
}
