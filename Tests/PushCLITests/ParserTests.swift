import Testing
@testable import PushCLI

/// The parser's rules, on a small table of its own: one rule for every program.
@Suite struct ParserTests {
    enum Ran: Equatable {
        case leaf([String], Invocation)
    }

    static let program = Program<Invocation>("tool", root: Command(
        "tool", summary: "a test tool",
        options: [.value("--root-dir", placeholder: "DIR", help: "a global option")],
        subcommands: [
            Command("nc", summary: "group", subcommands: [
                Command("list", summary: "list things", options: [
                    .value("--user", placeholder: "U", help: "whose"),
                    .value("--device", placeholder: "D", help: "which device"),
                    .value("--limit", placeholder: "N", help: "how many"),
                    .value("--text", placeholder: "T", help: "may be empty", allowsEmpty: true),
                    .value("--tag", placeholder: "T", help: "repeatable", repeatable: true),
                    .value("-n", "--lines", placeholder: "N", help: "short and long"),
                    .flag("--json", help: "JSON"),
                ], groups: [OptionGroup(["--user", "--device"], .exactlyOne)]) { $0 },
                Command("read", summary: "read one or all", options: [.flag("--all", help: "every one")],
                        positionals: [Positional("ITEM", alternative: "--all")]) { $0 },
                Command("optout", summary: "on or off", positionals: [Positional("on|off", choices: ["on", "off"])]) { $0 },
            ]),
            Command("drop", summary: "files", positionals: [Positional("FILE", repeated: true)]) { $0 },
        ]))

    func run(_ arguments: [String]) throws(CLIError) -> Invocation {
        guard case .run(let invocation, _) = try Self.program.parse(arguments) else {
            throw CLIError(.invalidValue, command: "test", "not a run")
        }
        return invocation
    }

    func code(_ arguments: [String]) -> CLIError.Code? {
        do { _ = try Self.program.parse(arguments) } catch { return error.code }
        return nil
    }

    @Test func equalsFormAndSeparateValueAreTheSame() throws {
        let separate = try run(["nc", "list", "--user", "alice", "--limit", "5"])
        let joined = try run(["nc", "list", "--user=alice", "--limit=5"])
        #expect(separate.values == joined.values)
        #expect(separate.value("--user") == "alice")
        #expect(separate.path == ["nc", "list"])
        // A value may hold '=' itself.
        #expect(try run(["nc", "list", "--user=a=b"]).value("--user") == "a=b")
    }

    @Test func emptyValuesAreRefusedUnlessTheOptionAllowsThem() throws {
        #expect(code(["nc", "list", "--user="]) == .emptyValue)
        #expect(code(["nc", "list", "--user", ""]) == .emptyValue)
        #expect(try run(["nc", "list", "--user", "u", "--text="]).value("--text") == "")
        #expect(try run(["nc", "list", "--user", "u", "--text", ""]).value("--text") == "")
    }

    @Test func aSeparateValueMustNotLookLikeAnOption() throws {
        #expect(code(["nc", "list", "--user", "--json"]) == .missingValue)
        #expect(code(["nc", "list", "--user", "-x"]) == .missingValue)
        #expect(code(["nc", "list", "--user"]) == .missingValue)
        #expect(try run(["nc", "list", "--user=-x"]).value("--user") == "-x")
        #expect(try run(["nc", "list", "--user=--json"]).value("--user") == "--json")
        // '-' alone is a value (stdin), not an option.
        #expect(try run(["nc", "list", "--user", "-"]).value("--user") == "-")
    }

    @Test func doubleDashEndsTheOptions() throws {
        let invocation = try run(["drop", "--", "--json", "-h", "-"])
        #expect(invocation.operands == ["--json", "-h", "-"])
        #expect(try run(["drop", "-"]).operands == ["-"])
    }

    @Test func repeatedOptions() throws {
        #expect(code(["nc", "list", "--user", "a", "--user", "b"]) == .repeatedOption)
        // Also through another spelling of the same option.
        #expect(code(["nc", "list", "--user", "a", "-n", "1", "--lines", "2"]) == .repeatedOption)
        let tags = try run(["nc", "list", "--user", "a", "--tag", "x", "--tag=y"])
        #expect(tags.all("--tag") == ["x", "y"])
        #expect(try run(["nc", "list", "--user", "a", "-n", "3"]).value("--lines") == "3")
    }

    @Test func flagsTakeNoValue() {
        #expect(code(["nc", "list", "--user", "a", "--json=yes"]) == .unexpectedValue)
    }

    @Test func unknownsAndMissing() throws {
        #expect(code(["nc", "list", "--user", "a", "--bogus"]) == .unknownOption)
        #expect(code(["frobnicate"]) == .unknownCommand)
        #expect(code(["nc", "frobnicate"]) == .unknownCommand)
        #expect(code([]) == .missingCommand)
        #expect(code(["nc"]) == .missingCommand)
        // Options belong to the command they follow.
        #expect(code(["--user", "a", "nc", "list"]) == .unknownOption)
        #expect(code(["nc", "list", "--root-dir", "/x", "--user", "a"]) == .unknownOption)
        #expect(try run(["--root-dir", "/x", "nc", "list", "--user", "a"]).value("--root-dir") == "/x")
    }

    @Test func groupsOperandsAndChoices() throws {
        #expect(code(["nc", "list"]) == .missingValue)
        #expect(code(["nc", "list", "--user", "a", "--device", "d"]) == .conflict)
        #expect(try run(["nc", "read", "7"]).operands == ["7"])
        #expect(try run(["nc", "read", "--all"]).operands.isEmpty)
        #expect(code(["nc", "read"]) == .missingOperand)
        #expect(code(["nc", "read", "--all", "7"]) == .conflict)
        #expect(code(["nc", "read", "7", "8"]) == .unexpectedOperand)
        #expect(code(["nc", "optout", "maybe"]) == .invalidValue)
        #expect(try run(["nc", "optout", "on"]).operands == ["on"])
        #expect(code(["drop"]) == .missingOperand)
        #expect(try run(["drop", "a", "b", "c"]).operands == ["a", "b", "c"])
    }

    @Test func helpIsForTheCommandReached() throws {
        guard case .help(let path) = try Self.program.parse(["nc", "list", "--user", "a", "--help"]) else {
            Issue.record("no help")
            return
        }
        #expect(path == ["nc", "list"])
        guard case .help(let topic) = try Self.program.parse(["help", "nc", "read"]) else { Issue.record("no help"); return }
        #expect(topic == ["nc", "read"])
        guard case .help(let root) = try Self.program.parse(["-h"]) else { Issue.record("no help"); return }
        #expect(root == [])
        #expect(code(["help", "frobnicate"]) == .unknownCommand)
        guard case .version = try Self.program.parse(["--version"]) else { Issue.record("no version"); return }
    }

    @Test func errorsNameTheCommandAndWhereToLook() {
        do {
            _ = try Self.program.parse(["nc", "list", "--limit"])
            Issue.record("accepted")
        } catch {
            #expect(error.description == "tool nc list: option --limit needs a value; see tool nc list --help")
        }
    }

    @Test(arguments: ["0", "501", "-1", "+1", "1e3", " 1", "", "99999999999999999999", "18446744073709551616", "x"])
    func integersAreRangeCheckedWithoutTrapping(_ text: String) throws {
        let invocation = Invocation(program: "tool", values: ["--limit": [text]])
        #expect(throws: CLIError.self) { try invocation.integer("--limit", in: 1...500) }
    }

    @Test func integersInRange() throws {
        let invocation = Invocation(program: "tool", values: ["--limit": ["500"], "--big": ["18446744073709551615"]])
        #expect(try invocation.integer("--limit", in: 1...500) == 500)
        #expect(try invocation.integer("--big", in: 1...UInt64.max) == UInt64.max)
        #expect(try invocation.integer("--absent", in: 1...5) == nil)
    }

    @Test func synopsisComesFromTheTable() {
        let usage = Self.program.usage(["nc"])
        #expect(usage.contains("usage: tool nc list (--user U | --device D) [--limit N] [--text T] [--tag T]... [-n N] [--json]"))
        #expect(usage.contains("tool nc read (ITEM | --all)"))
        #expect(usage.contains("tool nc optout (on | off)"))
        #expect(Self.program.usage(["drop"]) == "usage: tool drop FILE...")
    }
}
