import PushInbox
import PushSystem
import PushUserData

/// `pushspoolctl user export|erase`: what pushspool holds about one person (an access or
/// portability request), gathered by PushUserData; and its erasure (docs/design/erasure.md).
package struct UserCommand: CtlSubcommand {
    package static let name = "user"
    package static let summary = "export or erase everything held about a user or device"
    package static let help = """
        usage: pushspoolctl user export (USER | --device TOKEN) [--include-media] [--json]
               pushspoolctl user erase (USER | --device TOKEN) [--json]

        export  everything pushspool holds about USER (the envelopes' "user"), or with
                --device about a device (the envelopes' "device"): the journal's records
                naming it (pushes and Notification Center events, archived segments first,
                then the live ones), its inbox index items with their states, its outbox
                deliveries still pending or parked, quarantined spool files (failed/) whose
                payload names it, with their reasons, and the media files its records point
                at (path, size, sha256; with --include-media also the bytes, base64).

        The output is JSON Lines (--json is the default and only format): one object per
        line with a "kind": header, journal, inbox-owner, inbox-item, outbox, quarantine,
        media, warning, and last a summary with the counts. A document without its summary
        line is incomplete. A subject with nothing held gets a header and a summary with
        zero counts. Read-only; safe while pushspoold runs.

        erase   removes USER (or the device) from every store, for an erasure request:
                its journal records (live and archived) become tombstones of the same
                length that keep their seq and time ("erased" in journal cat), its inbox
                index rows go (the index is vacuumed and its WAL emptied), its outbox
                deliveries and quarantined files are deleted, and so are the media files
                only its records used (a file another user's record uses stays). A
                redelivery of an erased push is still a duplicate. Needs pushspoold stopped
                (it refuses while the daemon holds the journal). Idempotent: if it is
                interrupted, run it again and it finishes. Prints what was removed (one
                line, JSON with --json). Not reached: copies already exported to NATS,
                sent to vendors, in journald, in backups, or in freed disk blocks.

        Exit status: 0 success (also when nothing is held), 1 runtime failure (no journal,
        an unreadable store, pushspoold running; for export the summary line is then
        missing), 64 usage error.
        """

    enum Action { case export, erase }

    var action: Action
    var subject: DataSubject
    var includeMedia = false
    var json = false

    package init(arguments: [String]) throws(UsageError) {
        guard let verb = arguments.first else { throw UsageError("missing user action (export, erase)") }
        switch verb {
        case "export": action = .export
        case "erase": action = .erase
        default: throw UsageError("unknown user action '\(verb)' (export, erase)")
        }
        var user: String?
        var device: String?
        var cursor = ArgumentCursor(Array(arguments.dropFirst()))
        while let item = cursor.next() {
            switch item {
            case .option("--json", nil): json = true
            case .option("--include-media", nil) where verb == "export": includeMedia = true
            case .option("--device", let inline):
                guard device == nil else { throw UsageError("--device given twice") }
                device = try cursor.value(of: "--device", inline: inline)
            case .option(let name, _): throw UsageError("unknown option for user \(verb): \(name)")
            case .operand(let operand):
                guard user == nil else { throw UsageError("user \(verb) takes one USER, got '\(operand)' too") }
                user = operand
            }
        }
        switch (user, device) {
        case (let user?, nil):
            guard !user.isEmpty else { throw UsageError("USER must not be empty") }
            subject = .user(user)
        case (nil, let device?):
            guard !device.isEmpty else { throw UsageError("--device needs a non-empty token") }
            subject = .device(device)
        case (nil, nil): throw UsageError("user \(verb) needs USER or --device TOKEN")
        case (_?, _?): throw UsageError("give USER or --device TOKEN, not both")
        }
    }

    package func run(_ context: CtlContext) -> Int32 {
        guard let configuration = context.configurationOrReport() else { return ExitStatus.failure }
        if action == .erase {
            let erasure = UserDataErasure(subject: subject,
                                          sources: UserDataSources(stateDirectory: configuration.journal.stateDirectory,
                                                                   spool: context.spoolLayout(configuration)))
            do throws(UserDataError) {
                let (erasureID, counts) = try erasure.run()
                if json {
                    context.out(String(decoding: JSONValue.object(["erasureId": .string(erasureID), "complete": .bool(true),
                                                                   "counts": counts.jsonValue]).serialized(), as: UTF8.self) + "\n")
                } else {
                    context.out("erasure \(erasureID) complete: \(counts.journalRecords) journal records, \(counts.inboxItems) inbox items, "
                                + "\(counts.outboxDeliveries) outbox deliveries, \(counts.quarantined) quarantined files, "
                                + "\(counts.mediaFiles) media files, \(counts.statusFiles) status files removed "
                                + "(\(counts.mediaShared) shared media files kept)\n")
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
