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

    /// The read side of the inbox: `list`, `count`, `inapp`, `reindex` (NcQueryCommands.swift,
    /// built beside this file). INTEGRATION: put its entries here, e.g.
    /// `NcQueryCommands.entries` or `[NcEntry(NcListCommand.self), …]`.
    package static var queryEntries: [NcEntry] { [] }

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
