import PushInbox
import PushJournal
import PushSystem
import TestSupport
import PushConfig
import PushModuleOptions

/// A state directory with a real journal (written by `JournalWriter`) and an index beside it.
final class InboxFixture {
    let temp: TempDir
    let writer: JournalWriter
    var stateDirectory: String { temp.appending("state") }
    var journalDirectory: String { stateDirectory + "/journal" }
    var indexPath: String { InboxIndex.path(stateDirectory: stateDirectory) }
    private var counter = 0
    /// Ingest time of the records written: fixed, so tests choose `now` freely.
    var ingestMillis: Int64 = 1_800_000_000_000

    init(_ label: String = #function) throws {
        temp = TempDir(label)
        try Posix.mkdirs(temp.appending("state/journal"))
        writer = try JournalWriter.open(directory: temp.appending("state/journal"), options: JournalOptions(settings: Configuration().journal)).0
    }

    deinit { try? writer.close() }

    func openIndex() throws -> InboxIndex { try InboxIndex(path: indexPath) }

    /// Appends a body under a fresh key; returns its seq.
    @discardableResult
    func append(_ body: JSONObject, key: String? = nil) async throws -> UInt64 {
        counter += 1
        let result = await writer.append(key: key ?? "k\(counter)", body: JSONValue.object(body).serialized(), ingestMillis: ingestMillis)
        guard case .committed(let seq) = result else { throw FixtureError(message: "append: \(result)") }
        return seq
    }

    func appendRaw(_ bytes: [UInt8]) async throws -> UInt64 {
        counter += 1
        let result = await writer.append(key: "raw\(counter)", body: bytes, ingestMillis: ingestMillis)
        guard case .committed(let seq) = result else { throw FixtureError(message: "append: \(result)") }
        return seq
    }

    /// A notification record as the daemon writes it.
    @discardableResult
    func notification(user: String? = "alice", device: String? = nil, title: String = "t", vendor: String = "mindbox",
                      presentation: String? = nil, expiresAt: String? = nil, category: String? = nil,
                      extra: JSONObject = [:]) async throws -> UInt64 {
        counter += 1
        var body: JSONObject = [
            "vendor": .string(vendor), "platform": .string("ios"), "format": .string("test"), "id": .string("n\(counter)"),
            "title": .string(title), "body": .string("body of \(title)"), "silent": .bool(false), "buttons": .array([]),
            "warnings": .array([]), "ingestedAt": .string(Timestamp.iso8601(millis: ingestMillis)),
        ]
        if let user { body["user"] = .string(user) }
        if let device { body["device"] = .string(device) }
        if let presentation { body["presentation"] = .string(presentation) }
        if let expiresAt { body["expiresAt"] = .string(expiresAt) }
        if let category { body["category"] = .string(category) }
        for (key, value) in extra { body[key] = value }
        return try await append(body)
    }

    /// An event record as the daemon writes it for an accepted envelope.
    @discardableResult
    func event(_ type: String, user: String? = "alice", device: String? = nil, item: JSONValue? = nil,
               enabled: Bool? = nil) async throws -> UInt64 {
        counter += 1
        var body: JSONObject = ["kind": .string("event"), "type": .string(type), "eventId": .string("e\(counter)"),
                                         "at": .string(Timestamp.iso8601(millis: ingestMillis))]
        if let user { body["user"] = .string(user) }
        if let device { body["device"] = .string(device) }
        if let item { body["item"] = item }
        if let enabled { body["enabled"] = .bool(enabled) }
        return try await append(body, key: "event:e\(counter)")
    }
}

struct FixtureError: Error { var message: String }

extension JSONValue {
    static func seq(_ seq: UInt64) -> JSONValue { .integer(seq) }
}
