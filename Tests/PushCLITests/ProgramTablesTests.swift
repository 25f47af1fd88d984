import Foundation
import Testing
@testable import PushCLI
@testable import PushFetchServer
@testable import PushInboxMain
@testable import PushInboxServer
@testable import PushspoolCtl
@testable import PushspoolDaemon

/// The four programs' tables: every command's help, and the files generated from them
/// (man pages' SYNOPSIS and OPTIONS, bash completion) against the checked-in ones.
@Suite struct ProgramTablesTests {
    static let root = #filePath.components(separatedBy: "/Tests/")[0]

    /// A program's table with its documentation, type-erased for the tests.
    struct Entry: Sendable, CustomTestStringConvertible {
        var name: String
        var commands: @Sendable () -> [(path: [String], names: [String], positionals: [String], hasSubcommands: Bool)]
        var help: @Sendable ([String]) -> String
        var man: @Sendable (String) -> String?
        var manPage: String
        var testDescription: String { name }

        init<Target>(_ program: @escaping @Sendable () -> Program<Target>, manPage: String) {
            name = program().name
            commands = {
                program().root.all().map { path, command in
                    (path, command.options.filter { !$0.hidden }.flatMap(\.names),
                     command.positionals.flatMap { $0.choices.isEmpty ? [$0.name] : $0.choices },
                     !command.subcommands.isEmpty)
                }
            }
            help = { program().help($0) }
            man = { ManPage.render($0, program: program()) }
            self.manPage = manPage
        }
    }

    static let programs: [Entry] = [
        Entry({ PushspoolCtl.program }, manPage: "man/pushspoolctl.1.scd"),
        Entry({ DaemonArguments.program }, manPage: "man/pushspoold.8.scd"),
        Entry({ InboxServerMain.program }, manPage: "man/pushspool-inbox.8.scd"),
        Entry({ FetchMain.program }, manPage: "man/pushspool-fetch.8.scd"),
    ]

    @Test(arguments: programs)
    func everyCommandsHelpShowsItsUsageAndEveryOption(_ program: Entry) {
        for (path, names, positionals, hasSubcommands) in program.commands() {
            let help = program.help(path)
            let command = ([program.name] + path).joined(separator: " ")
            #expect(help.hasPrefix("usage: \(command)"), "\(command): \(help.prefix(200))")
            for name in names + positionals + ["--help"] {
                #expect(help.contains(name), "\(command) --help does not name \(name)")
            }
            if hasSubcommands { #expect(help.contains("Subcommands:"), "\(command)") }
        }
    }

    /// scripts/gen-docs.sh writes these sections; a table changed without running it fails here.
    @Test(arguments: programs)
    func manPageSectionsAreGenerated(_ program: Entry) throws {
        let page = try String(contentsOfFile: Self.root + "/" + program.manPage, encoding: .utf8)
        for section in ManPage.sections where section == "SYNOPSIS" || program.name != "pushspoolctl" {
            #expect(page.contains("; BEGIN GENERATED \(section) "), "\(program.manPage) has no generated \(section)")
        }
        let rendered = try #require(program.man(page))
        #expect(rendered == page, "\(program.manPage) is stale: run scripts/gen-docs.sh")
    }

    @Test func bashCompletionIsGenerated() throws {
        let file = try String(contentsOfFile: Self.root + "/packaging/completion/pushspoolctl", encoding: .utf8)
        #expect(file == BashCompletion.script(for: PushspoolCtl.program),
                "packaging/completion/pushspoolctl is stale: run scripts/gen-docs.sh")
    }

    /// The generated script is valid bash and completes from the table.
    @Test func bashCompletionWorks() throws {
        let script = BashCompletion.script(for: PushspoolCtl.program)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pushcli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("completion").path
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        // A stand-in for bash-completion's helpers: enough to drive the function.
        let driver = """
            _init_completion() { cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
            _filedir() { COMPREPLY=(FILEDIR"$1"); }
            source \(path)
            complete1() { COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMPREPLY=(); _pushspoolctl; echo "${COMPREPLY[*]}"; }
            complete1 pushspoolctl jo
            complete1 pushspoolctl journal ''
            complete1 pushspoolctl --instance a nc list --l
            complete1 pushspoolctl nc inapp-optout --user u ''
            complete1 pushspoolctl drop --platform ''
            complete1 pushspoolctl --config ''
            complete1 pushspoolctl help n
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", driver]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).prefix(7) == [
            "journal", "cat tail verify stats", "--limit --lang", "on off", "ios android", "FILEDIRconf", "nc",
        ], "\(output)")
    }
}
