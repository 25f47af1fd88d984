import PushCLI
import PushOutboxStore
import PushSystem

/// `pushspoolctl outbox list|show|retry|purge`: the Notification Center event outbox, Postfix
/// style. Works on `<state>/outbox/` files only, so it is safe while pushspoold runs: a retry
/// renames a dead letter into `retry/`, which the daemon's outbox thread moves back to
/// `pending/` with fresh attempts.
package struct OutboxCommand: CtlSubcommand {
    package static var command: CtlCommandSpec {
        let status = "Exit status: 0 success, 1 failure (e.g. no such parked delivery), 64 usage error."
        @Sendable func id(_ invocation: Invocation, all: Bool) throws(CLIError) -> Selection {
            let word = invocation.operands[0]
            if all, word == "ALL" { return .all }
            guard OutboxDelivery.fileName(forID: word) != nil else {
                throw invocation.error("'\(word)' is not a delivery id (SEQ-INDEX, e.g. 42-0)")
            }
            return .id(word)
        }
        let parked = ValueCompletion.programOutput(["outbox", "list"], plus: ["ALL"])
        return Command("outbox", summary: "list, show, retry or purge outbox deliveries (Mindbox / Infobip events)", subcommands: [
            Command("list", summary: "pending and parked deliveries", options: [
                .flag("--json", help: "one object per line with every stored field and \"state\""),
            ], discussion: """
                Each line: ID (SEQ-INDEX: the event's journal seq and which of its deliveries), state,
                target, event type, attempts, last HTTP status, and the reason for parked ones.
                """, exitStatus: status) { invocation throws(CLIError) in
                OutboxCommand(action: .list(json: invocation.flag("--json")))
            },
            Command("show", summary: "one delivery with its request payload and the last response",
                    options: [.flag("--json", help: "one object with every stored field")],
                    positionals: [Positional("ID", completion: .programOutput(["outbox", "list"]))],
                    discussion: "The last response is its status and the first KiB of the body; keys are never "
                        + "stored, so never shown.", exitStatus: status) { invocation throws(CLIError) in
                guard case .id(let word) = try id(invocation, all: false) else { throw invocation.error("ID needed") }
                return OutboxCommand(action: .show(word, json: invocation.flag("--json")))
            },
            Command("retry", summary: "re-queue a parked delivery (or every one)",
                    positionals: [Positional("ID|ALL", completion: parked)],
                    discussion: "The daemon sends it again with fresh attempts, its age counted from now.",
                    exitStatus: status) { invocation throws(CLIError) in
                OutboxCommand(action: .retry(try id(invocation, all: true)))
            },
            Command("purge", summary: "delete a parked delivery (or every one); pending ones cannot be purged",
                    positionals: [Positional("ID|ALL", completion: parked)], exitStatus: status) { invocation throws(CLIError) in
                OutboxCommand(action: .purge(try id(invocation, all: true)))
            },
        ])
    }

    enum Selection: Equatable {
        case all
        case id(String)
    }

    enum Action: Equatable {
        case list(json: Bool)
        case show(String, json: Bool)
        case retry(Selection)
        case purge(Selection)
    }

    var action: Action

    package func run(_ context: CtlContext) -> Int32 {
        guard let configuration = context.configurationOrReport() else { return ExitStatus.failure }
        let store = OutboxStore(stateDirectory: configuration.journal.stateDirectory)
        do throws(OutboxError) {
            switch action {
            case .list(let json):
                let pending = try store.list(store.pendingDirectory)
                let parked = try store.list(store.parkedDirectory)
                for (state, delivery) in pending.map({ ("pending", $0) }) + parked.map({ ("parked", $0) }) {
                    if json {
                        context.out(Self.json(delivery, state: state) + "\n")
                    } else {
                        let status = delivery.lastStatus.map(String.init) ?? "-"
                        context.out("\(delivery.id)\t\(state)\t\(delivery.target.rawValue)\t\(delivery.eventType)\t\(delivery.attempts)\t\(status)\t\(delivery.parkedReason ?? "-")\n")
                    }
                }
                if !json { context.err("\(pending.count) pending, \(parked.count) parked\n") }
            case .show(let id, let json):
                guard let name = OutboxDelivery.fileName(forID: id) else { return ExitStatus.usage }
                let found = [("pending", store.pendingDirectory), ("parked", store.parkedDirectory), ("retry", store.retryDirectory)]
                    .lazy.compactMap { state, dir in store.read(dir + "/" + name).map { (state, $0) } }.first
                guard let (state, delivery) = found else {
                    context.err("pushspoolctl: outbox: no delivery \(id)\n")
                    return ExitStatus.failure
                }
                if json {
                    context.out(Self.json(delivery, state: state) + "\n")
                } else {
                    context.out("""
                        id: \(delivery.id)
                        state: \(state)
                        target: \(delivery.target.rawValue)
                        event: \(delivery.eventType) \(delivery.eventId)
                        order: \(delivery.orderKey)
                        operation: \(delivery.operation ?? "-")
                        device: \(delivery.device ?? "-")
                        attempts: \(delivery.attempts)
                        payload: \(delivery.payload.serializedString())
                        last status: \(delivery.lastStatus.map(String.init) ?? "-")
                        last error: \(delivery.lastError ?? "-")
                        parked: \(delivery.parkedReason ?? "-")
                        last response: \(delivery.lastResponse ?? "-")

                        """)
                }
            case .retry(let selection), .purge(let selection):
                let isRetry = if case .retry = action { true } else { false }
                let names: [String]
                switch selection {
                case .all: names = try store.names(store.parkedDirectory)
                case .id(let id):
                    guard let name = OutboxDelivery.fileName(forID: id), store.read(store.parkedDirectory + "/" + name) != nil else {
                        context.err("pushspoolctl: outbox: no parked delivery \(id)\n")
                        return ExitStatus.failure
                    }
                    names = [name]
                }
                for name in names {
                    if isRetry {
                        try store.requeue(name)
                    } else {
                        try store.remove(name, in: store.parkedDirectory)
                    }
                }
                context.err("\(isRetry ? "re-queued" : "purged") \(names.count) parked delivery(ies)\n")
            }
        } catch {
            context.err("pushspoolctl: outbox: \(error)\n")
            return ExitStatus.failure
        }
        return ExitStatus.ok
    }

    static func json(_ delivery: OutboxDelivery, state: String) -> String {
        guard case .object(var object) = delivery.jsonValue else { return "{}" }
        object["state"] = .string(state)
        object["id"] = .string(delivery.id)
        return JSONValue.object(object).serializedString()
    }
}
