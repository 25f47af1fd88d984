/// One element of a synopsis, rendered as plain text for `--help` or as scdoc for the man
/// pages, so both say the same.
enum SynopsisPart {
    case literal(String)
    case placeholder(String)
    /// `[...]`
    case optional([SynopsisPart])
    /// `(a | b)`
    case choice([[SynopsisPart]])
    /// `X...`
    case repeated([SynopsisPart])

    func plain() -> String {
        switch self {
        case .literal(let text), .placeholder(let text): text
        case .optional(let parts): "[" + parts.map { $0.plain() }.joined(separator: " ") + "]"
        case .choice(let alternatives): "(" + alternatives.map { $0.map { $0.plain() }.joined(separator: " ") }.joined(separator: " | ") + ")"
        case .repeated(let parts): parts.map { $0.plain() }.joined(separator: " ") + "..."
        }
    }

    func scdoc() -> String {
        switch self {
        case .literal(let text): "*" + ManPage.escape(text) + "*"
        case .placeholder(let text): "_" + ManPage.escape(text) + "_"
        case .optional(let parts): "[" + parts.map { $0.scdoc() }.joined(separator: " ") + "]"
        case .choice(let alternatives): "(" + alternatives.map { $0.map { $0.scdoc() }.joined(separator: " ") }.joined(separator: " | ") + ")"
        case .repeated(let parts): parts.map { $0.scdoc() }.joined(separator: " ") + "..."
        }
    }
}

extension Option {
    /// `--limit N` as synopsis parts (the first spelling).
    var synopsisParts: [SynopsisPart] {
        [.literal(name)] + (placeholder.map { [.placeholder($0)] } ?? [])
    }

    /// `-n, --lines N` for the options list.
    var helpLabel: String {
        names.joined(separator: ", ") + (placeholder.map { " " + $0 } ?? "")
    }
}

extension Program {
    /// The synopsis of the command at `path`: one line per runnable command below it.
    func synopsisParts(_ path: [String]) -> [[SynopsisPart]] {
        guard let command = root.descendant(path) else { return [] }
        if path.isEmpty, !root.subcommands.isEmpty {
            let globals = root.options.filter { !$0.hidden }.map { SynopsisPart.optional($0.synopsisParts) }
            return [[.literal(name)] + globals + [.placeholder("<subcommand>"), .optional([.placeholder("options")]),
                                                   .optional([.placeholder("args")])],
                    [.literal(name), .literal("help"), .optional([.placeholder("<subcommand>")])]]
        }
        let base: [SynopsisPart] = [.literal(([name] + path).joined(separator: " "))]
        return command.leaves().map { relative, leaf in
            let words = relative.isEmpty ? base : [.literal(([name] + path + relative).joined(separator: " "))]
            return words + Self.parts(of: leaf)
        }
    }

    /// Groups first, then operands, then the other options: how a person reads a usage line.
    static func parts(of command: Command<Target>) -> [SynopsisPart] {
        var parts: [SynopsisPart] = []
        let grouped = Set(command.groups.flatMap(\.names))
        let alternatives = Set(command.positionals.compactMap(\.alternative))
        for group in command.groups {
            let options = group.names.compactMap { command.option(named: $0) }
            parts.append(.choice(options.map(\.synopsisParts)))
        }
        for positional in command.positionals {
            var part: SynopsisPart = positional.choices.isEmpty
                ? .placeholder(positional.name)
                : .choice(positional.choices.map { [.literal($0)] })
            if positional.repeated { part = .repeated([part]) }
            if let alternative = positional.alternative, let option = command.option(named: alternative) {
                part = .choice([[part], option.synopsisParts])
            } else if positional.optional {
                part = .optional([part])
            }
            parts.append(part)
        }
        for option in command.options where !option.hidden && !grouped.contains(option.name) && !alternatives.contains(option.name) {
            let part: SynopsisPart = .optional(option.synopsisParts)
            parts.append(option.repeatable ? .repeated([part]) : part)
        }
        return parts
    }

    /// `usage: …` lines of the command at `path`, for errors and the head of `--help`.
    package func usage(_ path: [String]) -> String {
        let lines = synopsisParts(path).map { $0.map { $0.plain() }.joined(separator: " ") }
        return lines.enumerated().map { ($0.offset == 0 ? "usage: " : "       ") + $0.element }.joined(separator: "\n")
    }

    /// The whole `--help` of the command at `path`.
    package func help(_ path: [String]) -> String {
        guard let command = root.descendant(path) else { return usage([]) }
        var sections = [usage(path)]
        if !command.summary.isEmpty, !path.isEmpty { sections.append(Self.sentence(command.summary)) }
        if !command.subcommands.isEmpty {
            sections.append("Subcommands:\n" + Self.table(command.subcommands.map { ($0.name, $0.summary) }))
        }
        var options = command.options.filter { !$0.hidden }.map { ($0.helpLabel, $0.help) }
        options.append(("-h, --help", path.isEmpty && helpCommand ? "show this help; 'help <subcommand>' for one subcommand" : "show this help"))
        if path.isEmpty { options.append(("--version", "show the version")) }
        sections.append((path.isEmpty && helpCommand ? "Global options:\n" : "Options:\n") + Self.table(options))
        if !command.discussion.isEmpty { sections.append(command.discussion) }
        if !command.exitStatus.isEmpty { sections.append(command.exitStatus) }
        return sections.joined(separator: "\n\n")
    }

    /// Two columns, the second aligned and wrapped at 100 characters.
    static func table(_ rows: [(String, String)]) -> String {
        let width = min(30, rows.map(\.0.count).max() ?? 0)
        return rows.map { label, text in
            let pad = String(repeating: " ", count: width + 4)
            var lines: [String] = []
            var line = "  " + label + String(repeating: " ", count: max(2, width - label.count + 2))
            if label.count > width {
                lines.append("  " + label)
                line = pad
            }
            var first = true
            for word in text.split(separator: " ", omittingEmptySubsequences: false) {
                if !first, line.count + 1 + word.count > 100 {
                    lines.append(line)
                    line = pad + word
                } else {
                    line += (first ? "" : " ") + word
                }
                first = false
            }
            lines.append(line)
            return lines.joined(separator: "\n")
        }.joined(separator: "\n")
    }

    static func sentence(_ summary: String) -> String {
        guard let first = summary.first else { return summary }
        return first.uppercased() + summary.dropFirst() + (summary.hasSuffix(".") ? "" : ".")
    }
}
