@preconcurrency import Glibc

/// What `main` does after the command line: run the command, or leave with this status.
/// Not `Sendable`: it carries whatever the table builds.
package enum Resolution<Target> {
    case run(Target, Invocation)
    case exit(Int32)
}

/// Exit statuses shared by every program (sysexits.h). `Sendable`: case-less namespace.
package enum CLIExit {
    package static let ok: Int32 = 0
    /// EX_USAGE: a command line that cannot be understood.
    package static let usage: Int32 = 64
}

extension Program {
    /// Parses `arguments` and answers what needs no command: help and `--version` on stdout
    /// (exit 0), a usage error on stderr with the command's usage (exit 64), and the hidden
    /// `--generate man|completion` (a man page from stdin with its generated sections
    /// rewritten, or the bash completion, on stdout).
    package func resolve(_ arguments: [String], version: String) -> Resolution<Target> {
        do throws(CLIError) {
            switch try parse(arguments) {
            case .run(let target, let invocation):
                return .run(target, invocation)
            case .help(let path):
                Self.write(1, help(path) + "\n")
            case .version:
                Self.write(1, "\(name) \(version)\n")
            case .generate("completion"):
                Self.write(1, BashCompletion.script(for: self))
            case .generate("man"):
                var page: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 65536)
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
                    if count < 0, errno == EINTR { continue }
                    guard count > 0 else { break }
                    page += buffer[..<count]
                }
                guard let rendered = ManPage.render(String(decoding: page, as: UTF8.self), program: self) else {
                    Self.write(2, "\(name): --generate man: the page on stdin has a BEGIN marker without its END marker\n")
                    return .exit(1)
                }
                Self.write(1, rendered)
            case .generate(let kind):
                throw CLIError(.invalidValue, command: name, "--generate takes man or completion, not '\(kind)'")
            }
            return .exit(CLIExit.ok)
        } catch {
            Self.write(2, "\(error)\n\n\(usage(error.path(in: self)))\n")
            return .exit(CLIExit.usage)
        }
    }

    /// Writes all of `text` to `fd`; a closed stdout (EPIPE) is not worth a crash.
    static func write(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return }
            bytes = bytes.dropFirst(written)
        }
    }
}

extension CLIError {
    /// The subcommand path the error belongs to, for the usage printed with it.
    func path<Target>(in program: Program<Target>) -> [String] {
        let words = command.split(separator: " ").dropFirst().map(String.init)
        return program.root.descendant(words) != nil ? words : []
    }
}
