/// A command line that cannot be understood: printed on stderr with the command's usage,
/// exit status 64 (EX_USAGE). `Sendable`: plain values.
package struct CLIError: Error, Sendable, Equatable, CustomStringConvertible {
    package enum Code: String, Sendable {
        case unknownOption = "unknown_option"
        case missingValue = "missing_value"
        case emptyValue = "empty_value"
        case unexpectedValue = "unexpected_value"
        case repeatedOption = "repeated_option"
        case unknownCommand = "unknown_command"
        case missingCommand = "missing_command"
        case missingOperand = "missing_operand"
        case unexpectedOperand = "unexpected_operand"
        case invalidValue = "invalid_value"
        case conflict
    }

    package var code: Code
    /// The command as typed so far, e.g. `pushspoolctl nc list`.
    package var command: String
    /// What is wrong, without the command's name, e.g. `option --limit needs a value`.
    package var message: String

    package init(_ code: Code, command: String, _ message: String) {
        self.code = code
        self.command = command
        self.message = message
    }

    /// `pushspoolctl nc list: option --limit needs a value; see pushspoolctl nc list --help`
    package var description: String { "\(command): \(message); see \(command) --help" }
}

/// A parsed command line: the path of subcommands and every option and operand, checked
/// against the table. Commands read their values from it. `Sendable`: plain values.
package struct Invocation: Sendable, Equatable {
    package var program: String
    /// Subcommand names after the program, e.g. `["nc", "list"]`.
    package var path: [String] = []
    /// Values by every spelling of their option; a flag given maps to `[""]` per use.
    package var values: [String: [String]] = [:]
    package var operands: [String] = []

    package init(program: String, path: [String] = [], values: [String: [String]] = [:], operands: [String] = []) {
        self.program = program
        self.path = path
        self.values = values
        self.operands = operands
    }

    /// `pushspoolctl nc list`.
    package var commandName: String { ([program] + path).joined(separator: " ") }

    package func flag(_ name: String) -> Bool { values[name] != nil }

    /// The option's value; the last one of a repeatable option.
    package func value(_ name: String) -> String? { values[name]?.last }

    package func all(_ name: String) -> [String] { values[name] ?? [] }

    /// A usage error of this command, e.g. for a value the table cannot judge.
    package func error(_ message: String, _ code: CLIError.Code = .invalidValue) -> CLIError {
        CLIError(code, command: commandName, message)
    }

    /// The option's value as a decimal integer in `range`; `nil` when not given. Digits only
    /// (no sign, no spaces); too large for `T` is out of range, never a trap.
    package func integer<T: FixedWidthInteger & Sendable>(_ name: String, in range: ClosedRange<T>) throws(CLIError) -> T? {
        guard let text = value(name) else { return nil }
        return try Self.integer(text, in: range, what: "option \(name)", command: commandName)
    }

    /// `text` as a decimal integer in `range`, or a usage error naming `what`.
    package static func integer<T: FixedWidthInteger & Sendable>(_ text: String, in range: ClosedRange<T>, what: String,
                                                                 command: String) throws(CLIError) -> T {
        let digits = !text.isEmpty && text.utf8.count <= 40
            && text.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        guard digits, let number = T(text, radix: 10), range.contains(number) else {
            let shown = text.count > 40 ? String(text.prefix(40)) + "…" : text
            let bounds = range.upperBound == T.max ? "from \(range.lowerBound)" : "from \(range.lowerBound) to \(range.upperBound)"
            throw CLIError(.invalidValue, command: command, "\(what) needs a whole number \(bounds), not '\(shown)'")
        }
        return number
    }
}

/// What a command line asks for. Not `Sendable`: it carries whatever the table builds.
package enum ParseResult<Target> {
    /// Run the command built from the table.
    case run(Target, Invocation)
    /// Help for the command at this path, on stdout.
    case help([String])
    case version
    /// The hidden `--generate KIND` of every program (scripts/gen-docs.sh).
    case generate(String)
}

/// A program: its name and its command tree. `Sendable`: plain values and `@Sendable` closures.
package struct Program<Target>: Sendable {
    package var name: String
    package var root: Command<Target>
    /// `help [SUBCOMMAND...]` as a word, for programs with subcommands.
    package var helpCommand: Bool { !root.subcommands.isEmpty }

    package init(_ name: String, root: Command<Target>) {
        self.name = name
        self.root = root
    }

    /// The options every program has, answered before its own table is consulted.
    static var builtinOptions: [Option] {
        [.flag("-h", "--help", help: "show this help"), .flag("--version", help: "show the version")]
    }

    /// Parses `arguments` (without the program's name) against the table.
    ///
    /// The rules, the same for every program: options belong to the command they follow
    /// (global options before the first subcommand); `--name=value` and `--name value` are
    /// the same, a separate value must not start with `-` (write `--name=-x` for that; `-`
    /// alone is a value); an empty value is refused unless the option allows it; an option
    /// with a value given twice is refused unless it is repeatable; `--` ends the options, so
    /// every later argument is an operand; `-h`/`--help` before `--` asks for the help of the
    /// command reached so far.
    package func parse(_ arguments: [String]) throws(CLIError) -> ParseResult<Target> {
        var command = root
        var invocation = Invocation(program: name)
        var seen: Set<String> = []
        var optionsDone = false
        var index = 0
        func fail(_ code: CLIError.Code, _ message: String) -> CLIError {
            CLIError(code, command: invocation.commandName, message)
        }
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if !optionsDone, argument == "--" {
                optionsDone = true
                continue
            }
            if !optionsDone, argument.hasPrefix("-"), argument != "-" {
                var spelled = argument
                var inline: String?
                if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                    spelled = String(argument[..<equals])
                    inline = String(argument[argument.index(after: equals)...])
                }
                if spelled == "-h" || spelled == "--help" { return .help(invocation.path) }
                if spelled == "--version", invocation.path.isEmpty { return .version }
                if spelled == "--generate", invocation.path.isEmpty {
                    guard let kind = inline ?? (index < arguments.count ? arguments[index] : nil) else {
                        throw fail(.missingValue, "option --generate needs a value")
                    }
                    return .generate(kind)
                }
                guard let option = command.option(named: spelled) else {
                    throw fail(.unknownOption, "unknown option \(spelled)")
                }
                let value: String
                if option.takesValue {
                    if let inline {
                        value = inline
                    } else {
                        guard index < arguments.count, !(arguments[index].hasPrefix("-") && arguments[index] != "-") else {
                            throw fail(.missingValue, "option \(spelled) needs a value"
                                       + (index < arguments.count ? "; write \(spelled)=VALUE for one starting with '-'" : ""))
                        }
                        value = arguments[index]
                        index += 1
                    }
                    if value.isEmpty, !option.allowsEmpty { throw fail(.emptyValue, "option \(spelled) needs a non-empty value") }
                    if seen.contains(option.name), !option.repeatable { throw fail(.repeatedOption, "option \(spelled) given twice") }
                } else {
                    if inline != nil { throw fail(.unexpectedValue, "option \(spelled) takes no value") }
                    value = ""
                }
                seen.insert(option.name)
                for spelling in option.names { invocation.values[spelling, default: []].append(value) }
                continue
            }
            if !command.subcommands.isEmpty {
                if invocation.path.isEmpty, helpCommand, argument == "help" {
                    let topic = Array(arguments[index...])
                    guard root.descendant(topic) != nil else {
                        throw fail(.unknownCommand, "no such subcommand: \(topic.joined(separator: " "))")
                    }
                    return .help(topic)
                }
                guard let next = command.subcommand(named: argument) else {
                    let choices = command.subcommands.map(\.name).joined(separator: ", ")
                    throw fail(.unknownCommand, "no such subcommand: \(argument) (\(choices))")
                }
                command = next
                invocation.path.append(argument)
                continue
            }
            invocation.operands.append(argument)
        }
        if !command.subcommands.isEmpty {
            let choices = command.subcommands.map(\.name).joined(separator: ", ")
            throw fail(.missingCommand, "missing subcommand (\(choices))")
        }
        try Self.check(invocation, against: command)
        guard let make = command.make else { throw fail(.missingCommand, "nothing to run") }
        return .run(try make(invocation), invocation)
    }

    /// Operands and groups, which can be judged only once the whole line is read.
    static func check(_ invocation: Invocation, against command: Command<Target>) throws(CLIError) {
        func fail(_ code: CLIError.Code, _ message: String) -> CLIError {
            CLIError(code, command: invocation.commandName, message)
        }
        for group in command.groups {
            let given = group.names.filter { invocation.flag($0) }
            let shown = group.names.joined(separator: " or ")
            if given.isEmpty { throw fail(.missingValue, "give \(shown)") }
            if group.rule == .exactlyOne, given.count > 1 { throw fail(.conflict, "give \(shown), not both") }
        }
        // An operand stood in for by its alternative option is not expected.
        let expected = command.positionals.filter { positional in
            guard let alternative = positional.alternative else { return true }
            return !invocation.flag(alternative)
        }
        let operands = invocation.operands
        let required = expected.filter { !$0.optional }.count
        if operands.count < required {
            let missing = expected[operands.count]
            throw fail(.missingOperand, "missing \(missing.name)" + (missing.alternative.map { " (or \($0))" } ?? ""))
        }
        if !expected.contains(where: \.repeated), operands.count > expected.count {
            let extra = operands[expected.count]
            if let replaced = command.positionals.first(where: { $0.alternative.map(invocation.flag) == true }) {
                throw fail(.conflict, "give \(replaced.name) or \(replaced.alternative!), not both (unexpected argument '\(extra)')")
            }
            throw fail(.unexpectedOperand, "unexpected argument '\(extra)'")
        }
        for (position, operand) in operands.enumerated() {
            let positional = position < expected.count ? expected[position] : expected.last { $0.repeated }
            guard let positional, !positional.choices.isEmpty else { continue }
            guard positional.choices.contains(operand) else {
                throw fail(.invalidValue, "\(positional.name) must be one of \(positional.choices.joined(separator: ", ")), not '\(operand)'")
            }
        }
    }
}
