@preconcurrency import Glibc
import PushCLI
import PushExport
import PushInbox
import PushJournal
import PushConfig
import PushModuleOptions
import PushPayload
import PushSpool
import PushSystem
import PushErasure

/// `pushspoolctl user export|erase`: what pushspool holds about one person (an access or
/// portability request), gathered by PushErasure's UserDataExport; and its erasure (docs/design/erasure.md).
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
                    options: [device, .flag("--json", help: "what was removed, as one JSON object"),
                              .flag("--no-wait", help: "with pushspoold running: return once the request is in the spool"),
                              .flag("--status", help: "list the erasures pushspoold ran or runs, and their steps done")],
                    positionals: [Positional("USER", optional: true)], discussion: """
                        Its journal records (live and archived) become tombstones of the same length that keep
                        their seq and time ("erased" in journal cat), its inbox index rows go (the index is
                        vacuumed and its WAL emptied), its outbox deliveries and quarantined files are deleted,
                        and so are the media files only its records used (a file another user's record uses
                        stays). A redelivery of an erased push is still a duplicate. With [Export] Enabled=yes
                        or [Inbox] Source=nats, its messages in the JetStream export stream ([Export] Stream=)
                        are then erased too: every message is read and those whose record names USER (or
                        whose Nats-Msg-Id key does) are deleted with the server's secure erase, which
                        overwrites them in its store.

                        With pushspoold running, the request goes through the spool: pushspoold journals an
                        erasure record naming only a keyed hash of USER, and its eraser performs the same
                        steps on sealed segments while ingest goes on; records journaled after the request
                        are not erased. The command waits and shows each step done (--no-wait returns at
                        once); if pushspoold stops first it says so and exits 1, the request kept for its
                        next start; --status lists erasures by id with their steps. With pushspoold stopped it
                        erases directly, holding the journal. Idempotent: if it is interrupted, or NATS
                        cannot be reached, run it again (or let pushspoold retry) and it finishes. Not
                        reached: copies other consumers read from the stream, pushes sent to vendors,
                        journald, backups, and freed disk blocks.
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

    enum Action { case export, erase, eraseStatus }

    var action: Action
    var subject: DataSubject
    var includeMedia = false
    var json = false
    var wait = true

    init(_ action: Action, _ invocation: Invocation) throws(CLIError) {
        let user = invocation.operands.first
        if let user, user.isEmpty { throw invocation.error("USER must not be empty") }
        self.action = action
        if action == .erase {
            let given = [user != nil, invocation.flag("--device"), invocation.flag("--status")].filter { $0 }.count
            if given != 1 { throw invocation.error("give exactly one of USER, --device TOKEN and --status", .missingOperand) }
            if invocation.flag("--status") { self.action = .eraseStatus }
            wait = !invocation.flag("--no-wait")
        }
        subject = user.map { .user($0) } ?? .device(invocation.value("--device") ?? "")
        includeMedia = action == .export && invocation.flag("--include-media")
        json = invocation.flag("--json")
    }

    package func run(_ context: CtlContext) -> Int32 {
        guard let configuration = context.configurationOrReport() else { return ExitStatus.failure }
        let requests = ErasureRequests(stateDirectory: configuration.journal.stateDirectory)
        if action == .eraseStatus {
            for status in requests.all() {
                context.out(json ? status.jsonValue.serializedString() + "\n" : Self.line(status))
            }
            return ExitStatus.ok
        }
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
            } catch where error.code == .busy {
                // pushspoold holds the journal: it performs the erasure, without stopping ingest.
                return requestLive(context, configuration: configuration, requests: requests)
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

    /// Drops the erasure request into the spool and, unless `--no-wait`, follows its status
    /// file until the eraser says it is complete.
    private func requestLive(_ context: CtlContext, configuration: Configuration, requests: ErasureRequests) -> Int32 {
        let request = switch subject {
        case .user(let id): ErasureRequest(scope: .user, id: id, erasureId: ErasureRequest.newErasureId())
        case .device(let id): ErasureRequest(scope: .device, id: id, erasureId: ErasureRequest.newErasureId())
        }
        do throws(SpoolError) {
            try SpoolDropper.drop(bytes: request.envelopeBytes(), layout: context.spoolLayout(configuration))
        } catch {
            context.err("pushspoolctl: user erase: cannot drop the erasure request into the spool: \(error)\n")
            return ExitStatus.failure
        }
        if !json { context.out("erasure \(request.erasureId) requested from pushspoold\n") }
        guard wait else {
            if json { context.out(JSONValue.object(["erasureId": .string(request.erasureId), "complete": .bool(false)]).serializedString() + "\n") }
            return ExitStatus.ok
        }
        var shown: [String] = []
        var hinted = false
        let started = Posix.monotonicNanos()
        let journal = StateLayout(root: configuration.journal.stateDirectory).journal
        // The eraser announces each step by renaming the status file into place: wake on that.
        // pushspoold holds the journal's LOCK open for writing while it runs, so its exit (a
        // crash included) closes it and wakes this wait too.
        let changes = try? DirectoryChangeWaiter(directory: requests.directory)
        changes?.watchClose(of: journal + "/" + JournalFiles.lock)
        /// Shows the steps not shown yet; the exit status once the erasure is complete.
        func show(_ status: ErasureRequests.Status?) -> Int32? {
            guard let status else { return nil }
            for step in status.steps where !shown.contains(step) {
                shown.append(step)
                if !json { context.out("  \(step)\n") }
            }
            guard status.complete else { return nil }
            if json {
                context.out(status.jsonValue.serializedString() + "\n")
            } else {
                context.out("erasure \(request.erasureId) complete: \(status.journalRecords) journal records erased\n")
            }
            return ExitStatus.ok
        }
        while true {
            let status = requests.status(request.erasureId)
            if let done = show(status) { return done }
            if JournalLockProbe.isHeld(directory: journal) == false {
                // It may have completed the erasure just before it stopped.
                if let done = show(requests.status(request.erasureId)) { return done }
                context.err("pushspoolctl: user erase: pushspoold stopped before erasure \(request.erasureId) was complete "
                            + "(nothing holds the journal's lock any more); the request is kept in the spool and runs when "
                            + "pushspoold starts again: see why it stopped (`journalctl -u pushspoold`), start it "
                            + "(`systemctl start pushspoold`), then follow it with `pushspoolctl user erase --status`\n")
                return ExitStatus.failure
            }
            if status == nil, !hinted, Posix.monotonicNanos() &- started > 10_000_000_000 {
                hinted = true
                context.err("pushspoolctl: user erase: pushspoold's eraser has not started erasure \(request.erasureId) yet "
                            + "(the eraser behind the journal, or a follower it waits for lagging); "
                            + "the request is kept and runs when it can (Ctrl-C stops only this wait; --status shows it later)\n")
            }
            if let changes {
                let sinceStart = Duration.nanoseconds(Int64(clamping: Posix.monotonicNanos() &- started))
                changes.wait(timeout: hinted ? nil : max(.milliseconds(1), .seconds(10) - sinceStart))
            } else {
                // No inotify (fs.inotify.max_user_instances reached): look again now and then.
                usleep(200_000)
            }
        }
    }

    static func line(_ status: ErasureRequests.Status) -> String {
        "\(status.erasureID) seq \(status.seq) \(status.scope) \(status.complete ? "complete" : "in progress")"
            + (status.steps.isEmpty ? "" : ": " + status.steps.joined(separator: ", "))
            + (status.lastError.map { " (last error: \($0))" } ?? "") + "\n"
    }
}
