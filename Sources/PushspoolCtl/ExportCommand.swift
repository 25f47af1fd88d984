@preconcurrency import Glibc
import PushCLI
import PushConfig
import PushModuleOptions
import PushExport
import PushJournal
import PushSystem

/// `pushspoolctl export status|replay`: the NATS JetStream exporter. `status` reads
/// `<state>/export/` (cursor and the daemon's status file) and the journal, so it works
/// whether or not pushspoold runs; `replay` publishes a range of records again itself.
package struct ExportCommand: CtlSubcommand {
    package static var command: CtlCommandSpec {
        let status = "Exit status: 0 success, 1 failure (NATS unreachable, unreadable journal), 64 usage error."
        return Command("export", summary: "show the NATS JetStream export's lag, or publish a range of records again", subcommands: [
            Command("status", summary: "the acknowledged seq, the journal's last seq, the lag, and the daemon's last report",
                    options: [.flag("--json", help: "one object")], discussion: """
                        The acknowledged seq is export/cursor: it and every earlier record are in the stream.
                        What the running daemon last reported: connected, publishes in flight, last error.
                        """, exitStatus: status) { invocation throws(CLIError) in
                ExportCommand(action: .status(json: invocation.flag("--json")))
            },
            Command("replay", summary: "publish journal records N..M (M = the last one) to [Export] Subject= again",
                    options: [.value("--from-seq", placeholder: "N", help: "the first record to publish"),
                              .value("--to-seq", placeholder: "M", help: "the last one (default: the journal's last)")],
                    groups: [OptionGroup(["--from-seq"], .exactlyOne)], discussion: """
                        One PubAck at a time; the cursor is not touched. The stream drops records it
                        already holds within its duplicate window ([Export] DuplicateWindowSec=), so a
                        replay never doubles them there; past the window it does.
                        """, exitStatus: status) { invocation throws(CLIError) in
                let from = try invocation.integer("--from-seq", in: 1...UInt64.max) ?? 1
                let to = try invocation.integer("--to-seq", in: 1...UInt64.max)
                if let to, to < from { throw invocation.error("--to-seq must not be below --from-seq", .conflict) }
                return ExportCommand(action: .replay(from: from, to: to))
            },
        ])
    }

    enum Action: Equatable {
        case status(json: Bool)
        case replay(from: UInt64, to: UInt64?)
    }

    var action: Action

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
            var object: JSONObject = [
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
