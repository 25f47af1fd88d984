/// The man pages' SYNOPSIS and OPTIONS, written from a program's table into the parts of
/// `man/*.scd` between marker comments; the prose around them stays hand-written.
package enum ManPage {
    /// The sections a page may hold between `; BEGIN GENERATED NAME` and `; END GENERATED NAME`.
    package static let sections = ["SYNOPSIS", "OPTIONS"]

    /// scdoc's markup characters, escaped so a help text prints as written.
    static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            if character == "*" || character == "_" || character == "\\" { out.append("\\") }
            out.append(character)
        }
        return out
    }

    /// The generated text of `section` for `program`.
    package static func section<Target>(_ section: String, of program: Program<Target>) -> String {
        switch section {
        case "SYNOPSIS":
            if program.root.subcommands.isEmpty {
                let line = program.synopsisParts([]).map { line in line.map { $0.scdoc() }.joined(separator: " ") }
                return (line + ["*\(escape(program.name))* *--help* | *--version*"]).joined(separator: "\n\n")
            }
            var lines = program.synopsisParts([])
            for (path, _) in program.root.leaves() { lines += program.synopsisParts(path) }
            return lines.map { line in line.map { $0.scdoc() }.joined(separator: " ") }.joined(separator: "\n\n")
        default:
            var entries = program.root.options.filter { !$0.hidden }.map { option in
                let names = option.names.map { "*" + escape($0) + "*" }.joined(separator: ", ")
                return names + (option.placeholder.map { " _" + escape($0) + "_" } ?? "") + "\n\t" + escape(option.help) + "."
            }
            entries.append("*-h*, *--help*\n\tShow the help" + (program.helpCommand ? "; *help* _subcommand_ for one subcommand." : "."))
            entries.append("*--version*\n\tShow the version.")
            return entries.joined(separator: "\n\n")
        }
    }

    /// `page` with every marked section replaced by what `program`'s table generates; `nil`
    /// when a section's markers are missing or out of order.
    package static func render<Target>(_ page: String, program: Program<Target>) -> String? {
        var lines = page.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for name in sections {
            let begin = "; BEGIN GENERATED \(name) (from the option table; scripts/gen-docs.sh)"
            let end = "; END GENERATED \(name)"
            guard let start = lines.firstIndex(of: begin) else { continue }
            guard let stop = lines[start...].firstIndex(of: end) else { return nil }
            let body = section(name, of: program).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            lines.replaceSubrange((start + 1)..<stop, with: [""] + body + [""])
        }
        return lines.joined(separator: "\n")
    }
}
