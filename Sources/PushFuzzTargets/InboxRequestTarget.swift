import Foundation
import PushInbox
import PushInboxServer
import PushSpool
import PushSystem

/// The inbox API behind one fixture: an empty index, a spool and a fixed secret in a
/// temporary directory made on first use. The fuzz binary runs one input at a time; the lock
/// only keeps `swift test`'s parallel replays apart.
final class InboxFixture: Sendable {
    static let shared = InboxFixture()

    let root: String
    let api: InboxAPI
    let auth = TokenAuth(secret: Array("pushspool fuzz secret, 32 bytes!".utf8))
    let layout: SpoolLayout
    let lock = Locked<Int>(0)

    private init() {
        root = FileManager.default.temporaryDirectory.path + "/pushspool-fuzz-inbox-\(getpid())"
        try? FileManager.default.removeItem(atPath: root)
        // The state directory's layout, so the API serves media from where the daemon keeps it.
        let state = StateLayout(root: root)
        try? FileManager.default.createDirectory(atPath: state.media, withIntermediateDirectories: true)
        layout = SpoolLayout(root: root + "/spool")
        try? layout.create()
        try? FileManager.default.createDirectory(atPath: state.inbox, withIntermediateDirectories: true)
        let indexPath = state.inboxIndex
        _ = try? InboxIndex(path: indexPath)
        let settings = InboxAPI.Settings(indexPath: indexPath, mediaDirectory: state.media, spool: layout, retention: .seconds(86_400))
        api = InboxAPI(settings: settings, auth: auth, hub: EventHub(indexPath: indexPath), stats: ServerStats())
    }

    /// Runs one request; every 256 requests empties the spool the event routes write into.
    func handle(_ request: HTTPRequest) -> HTTPResponse {
        lock.withLock { count in
            count += 1
            if count % 256 == 0, let names = try? FileManager.default.contentsOfDirectory(atPath: layout.incoming) {
                for name in names { try? FileManager.default.removeItem(atPath: layout.incoming + "/" + name) }
            }
            return api.handle(request)
        }
    }
}

extension FuzzTargets {
    /// The inbox API's request handling (routing, path, query, cursor and limit parsing, the
    /// token check, event bodies): the input is split at NUL bytes into method, path, query
    /// (`a=b&c=d`), header lines (`Name: value`) and body. An odd first byte adds a valid token
    /// for the request's user so the fuzzer gets past authentication. Every answer is a
    /// well-formed status with a JSON body (the streaming route is left out: it holds a
    /// connection open).
    static func inboxRequest(_ bytes: [UInt8]) throws(FuzzFailure) {
        let fields = bytes.dropFirst().split(separator: 0, maxSplits: 4, omittingEmptySubsequences: false)
            .map { String(decoding: $0, as: UTF8.self) }
        func field(_ i: Int) -> String { i < fields.count ? fields[i] : "" }
        let methods = ["GET", "POST", "HEAD", "PUT", "DELETE"]
        let method = methods.first { $0 == field(0) } ?? methods[Int(bytes.first ?? 0) / 2 % methods.count]
        var path = field(1)
        if path.hasSuffix("/stream") { path += "-not" }
        var query: [String: String] = [:]
        for pair in field(2).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            if query[name] == nil { query[name] = parts.count > 1 ? String(parts[1]) : "" }
        }
        var headers: [String: String] = [:]
        for line in field(3).split(separator: "\n") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            if headers[name] == nil { headers[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces) }
        }
        if let first = bytes.first, first & 1 == 1 {
            let user = headers["x-pushspool-user"] ?? query["user"] ?? "fuzz-user"
            headers["x-pushspool-user"] = user
            headers["authorization"] = "Bearer " + InboxFixture.shared.auth.token(user: user)
        }
        let body = fields.count > 4 ? Array(fields[4].utf8) : []
        let request = HTTPRequest(method: method, path: path, query: query, headers: headers, body: body, clientAddress: "127.0.0.1")
        let response = InboxFixture.shared.handle(request)
        guard (200...599).contains(response.status) else {
            throw FuzzFailure(target: "inbox-request", message: "status \(response.status)")
        }
        if case .bytes(let content) = response.body, !content.isEmpty,
           response.headers.contains(where: { $0.0 == "Content-Type" && $0.1.contains("json") }) {
            guard (try? JSONParser(maxDepth: JSONParser.depthCeiling).parse(content)) != nil else {
                throw FuzzFailure(target: "inbox-request", message: "a JSON answer that is not JSON: \(String(decoding: content.prefix(200), as: UTF8.self))")
            }
        }
    }
}
