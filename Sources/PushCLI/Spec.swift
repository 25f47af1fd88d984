/// How a shell may complete an option's value or an operand: the same table that parses the
/// command line also writes the bash completion.
package enum ValueCompletion: Sendable, Equatable {
    case none
    /// Any file; with a suffix (`conf`), files of that extension and directories.
    case file(suffix: String?)
    case directory
    /// One of these words.
    case words([String])
    /// The first tab-separated column of what this program prints for these arguments, run
    /// with the path options given on the line (e.g. `failed list` for quarantined names),
    /// and the words `plus`.
    case programOutput([String], plus: [String] = [])
}

/// One option of a command: a flag (`--json`) or an option with a value (`--limit N`).
/// `Sendable`: plain values.
package struct Option: Sendable, Equatable {
    /// Every spelling, in the order help shows them (`-n`, `--lines`); the first is canonical.
    package var names: [String]
    /// The value's placeholder (`N`, `FILE`); `nil` for a flag.
    package var placeholder: String?
    package var help: String
    /// May be given more than once; every value is kept in order.
    package var repeatable = false
    /// `--name=` (an empty value) is accepted; otherwise it is a usage error.
    package var allowsEmpty = false
    package var completion: ValueCompletion = .none
    /// Parsed but left out of help, man pages and completion (generators, debugging switches).
    package var hidden = false

    package var name: String { names[0] }
    package var takesValue: Bool { placeholder != nil }

    package static func flag(_ names: String..., help: String, hidden: Bool = false) -> Option {
        Option(names: names, placeholder: nil, help: help, hidden: hidden)
    }

    package static func value(_ names: String..., placeholder: String, help: String, repeatable: Bool = false,
                              allowsEmpty: Bool = false, completion: ValueCompletion = .none, hidden: Bool = false) -> Option {
        Option(names: names, placeholder: placeholder, help: help, repeatable: repeatable, allowsEmpty: allowsEmpty,
               completion: completion, hidden: hidden)
    }
}

/// One operand. `Sendable`: plain values.
package struct Positional: Sendable, Equatable {
    package var name: String
    package var optional = false
    /// Takes every remaining operand (`FILE...`).
    package var repeated = false
    /// The only words accepted (`on`, `off`).
    package var choices: [String] = []
    /// An option of the same command that stands in for this operand: `(ITEM | --all)`.
    /// Exactly one of the two must be given.
    package var alternative: String?
    package var completion: ValueCompletion = .none

    package init(_ name: String, optional: Bool = false, repeated: Bool = false, choices: [String] = [],
                 alternative: String? = nil, completion: ValueCompletion = .none) {
        self.name = name
        self.optional = optional
        self.repeated = repeated
        self.choices = choices
        self.alternative = alternative
        self.completion = choices.isEmpty ? completion : .words(choices)
    }
}

/// Options of which exactly one must be given: `(--user U | --device D)`.
/// `Sendable`: plain values.
package struct OptionGroup: Sendable, Equatable {
    package enum Rule: Sendable, Equatable {
        /// One and only one.
        case exactlyOne
        /// At least one; several may be combined.
        case atLeastOne
    }

    package var names: [String]
    package var rule: Rule

    package init(_ names: [String], _ rule: Rule) {
        self.names = names
        self.rule = rule
    }
}

/// A command or subcommand: its options and operands, or its subcommands, and what it becomes
/// once parsed (`make`). A program is one tree of these: the only dispatch table it has, from
/// which parsing, `--help`, the man pages' synopses and the bash completion all come.
/// `Sendable`: plain values and a `@Sendable` closure.
package struct Command<Target>: Sendable {
    package var name: String
    /// One line for the parent's list of subcommands.
    package var summary: String
    package var options: [Option]
    package var positionals: [Positional]
    package var groups: [OptionGroup]
    package var subcommands: [Command<Target>]
    /// Prose after the options in `--help`: what it does in detail.
    package var discussion: String
    /// The last paragraph of `--help`, e.g. "Exit status: 0 success, 64 usage error."
    package var exitStatus: String
    /// Builds the parsed command; `nil` for a command that only groups subcommands.
    package var make: (@Sendable (Invocation) throws(CLIError) -> Target)?

    package init(_ name: String, summary: String, options: [Option] = [], positionals: [Positional] = [],
                 groups: [OptionGroup] = [], subcommands: [Command<Target>] = [], discussion: String = "",
                 exitStatus: String = "", make: (@Sendable (Invocation) throws(CLIError) -> Target)? = nil) {
        self.name = name
        self.summary = summary
        self.options = options
        self.positionals = positionals
        self.groups = groups
        self.subcommands = subcommands
        self.discussion = discussion
        self.exitStatus = exitStatus
        self.make = make
    }

    package func option(named name: String) -> Option? {
        options.first { $0.names.contains(name) }
    }

    package func subcommand(named name: String) -> Command<Target>? {
        subcommands.first { $0.name == name }
    }

    /// The command at `path` (subcommand names below this one), if there is one.
    package func descendant(_ path: [String]) -> Command<Target>? {
        var command = self
        for word in path {
            guard let next = command.subcommand(named: word) else { return nil }
            command = next
        }
        return command
    }

    /// Every command below this one that runs something, with its path, depth first in
    /// table order.
    package func leaves(prefix: [String] = []) -> [(path: [String], command: Command<Target>)] {
        if subcommands.isEmpty { return [(prefix, self)] }
        return subcommands.flatMap { $0.leaves(prefix: prefix + [$0.name]) }
    }

    /// Every command of the tree with its path, this one first.
    package func all(prefix: [String] = []) -> [(path: [String], command: Command<Target>)] {
        [(prefix, self)] + subcommands.flatMap { $0.all(prefix: prefix + [$0.name]) }
    }
}
