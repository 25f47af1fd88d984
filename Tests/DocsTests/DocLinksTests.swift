import Foundation
import Testing

/// README.md and docs/ as a reader meets them on GitHub or in a clone: every relative link
/// leads to a file of this repository, every `#anchor` to a heading of its target, nothing
/// refers to files outside the repository, and the README stays a front door.
@Suite struct DocLinksTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().standardizedFileURL.path

    /// README.md and every Markdown file under docs/, as paths relative to the root.
    static func markdownFiles() -> [String] {
        var files = ["README.md"]
        let docs = root + "/docs"
        if let walker = FileManager.default.enumerator(atPath: docs) {
            for case let path as String in walker where path.hasSuffix(".md") { files.append("docs/" + path) }
        }
        return files.sorted()
    }

    static func read(_ relative: String) throws -> String {
        try String(contentsOfFile: root + "/" + relative, encoding: .utf8)
    }

    @Test func theDocumentationIsFound() {
        let files = Self.markdownFiles()
        for expected in ["README.md", "docs/architecture.md", "docs/operations.md", "docs/configuration.md",
                         "docs/spool-protocol.md", "docs/export-nats.md", "docs/media-sandbox.md", "docs/performance.md",
                         "docs/development.md", "docs/journal-format.md", "docs/reason-codes.md",
                         "docs/design/README.md", "docs/design/spool-protocol.md"] {
            #expect(files.contains(expected), "\(expected) is missing")
        }
    }

    @Test func everyRelativeLinkResolves() throws {
        var problems: [String] = []
        var checked = 0
        for file in Self.markdownFiles() {
            let text = try Self.read(file)
            for link in MarkdownText.links(in: text) {
                checked += 1
                if let problem = try Self.problem(with: link.target, in: file) {
                    problems.append("\(file):\(link.line): (\(link.target)) \(problem)")
                }
            }
        }
        #expect(checked > 100, "only \(checked) links found: is the link scanner broken?")
        #expect(problems.isEmpty, "\n\(problems.joined(separator: "\n"))")
    }

    /// What is wrong with `target` written in `file`, or nil when it leads somewhere real.
    static func problem(with target: String, in file: String) throws -> String? {
        if let scheme = target.range(of: "^[A-Za-z][A-Za-z0-9+.-]*:", options: .regularExpression) {
            let name = target[scheme].lowercased()
            return ["http:", "https:", "mailto:"].contains(name) ? nil : "is not a relative link nor a web address"
        }
        if target.hasPrefix("/") { return "is an absolute path; link relative to \(file)" }
        let parts = target.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false)
        let path = String(parts[0]).removingPercentEncoding ?? String(parts[0])
        let anchor = parts.count > 1 ? String(parts[1]) : nil
        var targetFile = file
        if !path.isEmpty {
            let directory = URL(fileURLWithPath: root + "/" + file).deletingLastPathComponent()
            let resolved = directory.appendingPathComponent(path).standardizedFileURL.path
            guard resolved == root || resolved.hasPrefix(root + "/") else { return "points outside the repository" }
            guard FileManager.default.fileExists(atPath: resolved) else { return "names no file" }
            targetFile = String(resolved.dropFirst(root.count + 1))
        }
        guard let anchor, !anchor.isEmpty else { return nil }
        guard targetFile.hasSuffix(".md") else { return "has an anchor into a file that is not Markdown" }
        let slugs = MarkdownText.headingSlugs(in: try read(targetFile))
        return slugs.contains(anchor) ? nil : "names no heading of \(targetFile) (headings: \(slugs.sorted().joined(separator: " ")))"
    }

    /// The repository stands alone: no file refers to notes kept beside it.
    @Test func nothingRefersToFilesOutsideTheRepository() throws {
        // Assembled, so that this file does not match itself.
        let needles = ["../" + "shared", "/work/" + "shared", "STYLE" + ".md", "DESIGN" + ".md", "JOURNAL" + ".md",
                       "vendors" + ".md"]
        var problems: [String] = []
        var scanned = 0
        for top in ["README.md", "Package.swift", "Sources", "Tests", "docs", "scripts", "packaging", "man", "debian",
                    "systemd", "spool-examples", "Fuzz", ".ci"] {
            for file in Self.files(under: top) {
                guard let data = FileManager.default.contents(atPath: Self.root + "/" + file), data.count <= 4 << 20,
                      let text = String(data: data, encoding: .utf8) else { continue }
                scanned += 1
                for needle in needles where text.contains(needle) {
                    problems.append("\(file) refers to \(needle)")
                }
            }
        }
        #expect(scanned > 300, "only \(scanned) files scanned")
        #expect(problems.isEmpty, "\n\(problems.joined(separator: "\n"))")
    }

    /// Regular files under `top` (or `top` itself), skipping build output and fuzz inputs.
    static func files(under top: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: root + "/" + top, isDirectory: &isDirectory) else { return [] }
        guard isDirectory.boolValue else { return [top] }
        var found: [String] = []
        guard let walker = FileManager.default.enumerator(atPath: root + "/" + top) else { return [] }
        for case let path as String in walker {
            let name = (path as NSString).lastPathComponent
            if [".build", ".work", "corpus", "FuzzRegressions"].contains(name) {
                walker.skipDescendants()
                continue
            }
            var directory: ObjCBool = false
            if FileManager.default.fileExists(atPath: root + "/" + top + "/" + path, isDirectory: &directory), !directory.boolValue {
                found.append(top + "/" + path)
            }
        }
        return found
    }

    /// The first lines give the two commands; the whole stays short enough to read.
    @Test func theReadmeIsAFrontDoor() throws {
        let lines = try Self.read("README.md").components(separatedBy: "\n")
        let count = lines.last == "" ? lines.count - 1 : lines.count
        #expect(count <= 250, "README.md has \(count) lines; move detail into docs/")
        // Title, a blank line, then the fence with exactly the two set-up commands.
        try #require(lines.count > 6)
        #expect(lines[0].hasPrefix("# "))
        #expect(lines[2] == "```sh")
        let fenceEnd = try #require(lines.dropFirst(3).firstIndex(of: "```"))
        let commands = lines[3..<fenceEnd].map { $0.split(separator: "#", maxSplits: 1)[0].trimmingCharacters(in: .whitespaces) }
        #expect(commands == ["./scripts/demo.sh", "./scripts/test.sh"])
        #expect(lines.contains { $0.contains("](docs/architecture.svg)") }, "the picture of the processes")
    }
}

/// Just enough Markdown for links and GitHub's heading anchors.
enum MarkdownText {
    struct Link {
        var line: Int
        var target: String
    }

    /// Inline links and images (`[text](target)`, `![alt](target)`) and reference definitions
    /// (`[name]: target`), outside fenced code blocks and code spans.
    static func links(in text: String) -> [Link] {
        var links: [Link] = []
        for (number, line) in proseLines(of: text) {
            let prose = withoutCodeSpans(line)
            if let definition = prose.range(of: #"^\s{0,3}\[[^\]]+\]:\s+(\S+)"#, options: .regularExpression) {
                let target = prose[definition].split(whereSeparator: \.isWhitespace).last.map(String.init) ?? ""
                links.append(Link(line: number, target: target.trimmingCharacters(in: CharacterSet(charactersIn: "<>"))))
                continue
            }
            var rest = Substring(prose)
            while let open = rest.range(of: "](") {
                var depth = 0
                var end = open.upperBound
                var target = ""
                while end < rest.endIndex {
                    let character = rest[end]
                    if character == "(" { depth += 1 }
                    if character == ")" {
                        if depth == 0 { break }
                        depth -= 1
                    }
                    target.append(character)
                    end = rest.index(after: end)
                }
                // `[text](target "title")`: the target is the first word.
                let first = target.split(separator: " ", maxSplits: 1).first.map(String.init) ?? ""
                links.append(Link(line: number, target: first.trimmingCharacters(in: CharacterSet(charactersIn: "<>"))))
                rest = end < rest.endIndex ? rest[rest.index(after: end)...] : ""
            }
        }
        return links
    }

    /// GitHub's anchors for the ATX headings of `text`: the rendered text lowercased, without
    /// punctuation or symbols (letters, digits, `-`, `_` and spaces stay), spaces as `-`; a
    /// repeated anchor gets `-1`, `-2`, ….
    static func headingSlugs(in text: String) -> Set<String> {
        var slugs: Set<String> = []
        var seen: [String: Int] = [:]
        for (_, line) in proseLines(of: text) {
            guard let marks = line.range(of: #"^#{1,6}\s+"#, options: .regularExpression) else { continue }
            var heading = String(line[marks.upperBound...])
            heading = heading.replacingOccurrences(of: #"\s+#+\s*$"#, with: "", options: .regularExpression)
            let base = slug(heading)
            let count = seen[base, default: 0]
            seen[base] = count + 1
            slugs.insert(count == 0 ? base : "\(base)-\(count)")
        }
        return slugs
    }

    static func slug(_ heading: String) -> String {
        // Rendered text: a link shows its text; code and emphasis marks are not text.
        var text = heading.replacingOccurrences(of: #"!?\[([^\]]*)\]\([^)]*\)"#, with: "$1", options: .regularExpression)
        text = text.replacingOccurrences(of: "`", with: "").replacingOccurrences(of: "*", with: "")
        var slug = ""
        for character in text.lowercased() {
            if character == " " {
                slug.append("-")
            } else if character.isLetter || character.isNumber || character == "-" || character == "_" {
                slug.append(character)
            }
        }
        return slug
    }

    /// The lines outside fenced code blocks, numbered from 1.
    static func proseLines(of text: String) -> [(Int, String)] {
        var result: [(Int, String)] = []
        var fence: String?
        for (index, line) in text.components(separatedBy: "\n").enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if let open = fence {
                if trimmed.hasPrefix(open) { fence = nil }
                continue
            }
            if trimmed.hasPrefix("```") || trimmed.hasPrefix("~~~") {
                fence = String(trimmed.prefix(3))
                continue
            }
            result.append((index + 1, line))
        }
        return result
    }

    /// `line` with its code spans blanked, so `[x](y)` inside backticks is not a link.
    static func withoutCodeSpans(_ line: String) -> String {
        var out = ""
        var index = line.startIndex
        while index < line.endIndex {
            guard line[index] == "`" else {
                out.append(line[index])
                index = line.index(after: index)
                continue
            }
            var run = ""
            var end = index
            while end < line.endIndex, line[end] == "`" {
                run.append("`")
                end = line.index(after: end)
            }
            if let close = line[end...].range(of: run) {
                index = close.upperBound
            } else {
                out.append(run)
                index = end
            }
        }
        return out
    }
}
