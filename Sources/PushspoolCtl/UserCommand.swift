@preconcurrency import Glibc
import PushCLI
import PushExport
import PushInbox
import PushSystem
import PushUserData

/// `pushspoolctl user export|erase`: what pushspool holds about one person (an access or
/// portability request), gathered by PushUserData; and its erasure (docs/design/erasure.md).
package struct UserCommand: CtlSubcommand {
    package static var command: CtlCommandSpec {
        let device = Option.value("--device", placeholder: "TOKEN", help: "the device (the envelopes' \"device\")")
        let subject = Positional("USER", alternative: "--device")
        return Command("user", summary: "export or erase everything held about a user or device, or print its log hash", subcommands: [
            Command("export", summary: "everything pushspool holds about USER, or with --device about a device",
                    options: [device,
                              .flag("--include-media", help: "also the media files' bytes, base64"),
                              .flag("--json", help: "JSON Lines (the default and only format)")],
                    positionals: [subject], discussion: """
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
                try UserCommand(.export, invocation)
            },
            Command("erase", summary: "remove USER, or with --device a device, from every store (an erasure request)",
                    options: [device, .flag("--json", help: "what was removed, as one JSON object")],
                    positionals: [subject], discussion: """
                        Its journal records (live and archived) become tombstones of the same length that keep
                        their seq and time ("erased" in journal cat), its inbox index rows go (the index is
                        vacuumed and its WAL emptied), its outbox deliveries and quarantined files are deleted,
                        and so are the media files only its records used (a file another user's record uses
                        stays). A redelivery of an erased push is still a duplicate. With [Export] Enabled=yes
                        or [Inbox] Source=nats, its messages in the JetStream export stream ([Export] Stream=)
                        are then erased too: every message is read and those whose record names USER (or
                        whose Nats-Msg-Id key does) are deleted with the server's secure erase, which
                        overwrites them in its store. Needs pushspoold stopped (it refuses while the daemon
                        holds the journal). Idempotent: if it is interrupted, or NATS cannot be reached, run
                        it again and it finishes. Not reached: copies other consumers read from the stream,
                        pushes sent to vendors, journald, backups, and freed disk blocks.
                        """,
                    exitStatus: """
                        Exit status: 0 success (also when nothing is held), 1 runtime failure (no journal,
                        an unreadable store, pushspoold running, the export stream unreachable: the erasure
                        is then incomplete), 64 usage error.
                        """) { invocation throws(CLIError) in
                try UserCommand(.erase, invocation)
            },
            UserHashCommand.command,
        ])
    }

    enum Action { case export, erase }

    var action: Action
    var subject: DataSubject
    var includeMedia = false
    var json = false

    init(_ action: Action, _ invocation: Invocation) throws(CLIError) {
        let user = invocation.operands.first
        if let user, user.isEmpty { throw invocation.error("USER must not be empty") }
        self.action = action
        subject = user.map { .user($0) } ?? .device(invocation.value("--device") ?? "")
        includeMedia = action == .export && invocation.flag("--include-media")
        json = invocation.flag("--json")
    }

    package func run(_ context: CtlContext) -> Int32 {
        guard let configuration = context.configurationOrReport() else { return ExitStatus.failure }
        if action == .erase {
            // The stream holds this host's data when the exporter publishes records to it, or
            // when this node's inbox publishes its events there.
            let stream = configuration.export.enabled || configuration.inbox.source == .nats
                ? ExportOptions(settings: configuration.export, stateDirectory: configuration.journal.stateDirectory,
                                instance: context.globals.instance,
                                credentialsDirectory: getenv("CREDENTIALS_DIRECTORY").map { String(cString: $0) })
                : nil
            let erasure = UserDataErasure(subject: subject,
                                          sources: UserDataSources(stateDirectory: configuration.journal.stateDirectory,
                                                                   spool: context.spoolLayout(configuration)),
                                          stream: stream)
            do throws(UserDataError) {
                let (erasureID, counts) = try erasure.run()
                if json {
                    context.out(String(decoding: JSONValue.object(["erasureId": .string(erasureID), "complete": .bool(true),
                                                                   "counts": counts.jsonValue]).serialized(), as: UTF8.self) + "\n")
                } else {
                    context.out("erasure \(erasureID) complete: \(counts.journalRecords) journal records, \(counts.inboxItems) inbox items, "
                                + "\(counts.outboxDeliveries) outbox deliveries, \(counts.quarantined) quarantined files, "
                                + "\(counts.mediaFiles) media files, \(counts.statusFiles) status files"
                                + (counts.streamMessages.map { ", \($0) export stream messages" } ?? "")
                                + " removed (\(counts.mediaShared) shared media files kept)\n")
                    if counts.quarantineUnchecked > 0 {
                        context.out("\(counts.quarantineUnchecked) entries of the spool's failed/ could not be checked "
                                    + "(a symlink, a FIFO, too large or unreadable); review them by hand\n")
                    }
                }
                return ExitStatus.ok
            } catch {
                context.err("pushspoolctl: user erase: \(error)\n")
                return ExitStatus.failure
            }
        }
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
