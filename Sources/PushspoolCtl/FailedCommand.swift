import PushCLI
import PushPayload
import PushSpool
import PushSystem

/// `pushspoolctl failed list|show|retry|purge`: the quarantine, Postfix style.
package struct FailedCommand: CtlSubcommand {
    package static var command: CtlCommandSpec {
        let names = ValueCompletion.programOutput(["failed", "list"])
        let status = "Safe while pushspoold runs. Exit status: 0 success, 1 failure, 64 usage error."
        @Sendable func selection(_ invocation: Invocation) -> FailedSelection {
            invocation.operands[0] == "ALL" ? .all : .name(invocation.operands[0])
        }
        return Command("failed", summary: "list, show, retry or purge quarantined payloads", subcommands: [
            Command("list", summary: "every file in the spool's failed/ with its reason code, stage and time",
                    options: [.flag("--json", help: "one object per line: name, size, code, message, stage, at, file")],
                    exitStatus: status) { invocation throws(CLIError) in
                FailedCommand(action: .list(json: invocation.flag("--json")))
            },
            Command("show", summary: "the reason file of NAME as stored, and the payload's size",
                    positionals: [Positional("NAME", completion: names), ], exitStatus: status) { invocation throws(CLIError) in
                FailedCommand(action: .show(invocation.operands[0]))
            },
            Command("retry", summary: "move NAME (or every quarantined file) back to incoming/ so the daemon takes it again",
                    positionals: [Positional("NAME|ALL", completion: .programOutput(["failed", "list"], plus: ["ALL"]))],
                    discussion: "E.g. after a configuration change; its reason file is removed.",
                    exitStatus: status) { invocation throws(CLIError) in
                FailedCommand(action: .retry(selection(invocation)))
            },
            Command("purge", summary: "delete NAME (or every quarantined file) and its reason file",
                    positionals: [Positional("NAME|ALL", completion: .programOutput(["failed", "list"], plus: ["ALL"]))],
                    discussion: """
                        A quarantined directory is removed only when empty (purge ALL skips a non-empty
                        one with a warning on stderr and goes on).
                        """,
                    exitStatus: status) { invocation throws(CLIError) in
                FailedCommand(action: .purge(selection(invocation)))
            },
        ])
    }

    enum Action: Equatable {
        case list(json: Bool)
        case show(String)
        case retry(FailedSelection)
        case purge(FailedSelection)
    }

    var action: Action

    package func run(_ context: CtlContext) -> Int32 {
        guard let configuration = context.configurationOrReport() else { return ExitStatus.failure }
        let layout = context.spoolLayout(configuration)
        do throws(SpoolError) {
            switch action {
            case .list(let json):
                let entries = try FailedQueue.list(layout: layout)
                for entry in entries {
                    if json {
                        var object: JSONObject = [
                            "name": .string(entry.name), "code": .string(entry.code), "message": .string(entry.message),
                            "stage": .string(entry.stage), "at": .string(entry.at),
                        ]
                        if let size = entry.size { object["size"] = .number(String(size)) }
                        if let file = entry.file { object["file"] = .string(file) }
                        if entry.payloadMissing { object["payloadMissing"] = .bool(true) }
                        if entry.reasonMissing { object["reasonMissing"] = .bool(true) }
                        context.out(String(decoding: JSONValue.object(object).serialized(), as: UTF8.self) + "\n")
                    } else {
                        context.out("\(entry.name)\t\(entry.code)\t\(entry.stage)\t\(entry.at)\t\(entry.message)\n")
                    }
                }
                if !json { context.err("\(entries.count) quarantined file(s)\n") }
            case .show(let name):
                let detail = try FailedQueue.show(layout: layout, name: name)
                context.out((detail.reasonJSON ?? "(no reason file)\n"))
                if let size = detail.size { context.out("payload: failed/\(name), \(size) bytes\n") }
            case .retry(let selection):
                for retried in try FailedQueue.retry(layout: layout, selection) {
                    context.out("\(retried.name) -> incoming/\(retried.incomingName)\n")
                }
            case .purge(let selection):
                let purged = try FailedQueue.purge(layout: layout, selection) { name, why in
                    context.err("pushspoolctl: warning: skipped failed/\(name): \(why)\n")
                }
                for name in purged {
                    context.out("purged \(name)\n")
                }
            }
            return ExitStatus.ok
        } catch {
            context.err("pushspoolctl: \(error)\n")
            return ExitStatus.failure
        }
    }
}
