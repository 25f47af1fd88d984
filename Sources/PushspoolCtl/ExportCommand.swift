@preconcurrency import Glibc
import PushConfig
import PushExport
import PushJournal
import PushSystem

/// `pushspoolctl export status|replay`: the NATS JetStream exporter. `status` reads
/// `<state>/export/` (cursor and the daemon's status file) and the journal, so it works
/// whether or not pushspoold runs; `replay` publishes a range of records again itself.
package struct ExportCommand: CtlSubcommand {
    package static let name = "export"
    package static let summary = "show the NATS JetStream export's lag, or publish a range of records again"
    package static let help = """
        usage: pushspoolctl export status [--json]
               pushspoolctl export replay --from-seq N [--to-seq M]

        status  the acknowledged seq (export/cursor: it and every earlier record are in the
                stream), the journal's last seq, the lag between them, and what the running
                daemon last reported (connected, publishes in flight, last error)
                (--json: one object)
        replay  publish journal records N..M (M = the last one) to [Export] Subject= again,
                one PubAck at a time; the cursor is not touched. The stream drops records it
                already holds within its duplicate window ([Export] DuplicateWindowSec=), so a
                replay never doubles them there; past the window it does.

        Exit status: 0 success, 1 failure (NATS unreachable, unreadable journal), 64 usage error.
        """

    enum Action: Equatable {
        case status(json: Bool)
        case replay(from: UInt64, to: UInt64?)
    }

    var action: Action

    package init(arguments: [String]) throws(UsageError) {
        guard let verb = arguments.first else { throw UsageError("missing export action (status, replay)", subcommand: Self.name) }
        let rest = Array(arguments.dropFirst())
        switch verb {
        case "status":
            guard rest.allSatisfy({ $0 == "--json" }) else { throw UsageError("export status takes only --json", subcommand: Self.name) }
            action = .status(json: !rest.isEmpty)
        case "replay":
            var from: UInt64?, to: UInt64?
            var index = 0
            while index < rest.count {
                let word = rest[index]
                var value: String?
                var option = word
                if let equals = word.firstIndex(of: "=") {
                    option = String(word[..<equals])
                    value = String(word[word.index(after: equals)...])
                } else if index + 1 < rest.count {
                    value = rest[index + 1]
                    index += 1
                }
                guard let text = value, let number = UInt64(text), number >= 1 else {
                    throw UsageError("\(option) needs a seq (a whole number from 1)", subcommand: Self.name)
                }
                switch option {
                case "--from-seq": from = number
                case "--to-seq": to = number
                default: throw UsageError("unknown option '\(option)' for export replay", subcommand: Self.name)
                }
                index += 1
            }
            guard let from else { throw UsageError("export replay needs --from-seq N", subcommand: Self.name) }
            if let to, to < from { throw UsageError("--to-seq must not be below --from-seq", subcommand: Self.name) }
            action = .replay(from: from, to: to)
        default:
            throw UsageError("unknown export action '\(verb)' (status, replay)", subcommand: Self.name)
        }
    }

    package func run(_ context: CtlContext) -> Int32 {
        guard let configuration = context.configurationOrReport() else { return ExitStatus.failure }
        let state = configuration.journal.stateDirectory
        switch action {
        case .status(let json):
            let acknowledged: UInt64
            do { acknowledged = try ExportCursor.read(stateDirectory: state) } catch {
                context.err("pushspoolctl: export: \(error)\n")
                return ExitStatus.failure
            }
            let last = ((try? JournalReader.lastSeq(directory: StateLayout(root: state).journal)) ?? nil) ?? 0
            let daemon = (try? Posix.readFile(StateLayout(root: state).exportStatus, limit: 1 << 16))
                .flatMap { try? JSONParser().parse($0).objectValue }
            var object: [String: JSONValue] = [
                "enabled": .bool(configuration.export.enabled), "acknowledgedSeq": .integer(acknowledged),
                "journalLastSeq": .integer(last), "lag": .integer(last > acknowledged ? last - acknowledged : 0),
                "stream": .string(configuration.export.stream), "subject": .string(configuration.export.subject),
            ]
            if let daemon {
                for key in ["connected", "pending", "lastError", "updatedAt", "published"] { object[key] = daemon[key] }
            }
            if json {
                context.out(JSONValue.object(object).serializedString() + "\n")
            } else {
                var text = """
                    enabled: \(configuration.export.enabled ? "yes" : "no")
                    stream: \(configuration.export.stream) (subject \(configuration.export.subject))
                    acknowledged seq: \(acknowledged)
                    journal last seq: \(last)
                    lag: \(last > acknowledged ? last - acknowledged : 0) records

                    """
                if let daemon {
                    text += "connected: \(daemon["connected"]?.boolValue == true ? "yes" : "no") (as of \(daemon["updatedAt"]?.stringValue ?? "?"))\n"
                    text += "in flight: \(daemon["pending"]?.numberLexeme ?? "0")\n"
                    text += "last error: \(daemon["lastError"]?.stringValue ?? "-")\n"
                }
                context.out(text)
            }
            return ExitStatus.ok
        case .replay(let from, let to):
            // The daemon's own options, so the replayed ids are the ones it published.
            let options = ExportOptions(settings: configuration.export, stateDirectory: state, instance: context.globals.instance,
                                        credentialsDirectory: getenv("CREDENTIALS_DIRECTORY").map { String(cString: $0) })
            do {
                let result = try Exporter.replay(options: options, fromSeq: from, toSeq: to)
                context.err("published \(result.published) record(s); \(result.duplicates) dropped by the stream as duplicates\n")
                return ExitStatus.ok
            } catch {
                context.err("pushspoolctl: export: \(error)\n")
                return ExitStatus.failure
            }
        }
    }
}
