import PushCLI
import PushOutboxStore
import PushSystem

/// `pushspoolctl outbox list|show|retry|purge`: the Notification Center event outbox, Postfix
/// style. Works on `<state>/outbox/` files only, so it is safe while pushspoold runs: a retry
/// renames a dead letter into `retry/`, which the daemon's outbox thread moves back to
/// `pending/` with fresh attempts.
///
/// On an `[Inbox] Source=nats` node the fleet outbox's files (`<state>/inbox/outbox/`) are
/// listed too, their ids prefixed `fleet:` (their seqs are stream seqs, the journal outbox's
/// journal seqs: the same number names two different events). A retried fleet dead letter is
/// sent by pushspool-inbox on this node, which watches its `retry/`.
package struct OutboxCommand: CtlSubcommand {
    package static var command: CtlCommandSpec {
        let status = "Exit status: 0 success, 1 failure (e.g. no such parked delivery), 64 usage error."
        @Sendable func id(_ invocation: Invocation, all: Bool) throws(CLIError) -> Selection {
            let word = invocation.operands[0]
            if all, word == "ALL" { return .all }
            guard OutboxPlace.split(word) != nil else {
                throw invocation.error("'\(word)' is not a delivery id (SEQ-INDEX or fleet:SEQ-INDEX, e.g. 42-0)")
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
                On an [Inbox] Source=nats node the fleet outbox's deliveries follow, as
                fleet:SEQ-INDEX (SEQ: the event's stream seq).
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
                    discussion: "The daemon sends it again with fresh attempts, its age counted from now; "
                        + "a fleet: delivery is sent again by pushspool-inbox on this node.",
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
        let state = configuration.journal.stateDirectory
        var places = [OutboxPlace(prefix: "", store: OutboxStore(stateDirectory: state))]
        if configuration.inbox.source == .nats {
            places.append(OutboxPlace(prefix: OutboxPlace.fleetPrefix, store: OutboxStore(directory: StateLayout(root: state).fleetOutbox)))
        }
        do throws(OutboxError) {
            switch action {
            case .list(let json):
                var pendingCount = 0
                var parkedCount = 0
                for place in places {
                    let pending = try place.store.list(place.store.pendingDirectory)
                    let parked = try place.store.list(place.store.parkedDirectory)
                    pendingCount += pending.count
                    parkedCount += parked.count
                    for (state, delivery) in pending.map({ ("pending", $0) }) + parked.map({ ("parked", $0) }) {
                        let id = place.prefix + delivery.id
                        if json {
                            context.out(Self.json(delivery, id: id, state: state) + "\n")
                        } else {
                            let status = delivery.lastStatus.map(String.init) ?? "-"
                            context.out("\(id)\t\(state)\t\(delivery.target.rawValue)\t\(delivery.eventType)\t\(delivery.attempts)\t\(status)\t\(delivery.parkedReason ?? "-")\n")
                        }
                    }
                }
                if !json { context.err("\(pendingCount) pending, \(parkedCount) parked\n") }
            case .show(let id, let json):
                guard let (place, name) = Self.locate(id, in: places) else {
                    context.err("pushspoolctl: outbox: no delivery \(id)\n")
                    return ExitStatus.failure
                }
                let store = place.store
                let found = [("pending", store.pendingDirectory), ("parked", store.parkedDirectory), ("retry", store.retryDirectory)]
                    .lazy.compactMap { state, dir in store.read(dir + "/" + name).map { (state, $0) } }.first
                guard let (state, delivery) = found else {
                    context.err("pushspoolctl: outbox: no delivery \(id)\n")
                    return ExitStatus.failure
                }
                if json {
                    context.out(Self.json(delivery, id: place.prefix + delivery.id, state: state) + "\n")
                } else {
                    context.out("""
                        id: \(place.prefix + delivery.id)
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
                var targets: [(OutboxPlace, String)] = []
                switch selection {
                case .all:
                    for place in places {
                        targets += try place.store.names(place.store.parkedDirectory).map { (place, $0) }
                    }
                case .id(let id):
                    guard let (place, name) = Self.locate(id, in: places),
                          place.store.read(place.store.parkedDirectory + "/" + name) != nil else {
                        context.err("pushspoolctl: outbox: no parked delivery \(id)\n")
                        return ExitStatus.failure
                    }
                    targets = [(place, name)]
                }
                for (place, name) in targets {
                    if isRetry {
                        try place.store.requeue(name)
                    } else {
                        try place.store.remove(name, in: place.store.parkedDirectory)
                    }
                }
                context.err("\(isRetry ? "re-queued" : "purged") \(targets.count) parked delivery(ies)\n")
            }
        } catch {
            context.err("pushspoolctl: outbox: \(error)\n")
            return ExitStatus.failure
        }
        return ExitStatus.ok
    }

    /// The store and file name an operator's id names; `nil` when it names none configured
    /// here (a `fleet:` id on a journal node).
    static func locate(_ id: String, in places: [OutboxPlace]) -> (OutboxPlace, String)? {
        guard let (prefix, bare) = OutboxPlace.split(id), let name = OutboxDelivery.fileName(forID: bare),
              let place = places.first(where: { $0.prefix == prefix }) else { return nil }
        return (place, name)
    }

    static func json(_ delivery: OutboxDelivery, id: String, state: String) -> String {
        guard case .object(var object) = delivery.jsonValue else { return "{}" }
        object["state"] = .string(state)
        object["id"] = .string(id)
        return JSONValue.object(object).serializedString()
    }
}

/// One outbox directory `pushspoolctl outbox` reads: the journal outbox's (ids as stored) or
/// the fleet outbox's (ids prefixed ``fleetPrefix``). `Sendable` value.
struct OutboxPlace: Sendable {
    static let fleetPrefix = "fleet:"
    var prefix: String
    var store: OutboxStore

    /// `fleet:42-0` → (`fleet:`, `42-0`); `42-0` → (``, `42-0`); `nil` when the rest is no id.
    static func split(_ id: String) -> (prefix: String, id: String)? {
        let (prefix, bare) = id.hasPrefix(fleetPrefix) ? (fleetPrefix, String(id.dropFirst(fleetPrefix.count))) : ("", id)
        return OutboxDelivery.fileName(forID: bare) == nil ? nil : (prefix, bare)
    }
}
