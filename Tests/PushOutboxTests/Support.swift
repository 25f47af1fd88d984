@preconcurrency import Glibc
import Foundation
import PushFollow
import PushJournal
import PushOutbox
import PushOutboxStore
import PushSystem
import TestSupport
import PushConfig
import PushModuleOptions

/// A state directory with a real journal written by `JournalWriter`, key files and a
/// loopback receiver standing in for both vendors.
final class OutboxFixture: @unchecked Sendable {
    let dir = TempDir("outbox")
    let server: LoopbackHTTPServer
    static let mindboxKey = "mb-secret-123"
    static let infobipKey = "ib-key-456"
    var state: String { dir.path }

    init() throws {
        server = try LoopbackHTTPServer()
        try writeKey("mindbox.key", Self.mindboxKey)
        try writeKey("infobip.key", Self.infobipKey)
    }

    func writeKey(_ name: String, _ value: String, mode: mode_t = 0o600) throws {
        let path = dir.appending(name)
        try Posix.writeFileAtomically(directory: dir.path, name: name, bytes: Array((value + "\n").utf8), mode: mode)
        chmod(path, mode)
    }

    func options(maxAge: Duration = .seconds(3600), maxAttempts: Int = 10) throws -> OutboxOptions {
        var options = OutboxOptions(stateDirectory: state)
        options.mindboxURL = server.url("")
        options.mindboxEndpointId = "app-ios"
        options.infobipURL = server.url("")
        options.allowHTTP = true
        options.allowNetworks = ["127.0.0.0/8"]
        options.retryBase = .milliseconds(10)
        options.retryCeiling = .milliseconds(40)
        options.maxAge = maxAge
        options.maxAttempts = maxAttempts
        try options.load(mindboxSecretKeyFile: dir.appending("mindbox.key"), infobipAppKeyFile: dir.appending("infobip.key"))
        return options
    }

    /// Appends records (key, body JSON, ingest time) to `<state>/journal` with the real writer.
    func journal(_ records: [(String, JSONValue, Int64)]) async throws {
        let (writer, _) = try JournalWriter.open(directory: state + "/journal", options: JournalOptions(settings: Configuration().journal))
        for (key, body, millis) in records {
            let result = await writer.append(key: key, body: body.serialized(), ingestMillis: millis)
            if case .failed(let error) = result { throw error }
        }
        try writer.close()
    }

    /// Every byte under the state directory, for "the key is nowhere" checks.
    func allStateBytes() -> [String: [UInt8]] {
        var result: [String: [UInt8]] = [:]
        let root = state + "/outbox"
        guard let walker = FileManager.default.enumerator(atPath: root) else { return [:] }
        for case let relative as String in walker {
            let path = root + "/" + relative
            if let bytes = try? Posix.readFile(path) { result[relative] = bytes }
        }
        return result
    }
}

let now = Posix.wallClockMillis()

func mindboxItem(id: String = "mb-1", user: String = "alice") -> JSONValue {
    .object([
        "kind": .string("notification"), "vendor": .string("mindbox"), "platform": .string("ios"), "id": .string(id),
        "user": .string(user), "title": .string("Sale"), "body": .string("Everything half price"),
        "customPayload": .object(["pushName": .string("sale_november"), "pushDate": .string("2026-11-30T10:00:00Z")]),
        "ingestedAt": .string("2026-11-30T10:00:01.000Z"),
    ])
}

func infobipItem(id: String = "ib-msg-1", user: String = "alice") -> JSONValue {
    .object([
        "kind": .string("notification"), "vendor": .string("infobip"), "platform": .string("ios"), "id": .string(id),
        "user": .string(user), "title": .string("Invite"), "body": .string("Join?"), "category": .string("mm_accept_decline"),
        "actions": .array([
            .object(["id": .string("mm_accept"), "title": .string("Accept"),
                     "options": .array([.string("foreground"), .string("authenticationRequired"), .string("moRequired")])]),
            .object(["id": .string("later"), "title": .string("Later"), "options": .array([])]),
        ]),
        "ingestedAt": .string("2026-11-30T10:00:02.000Z"),
    ])
}

/// `record` with the members of `extra` added or replaced.
func merging(_ record: JSONValue, _ extra: JSONObject) -> JSONValue {
    guard case .object(var members) = record else { return record }
    for (key, value) in extra { members[key] = value }
    return .object(members)
}

/// A contract-shaped event record body.
func event(_ type: String, _ eventId: String, user: String? = "alice", device: String? = "dev-1", item: UInt64? = nil,
           action: String? = nil, text: String? = nil) -> JSONValue {
    var object: JSONObject = [
        "kind": .string("event"), "type": .string(type), "eventId": .string(eventId), "at": .string("2026-11-30T12:00:00.000Z"),
        "ingestedAt": .string("2026-11-30T12:00:00.500Z"), "sourceFile": .string("ev.json"), "sha256": .string("00"), "size": .integer(10),
    ]
    if let user { object["user"] = .string(user) }
    if let device { object["device"] = .string(device) }
    if let item { object["item"] = .integer(item) }
    if let action { object["action"] = .string(action) }
    if let text { object["text"] = .string(text) }
    return .object(object)
}

func parse(_ bytes: [UInt8]) -> JSONValue? { try? JSONParser(maxDepth: 64).parse(bytes) }

/// Whether `condition` comes to hold within `seconds` (TestSupport's one bounded wait).
func waitFor(_ seconds: Double, _ condition: () -> Bool) -> Bool {
    eventually(within: seconds, condition)
}

extension OutboxFollower {
    /// On its own runner, as in the daemon; the fixture's journal was written before.
    func running() throws -> FollowerRunner {
        let runner = FollowerRunner(self, commits: CommitFeed(), niceness: 0)
        try runner.start()
        return runner
    }
}
