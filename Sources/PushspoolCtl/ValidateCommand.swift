import Glibc
import PushPayload
import PushSystem

/// `pushspoolctl validate [--json] FILE...`: runs the normaliser on files without ingesting them.
package struct ValidateCommand: CtlSubcommand {
    package static let name = "validate"
    package static let summary = "check payload files against the vendor formats (nothing is ingested)"
    package static let help = """
        usage: pushspoolctl validate [--json] [--max-payload-bytes N] [--max-depth N] FILE...

        Parses and normalises each FILE ('-' reads stdin) exactly as the daemon would, and
        prints the outcome. Reason and warning codes: docs/reason-codes.md.

        Options:
          --json                 one JSON object per input, one per line:
                                 {"file","accepted","vendor","platform","format","id",
                                  "reason","message","warnings","notification"}
          --max-payload-bytes N  largest compact vendor payload (default 4096)
          --max-depth N          deepest JSON nesting (default 32)
          -h, --help             show this help

        Exit status: 0 all accepted, 65 any refused, 1 a file could not be read, 64 usage error.
        """

    package var json = false
    package var files: [String] = []
    package var options = NormalizerOptions()

    package init(arguments: [String]) throws(UsageError) {
        var cursor = ArgumentCursor(arguments)
        while let item = cursor.next() {
            switch item {
            case .operand(let file): files.append(file)
            case .option("--json", nil): json = true
            case .option("--max-payload-bytes", let inline):
                options.maxPayloadBytes = try cursor.positiveInteger(of: "--max-payload-bytes", inline: inline)
            case .option("--max-depth", let inline):
                options.maxDepth = try cursor.positiveInteger(of: "--max-depth", inline: inline)
            case .option(let name, _): throw UsageError("unknown option: \(name)")
            }
        }
        if files.isEmpty { throw UsageError("no FILE given (use '-' for stdin)") }
        if files.filter({ $0 == "-" }).count > 1 { throw UsageError("'-' (stdin) may be given only once") }
    }

    package func run(_ context: CtlContext) -> Int32 {
        var anyRefused = false
        var anyUnreadable = false
        for file in files {
            let bytes: [UInt8]
            let outcome: NormalizeOutcome
            do throws(SystemError) {
                // One byte over the limit is enough for the normaliser to refuse the size.
                let limit = options.maxInputBytes + 1
                bytes = file == "-" ? try Posix.readAll(0, limit: limit, subject: "stdin") : try Posix.readFile(file, limit: limit)
                outcome = Normalizer.normalize(bytes, options: options)
            } catch where error.errno == EFBIG {
                outcome = .refused(PayloadRefusal(.payloadTooLarge, "input is over the \(options.maxInputBytes)-byte input limit"))
            } catch {
                context.err("pushspoolctl validate: cannot read \(file): \(error)\n")
                anyUnreadable = true
                continue
            }
            if case .refused = outcome { anyRefused = true }
            context.out(json ? Self.jsonLine(file: file, outcome) : Self.humanLines(file: file, outcome))
        }
        if anyUnreadable { return ExitStatus.failure }
        return anyRefused ? ExitStatus.dataError : ExitStatus.ok
    }

    /// The `--json` line for one input; every key is always present (null when not applicable).
    package static func jsonValue(file: String, _ outcome: NormalizeOutcome) -> JSONValue {
        func str(_ s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }
        switch outcome {
        case .accepted(let n):
            return .object([
                "file": .string(file), "accepted": .bool(true),
                "vendor": .string(n.vendor.rawValue), "platform": .string(n.platform.rawValue),
                "format": .string(n.format), "id": .string(n.id),
                "reason": .null, "message": .null,
                "warnings": .array(n.warnings.map { .string($0.description) }),
                "notification": n.jsonValue(),
            ])
        case .refused(let r):
            return .object([
                "file": .string(file), "accepted": .bool(false),
                "vendor": str(r.vendor?.rawValue), "platform": str(r.platform?.rawValue),
                "format": .null, "id": .null,
                "reason": .string(r.code.rawValue), "message": .string(r.message),
                "warnings": .array([]), "notification": .null,
            ])
        }
    }

    static func jsonLine(file: String, _ outcome: NormalizeOutcome) -> String {
        jsonValue(file: file, outcome).serializedString() + "\n"
    }

    static func humanLines(file: String, _ outcome: NormalizeOutcome) -> String {
        switch outcome {
        case .accepted(let n):
            var text = "\(file): accepted \(n.format) id=\(n.id)\n"
            for warning in n.warnings { text += "  warning: \(warning)\n" }
            return text
        case .refused(let r):
            return "\(file): refused \(r.code.rawValue): \(r.message)\n"
        }
    }
}
