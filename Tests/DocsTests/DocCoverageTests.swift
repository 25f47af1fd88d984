import Foundation
import Testing
import PushSystem

/// The pages that promise to be complete are: every target of Package.swift in the module
/// table, every journald MESSAGE_ID in the runbook, and the picture rendered from its source.
@Suite struct DocCoverageTests {
    static func read(_ relative: String) throws -> String {
        try DocLinksTests.read(relative)
    }

    /// Every non-test target (libraries, C targets, executables, test kits) by name.
    @Test func architectureNamesEveryTarget() throws {
        let manifest = try Self.read("Package.swift")
        let pattern = try NSRegularExpression(pattern: #"\.(target|systemLibrary|executableTarget)\(name: "([^"]+)""#)
        let names = pattern.matches(in: manifest, range: NSRange(manifest.startIndex..., in: manifest)).compactMap {
            Range($0.range(at: 2), in: manifest).map { String(manifest[$0]) }
        }
        #expect(names.count >= 40, "only \(names.count) targets found in Package.swift: is the pattern stale?")
        let page = try Self.read("docs/architecture.md")
        let missing = names.filter { !page.contains("`\($0)`") }
        #expect(missing.isEmpty, "docs/architecture.md does not name \(missing)")
    }

    /// Each event of the catalog (one per `EventKind`, a PushSystemdTests test checks) has its
    /// row in the runbook.
    @Test func operationsExplainsEveryMessageID() throws {
        let catalog = try Self.read("systemd/pushspool.catalog")
        let ids = catalog.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("-- ") else { return nil }
            return String(line.dropFirst(3)).trimmingCharacters(in: .whitespaces)
        }
        #expect(ids.count >= 20, "only \(ids.count) MESSAGE_IDs found in the catalog")
        let page = try Self.read("docs/operations.md")
        let missing = ids.filter { !page.contains("| `\($0)` |") }
        #expect(missing.isEmpty, "docs/operations.md has no row for MESSAGE_ID \(missing)")
    }

    /// The module table's "Depends on" column and rows are generated from Package.swift
    /// (scripts/gen-module-table.py, run by scripts/gen-docs.sh), which records the manifest's
    /// SHA-256: a changed Package.swift without a regenerated table fails here.
    @Test func theModuleTableIsGeneratedFromTheCurrentManifest() throws {
        let manifest = try #require(FileManager.default.contents(atPath: DocLinksTests.root + "/Package.swift"))
        let architecture = try Self.read("docs/architecture.md")
        let marker = "<!-- BEGIN generated from Package.swift, sha256 "
        let start = try #require(architecture.range(of: marker), "docs/architecture.md's module table was not made by scripts/gen-docs.sh")
        let recorded = String(architecture[start.upperBound...].prefix(64))
        #expect(recorded == SHA256.hex(of: Array(manifest)), "docs/architecture.md's module table is stale: run scripts/gen-docs.sh")
    }

    /// scripts/gen-docs.sh writes the source's SHA-256 into the SVG; a changed .dot without a
    /// new SVG fails here, on machines without Graphviz too.
    @Test func theArchitecturePictureIsRenderedFromItsSource() throws {
        let source = try #require(FileManager.default.contents(atPath: DocLinksTests.root + "/docs/architecture.dot"))
        let svg = try Self.read("docs/architecture.svg")
        let marker = "from docs/architecture.dot, sha256 "
        let start = try #require(svg.range(of: marker), "docs/architecture.svg was not made by scripts/gen-docs.sh")
        let recorded = String(svg[start.upperBound...].prefix(64))
        #expect(recorded == SHA256.hex(of: Array(source)), "docs/architecture.svg is stale: run scripts/gen-docs.sh")
        // Graphviz writes `-` in text as `&#45;`.
        let text = svg.replacingOccurrences(of: "&#45;", with: "-")
        let missing = ["<svg", "pushspoold", "pushspool-fetch", "pushspool-inbox", "journal", "spool", "inbox index", "outbox",
                       "exporter", "retention"].filter { !text.contains($0) }
        #expect(missing.isEmpty, "the picture does not show \(missing)")
    }
}
