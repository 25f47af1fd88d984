@preconcurrency import Glibc
import PushConfig
import PushExport
import PushInbox
import PushInboxStream
import PushSpool
import PushSystem

/// `pushspoolctl nc list|count|inapp|reindex|update`: the Notification Center's read side,
/// over the inbox index (`<state>/inbox/index.sqlite`). The `nc` dispatcher calls
/// ``run(subcommand:arguments:context:)`` for these words.
package enum NcQueryCommands {
    /// The words handled here.
    package static let subcommands = ["list", "count", "inapp", "reindex", "update"]

    package static let help = """
        usage: pushspoolctl nc list (--user U | --device D) [--unread] [--limit N] [--cursor C] [--category ID] [--lang TAG] [--json]
               pushspoolctl nc count (--user U | --device D) [--json]
               pushspoolctl nc inapp (--user U | --device D) [--lang TAG] [--json]
               pushspoolctl nc reindex [--from-stream]
               pushspoolctl nc update

          list     a user's inbox, newest first, without archived or expired items; --limit 1-500
                   (default 20); the last line names the cursor of the next page (--cursor).
                   --device D lists the shared inbox of a device: items stored without a user.
                   Silent pushes are not items; MODALs are presented by inapp, not listed
                   ([Inbox] ListModals=yes lists them too)
          count    exact numbers of unseen and unread listed items
          inapp    the in-app message to present now (the latest unexpired modal not yet shown),
                   and drops an nc.inapp-shown event into the spool so it is presented once;
                   with its buttons: its category's actions when it is interactive, else
                   Cancel (dismiss: nothing more to report) and Open (nc open)
          reindex  rebuilds the index from the journal alone, whatever the file holds (damaged,
                   another schema), and renames it into place; pushspoold and
                   pushspool-inbox may keep running and switch to it. With [Inbox] Source=nats
                   it needs --from-stream: rebuilds from the [Export] stream, from the stream's
                   first seq to its last (a new node, a lost disk, a stream purged past the
                   index); what the stream no longer holds is not in the index
          update   applies the journal's new records to the index in place (what pushspoold's
                   follower does); not with [Inbox] Source=nats

        --lang TAG (list, inapp) gives the titles of the Infobip SDK's predefined buttons
        (Accept, Decline, Cancel, Open) in that language, as the SDK translates them
        (de, fr-CA, zh-Hant, pt-PT…; a region falls back to its language); English by
        default and for a language the SDK does not translate.

        The index is read-only to list/count/inapp. Exit status: 0 ok, 1 failure (no index:
        run 'pushspoolctl nc reindex'), 64 usage error.
        """

    /// Runs `nc <subcommand> <arguments>`; returns the exit status.
    package static func run(subcommand: String, arguments: [String], context: CtlContext) -> Int32 {
        let query: Query
        do throws(UsageError) {
            query = try Query(subcommand: subcommand, arguments: arguments)
        } catch {
            context.err("pushspoolctl: \(error.message)\n\n\(help)\n")
            return ExitStatus.usage
        }
        guard let configuration = context.configurationOrReport() else { return ExitStatus.failure }
        let stateDirectory = configuration.journal.stateDirectory
        let indexPath = InboxIndex.path(stateDirectory: stateDirectory)
        // An index built from the stream numbers items by stream seq, one from the journal by
        // journal seq: never let one source write into an index the other follows.
        let fromStream = configuration.inbox.source == .nats
        if subcommand == "reindex", query.fromStream != fromStream {
            context.err(fromStream
                ? "pushspoolctl: [Inbox] Source=nats: the index is built from the stream; rebuild it with `pushspoolctl nc reindex --from-stream`\n"
                : "pushspoolctl: --from-stream needs [Inbox] Source=nats (this index follows the journal)\n")
            return ExitStatus.usage
        }
        if subcommand == "update", fromStream {
            context.err("pushspoolctl: [Inbox] Source=nats: pushspool-inbox applies the stream to the index; `nc update` applies the journal\n")
            return ExitStatus.usage
        }
        if subcommand == "reindex", fromStream { return reindexFromStream(configuration: configuration, indexPath: indexPath, context: context) }
        do throws(InboxError) {
            switch subcommand {
            case "reindex":
                let result = try InboxIndex.rebuild(path: indexPath, journalDirectory: context.journalDirectory(configuration),
                                                    listModals: configuration.inbox.listModals)
                context.out("rebuilt \(indexPath): \(result.items) items, journal seq \(result.appliedSeq)\n")
            case "update":
                let index = try InboxIndexHandle(path: indexPath, readOnly: false, listModals: configuration.inbox.listModals).current()
                let applied = try index.catchUp(journalDirectory: context.journalDirectory(configuration))
                context.out("applied \(applied) records, journal seq \(try index.appliedSeq())\n")
            default:
                let index = try InboxIndexHandle(path: indexPath, readOnly: true).current()
                let retention = configuration.inbox.retention > .zero ? configuration.inbox.retention : nil
                return try query.run(index, context: context, layout: context.spoolLayout(configuration), retention: retention)
            }
            return ExitStatus.ok
        } catch {
            context.err("pushspoolctl: \(error)\n")
            return ExitStatus.failure
        }
    }

    /// `nc reindex --from-stream`: the index rebuilt from what the `[Export]` stream holds.
    static func reindexFromStream(configuration: Configuration, indexPath: String, context: CtlContext) -> Int32 {
        do throws(InboxStreamError) {
            let options: StreamInboxOptions
            do throws(ExportError) {
                options = try StreamInboxOptions(configuration: configuration, indexPath: indexPath, instance: context.globals.instance,
                                                 credentialsDirectory: getenv("CREDENTIALS_DIRECTORY").map { String(cString: $0) })
            } catch {
                throw InboxStreamError(.nats(error), stream: configuration.export.stream)
            }
            let result = try StreamInboxFollower.rebuild(options: options)
            context.out("rebuilt \(indexPath) from stream \(options.export.stream): \(result.items) items, stream seq \(result.appliedSeq)\n")
            return ExitStatus.ok
        } catch {
            context.err("pushspoolctl: \(error)\n")
            return ExitStatus.failure
        }
    }

    struct Query {
        var fromStream = false
        var owner: InboxOwner?
        var unread = false
        var limit = 20
        var cursor: String?
        var category: String?
        var json = false
        var language = TitleLanguage.english
        let subcommand: String

        init(subcommand: String, arguments: [String]) throws(UsageError) {
            self.subcommand = subcommand
            guard NcQueryCommands.subcommands.contains(subcommand) else { throw UsageError("no such nc subcommand: \(subcommand)") }
            var cursor = ArgumentCursor(arguments)
            let takesOwner = ["list", "count", "inapp"].contains(subcommand)
            while let item = cursor.next() {
                switch item {
                case .option("--user", let inline) where takesOwner:
                    guard owner == nil else { throw UsageError("give one of --user and --device") }
                    owner = .user(try cursor.value(of: "--user", inline: inline))
                case .option("--device", let inline) where takesOwner:
                    guard owner == nil else { throw UsageError("give one of --user and --device") }
                    owner = .device(try cursor.value(of: "--device", inline: inline))
                case .option("--json", nil) where takesOwner: json = true
                case .option("--from-stream", nil) where subcommand == "reindex": fromStream = true
                case .option("--unread", nil) where subcommand == "list": unread = true
                case .option("--limit", let inline) where subcommand == "list":
                    limit = try cursor.positiveInteger(of: "--limit", inline: inline)
                    guard limit <= InboxIndex.maxLimit else { throw UsageError("--limit must be 1 to \(InboxIndex.maxLimit)") }
                case .option("--cursor", let inline) where subcommand == "list":
                    self.cursor = try cursor.value(of: "--cursor", inline: inline)
                case .option("--category", let inline) where subcommand == "list":
                    category = try cursor.value(of: "--category", inline: inline)
                case .option("--lang", let inline) where subcommand == "list" || subcommand == "inapp":
                    let tag = try cursor.value(of: "--lang", inline: inline)
                    guard TitleLanguage.isWellFormed(tag) else {
                        throw UsageError("--lang takes a language tag like de, pt-PT or zh-Hant, not '\(tag.prefix(80))'")
                    }
                    language = TitleLanguage.lookup(tag) ?? .english
                case .option(let name, _): throw UsageError("unknown option for nc \(subcommand): \(name)")
                case .operand(let operand): throw UsageError("unexpected argument: \(operand)")
                }
            }
            if takesOwner, owner == nil { throw UsageError("nc \(subcommand) needs --user U or --device D") }
            if case .user(let id)? = owner, id.isEmpty { throw UsageError("--user needs a non-empty id") }
            if case .device(let id)? = owner, id.isEmpty { throw UsageError("--device needs a non-empty id") }
        }

        func run(_ index: InboxIndex, context: CtlContext, layout: SpoolLayout, retention: Duration?) throws(InboxError) -> Int32 {
            guard let owner else { return ExitStatus.usage }
            switch subcommand {
            case "list":
                let page = try index.list(owner, unread: unread, category: category, limit: limit, cursor: cursor, retention: retention)
                if json {
                    for item in page.items { context.out(item.localized(language).jsonValue().serializedString() + "\n") }
                    if let next = page.nextCursor { context.out(JSONValue.object(["nextCursor": .string(next)]).serializedString() + "\n") }
                } else {
                    if page.items.isEmpty { context.out("no items\n") }
                    for item in page.items { context.out(NcQueryCommands.text(item.localized(language))) }
                    if let next = page.nextCursor { context.out("next page: --cursor \(next)\n") }
                }
            case "count":
                let counts = try index.count(owner, retention: retention)
                if json {
                    context.out(JSONValue.object(["unseen": .integer(counts.unseen), "unread": .integer(counts.unread)]).serializedString() + "\n")
                } else {
                    context.out("unseen \(counts.unseen)\nunread \(counts.unread)\n")
                }
            default:  // inapp
                guard let item = try index.inapp(owner, retention: retention) else {
                    context.out(json ? "{}\n" : "no in-app message to present\n")
                    return ExitStatus.ok
                }
                do {
                    _ = try InAppShownEvent.drop(owner: owner, item: item.seq, layout: layout)
                } catch {
                    context.err("pushspoolctl: cannot drop the nc.inapp-shown event: \(error)\n")
                    return ExitStatus.failure
                }
                if json {
                    context.out(item.inAppJSON(language).serializedString() + "\n")
                } else {
                    context.out(NcQueryCommands.text(item.localized(language)))
                    context.out(NcQueryCommands.inAppButtons(item, owner: owner, language: language))
                }
            }
            return ExitStatus.ok
        }
    }

    /// The modal's buttons for people, one line each, with the command a tap on it is.
    static func inAppButtons(_ item: InboxItem, owner: InboxOwner, language: TitleLanguage) -> String {
        let who = switch owner {
        case .user(let id): "--user \(id)"
        case .device(let id): "--device \(id)"
        }
        return item.inAppActions(language).map { action in
            let tap = switch action.kind {
            case .dismiss: "dismisses it (shown is already reported)"
            case .open: "pushspoolctl nc open \(who) \(item.seq)"
            case .category: "pushspoolctl nc action \(who) \(item.seq) \(action.id)"
            }
            return "    button \(action.title): \(tap)\n"
        }.joined()
    }

    /// One item for people: a header line (id, state, time, vendor) and indented fields.
    static func text(_ item: InboxItem) -> String {
        let state = (item.archived ? "archived" : item.read ? "read" : item.seen ? "seen" : "unseen") + (item.pinned ? " pinned" : "")
        var lines = ["\(item.seq)  \(state)  \(Timestamp.iso8601(millis: item.ingestedAtMillis))  \(item.vendor)"
                     + (item.presentation.map { "  \($0)" } ?? "")]
        func put(_ label: String, _ value: String?) { if let value { lines.append("    \(label): \(value)") } }
        put("title", item.title)
        put("subtitle", item.subtitle)
        put("body", item.body)
        put("click", item.clickUrl)
        put("deeplink", item.deeplink)
        put("web view", item.webViewUrl)
        put("browser", item.browserUrl)
        put("title key", item.titleLocKey.map { key in key + (item.titleLocArgs.map { " " + $0.joined(separator: ", ") } ?? "") })
        put("body key", item.locKey.map { key in key + (item.locArgs.map { " " + $0.joined(separator: ", ") } ?? "") })
        put("sound", item.sound)
        put("badge", item.badge.map(String.init))
        put("media", item.mediaPath)
        put("thumbnail", item.thumbnailPath)
        put("category", item.category)
        let buttons = (item.buttons.arrayValue ?? []).compactMap { $0["text"]?.stringValue }
        if !buttons.isEmpty { lines.append("    buttons: " + buttons.joined(separator: " | ")) }
        let actions = (item.actions?.arrayValue ?? []).map { action -> String in
            let title = action["title"]?.stringValue ?? action["id"]?.stringValue ?? "?"
            return action["textInput"] != nil ? title + " (text)" : title
        }
        if !actions.isEmpty {
            lines.append("    actions: " + actions.joined(separator: " | ") + (item.actionsCut > 0 ? " (+\(item.actionsCut) not shown)" : ""))
        }
        put("expires", item.expiresAtMillis.map { Timestamp.iso8601(millis: $0) })
        put("payload", item.customPayload.map { $0.stringValue ?? $0.serializedString() })
        return lines.joined(separator: "\n") + "\n"
    }
}

/// Writes the `nc.inapp-shown` event envelope into the spool (staged in `tmp/`, renamed into
/// `incoming/`), so the daemon journals it and the modal is not presented again.
enum InAppShownEvent {
    static func envelope(owner: InboxOwner, item: UInt64, eventId: String, at: String) -> [UInt8] {
        var envelope: [String: JSONValue] = [
            "pushspool": .integer(1),
            "event": .object(["type": .string("nc.inapp-shown"), "eventId": .string(eventId),
                              "item": .integer(item), "at": .string(at)]),
        ]
        switch owner {
        case .user(let id): envelope["user"] = .string(id)
        case .device(let id): envelope["device"] = .string(id)
        }
        return JSONValue.object(envelope).serialized() + [0x0a]
    }

    /// 32 random hex digits: unique per presentation, so a replayed file is journaled once.
    static func randomId() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<2).map { _ in
            let hex = String(generator.next() as UInt64, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }

    static func drop(owner: InboxOwner, item: UInt64, layout: SpoolLayout) throws(SpoolError) -> String {
        try SpoolDropper.drop(bytes: envelope(owner: owner, item: item, eventId: randomId(), at: Timestamp.now()), layout: layout)
    }
}
