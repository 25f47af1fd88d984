import PushOutboxStore
import PushSystem

/// `pushspoolctl outbox list|show|retry|purge`: the Notification Center event outbox, Postfix
/// style. Works on `<state>/outbox/` files only, so it is safe while pushspoold runs: a retry
/// renames a dead letter into `retry/`, which the daemon's outbox thread moves back to
/// `pending/` with fresh attempts.
package struct OutboxCommand: CtlSubcommand {
    package static let name = "outbox"
    package static let summary = "list, show, retry or purge outbox deliveries (Mindbox / Infobip events)"
    package static let help = """
        usage: pushspoolctl outbox list [--json]
               pushspoolctl outbox show ID [--json]
               pushspoolctl outbox retry ID|ALL
               pushspoolctl outbox purge ID|ALL

        list   pending and parked deliveries: ID (SEQ-INDEX: the event's journal seq and
               which of its deliveries), state, target, event type, attempts, last HTTP
               status, and the reason for parked ones
               (--json: one object per line with every stored field and "state")
        show   one delivery with its request payload and the last response (status and the
               first KiB of the body); keys are never stored, so never shown
        retry  re-queue a parked delivery (or every one): the daemon sends it again with
               fresh attempts, its age counted from now
        purge  delete a parked delivery (or every one); pending ones cannot be purged

        Exit status: 0 success, 1 failure (e.g. no such parked delivery), 64 usage error.
        """

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

    package init(arguments: [String]) throws(UsageError) {
        guard let verb = arguments.first else { throw UsageError("missing outbox action (list, show, retry, purge)", subcommand: Self.name) }
        let rest = Array(arguments.dropFirst())
        let json = rest.contains("--json")
        let words = rest.filter { $0 != "--json" }
        func selection() throws(UsageError) -> Selection {
            guard words.count == 1, !json else { throw UsageError("outbox \(verb) needs exactly one ID or ALL", subcommand: Self.name) }
            if words[0] == "ALL" { return .all }
            guard OutboxDelivery.fileName(forID: words[0]) != nil else {
                throw UsageError("'\(words[0])' is not a delivery id (SEQ-INDEX, e.g. 42-0)", subcommand: Self.name)
            }
            return .id(words[0])
        }
        switch verb {
        case "list":
            guard words.isEmpty else { throw UsageError("outbox list takes only --json", subcommand: Self.name) }
            action = .list(json: json)
        case "show":
            guard words.count == 1, OutboxDelivery.fileName(forID: words[0]) != nil else {
                throw UsageError("outbox show needs exactly one ID (SEQ-INDEX, e.g. 42-0)", subcommand: Self.name)
            }
            action = .show(words[0], json: json)
        case "retry": action = .retry(try selection())
        case "purge": action = .purge(try selection())
        default: throw UsageError("unknown outbox action '\(verb)' (list, show, retry, purge)", subcommand: Self.name)
        }
    }

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
