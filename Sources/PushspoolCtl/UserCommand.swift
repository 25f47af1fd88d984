import PushInbox
import PushSystem
import PushUserData

/// `pushspoolctl user export`: what pushspool holds about one person (an access or
/// portability request), gathered by PushUserData.
package struct UserCommand: CtlSubcommand {
    package static let name = "user"
    package static let summary = "export everything held about a user or device (access requests)"
    package static let help = """
        usage: pushspoolctl user export (USER | --device TOKEN) [--include-media] [--json]

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

        Exit status: 0 success (also when nothing is held), 1 runtime failure (no journal,
        an unreadable store; the summary line is then missing), 64 usage error.
        """

    var subject: DataSubject
    var includeMedia = false

    package init(arguments: [String]) throws(UsageError) {
        guard let verb = arguments.first else { throw UsageError("missing user action (export)") }
        guard verb == "export" else { throw UsageError("unknown user action '\(verb)' (export)") }
        var user: String?
        var device: String?
        var cursor = ArgumentCursor(Array(arguments.dropFirst()))
        while let item = cursor.next() {
            switch item {
            case .option("--json", nil): break
            case .option("--include-media", nil): includeMedia = true
            case .option("--device", let inline):
                guard device == nil else { throw UsageError("--device given twice") }
                device = try cursor.value(of: "--device", inline: inline)
            case .option(let name, _): throw UsageError("unknown option for user export: \(name)")
            case .operand(let operand):
                guard user == nil else { throw UsageError("user export takes one USER, got '\(operand)' too") }
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
        case (nil, nil): throw UsageError("user export needs USER or --device TOKEN")
        case (_?, _?): throw UsageError("give USER or --device TOKEN, not both")
        }
    }

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
