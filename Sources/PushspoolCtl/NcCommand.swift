/// One `pushspoolctl nc <name>` subcommand in ``NcCommand``'s dispatch table.
package struct NcEntry {
    /// The word after `nc`, e.g. `open`.
    package var name: String
    /// Usage line(s) without the `usage: ` prefix, e.g. `pushspoolctl nc open --user U ITEM`.
    package var synopsis: String
    /// One line for `pushspoolctl nc --help`.
    package var summary: String
    /// Parses the arguments after the name; throws for a bad command line.
    package var parse: ([String]) throws(UsageError) -> any CtlSubcommand

    package init(name: String, synopsis: String, summary: String, parse: @escaping ([String]) throws(UsageError) -> any CtlSubcommand) {
        self.name = name
        self.synopsis = synopsis
        self.summary = summary
        self.parse = parse
    }

    /// An entry for a type that is written like a top-level subcommand (its `name` is the word
    /// after `nc`; its `help` starts with its usage line).
    package init(_ type: any CtlSubcommand.Type) {
        let firstLine = type.help.split(separator: "\n", maxSplits: 1).first.map(String.init) ?? "pushspoolctl nc \(type.name)"
        let synopsis = firstLine.hasPrefix("usage: ") ? String(firstLine.dropFirst("usage: ".count)) : firstLine
        self.init(name: type.name, synopsis: synopsis, summary: type.summary) { (arguments: [String]) throws(UsageError) -> any CtlSubcommand in
            try type.init(arguments: arguments)
        }
    }
}

/// `pushspoolctl nc <subcommand> …`: the Notification Center. One top-level subcommand that
/// dispatches on the next word, so its parts live in files of their own: the events an app
/// reports (NcEventCommands.swift) and the inbox queries (NcQueryCommands.swift).
package struct NcCommand: CtlSubcommand {
    package static let name = "nc"
    package static let summary = "Notification Center: report inbox events, query a user's inbox"

    /// Every `nc` subcommand, in help order.
    package static var entries: [NcEntry] { queryEntries + NcEventCommand.entries }

    /// The read side of the inbox (NcQueryCommands.swift), which parses and runs its own words.
    package static var queryEntries: [NcEntry] {
        let summaries = [
            "list": "a user's or device's inbox, newest first, cursor-paginated",
            "count": "exact unseen and unread counts",
            "inapp": "the in-app message to present now (reports it shown)",
            "reindex": "rebuild the inbox index from the journal alone",
            "update": "apply the journal's new records to the inbox index",
            "preferences": "the categories a user muted",
        ]
        let usage = NcQueryCommands.help.split(separator: "\n").map { $0.trimmingSpaces }
        return NcQueryCommands.subcommands.map { word in
            let synopsis = usage.first { $0.hasPrefix("pushspoolctl nc \(word)") || $0.hasPrefix("usage: pushspoolctl nc \(word)") }
                .map { $0.hasPrefix("usage: ") ? String($0.dropFirst("usage: ".count)) : $0 } ?? "pushspoolctl nc \(word)"
            return NcEntry(name: word, synopsis: synopsis, summary: summaries[word] ?? word) { (arguments: [String]) throws(UsageError) -> any CtlSubcommand in
                NcQuery(word: word, arguments: arguments)
            }
        }
    }

    package static var help: String {
        var lines = ["usage: pushspoolctl nc <subcommand> [options] [args]", ""]
        for entry in entries { lines.append("       " + entry.synopsis) }
        lines += ["", "Subcommands:"]
        let width = entries.map(\.name.count).max() ?? 0
        for entry in entries {
            lines.append("  " + entry.name + String(repeating: " ", count: width - entry.name.count + 2) + entry.summary)
        }
        lines += ["", NcEventCommand.helpDetails, "",
                  "Exit status: 0 success, 1 runtime failure (configuration, spool not writable), 64 usage error."]
        return lines.joined(separator: "\n")
    }

    let subcommand: any CtlSubcommand

    package init(arguments: [String]) throws(UsageError) {
        guard let word = arguments.first else { throw UsageError("missing nc subcommand") }
        guard let entry = Self.entries.first(where: { $0.name == word }) else {
            throw UsageError("no such nc subcommand: \(word)")
        }
        do throws(UsageError) {
            subcommand = try entry.parse(Array(arguments.dropFirst()))
        } catch {
            throw UsageError("nc \(word): \(error.message)", subcommand: error.subcommand)
        }
    }

    package func run(_ context: CtlContext) -> Int32 {
        subcommand.run(context)
    }
}

/// One inbox query as a dispatch target: NcQueryCommands checks the arguments when it runs.
struct NcQuery: CtlSubcommand {
    static let name = "nc"
    static let summary = "Notification Center inbox queries"
    static var help: String { NcQueryCommands.help }

    let word: String
    let arguments: [String]

    init(word: String, arguments: [String]) {
        self.word = word
        self.arguments = arguments
    }

    init(arguments: [String]) throws(UsageError) {
        guard let first = arguments.first, NcQueryCommands.subcommands.contains(first) else {
            throw UsageError("expected one of: \(NcQueryCommands.subcommands.joined(separator: ", "))")
        }
        self.init(word: first, arguments: Array(arguments.dropFirst()))
    }

    func run(_ context: CtlContext) -> Int32 {
        NcQueryCommands.run(subcommand: word, arguments: arguments, context: context)
    }
}
