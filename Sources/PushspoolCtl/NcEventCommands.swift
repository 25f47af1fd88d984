@preconcurrency import Glibc
import PushConfig
import PushExport
import PushNcEvents
import PushPayload
import PushSpool
import PushSystem

/// One `pushspoolctl nc <event>` command line, parsed: the event to write (its id drawn at
/// run time unless `--event-id` fixes it). Conforms to ``CtlSubcommand`` so ``NcCommand`` can
/// run it; its `name` and `help` are those of `nc`.
package struct NcEventCommand: CtlSubcommand {
    package static let name = NcCommand.name
    package static let summary = NcCommand.summary
    package static var help: String { NcCommand.help }

    /// The `nc` subcommands that write events, in help order.
    package static var entries: [NcEntry] {
        func entry(_ word: String, _ operands: String, _ summary: String) -> NcEntry {
            NcEntry(name: word, synopsis: "pushspoolctl nc \(word) (--user U | --device D) \(operands)[--event-id ID] [--json]", summary: summary) {
                (arguments: [String]) throws(UsageError) -> any CtlSubcommand in
                try NcEventCommand(word: word, arguments: arguments)
            }
        }
        return [
            entry("opened", "", "report that the Notification Center screen was opened (nc.opened)"),
            entry("open", "ITEM ", "the user opened ITEM from the NC: read, push-open reports (nc.open)"),
            entry("seen", "ITEM ", "ITEM was listed to the user (nc.seen)"),
            entry("read", "(ITEM | --all) ", "mark ITEM, or every item, read (nc.read, nc.read-all)"),
            entry("archive", "(ITEM | --all-read) ", "hide ITEM, or every read item (nc.archive, nc.archive-read)"),
            entry("unread", "ITEM ", "mark the read ITEM unread again (nc.unread)"),
            entry("unarchive", "ITEM ", "bring the archived ITEM back into the inbox (nc.unarchive)"),
            entry("delete", "ITEM ", "remove ITEM from the inbox for good; the journal keeps the push (nc.delete)"),
            entry("pin", "ITEM ", "keep ITEM first in lists (nc.pin)"),
            entry("unpin", "ITEM ", "list ITEM by arrival again (nc.unpin)"),
            entry("action", "ITEM ACTION [--text T] ", "the user chose button/category ACTION of ITEM (nc.action)"),
            entry("inapp-shown", "ITEM ", "the in-app message of ITEM was presented (nc.inapp-shown)"),
            entry("inapp-optout", "(on | off) ", "opt the user out of (on) or back into (off) in-app messages (nc.inapp-optout)"),
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

        Options of the event subcommands:
          --user U        the user whose inbox it is (at most 255 bytes)
          --device D      the device (a shared-device inbox when there is no user)
          --event-id ID   use ID (1-128 of A-Z a-z 0-9 . _ : -) instead of a fresh random one,
                          e.g. to replay an event the app may have reported already
          --text T        nc action: the text typed into a text-input action (<= 4096 bytes)
          --all           nc read: every item;  --all-read  nc archive: every read item
          --json          print the envelope written instead of the event id
        """

    /// The event to write; `eventId` is empty until ``run(_:)`` draws one unless `--event-id`.
    package private(set) var event: PushEvent
    package private(set) var json = false

    package init(arguments: [String]) throws(UsageError) {
        throw UsageError("use 'pushspoolctl nc <subcommand>'", subcommand: NcCommand.name)
    }

    /// Parses the arguments after `nc <word>`.
    package init(word: String, arguments: [String]) throws(UsageError) {
        var user: String?
        var device: String?
        var eventId: String?
        var text: String?
        var all = false
        var allRead = false
        var operands: [String] = []
        var cursor = ArgumentCursor(arguments)
        while let item = cursor.next() {
            switch item {
            case .operand(let operand): operands.append(operand)
            case .option("--user", let inline): user = try cursor.value(of: "--user", inline: inline)
            case .option("--device", let inline): device = try cursor.value(of: "--device", inline: inline)
            case .option("--event-id", let inline): eventId = try cursor.value(of: "--event-id", inline: inline)
            case .option("--json", nil): json = true
            case .option("--text", let inline) where word == "action": text = try cursor.value(of: "--text", inline: inline)
            case .option("--all", nil) where word == "read": all = true
            case .option("--all-read", nil) where word == "archive": allRead = true
            case .option(let name, _): throw UsageError("unknown option for nc \(word): \(name)")
            }
        }
        for (option, value) in [("--user", user), ("--device", device)] {
            if let value, value.isEmpty || value.utf8.count > PushEvent.maxNameBytes {
                throw UsageError("\(option) needs 1-\(PushEvent.maxNameBytes) bytes")
            }
            // The daemon refuses such an envelope (control_character): say so before writing it.
            if let value, ControlCharacters.first(in: value) != nil {
                throw UsageError("\(option) must not hold control characters (U+0000-U+001F, U+007F)")
            }
        }
        if user == nil, device == nil { throw UsageError("nc \(word) needs --user U or --device D (whose inbox)") }
        if let eventId, !PushEvent.isValidEventId(eventId) {
            throw UsageError("--event-id needs 1-\(PushEvent.maxEventIdBytes) characters of A-Z a-z 0-9 . _ : -, not '\(eventId)'")
        }
        func expectOperands(_ names: [String]) throws(UsageError) {
            if operands.count < names.count { throw UsageError("nc \(word) needs \(names.joined(separator: " "))") }
            if operands.count > names.count { throw UsageError("unexpected argument: \(operands[names.count])") }
        }
        func itemOperand() throws(UsageError) -> UInt64 { try Self.item(operands[0]) }

        var event = PushEvent(type: .opened, eventId: eventId ?? "", user: user, device: device)
        switch word {
        case "opened":
            try expectOperands([])
        case "open":
            try expectOperands(["ITEM"])
            event = .ncOpen(item: try itemOperand(), user: user, device: device, eventId: event.eventId)
        case "inapp-shown":
            try expectOperands(["ITEM"])
            event = .ncInAppShown(item: try itemOperand(), user: user, device: device, eventId: event.eventId)
        case "seen", "unread", "unarchive", "delete", "pin", "unpin":
            try expectOperands(["ITEM"])
            event.type = switch word {
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
                try expectOperands([])
                event.type = word == "read" ? .readAll : .archiveRead
            } else {
                try expectOperands(["ITEM (or \(word == "read" ? "--all" : "--all-read"))"])
                event.type = word == "read" ? .read : .archive
                event.item = try itemOperand()
            }
        case "action":
            try expectOperands(["ITEM", "ACTION"])
            event.type = .action
            event.item = try itemOperand()
            let action = operands[1]
            guard !action.isEmpty, action.utf8.count <= PushEvent.maxNameBytes else {
                throw UsageError("ACTION needs 1-\(PushEvent.maxNameBytes) bytes")
            }
            event.action = action
            if let text, text.utf8.count > PushEvent.maxTextBytes {
                throw UsageError("--text is \(text.utf8.count) bytes, over \(PushEvent.maxTextBytes)")
            }
            event.text = text
        case "inapp-optout":
            try expectOperands(["on|off"])
            let optedOut: Bool
            switch operands[0] {
            case "on": optedOut = true
            case "off": optedOut = false
            default: throw UsageError("nc inapp-optout takes on or off, not '\(operands[0])'")
            }
            event = .ncInAppOptOut(optedOut: optedOut, user: user, device: device, eventId: event.eventId)
        default:
            throw UsageError("no such nc subcommand: \(word)")
        }
        self.event = event
    }

    /// ITEM: a positive decimal integer that fits UInt64 (digits only; no sign, no exponent).
    static func item(_ text: String) throws(UsageError) -> UInt64 {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
              let value = UInt64(text), value > 0 else {
            throw UsageError("ITEM must be a positive integer (an item id from 'nc list'), not '\(text)'")
        }
        return value
    }

    package func run(_ context: CtlContext) -> Int32 {
        guard let configuration = context.configurationOrReport() else { return ExitStatus.failure }
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
