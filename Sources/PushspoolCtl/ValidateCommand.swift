import Glibc
import PushCLI
import PushPayload
import PushSystem

/// `pushspoolctl validate [--json] FILE...`: runs the normaliser on files without ingesting them
/// (pushes and Notification Center event envelopes alike, as the daemon's `classify` does).
package struct ValidateCommand: CtlSubcommand {
    package static var command: CtlCommandSpec {
        Command("validate", summary: "check payload files against the vendor formats (nothing is ingested)",
                options: [
                    .flag("--json", help: """
                        one JSON object per input, one per line: {"file","accepted","kind","vendor","platform","format",\
                        "id","type","reason","message","warnings","notification","event"} (kind "notification" or \
                        "event", null when refused; for an event, id is its eventId and type its type)
                        """),
                    .value("--max-payload-bytes", placeholder: "N", help: "largest compact vendor payload (default 4096)"),
                    .value("--max-depth", placeholder: "N", help: "deepest JSON nesting (default 32)"),
                ],
                positionals: [Positional("FILE", repeated: true, completion: .file(suffix: nil))],
                discussion: """
                    Parses and normalises each FILE ('-' reads stdin) exactly as the daemon would, and
                    prints the outcome: a push ("accepted FORMAT id=ID"), a Notification Center event
                    envelope ("event TYPE eventId=ID"), or a refusal. Reason and warning codes:
                    docs/reason-codes.md.
                    """,
                exitStatus: "Exit status: 0 all accepted, 65 any refused, 1 a file could not be read, 64 usage error."
        ) { invocation throws(CLIError) in try ValidateCommand(invocation) }
    }

    package var json = false
    package var files: [String] = []
    package var options = NormalizerOptions()

    package init(_ invocation: Invocation) throws(CLIError) {
        json = invocation.flag("--json")
        // Bounded far above any real payload: the input limit derives from them.
        if let bytes = try invocation.integer("--max-payload-bytes", in: 1...(1 << 30)) { options.maxPayloadBytes = bytes }
        if let depth = try invocation.integer("--max-depth", in: 1...100_000) { options.maxDepth = depth }
        files = invocation.operands
        if files.filter({ $0 == "-" }).count > 1 { throw invocation.error("'-' (stdin) may be given only once") }
    }

    package func run(_ context: CtlContext) -> Int32 {
        var anyRefused = false
        var anyUnreadable = false
        for file in files {
            let bytes: [UInt8]
            let outcome: IntakeOutcome
            do throws(SystemError) {
                // One byte over the limit is enough for the normaliser to refuse the size.
                let limit = options.maxInputBytes + 1
                bytes = file == "-" ? try Posix.readAll(0, limit: limit, subject: "stdin") : try Posix.readFile(file, limit: limit)
                outcome = Normalizer.classify(bytes, options: options)
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
    package static func jsonValue(file: String, _ outcome: IntakeOutcome) -> JSONValue {
        func str(_ s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }
        switch outcome {
        case .notification(let n):
            return .object([
                "file": .string(file), "accepted": .bool(true), "kind": .string("notification"),
                "vendor": .string(n.vendor.rawValue), "platform": .string(n.platform.rawValue),
                "format": .string(n.format), "id": .string(n.id), "type": .null,
                "reason": .null, "message": .null,
                "warnings": .array(n.warnings.map { .string($0.description) }),
                "notification": n.jsonValue(), "event": .null,
            ])
        case .event(let e):
            return .object([
                "file": .string(file), "accepted": .bool(true), "kind": .string("event"),
                "vendor": .null, "platform": .null, "format": .null,
                "id": .string(e.eventId), "type": .string(e.type.rawValue),
                "reason": .null, "message": .null, "warnings": .array([]),
                "notification": .null, "event": e.jsonValue(),
            ])
        case .erasure(let request):
            // The plain id is not echoed: validate output lands in logs and tickets.
            return .object([
                "file": .string(file), "accepted": .bool(true), "kind": .string("erasure"),
                "vendor": .null, "platform": .null, "format": .null,
                "id": .string(request.erasureId), "type": .string(request.scope.rawValue),
                "reason": .null, "message": .null, "warnings": .array([]),
                "notification": .null, "event": .null,
            ])
        case .refused(let r):
            return .object([
                "file": .string(file), "accepted": .bool(false), "kind": .null,
                "vendor": str(r.vendor?.rawValue), "platform": str(r.platform?.rawValue),
                "format": .null, "id": .null, "type": .null,
                "reason": .string(r.code.rawValue), "message": .string(r.message),
                "warnings": .array([]), "notification": .null, "event": .null,
            ])
        }
    }

    static func jsonLine(file: String, _ outcome: IntakeOutcome) -> String {
        jsonValue(file: file, outcome).serializedString() + "\n"
    }

    static func humanLines(file: String, _ outcome: IntakeOutcome) -> String {
        switch outcome {
        case .notification(let n):
            var text = "\(file): accepted \(n.format) id=\(n.id)\n"
            for warning in n.warnings { text += "  warning: \(warning)\n" }
            return text
        case .event(let e):
            return "\(file): event \(e.type.rawValue) eventId=\(e.eventId)\n"
        case .erasure(let request):
            return "\(file): erasure of a \(request.scope.rawValue) erasureId=\(request.erasureId)\n"
        case .refused(let r):
            return "\(file): refused \(r.code.rawValue): \(r.message)\n"
        }
    }
}
