import Foundation
import Testing
@testable import PushConfig

/// docs/configuration.md's key table and pushspool.conf(5)'s key list are rendered from the
/// schema (`pushspoolctl config reference`, written by scripts/gen-docs.sh): these tests fail
/// when a checked-in copy no longer matches the schema, and check that the rendering says
/// what the schema holds.
@Suite struct ConfigReferenceTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    static func read(_ path: String) throws -> String {
        try String(contentsOf: packageRoot.appendingPathComponent(path), encoding: .utf8)
    }

    @Test(arguments: [("docs/configuration.md", ConfigReference.Format.markdown), ("man/pushspool.conf.5.scd", .man)])
    func checkedInReferenceIsCurrent(path: String, format: ConfigReference.Format) throws {
        let document = try Self.read(path)
        let rendered = ConfigReference.render(format)
        #expect(document.components(separatedBy: rendered).count == 2,
                "\(path) is stale or its generated block was edited by hand: run scripts/gen-docs.sh and check in the result")
    }

    /// The hand-written text around the generated block stays: the guide's prose and the
    /// man page's other sections.
    @Test func handWrittenTextAroundTheBlocksIsKept() throws {
        let guide = try Self.read("docs/configuration.md")
        #expect(guide.hasPrefix("# Configuration\n"))
        #expect(guide.contains("| Key in `[Category ID]` | Value | Meaning |"))
        let man = try Self.read("man/pushspool.conf.5.scd")
        for heading in ["# NAME", "# SYNTAX", "# SECTIONS", "## [Category ID]", "# EXAMPLE", "# SEE ALSO"] {
            #expect(man.contains("\n\(heading)\n"), "\(heading)")
        }
    }

    @Test(arguments: Schema.keys.map(\.path))
    func everyKeyIsDescribed(path: String) throws {
        let spec = try #require(Schema.byPath[path])
        #expect(!spec.summary.isEmpty, "\(path) has no description in the schema")
        #expect(!spec.rangeDescription.isEmpty, "\(path) says nothing of its values")
    }

    /// One row per key, in schema order, with the default as `config show` prints it, the
    /// range as the loader's error says it and whether a reload applies it.
    @Test func markdownRowsFollowTheSchema() throws {
        let rows = ConfigReference.markdown().split(separator: "\n").dropFirst(2)
        #expect(rows.count == Schema.keys.count)
        let byKey = Dictionary(uniqueKeysWithValues: zip(Schema.keys.map(\.path), rows))
        #expect(byKey["Spool.RescanIntervalSec"] == "| `[Spool] RescanIntervalSec=` | `1min` | 1s to 1d | reload | full rescan period, a safety net behind inotify |")
        #expect(byKey["Media.CAFile"]?.hasPrefix("| `[Media] CAFile=` | empty | absolute path | restart | ") == true)
        #expect(byKey["Journal.CorruptionPolicy"]?.contains("| `refuse` | `refuse`, `quarantine-segment` | restart |") == true)
    }

    @Test func aPipeInADescriptionDoesNotSplitTheMarkdownCell() {
        #expect("a | b".replacingAll("|", with: "\\|") == "a \\| b")
    }

    @Test func manTextEscapesEmphasisAndRendersCodeAndLinks() {
        #expect(ConfigReference.scdocText("records land with `media_backlog_full`") == "records land with *media\\_backlog\\_full*")
        #expect(ConfigReference.scdocText("a *star* and snake_case") == "a \\*star\\* and snake\\_case")
        #expect(ConfigReference.scdocText("see [vendor-rules.md](vendor-rules.md#mindbox).") == "see _/usr/share/doc/pushspool/docs/vendor-rules.md_.")
        // An unclosed backtick or bracket is text, not markup.
        #expect(ConfigReference.scdocText("a ` b [c") == "a ` b [c")
    }

    @Test func manListsEveryKeyUnderItsSectionWithItsDefaultAndReload() {
        let man = ConfigReference.man()
        for section in Schema.sections {
            #expect(man.contains("## [\(section)]\n\n"), "\(section)")
        }
        #expect(man.contains("*RescanIntervalSec=*\n\tfull rescan period, a safety net behind inotify.\n\n\tDefault: *1min*. Values: 1s to 1d. A reload applies a change.\n"))
        #expect(man.contains("*Directory=*\n"))
        #expect(man.contains("\tDefault: */var/spool/pushspool*. Values: absolute path. Takes effect at the next restart.\n"))
    }

    /// The checked-in man page compiles with scdoc (Build-Depends of the package, and in
    /// scripts/apt-packages), escapes included.
    @Test func manPageCompilesWithScdoc() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/scdoc")
        process.standardInput = try FileHandle(forReadingFrom: Self.packageRoot.appendingPathComponent("man/pushspool.conf.5.scd"))
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let page = output.fileHandleForReading.readDataToEndOfFile()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "scdoc: \(message)")
        let text = String(decoding: page, as: UTF8.self)
        #expect(text.contains("RescanIntervalSec="))
    }
}
