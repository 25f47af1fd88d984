@preconcurrency import Glibc
import PushCLI
import PushConfig
import PushModuleOptions
import PushExport
import PushInbox
import PushInboxJetStream
import PushPayload
import PushSpool
import PushSystem

/// `pushspoolctl nc list|count|inapp|reindex|update|preferences`: the Notification Center's read side,
/// over the inbox index (`<state>/inbox/index.sqlite`).
package enum NcQueryCommands {
    /// The table entries of the read side, in help order.
    static var commands: [CtlCommandSpec] {
        let status = "Exit status: 0 ok, 1 failure (no index: run 'pushspoolctl nc reindex'), 64 usage error."
        let owner = OptionGroup(["--user", "--device"], .exactlyOne)
        let json = Option.flag("--json", help: "JSON Lines")
        let lang = Option.value("--lang", placeholder: "TAG", help: """
            the titles of the Infobip SDK's predefined buttons (Accept, Decline, Cancel, Open) in that language, \
            as the SDK translates them (de, fr-CA, zh-Hant, pt-PT…; a region falls back to its language); \
            English by default and for a language the SDK does not translate
            """, completion: .words(["ar", "cs", "da", "de", "en", "es", "es-419", "fi", "fr", "he", "hi", "hr", "hu", "id", "it",
                                     "ja", "ko", "ms", "nb", "nl", "pl", "pt", "pt-PT", "ro", "ru", "sk", "sq", "sr", "sv", "th",
                                     "tr", "uk", "vi", "zh-Hans", "zh-Hant"]))
        func feed(_ what: String) -> Option {
            .value("--feed", placeholder: "NAME", help: "\(what) of feed NAME only (a [Feed NAME] section of the configuration)")
        }
        func make(_ word: String) -> @Sendable (Invocation) throws(CLIError) -> any CtlSubcommand {
            { invocation throws(CLIError) in NcQuery(query: try Query(subcommand: word, invocation)) }
        }
        return [
            Command("list", summary: "a user's or device's inbox, newest first, cursor-paginated",
                    options: NcCommand.owner + [
                        .flag("--unread", help: "only unread items"),
                        .value("--limit", placeholder: "N", help: "items per page, 1-\(InboxIndex.maxLimit) (default 20)"),
                        .value("--cursor", placeholder: "C", help: "the page after the one that named this cursor"),
                        .value("--category", placeholder: "ID", help: "only items of this category"),
                        feed("the items"), lang, json,
                    ], groups: [owner], discussion: """
                        Without archived or expired items; the last line names the cursor of the next page
                        (--cursor). --device D lists the shared inbox of a device: items stored without a
                        user. Silent pushes are not items; MODALs are presented by inapp, not listed
                        ([Inbox] ListModals=yes lists them too). --feed NAME lists one feed. The index is
                        read-only to list.
                        """, exitStatus: status, make: make("list")),
            Command("count", summary: "exact unseen and unread counts", options: NcCommand.owner + [feed("the counts"), json],
                    groups: [owner], discussion: """
                        Exact numbers of unseen and unread listed items, and of each feed ([Feed NAME] in the
                        configuration); with --feed NAME, of that feed only.
                        """, exitStatus: status, make: make("count")),
            Command("inapp", summary: "the in-app message to present now (reports it shown)",
                    options: NcCommand.owner + [lang, json], groups: [owner], discussion: """
                        The latest unexpired modal not yet shown; drops an nc.inapp-shown event into the spool
                        (with [Inbox] Source=nats: publishes it to the stream) so it is presented once; with
                        its buttons: its category's actions when it is
                        interactive, else Cancel (dismiss: nothing more to report) and Open (nc open).
                        """, exitStatus: status, make: make("inapp")),
            Command("reindex", summary: "rebuild the inbox index from the journal alone",
                    options: [.flag("--from-stream", help: "with [Inbox] Source=nats: rebuild from the [Export] stream")],
                    discussion: """
                        Rebuilds the index whatever the file holds (damaged, another schema), and renames it
                        into place; pushspoold and pushspool-inbox may keep running and switch to it. With
                        [Inbox] Source=nats it needs --from-stream: rebuilds from the [Export] stream, from the
                        stream's first seq to its last (a new node, a lost disk, a stream purged past the
                        index); what the stream no longer holds is not in the index.
                        """, exitStatus: status, make: make("reindex")),
            Command("update", summary: "apply the journal's new records to the inbox index",
                    discussion: "In place, what pushspoold's follower does; not with [Inbox] Source=nats.",
                    exitStatus: status, make: make("update")),
            Command("preferences", summary: "the categories a user muted", options: NcCommand.owner + [json], groups: [owner],
                    discussion: """
                        The categories muted with nc mute (and not unmuted with nc unmute): their items are
                        neither listed, counted nor presented in-app until unmuted.
                        """, exitStatus: status, make: make("preferences")),
        ]
    }

    /// Runs a parsed query; returns the exit status.
    static func run(_ query: Query, context: CtlContext) -> Int32 {
        let subcommand = query.subcommand
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
                                                    listModals: configuration.inbox.listModals, feeds: configuration.inboxFeeds,
                                                    retention: configuration.inbox.retention > .zero ? configuration.inbox.retention : nil)
                context.out("rebuilt \(indexPath): \(result.items) items, journal seq \(result.appliedSeq)\n")
            case "update":
                let index = try InboxIndexHandle(path: indexPath, readOnly: false, listModals: configuration.inbox.listModals,
                                                 feeds: configuration.inboxFeeds,
                                                 retention: configuration.inbox.retention > .zero ? configuration.inbox.retention : nil).current()
                let applied = try index.catchUp(journalDirectory: context.journalDirectory(configuration))
                try index.applyDue(now: Posix.wallClockMillis())
                context.out("applied \(applied) records, journal seq \(try index.appliedSeq())\n")
            default:
                let index = try InboxIndexHandle(path: indexPath, readOnly: true).current()
                let retention = configuration.inbox.retention > .zero ? configuration.inbox.retention : nil
                return try query.run(index, context: context, configuration: configuration, retention: retention)
            }
            return ExitStatus.ok
        } catch {
            context.err("pushspoolctl: \(error)\n")
            return ExitStatus.failure
        }
    }

    /// `nc reindex --from-stream`: the index rebuilt from what the `[Export]` stream holds.
    static func reindexFromStream(configuration: Configuration, indexPath: String, context: CtlContext) -> Int32 {
        do throws(JetStreamInboxError) {
            let options: JetStreamInboxOptions
            do throws(ExportError) {
                options = try JetStreamInboxOptions(configuration: configuration, indexPath: indexPath, instance: context.globals.instance,
                                                 credentialsDirectory: getenv("CREDENTIALS_DIRECTORY").map { String(cString: $0) })
            } catch {
                throw JetStreamInboxError(.nats(error), stream: configuration.export.stream)
            }
            let result = try JetStreamInboxFollower.rebuild(options: options)
            context.out("rebuilt \(indexPath) from stream \(options.export.stream): \(result.items) items, stream seq \(result.appliedSeq)\n")
            return ExitStatus.ok
        } catch {
            context.err("pushspoolctl: \(error)\n")
            return ExitStatus.failure
        }
    }

    /// One inbox query as the table builds it.
    struct NcQuery: CtlSubcommand {
        let query: Query
        func run(_ context: CtlContext) -> Int32 { NcQueryCommands.run(query, context: context) }
    }

    struct Query {
        var fromStream = false
        var owner: InboxOwner?
        var unread = false
        var limit = 20
        var cursor: String?
        var category: String?
        var feed: String?
        var json = false
        var language = TitleLanguage.english
        let subcommand: String

        init(subcommand: String, _ invocation: Invocation) throws(CLIError) {
            self.subcommand = subcommand
            fromStream = invocation.flag("--from-stream")
            unread = invocation.flag("--unread")
            json = invocation.flag("--json")
            cursor = invocation.value("--cursor")
            category = invocation.value("--category")
            feed = invocation.value("--feed")
            if let feed, let problem = FeedName.problem(feed) { throw invocation.error("--feed: \(problem)") }
            limit = try invocation.integer("--limit", in: 1...InboxIndex.maxLimit) ?? 20
            if let tag = invocation.value("--lang") {
                guard TitleLanguage.isWellFormed(tag) else {
                    throw invocation.error("--lang takes a language tag like de, pt-PT or zh-Hant, not '\(tag.prefix(80))'")
                }
                language = TitleLanguage.lookup(tag) ?? .english
            }
            if let user = invocation.value("--user") { owner = .user(user) }
            if let device = invocation.value("--device") { owner = .device(device) }
        }

        func run(_ index: InboxIndex, context: CtlContext, configuration: Configuration, retention: Duration?) throws(InboxError) -> Int32 {
            guard let owner else { return ExitStatus.usage }
            switch subcommand {
            case "list":
                let page = try index.list(owner, unread: unread, category: category, feed: feed, limit: limit, cursor: cursor,
                                          retention: retention)
                if json {
                    for item in page.items { context.out(item.localized(language).jsonValue().serializedString() + "\n") }
                    if let next = page.nextCursor { context.out(JSONValue.object(["nextCursor": .string(next)]).serializedString() + "\n") }
                } else {
                    if page.items.isEmpty { context.out("no items\n") }
                    for item in page.items { context.out(NcQueryCommands.text(item.localized(language))) }
                    if let next = page.nextCursor { context.out("next page: --cursor \(next)\n") }
                }
            case "count":
                if let feed {
                    let counts = try index.count(owner, feed: feed, retention: retention)
                    context.out(json ? NcQueryCommands.countsJSON(counts, feeds: nil).serializedString() + "\n"
                                : "unseen \(counts.unseen)\nunread \(counts.unread)\n")
                    return ExitStatus.ok
                }
                let counts = try index.count(owner, retention: retention)
                let feeds = try index.feedCounts(owner, retention: retention)
                if json {
                    context.out(NcQueryCommands.countsJSON(counts, feeds: feeds).serializedString() + "\n")
                } else {
                    context.out("unseen \(counts.unseen)\nunread \(counts.unread)\n")
                    for feed in feeds { context.out("feed \(feed.feed): unseen \(feed.counts.unseen), unread \(feed.counts.unread)\n") }
                }
            case "preferences":
                let muted = try index.mutedCategories(owner)
                if json {
                    context.out(JSONValue.object(["muted": .object(JSONObject(muted.map { ($0, JSONValue.bool(true)) }, uniquingKeysWith: { a, _ in a }))])
                        .serializedString() + "\n")
                } else {
                    context.out(muted.isEmpty ? "no muted categories\n" : muted.map { "muted \($0)\n" }.joined())
                }
            default:  // inapp
                guard let item = try index.inapp(owner, retention: retention) else {
                    context.out(json ? "{}\n" : "no in-app message to present\n")
                    return ExitStatus.ok
                }
                if configuration.inbox.source == .nats {
                    // No pushspoold journals for this index: the event goes to the stream.
                    var (user, device): (String?, String?) = (nil, nil)
                    switch owner {
                    case .user(let id): user = id
                    case .device(let id): device = id
                    }
                    let shown = PushEvent.ncInAppShown(item: item.seq, user: user, device: device,
                                                       eventId: InAppShownEvent.randomId(), at: Timestamp.now())
                    if let failure = NcEventDestination.submit(shown, configuration: configuration, context: context) {
                        context.err("pushspoolctl: \(failure)\n")
                        return ExitStatus.failure
                    }
                } else {
                    do {
                        _ = try InAppShownEvent.drop(owner: owner, item: item.seq, layout: context.spoolLayout(configuration))
                    } catch {
                        context.err("pushspoolctl: cannot drop the nc.inapp-shown event: \(error)\n")
                        return ExitStatus.failure
                    }
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

    /// `{"unseen":…,"unread":…}`, with `"feeds":{NAME:{…}}` when there are feeds: the same
    /// shape as pushspool-inbox's `GET /v1/inbox/counts`.
    static func countsJSON(_ counts: InboxCounts, feeds: [InboxFeedCounts]?) -> JSONValue {
        func object(_ c: InboxCounts) -> JSONValue { .object(["unseen": .integer(c.unseen), "unread": .integer(c.unread)]) }
        guard case .object(var o) = object(counts) else { return object(counts) }
        if let feeds, !feeds.isEmpty {
            o["feeds"] = .object(JSONObject(feeds.map { ($0.feed, object($0.counts)) }, uniquingKeysWith: { first, _ in first }))
        }
        return .object(o)
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
        if let reason = item.mediaNotStoredReason {
            put("media", "not stored (\(reason))" + (item.mediaSourceUrl.map { ": " + $0 } ?? ""))
        } else {
            put("media", item.mediaPath)
            put("thumbnail", item.thumbnailPath)
        }
        put("category", item.category)
        put("acted", item.actedAction.map { action in action + (item.actedText.map { " \"\($0)\"" } ?? "") })
        put("collapse id", item.collapseId.map { id in id + (item.replaces.map { " (replaced \($0))" } ?? "") })
        put("thread", item.threadId)
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
        var envelope: JSONObject = [
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
