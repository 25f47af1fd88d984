import PushPayload
import PushSpool
import PushSystem

/// `pushspoolctl failed list|show|retry|purge`: the quarantine, Postfix style.
package struct FailedCommand: CtlSubcommand {
    package static let name = "failed"
    package static let summary = "list, show, retry or purge quarantined payloads"
    package static let help = """
        usage: pushspoolctl failed list [--json]
               pushspoolctl failed show NAME
               pushspoolctl failed retry NAME|ALL
               pushspoolctl failed purge NAME|ALL

        list   every file in the spool's failed/ with its reason code, stage and time
               (--json: one object per line: name, size, code, message, stage, at, file)
        show   the reason file of NAME as stored, and the payload's size
        retry  move NAME (or every quarantined file) back to incoming/ so the daemon takes it
               again, e.g. after a configuration change; its reason file is removed
        purge  delete NAME (or every quarantined file) and its reason file; a quarantined
               directory is removed only when empty (purge ALL skips a non-empty one with
               a warning on stderr and goes on)

        Safe while pushspoold runs. Exit status: 0 success, 1 failure, 64 usage error.
        """

    enum Action: Equatable {
        case list(json: Bool)
        case show(String)
        case retry(FailedSelection)
        case purge(FailedSelection)
    }

    var action: Action

    package init(arguments: [String]) throws(UsageError) {
        guard let verb = arguments.first else { throw UsageError("missing failed action (list, show, retry, purge)") }
        let rest = Array(arguments.dropFirst())
        func selection() throws(UsageError) -> FailedSelection {
            guard rest.count == 1 else { throw UsageError("failed \(verb) needs exactly one NAME or ALL") }
            return rest[0] == "ALL" ? .all : .name(rest[0])
        }
        switch verb {
        case "list":
            guard rest.allSatisfy({ $0 == "--json" }) else { throw UsageError("failed list takes only --json") }
            action = .list(json: !rest.isEmpty)
        case "show":
            guard rest.count == 1 else { throw UsageError("failed show needs exactly one NAME") }
            action = .show(rest[0])
        case "retry": action = .retry(try selection())
        case "purge": action = .purge(try selection())
        default: throw UsageError("unknown failed action '\(verb)' (list, show, retry, purge)")
        }
    }

    package func run(_ context: CtlContext) -> Int32 {
        guard let configuration = context.configurationOrReport() else { return ExitStatus.failure }
        let layout = context.spoolLayout(configuration)
        do throws(SpoolError) {
            switch action {
            case .list(let json):
                let entries = try FailedQueue.list(layout: layout)
                for entry in entries {
                    if json {
                        var object: [String: JSONValue] = [
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
