@preconcurrency import Glibc
import PushCLI
import PushConfig
import PushModuleOptions
import PushExport
import PushInbox
import PushNcEvents
import PushPayload
import PushSpool
import PushSystem

/// One `pushspoolctl nc <event>` command line, parsed: the event to write (its id drawn at
/// run time unless `--event-id` fixes it).
package struct NcEventCommand: CtlSubcommand {
    /// The `nc` subcommands that write events, in help order.
    static var commands: [CtlCommandSpec] {
        let common: [Option] = NcCommand.owner + [
            .value("--event-id", placeholder: "ID", help: "use ID (1-128 of A-Z a-z 0-9 . _ : -) instead of a fresh random "
                   + "one, e.g. to replay an event the app may have reported already"),
            .flag("--json", help: "print the envelope written instead of the event id"),
        ]
        let item = Positional("ITEM")
        let feed = Option.value("--feed", placeholder: "NAME", help: "with --all or --all-read: only the items of feed NAME "
                                + "(a [Feed NAME] section of the configuration)")
        let itemDiscussion = "ITEM is an item's id (its journal seq, as `nc list` shows it). See pushspoolctl nc --help "
            + "for the envelope written."
        func entry(_ word: String, _ summary: String, options: [Option] = [], positionals: [Positional] = [],
                   discussion: String = itemDiscussion) -> CtlCommandSpec {
            Command(word, summary: summary, options: common + options, positionals: positionals,
                    groups: [OptionGroup(["--user", "--device"], .atLeastOne)],
                    discussion: discussion,
                    exitStatus: "Exit status: 0 success, 1 runtime failure (configuration, spool not writable), 64 usage error"
                        + (word == "action" ? ", 65 the item's push offered no such ACTION." : ".")
            ) { invocation throws(CLIError) in try NcEventCommand(word: word, invocation) }
        }
        let categoryDiscussion = """
            CATEGORY is a category id as pushes carry it (1-\(PushEvent.maxNameBytes) bytes, at most \(PushEvent.maxPreferences) at once).
            A muted category's items are neither listed, counted nor presented in-app until it is
            unmuted; `nc preferences` lists the muted ones. See pushspoolctl nc --help for the
            envelope written.
            """
        return [
            entry("opened", "report that the Notification Center screen was opened (nc.opened)",
                  options: [.value("--platform", placeholder: "ios|android", help: "the platform the app runs on: picks the Mindbox "
                                   + "endpoint when there is one per platform (without it, only MindboxEndpointId= can take the NCOpen)")]),
            entry("open", "the user opened ITEM from the NC: read, push-open reports (nc.open)", positionals: [item]),
            entry("seen", "ITEM was listed to the user (nc.seen)", positionals: [item]),
            entry("read", "mark ITEM, or every item (of a feed), read (nc.read, nc.read-all)",
                  options: [.flag("--all", help: "every item"), feed], positionals: [Positional("ITEM", alternative: "--all")]),
            entry("archive", "hide ITEM, or every read item (of a feed) (nc.archive, nc.archive-read)",
                  options: [.flag("--all-read", help: "every read item"), feed],
                  positionals: [Positional("ITEM", alternative: "--all-read")]),
            entry("unread", "mark the read ITEM unread again (nc.unread)", positionals: [item]),
            entry("unarchive", "bring the archived ITEM back into the inbox (nc.unarchive)", positionals: [item]),
            entry("delete", "remove ITEM from the inbox for good; the journal keeps the push (nc.delete)", positionals: [item]),
            entry("pin", "keep ITEM first in lists (nc.pin)", positionals: [item]),
            entry("unpin", "list ITEM by arrival again (nc.unpin)", positionals: [item]),
            entry("snooze", "hide ITEM until --until, then bring it back unread (nc.snooze)",
                  options: [.value("--until", placeholder: "TIME", help: "when ITEM comes back: an ISO-8601 date-time "
                                   + "(2026-12-01T09:00:00Z) after now, at most 366 days ahead (required)")],
                  positionals: [item]),
            entry("unsnooze", "bring the snoozed ITEM back now, unread (nc.unsnooze)", positionals: [item]),
            entry("action", "the user chose button/category ACTION of ITEM, or undoes it (nc.action, nc.action-revert)",
                  options: [.value("--text", placeholder: "T", help: "the text typed into a text-input action (<= 4096 bytes)",
                                   allowsEmpty: true),
                            .flag("--revert", help: "undo ACTION: the item no longer keeps it (only when it is the action "
                                  + "the item keeps; nothing is sent to the vendor)")],
                  positionals: [item, Positional("ACTION")],
                  discussion: itemDiscussion + " The item keeps the action chosen last (and its --text) until it is reverted."),
            entry("inapp-shown", "the in-app message of ITEM was presented (nc.inapp-shown)", positionals: [item]),
            entry("mute", "mute categories: their items are neither listed, counted nor presented (nc.preferences)",
                  positionals: [Positional("CATEGORY", repeated: true)], discussion: categoryDiscussion),
            entry("unmute", "unmute categories: their items come back (nc.preferences)",
                  positionals: [Positional("CATEGORY", repeated: true)], discussion: categoryDiscussion),
            entry("inapp-optout", "opt the user out of (on) or back into (off) in-app messages (nc.inapp-optout)",
                  positionals: [Positional("on|off", choices: ["on", "off"])]),
        ]
    }

    static let helpDetails = """
        Event subcommands write one event envelope
        {"pushspool":1,"user":U,"device":D,"event":{"type","eventId","item",...,"at":NOW}}
        into the spool (tmp/, then renamed into incoming/); pushspoold journals it under
        event:<eventId>, so a replayed event counts once. With [Inbox] Source=nats the event
        goes to the [Export] stream instead (message id event:<eventId>; the command returns
        once the stream confirmed it), and every inbox node applies it from there. They print
        the event id, or with --json the envelope as one line. ITEM is an item's id (its
        journal seq, or its stream seq with Source=nats, as `nc list` shows it).
        """

    /// The event to write; `eventId` is empty until ``run(_:)`` draws one unless `--event-id`.
    package private(set) var event: PushEvent
    package private(set) var json = false

    /// Builds the event of `nc <word>` from the parsed line.
    init(word: String, _ invocation: Invocation) throws(CLIError) {
        let user = invocation.value("--user")
        let device = invocation.value("--device")
        let eventId = invocation.value("--event-id")
        let text = invocation.value("--text")
        let all = invocation.flag("--all")
        let allRead = invocation.flag("--all-read")
        let feed = invocation.value("--feed")
        let operands = invocation.operands
        json = invocation.flag("--json")
        func usage(_ message: String) -> CLIError { invocation.error(message) }
        for (option, value) in [("--user", user), ("--device", device)] {
            if let value, value.isEmpty || value.utf8.count > PushEvent.maxNameBytes {
                throw usage("\(option) needs 1-\(PushEvent.maxNameBytes) bytes")
            }
            // The daemon refuses such an envelope (control_character): say so before writing it.
            if let value, ControlCharacters.first(in: value) != nil {
                throw usage("\(option) must not hold control characters (U+0000-U+001F, U+007F)")
            }
        }
        if let feed, let problem = FeedName.problem(feed) { throw usage("--feed: \(problem)") }
        if let eventId, !PushEvent.isValidEventId(eventId) {
            throw usage("--event-id needs 1-\(PushEvent.maxEventIdBytes) characters of A-Z a-z 0-9 . _ : -, not '\(eventId)'")
        }
        // The table has checked how many operands there are.
        func itemOperand() throws(CLIError) -> UInt64 { try Self.item(operands[0], invocation) }

        var event = PushEvent(type: .opened, eventId: eventId ?? "", user: user, device: device)
        switch word {
        case "opened":
            if let name = invocation.value("--platform") {
                guard let platform = EventPlatform(rawValue: name) else { throw usage("--platform takes ios or android, not '\(name)'") }
                event.platform = platform
            }
        case "open":
            event = .ncOpen(item: try itemOperand(), user: user, device: device, eventId: event.eventId)
        case "inapp-shown":
            event = .ncInAppShown(item: try itemOperand(), user: user, device: device, eventId: event.eventId)
        case "snooze":
            guard let until = invocation.value("--until") else { throw usage("nc snooze needs --until TIME") }
            if let problem = PushEvent.snoozeProblem(until: until, now: Posix.wallClockMillis()) { throw usage("--until: \(problem)") }
            event.type = .snooze
            event.item = try itemOperand()
            event.until = until
        case "seen", "unread", "unarchive", "delete", "pin", "unpin", "unsnooze":
            event.type = switch word {
            case "unsnooze": .unsnooze
            case "unread": .unread
            case "unarchive": .unarchive
            case "delete": .delete
            case "pin": .pin
            case "unpin": .unpin
            default: .seen
            }
            event.item = try itemOperand()
        case "read", "archive":
            if all || allRead {
                event.type = word == "read" ? .readAll : .archiveRead
                event.feed = feed
            } else {
                if feed != nil { throw usage("--feed goes with \(word == "read" ? "--all" : "--all-read")") }
                event.type = word == "read" ? .read : .archive
                event.item = try itemOperand()
            }
        case "action":
            event.type = invocation.flag("--revert") ? .actionRevert : .action
            if event.type == .actionRevert, text != nil { throw usage("--text goes with an action, not with --revert") }
            event.item = try itemOperand()
            let action = operands[1]
            guard !action.isEmpty, action.utf8.count <= PushEvent.maxNameBytes else {
                throw usage("ACTION needs 1-\(PushEvent.maxNameBytes) bytes")
            }
            event.action = action
            if let text, text.utf8.count > PushEvent.maxTextBytes {
                throw usage("--text is \(text.utf8.count) bytes, over \(PushEvent.maxTextBytes)")
            }
            event.text = text
        case "mute", "unmute":
            // The table has checked there is at least one.
            guard operands.count <= PushEvent.maxPreferences else {
                throw usage("nc \(word) takes at most \(PushEvent.maxPreferences) categories at once")
            }
            for category in operands {
                guard !category.isEmpty, category.utf8.count <= PushEvent.maxNameBytes, ControlCharacters.first(in: category) == nil else {
                    throw usage("a CATEGORY is 1-\(PushEvent.maxNameBytes) bytes without control characters")
                }
            }
            event.type = .preferences
            event.muted = Dictionary(operands.map { ($0, word == "mute") }, uniquingKeysWith: { a, _ in a })
        case "inapp-optout":
            let optedOut: Bool
            switch operands[0] {
            case "on": optedOut = true
            case "off": optedOut = false
            default: throw usage("nc inapp-optout takes on or off, not '\(operands[0])'")
            }
            event = .ncInAppOptOut(optedOut: optedOut, user: user, device: device, eventId: event.eventId)
        default:
            throw usage("no such nc subcommand: \(word)")
        }
        self.event = event
    }

    /// ITEM: a positive decimal integer that fits UInt64 (digits only; no sign, no exponent).
    static func item(_ text: String, _ invocation: Invocation) throws(CLIError) -> UInt64 {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              let value = UInt64(text), value > 0 else {
            throw invocation.error("ITEM must be a positive integer (an item id from 'nc list'), not '\(text)'")
        }
        return value
    }

    /// For `nc action` (not `--revert`): why the action cannot have been chosen, when the
    /// inbox index holds the item and its push offered no action with that id (as
    /// pushspool-inbox answers `unknown_action`); `nil` otherwise. Without an index, or with
    /// an item the index does not hold yet, the event is written as before.
    static func unofferedAction(_ event: PushEvent, configuration: Configuration) -> String? {
        guard event.type == .action, let action = event.action, let seq = event.item else { return nil }
        let owner: InboxOwner
        if let user = event.user { owner = .user(user) } else if let device = event.device { owner = .device(device) } else { return nil }
        let path = InboxIndex.path(stateDirectory: configuration.journal.stateDirectory)
        guard let index = try? InboxIndexHandle(path: path, readOnly: true).current(),
              let item = try? index.item(owner, seq: seq), !item.offersAction(action) else { return nil }
        let offered = item.offeredActionIds
        return "item \(seq) offers no action '\(action)'; "
            + (offered.isEmpty ? "it offers no actions" : "its actions are \(offered.joined(separator: ", "))")
    }

    package func run(_ context: CtlContext) -> Int32 {
        guard let configuration = context.configurationOrReport() else { return ExitStatus.failure }
        // A feed the configuration does not define would change nothing once applied: say so now.
        if let feed = event.feed, !configuration.feeds.contains(where: { $0.name == feed }) {
            let known = configuration.feeds.map(\.name)
            context.err("pushspoolctl: no feed '\(feed)'; \(known.isEmpty ? "no feeds are configured (add [Feed NAME] sections)" : "the feeds are \(known.joined(separator: ", "))")\n")
            return ExitStatus.failure
        }
        if let refusal = Self.unofferedAction(event, configuration: configuration) {
            context.err("pushspoolctl: \(refusal)\n")
            return ExitStatus.dataError
        }
        var event = event
        if event.eventId.isEmpty { event.eventId = NcEventWriter.newEventId() }
        if event.at == nil { event.at = Timestamp.now() }
        // The daemon refuses what classify refuses; checking here turns a bug in this command
        // into an error now instead of a quarantined file later.
        guard case .event(let checked) = Normalizer.classify(NcEventWriter.envelopeBytes(event)), checked == event else {
            context.err("pushspoolctl: internal error: the \(event.type.rawValue) envelope would be refused\n")
            return ExitStatus.failure
        }
        if let failure = NcEventDestination.submit(event, configuration: configuration, context: context) {
            context.err("pushspoolctl: \(failure)\n")
            return ExitStatus.failure
        }
        context.out(json ? event.envelope().serializedString() + "\n" : event.eventId + "\n")
        return ExitStatus.ok
    }
}

/// Where `pushspoolctl nc` puts an event: into the spool for pushspoold to journal, or, on a
/// node whose index follows the stream (`[Inbox] Source=nats`), published to the `[Export]`
/// stream, as pushspool-inbox does with the events it accepts: every node applies it from
/// there, and no pushspoold journals it.
enum NcEventDestination {
    /// Submits `event` (its id drawn); `nil` when it is stored (in the spool, or in the stream
    /// with its PubAck), else what went wrong and what to do.
    static func submit(_ event: PushEvent, configuration: Configuration, context: CtlContext) -> String? {
        guard configuration.inbox.source == .nats else {
            do {
                try NcEventWriter.write(event, layout: context.spoolLayout(configuration))
                return nil
            } catch {
                return "cannot write the \(event.type.rawValue) event: \(error)"
            }
        }
        let export = ExportOptions(settings: configuration.export, stateDirectory: configuration.journal.stateDirectory,
                                   instance: context.globals.instance,
                                   credentialsDirectory: getenv("CREDENTIALS_DIRECTORY").map { String(cString: $0) })
        do throws(ExportError) {
            let publisher = try EventPublisher(options: export)
            defer { publisher.close() }
            try publisher.publish(event)
            return nil
        } catch {
            return "cannot publish the \(event.type.rawValue) event ([Inbox] Source=nats): \(error); "
                + "nothing is stored unless the stream confirmed it: run the command again with --event-id \(event.eventId) (it then counts once)"
        }
    }
}
