@preconcurrency import Glibc
import PushInbox
import PushJournal
import PushMediaCore
import PushNcEvents
import PushPayload
import PushSpool
import PushSystem
import PushErasure

/// The `/v1/` routes (docs/inbox-api.md). Reads the index read-only; every state change is an
/// event envelope dropped into the spool, which pushspoold journals and its index follower
/// applies — or, with an ``EventSink`` (`[Inbox] Source=nats`), an event published to the
/// stream every node applies — so answers describe the item's state *as it will be once applied*.
///
/// `Sendable`: libmicrohttpd's worker threads call ``handle(_:)`` and ``fill(_:)`` at once;
/// each thread reads through an index connection of its own (SQLite WAL readers do not block
/// each other or the writer), kept in ``indexes`` under a lock taken only to find it.
package final class InboxAPI: HTTPHandler, EventFeed, @unchecked Sendable {
    package struct Settings: Sendable {
        package var indexPath: String
        package var mediaDirectory: String
        package var spool: SpoolLayout
        /// `[Inbox] RetentionSec=` at start (`nil` = no limit); ``setRetention(_:)`` replaces it.
        package var retention: Duration?
        /// Where Idempotency-Key bindings are kept across restarts (``IdempotencyStore``);
        /// `nil` = in memory only.
        package var idempotencyDatabase: String?
        /// Where Last-Event-IDs are checked against the journal's end.
        package var journalDirectory: String
        /// Where accepted events and erasure requests go: the one write port. Given `nil`,
        /// the init makes it ``SpoolEventSink`` over ``spool``, for pushspoold to journal.
        package var events: any EventSink
        /// The admin bearer token of `/v1/admin/` (`[Inbox] AdminTokenFile=`); `nil` = none,
        /// every admin request is refused unless ``selfErase`` lets a user erase themselves.
        package var adminToken: [UInt8]?
        /// `[Inbox] SelfErase=`.
        package var selfErase = false
        /// The state directory whose `erase/` holds the erasures' status files.
        package var stateDirectory = ""

        package init(indexPath: String, mediaDirectory: String, spool: SpoolLayout, retention: Duration?,
                     idempotencyDatabase: String? = nil, journalDirectory: String = "", events: (any EventSink)? = nil,
                     adminToken: [UInt8]? = nil, selfErase: Bool = false, stateDirectory: String = "") {
            self.adminToken = adminToken
            self.selfErase = selfErase
            self.stateDirectory = stateDirectory
            self.indexPath = indexPath
            self.journalDirectory = journalDirectory
            self.mediaDirectory = mediaDirectory
            self.spool = spool
            self.retention = retention
            self.idempotencyDatabase = idempotencyDatabase
            self.events = events ?? SpoolEventSink(layout: spool)
        }
    }

    private let settings: Settings
    /// The retention queries apply: ``Settings/retention`` until a reload sets another.
    private let currentRetention: Locked<Duration?>
    private var retention: Duration? { currentRetention.withLock { $0 } }
    private let auth: TokenAuth
    package let hub: EventHub
    package let stats: ServerStats
    /// One read-only index handle per worker thread, keyed by `pthread_self()`; it reopens
    /// when the index file is replaced (``InboxIndexHandle``).
    /// `@unchecked Sendable`: a box is only ever used by the thread whose key it has.
    private final class IndexBox: @unchecked Sendable {
        let handle: InboxIndexHandle
        init(path: String) { handle = InboxIndexHandle(path: path, readOnly: true) }
    }
    private let indexes = Locked([UInt: IndexBox]())
    /// Idempotency keys and the requests they were first used for.
    private let idempotency: IdempotencyBindings
    private static let parser = JSONParser(maxDepth: 16)

    /// Why ``Settings/idempotencyDatabase`` could not be opened (bindings then live in memory
    /// only); `nil` when it was, or none was asked for.
    package let idempotencyStoreError: SQLiteError?

    package init(settings: Settings, auth: TokenAuth, hub: EventHub, stats: ServerStats) {
        var store: IdempotencyStore?
        var storeError: SQLiteError?
        if let path = settings.idempotencyDatabase {
            do { store = try IdempotencyStore(path: path) } catch { storeError = error }
        }
        idempotency = IdempotencyBindings(store: store)
        idempotencyStoreError = storeError
        self.settings = settings
        currentRetention = Locked(settings.retention)
        self.auth = auth
        self.hub = hub
        self.stats = stats
    }

    /// `[Inbox] RetentionSec=` from a reload (`nil` or zero = no limit): requests that start
    /// after this returns list and count with it.
    package func setRetention(_ value: Duration?) {
        currentRetention.withLock { $0 = value == .zero ? nil : value }
    }

    /// `GET /healthz`, for a load balancer: 200 `ready` while the index follows its source;
    /// on a `Source=nats` node 200 `degraded` while NATS is out of reach (the index is served
    /// as it is), 503 `not_ready` while the index is rebuilt from a replaced stream or the
    /// node refused its stream (`index` says which).
    func health() -> HTTPResponse {
        guard let health = stats.node.stream?() else {
            return Self.json(200, .object(["status": .string("ready"), "index": .string("following")]))
        }
        let (code, status): (Int, String) = switch health.state {
        case .following: (200, "ready")
        case .connecting: (200, "degraded")
        case .rebuilding, .refused: (503, "not_ready")
        }
        return Self.json(code, .object(["status": .string(status), "index": .string(health.state.rawValue),
                                        "streamReplacements": .number(String(health.replacements))]))
    }

    // MARK: responses

    static func json(_ status: Int, _ value: JSONValue, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store")] + headers,
                     body: .bytes(value.serialized() + [0x0a]))
    }

    /// An error body: `{"error": code, "message": text}`.
    static func problem(_ status: Int, _ code: String, _ message: String) -> HTTPResponse {
        json(status, .object(["error": .string(code), "message": .string(message)]))
    }

    /// The one 401: identical for a missing header, an unknown user and a wrong token.
    static let unauthorized: HTTPResponse = {
        var response = problem(401, "unauthorized", "a valid bearer token for the user is required")
        response.headers.append(("WWW-Authenticate", "Bearer realm=\"pushspool-inbox\""))
        return response
    }()

    static let notFound = problem(404, "not_found", "no such item or route")

    /// 404 `unknown_action`: the item exists but its push offered no action with that id
    /// (neither one of its category's actions nor a button's id); the message lists those
    /// it offered.
    static func unknownAction(_ item: InboxItem) -> HTTPResponse {
        let offered = item.offeredActionIds
        return problem(404, "unknown_action", offered.isEmpty
            ? "item \(item.seq) offers no actions"
            : "item \(item.seq) offers no such action; its actions are \(offered.joined(separator: ", "))")
    }

    /// 405 for a path the table has with a method it does not take (RFC 9110 15.5.6): `Allow`
    /// lists the methods it takes, HEAD with GET.
    static func methodNotAllowed(_ methods: [Route.Method]) -> HTTPResponse {
        let allowed = methods.flatMap { $0 == .get ? ["GET", "HEAD"] : [$0.rawValue] }.joined(separator: ", ")
        var response = problem(405, "method_not_allowed", "this path takes \(allowed) only")
        response.headers.append(("Allow", allowed))
        return response
    }

    // MARK: routing

    package func handle(_ request: HTTPRequest) -> HTTPResponse {
        let started = Posix.monotonicNanos()
        let (route, response) = route(request)
        stats.record(route: route, status: response.status, nanos: Posix.monotonicNanos() &- started)
        return response
    }

    /// Every route the server answers, in the order they are tried: the one routing table
    /// (``Route``). An unknown path answers 404 like a missing item, a known path with a
    /// method it does not take 405 with `Allow`; under `/v1/` only after authentication, so a
    /// refusal says nothing about routes.
    static let routes: [Route] = [
        Route(.get, "/", "page") { _, _ in InboxPage.response() },
        Route(.get, "/metrics", "metrics") { api, _ in
            HTTPResponse(status: 200, headers: [("Content-Type", "text/plain; version=0.0.4")],
                         body: .bytes(Array(api.stats.prometheus(openStreams: api.hub.openStreams).utf8)))
        },
        Route(.get, "/healthz", "health") { api, _ in api.health() },
        Route(.get, "/v1/inbox", "inbox") { api, call in api.list(.user(call.user), call.request) },
        Route(.get, "/v1/inbox/counts", "counts") { api, call in api.counts(.user(call.user), call.request) },
        Route(.get, "/v1/inbox/stream", "stream") { api, call in api.stream(.user(call.user), call.request) },
        Route(.post, "/v1/inbox/read-all", "read-all") { api, call in api.bulk(.readAll, call.user, call.request) },
        Route(.post, "/v1/inbox/archive-read", "archive-read") { api, call in api.bulk(.archiveRead, call.user, call.request) },
        Route(.post, "/v1/inbox/{item}/seen", "seen") { api, call in api.itemEvent(call, type: .seen) },
        Route(.post, "/v1/inbox/{item}/read", "read") { api, call in api.itemEvent(call, type: .read) },
        Route(.post, "/v1/inbox/{item}/open", "open") { api, call in api.itemEvent(call, type: .open) },
        Route(.post, "/v1/inbox/{item}/archive", "archive") { api, call in api.itemEvent(call, type: .archive) },
        Route(.post, "/v1/inbox/{item}/unread", "unread") { api, call in api.itemEvent(call, type: .unread) },
        Route(.post, "/v1/inbox/{item}/unarchive", "unarchive") { api, call in api.itemEvent(call, type: .unarchive) },
        Route(.post, "/v1/inbox/{item}/pin", "pin") { api, call in api.itemEvent(call, type: .pin) },
        Route(.post, "/v1/inbox/{item}/unpin", "unpin") { api, call in api.itemEvent(call, type: .unpin) },
        Route(.post, "/v1/inbox/{item}/snooze", "snooze") { api, call in api.itemEvent(call, type: .snooze) },
        Route(.post, "/v1/inbox/{item}/unsnooze", "unsnooze") { api, call in api.itemEvent(call, type: .unsnooze) },
        Route(.delete, "/v1/inbox/{item}", "delete") { api, call in api.itemEvent(call, type: .delete) },
        Route(.post, "/v1/inbox/{item}/actions/{action}", "action") { api, call in api.itemEvent(call, type: .action) },
        Route(.post, "/v1/inbox/{item}/actions/{action}/revert", "action-revert") { api, call in api.itemEvent(call, type: .actionRevert) },
        Route(.get, "/v1/inapp", "inapp") { api, call in api.inapp(.user(call.user), call.request) },
        Route(.post, "/v1/inapp/{item}/shown", "inapp-shown") { api, call in api.itemEvent(call, type: .inAppShown) },
        Route(.put, "/v1/inapp/optout", "inapp-optout") { api, call in api.inAppOptOut(call) },
        Route(.get, "/v1/preferences", "preferences") { api, call in api.preferences(.user(call.user)) },
        Route(.put, "/v1/preferences", "set-preferences") { api, call in api.setPreferences(call) },
        Route(.post, "/v1/events/nc-open", "nc-open") { api, call in api.ncOpen(call.user, call.request) },
        Route(.get, "/v1/media/{sha256}", "media") { api, call in api.media(call.parameters["sha256"] ?? "", thumbnail: false, call.request) },
        Route(.get, "/v1/media/{sha256}/thumb", "thumb") { api, call in api.media(call.parameters["sha256"] ?? "", thumbnail: true, call.request) },
        Route(.post, "/v1/admin/users/{user}/erase", "admin-erase-user") { api, call in api.erase(call, scope: .user) },
        Route(.post, "/v1/admin/devices/{device}/erase", "admin-erase-device") { api, call in api.erase(call, scope: .device) },
        Route(.get, "/v1/admin/erasures/{erasureId}", "admin-erasure") { api, call in api.erasureStatus(call) },
    ]

    /// The routes as (method, template) pairs, HEAD left out: what `docs/openapi.yaml` must list.
    package static var routeList: [(method: String, path: String)] {
        routes.map { ($0.method.rawValue, $0.template) }
    }

    private func route(_ request: HTTPRequest) -> (String, HTTPResponse) {
        // The one place the path is decoded: split at `/`, each component once.
        let parts = PathComponent.split(rawPath: request.path)
        var user = ""
        var admin = false
        if parts.count > 1, parts[0] == .text("v1"), parts[1] == .text("admin") {
            // The admin token, or (for what `SelfErase=` allows, decided by the route) a user's.
            switch authenticateAdmin(request) {
            case .success(let identity): (admin, user) = (identity.admin, identity.user)
            case .failure(let refusal):
                stats.authFailure(client: request.clientAddress, method: request.method,
                                  route: Self.routeTemplate(parts), reason: refusal.rawValue)
                return ("unauthorized", refusal.response)
            }
        } else if parts.first == .text("v1") {
            // Every /v1/ route needs the user's token; authenticate before looking at anything
            // else so a refusal says nothing about routes, items or users.
            switch authenticate(request) {
            case .success(let name): user = name
            case .failure(let refusal):
                stats.authFailure(client: request.clientAddress, method: request.method,
                                  route: Self.routeTemplate(parts), reason: refusal.rawValue)
                return ("unauthorized", refusal.response)
            }
        }
        let candidates = Self.mostSpecificRoutes(parts)
        guard !candidates.isEmpty else { return ("other", Self.notFound) }
        for route in candidates where route.accepts(request.method) {
            guard let matched = route.match(parts) else { continue }
            switch Self.parameters(matched) {
            case .success(let parameters):
                return (route.name, route.handler(self, Route.Call(request: request, user: user, parameters: parameters, admin: admin)))
            case .failure(let refusal):
                return (route.name, refusal.response)
            }
        }
        return ("other", Self.methodNotAllowed(candidates.map(\.method)))
    }

    /// The routes for the path `parts` (in table order), whatever the method: of those whose
    /// template fits, the ones with the most fixed components. `/v1/inbox/counts` is the
    /// counts' path, GET only: DELETE there is 405, not the DELETE of an item "counts".
    /// Empty for a path of no route.
    static func mostSpecificRoutes(_ parts: [PathComponent]) -> [Route] {
        func literals(_ route: Route) -> Int { route.segments.filter { if case .literal = $0 { true } else { false } }.count }
        let matching = routes.filter { $0.match(parts) != nil }
        guard let most = matching.map(literals).max() else { return [] }
        return matching.filter { literals($0) == most }
    }

    /// The placeholders' values by name, or a 400 naming the first that is not an id: one
    /// that did not decode (a broken `%` escape, not UTF-8), or holds a control character
    /// (U+0000-U+001F, U+007F: a NUL, a newline must not reach the journal or a terminal).
    static func parameters(_ matched: [(name: String, value: PathComponent)]) -> Result<[String: String], Refusal> {
        var parameters: [String: String] = [:]
        for (name, value) in matched {
            guard case .text(let text) = value else {
                return .failure(Refusal(problem(400, "invalid_path_parameter",
                                                    "the path parameter {\(name)} is not valid percent-encoded UTF-8")))
            }
            if let (scalar, offset) = ControlCharacters.first(in: text) {
                let hex = String(scalar.value, radix: 16, uppercase: true)
                let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
                return .failure(Refusal(problem(400, "invalid_path_parameter",
                                                    "the path parameter {\(name)} holds the control character \(code) at byte \(offset); "
                                                    + "ids may not hold U+0000-U+001F or U+007F")))
            }
            parameters[name] = text
        }
        return .success(parameters)
    }

    /// A request refused before its handler ran: a 400 naming the path parameter, header or
    /// query argument that is not an id (``parameters(_:)``, ``device(_:)``).
    struct Refusal: Error {
        var response: HTTPResponse
        init(_ response: HTTPResponse) { self.response = response }
    }

    /// The user when `Authorization: Bearer <token>` and `X-Pushspool-User: <id>` match (for
    /// EventSource and `<img>`, which cannot send headers: `?user=&token=` on GET). A user id
    /// with a control character is refused as such (400 naming where it came from), whatever
    /// the token: no inbox is named so.
    private func authenticate(_ request: HTTPRequest) -> Result<String, AuthRefusal> {
        var user = request.headers["x-pushspool-user"]
        var token = request.headers["authorization"].flatMap(Self.bearerToken)
        var field = "X-Pushspool-User"
        if request.method == "GET", user == nil, token == nil {
            user = request.query["user"]
            token = request.query["token"]
            field = "the query argument user"
        }
        guard let user, let token, !user.isEmpty else { return .failure(.missingCredentials) }
        if ControlCharacters.first(in: user) != nil { return .failure(.invalidUser(field)) }
        guard user.utf8.count <= PushEvent.maxNameBytes, auth.verify(user: user, token: token) else { return .failure(.invalidToken) }
        return .success(user)
    }

    /// Who calls an admin route: the admin token's holder, or a user by their own token (the
    /// route decides whether a user may). A request with neither is refused (401).
    private func authenticateAdmin(_ request: HTTPRequest) -> Result<(admin: Bool, user: String), AuthRefusal> {
        guard let token = request.headers["authorization"].flatMap(Self.bearerToken), !token.isEmpty else {
            return .failure(.missingCredentials)
        }
        if let expected = settings.adminToken, Self.constantTimeEqual(expected, Array(token.utf8)) { return .success((true, "")) }
        if request.headers["x-pushspool-user"] != nil {
            switch authenticate(request) {
            case .success(let user): return .success((false, user))
            case .failure(.invalidUser(let field)): return .failure(.invalidUser(field))
            case .failure: break
            }
        }
        return .failure(.invalidToken)
    }

    /// Equality in time independent of where the two differ.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard !a.isEmpty, a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<a.count { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    /// The credentials of an `Authorization` value with the `Bearer` scheme, which RFC 9110
    /// (11.1) makes case-insensitive: `bearer`, `BEARER` too. `nil` for another scheme.
    static func bearerToken(_ header: String) -> String? {
        let value = header.trimmingCharacters(in: .whitespaces)
        guard let space = value.firstIndex(where: { $0 == " " || $0 == "\t" }),
              value[..<space].lowercased() == "bearer" else { return nil }
        return String(value[space...]).trimmingCharacters(in: .whitespaces)
    }

    /// Why a request was refused before its route ran: 401, or 400 for a user id no inbox
    /// can have. `rawValue`: the `REASON_CODE` of its journald event (the client is told
    /// neither).
    enum AuthRefusal: Error, Equatable {
        case missingCredentials
        case invalidToken
        /// The user id holds a control character; the associated value names where it came from.
        case invalidUser(String)

        var rawValue: String {
            switch self {
            case .missingCredentials: "missing_credentials"
            case .invalidToken: "invalid_token"
            case .invalidUser: "invalid_user"
            }
        }

        var response: HTTPResponse {
            switch self {
            case .missingCredentials, .invalidToken: InboxAPI.unauthorized
            case .invalidUser(let field):
                InboxAPI.problem(400, "invalid_user", "the user id in \(field) holds a control character (U+0000-U+001F, U+007F), which no user id may")
            }
        }
    }

    /// The template of the route a path is for (`/v1/inbox/{item}/read`), whatever the
    /// method, for the auth-failure event: bounded and free of the client's data (an item id
    /// or a hash could be a guess at someone else's). Unknown paths are "other". `parts`: the
    /// path split at `/`, without the leading empty component.
    static func routeTemplate(_ parts: [PathComponent]) -> String {
        routes.first { $0.match(parts) != nil }?.template ?? "other"
    }

    /// This thread's box (created on its first request).
    private var indexBox: IndexBox {
        let key = UInt(pthread_self())
        return indexes.withLock { boxes in
            if let box = boxes[key] { return box }
            let box = IndexBox(path: settings.indexPath)
            boxes[key] = box
            return box
        }
    }

    /// This thread's index connection, reopened when the file was replaced since its last use.
    private func openIndex() -> InboxIndex? {
        try? indexBox.handle.current()
    }

    private static let unavailable = problem(503, "index_unavailable", "the inbox index is not there yet (is pushspoold running with [Inbox] Enabled=yes?)")

    private func failure(_ error: InboxError) -> HTTPResponse {
        switch error.kind {
        case .invalidCursor: return Self.problem(400, "invalid_cursor", error.description)
        case .invalidLimit: return Self.problem(400, "invalid_limit", error.description)
        case .unknownFeed: return Self.problem(404, "unknown_feed", error.description)
        default:
            // A broken file: reopen on this thread's next request.
            indexBox.handle.close()
            return Self.problem(503, "index_unavailable", error.shortDescription)
        }
    }

    // MARK: reads

    private func list(_ owner: InboxOwner, _ request: HTTPRequest) -> HTTPResponse {
        var limit = 50
        if let text = request.query["limit"] {
            // One form, as for item ids: `+5`, `05` and ` 5` are not the number 5 here.
            guard let value = Int(text), String(value).utf8.elementsEqual(text.utf8), (1...InboxIndex.maxLimit).contains(value) else {
                return Self.problem(400, "invalid_limit", "limit must be a decimal from 1 to \(InboxIndex.maxLimit), without sign or leading zeros")
            }
            limit = value
        }
        var unread = false
        if let text = request.query["unread"] {
            guard let value = Self.boolean(text) else { return Self.problem(400, "invalid_unread", "unread must be true or false") }
            unread = value
        }
        let category = request.query["category"].flatMap { $0.isEmpty ? nil : $0 }
        let feed = request.query["feed"].flatMap { $0.isEmpty ? nil : $0 }
        guard let index = openIndex() else { return Self.unavailable }
        do {
            let page = try index.list(owner, unread: unread, category: category, feed: feed, limit: limit, cursor: request.query["cursor"],
                                      retention: retention)
            let language = Self.language(request)
            var body: JSONObject = ["items": .array(page.items.map { Self.itemJSON($0, language) })]
            body["nextCursor"] = page.nextCursor.map { .string($0) } ?? .null
            return Self.json(200, .object(body), headers: [Self.varyLanguage])
        } catch {
            return failure(error)
        }
    }

    /// A boolean query argument as the document types it: `true` or `false`, nothing else
    /// (an empty `unread=` or `unread=1` is refused rather than guessed).
    static func boolean(_ text: String) -> Bool? {
        switch text {
        case "true": true
        case "false": false
        default: nil
        }
    }

    /// The inbox's counts and, when there are feeds, each feed's (`feeds`); with `?feed=NAME`
    /// that feed's only (404 `unknown_feed` for a feed the index does not have).
    private func counts(_ owner: InboxOwner, _ request: HTTPRequest) -> HTTPResponse {
        guard let index = openIndex() else { return Self.unavailable }
        do {
            if let feed = request.query["feed"], !feed.isEmpty {
                return Self.json(200, Self.countsJSON(try index.count(owner, feed: feed, retention: retention)))
            }
            return Self.json(200, try allCountsJSON(owner, index: index))
        } catch {
            return failure(error)
        }
    }

    /// What `GET /v1/inbox/counts` and a stream's `counts` event carry.
    func allCountsJSON(_ owner: InboxOwner, index: InboxIndex) throws(InboxError) -> JSONValue {
        Self.countsJSON(try index.count(owner, retention: retention),
                        feeds: try index.feedCounts(owner, retention: retention))
    }

    /// `{"unseen":…,"unread":…}`, with `"feeds":{NAME:{"unseen":…,"unread":…}}` when `feeds`
    /// holds any.
    static func countsJSON(_ counts: InboxCounts, feeds: [InboxFeedCounts] = []) -> JSONValue {
        var o: JSONObject = ["unseen": .integer(counts.unseen), "unread": .integer(counts.unread)]
        if !feeds.isEmpty {
            o["feeds"] = .object(JSONObject(feeds.map { ($0.feed, countsJSON($0.counts)) }, uniquingKeysWith: { first, _ in first }))
        }
        return .object(o)
    }

    /// The language of the predefined action titles a request asked for with
    /// `Accept-Language` (English without one).
    static func language(_ request: HTTPRequest) -> TitleLanguage {
        TitleLanguage.negotiate(acceptLanguage: request.headers["accept-language"])
    }

    /// Answers that depend on `Accept-Language` say so to caches.
    static let varyLanguage = ("Vary", "Accept-Language")

    /// An item as served: the index's JSON with the predefined action titles in `language`
    /// and media paths turned into API URLs; with `inApp`, also the buttons of its modal
    /// (`inAppActions`), each with the route a tap on it calls.
    static func itemJSON(_ item: InboxItem, _ language: TitleLanguage, inApp: Bool = false) -> JSONValue {
        guard case .object(var o) = item.localized(language).jsonValue() else { return item.jsonValue() }
        if inApp {
            o["inAppActions"] = .array(item.inAppActions(language).map { action in
                guard case .object(var a) = action.jsonValue() else { return action.jsonValue() }
                a["path"] = .string(inAppPath(action, item: item.seq))
                return .object(a)
            })
        }
        // A stored image is served by its content address; an image pushspool does not hold,
        // or one it cannot decode (whose alt text may have replaced the body), is named by its
        // source URL with the reason, never as `url`.
        let sha = item.mediaPath.flatMap(sha256(inPath:))
        if item.mediaServed, sha == nil, item.mediaSourceUrl == nil {
            // A stored path that is no content address: nothing to serve, nothing to name.
        } else if let media = item.mediaJSON(stored: { media in
            if let sha {
                media["url"] = .string("/v1/media/\(sha)")
                if item.thumbnailPath != nil { media["thumbnailUrl"] = .string("/v1/media/\(sha)/thumb") }
            }
        }) {
            o["media"] = media
        }
        return .object(o)
    }

    /// The content address in a stored media path `…/ab/cdef….ext`.
    static func sha256(inPath path: String) -> String? {
        let parts = path.split(separator: "/")
        guard parts.count >= 2 else { return nil }
        let sha = String(parts[parts.count - 2]) + String(parts[parts.count - 1].prefix { $0 != "." })
        return isSHA256(sha) ? sha : nil
    }

    /// The route a tap on an in-app button calls (POST): Cancel reports the modal shown,
    /// Open opens the item, a category action acts on it. Category action ids are the
    /// configuration's (letters, digits, `_`, `-`, `.`) or the SDK's `mm_` ones: path-safe.
    static func inAppPath(_ action: InAppAction, item: UInt64) -> String {
        switch action.kind {
        case .dismiss: "/v1/inapp/\(item)/shown"
        case .open: "/v1/inbox/\(item)/open"
        case .category: "/v1/inbox/\(item)/actions/\(action.id)"
        }
    }

    static func isSHA256(_ text: String) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    private func inapp(_ owner: InboxOwner, _ request: HTTPRequest) -> HTTPResponse {
        guard let index = openIndex() else { return Self.unavailable }
        do {
            guard let item = try index.inapp(owner, retention: retention) else {
                return Self.json(200, .object(["item": .null]), headers: [Self.varyLanguage])
            }
            return Self.json(200, .object(["item": Self.itemJSON(item, Self.language(request), inApp: true)]), headers: [Self.varyLanguage])
        } catch {
            return failure(error)
        }
    }

    // MARK: writes (events into the spool)

    /// Gives `event` its id and hands it to the event sink; `nil` when done, else the
    /// refusal. The id is the sink's rule (``EventSink/eventID(user:idempotencyKey:fingerprint:)``).
    /// With an `Idempotency-Key`, a key this host saw bound to another request is refused with
    /// 422 before anything is stored (``IdempotencyBindings``); a stream sink also refuses a
    /// key first used for another request on another node (``EventSinkFailure/keyReused``).
    private func submit(_ event: inout PushEvent, user: String, _ request: HTTPRequest) -> HTTPResponse? {
        let sink = settings.events
        guard let key = request.headers["idempotency-key"] else {
            event.eventId = sink.eventID(user: user, idempotencyKey: nil, fingerprint: "")
            return store(event)
        }
        guard !key.isEmpty, key.utf8.count <= 255 else { return Self.problem(400, "invalid_idempotency_key", "Idempotency-Key must be 1-255 bytes") }
        let fingerprint = IdempotencyBindings.fingerprint(event)
        let scope = IdempotencyBindings.scope(user: user, key: key)
        let outcome = idempotency.bind(scope, fingerprint)
        if outcome == .conflict {
            return Self.problem(422, "idempotency_key_reused", "this Idempotency-Key was used for a different request; use a new key for a new request")
        }
        event.eventId = sink.eventID(user: user, idempotencyKey: key, fingerprint: fingerprint)
        let refusal = store(event, fingerprint: fingerprint)
        if refusal != nil, outcome == .bound { idempotency.unbind(scope, fingerprint) }
        return refusal
    }

    private func store(_ event: PushEvent, fingerprint: String? = nil) -> HTTPResponse? {
        switch Normalizer.classify(NcEventWriter.envelopeBytes(event)) {
        case .event(let checked) where checked == event: break
        case .refused(let refusal):
            // Its message names the member (`event.muted`, `device`…).
            return Self.problem(400, "invalid_event", "pushspoold would refuse the event: " + refusal.message)
        default: return Self.problem(400, "invalid_event", "pushspoold would not read the event back as it was sent")
        }
        guard let failure = settings.events.accept(event, fingerprint: fingerprint) else { return nil }
        return Self.problem(failure)
    }

    /// The answer to a sink's refusal, with its `Retry-After`.
    private static func problem(_ failure: EventSinkFailure) -> HTTPResponse {
        var response = problem(failure.status, failure.code, failure.message)
        if let seconds = failure.retryAfterSeconds { response.headers.append(("Retry-After", String(seconds))) }
        return response
    }

    // MARK: admin (erasure requests, docs/design/erasure.md)

    /// `POST /v1/admin/users/{user}/erase` and `…/devices/{device}/erase`: hands the erasure
    /// request to the event sink (the spool for pushspoold, or the fleet stream, which every
    /// node and ingest host applies), and answers 202 with its id and where to poll.
    /// The admin token may erase anyone; a user's token only that user, and only with
    /// `[Inbox] SelfErase=yes` (else 403).
    private func erase(_ call: Route.Call, scope: ErasureRequest.Scope) -> HTTPResponse {
        // Decoded once by the router (`%40` is `@`, `%2F` a `/`, `%25` a `%`); never again here.
        let id = call.parameters[scope.rawValue] ?? ""
        if !call.admin {
            // Ids are bytes: NFC and NFD `josé` are two users, though Swift's `==` equates them.
            guard settings.selfErase, scope == .user, IdBytes.equal(id, call.user) else {
                return Self.problem(403, "forbidden", settings.selfErase
                                    ? "a user's token may erase only that user; other erasures need the admin token"
                                    : "erasure needs the admin token ([Inbox] SelfErase=no)")
            }
        }
        let request = ErasureRequest(scope: scope, id: id, erasureId: ErasureRequest.newErasureId())
        guard case .erasure(let checked) = Normalizer.classify(request.envelopeBytes()), checked == request else {
            return Self.problem(400, "invalid_subject", "the path parameter {\(scope.rawValue)} must be 1-\(PushEvent.maxNameBytes) bytes without control characters")
        }
        switch settings.events.acceptErasure(request, stateDirectory: settings.stateDirectory) {
        case .failure(let failure):
            return Self.problem(failure)
        case .success(let receipt):
            let status = "/v1/admin/erasures/" + request.erasureId
            var answer: JSONObject = ["erasureId": .string(request.erasureId), "status": .string(status), "complete": .bool(false)]
            if let scope = receipt.statusScope { answer["statusScope"] = .string(scope) }
            return Self.json(202, .object(answer), headers: [("Location", status)])
        }
    }

    /// `GET /v1/admin/erasures/{erasureId}`: the erasure's steps done and whether it is
    /// complete (its status file names only the keyed hash). 404 until pushspoold has taken
    /// the request, and for an unknown id. The id is 128 random bits: a user (with
    /// `SelfErase=yes`) may poll the one their request returned.
    private func erasureStatus(_ call: Route.Call) -> HTTPResponse {
        guard call.admin || settings.selfErase else {
            return Self.problem(403, "forbidden", "erasure status needs the admin token ([Inbox] SelfErase=no)")
        }
        let id = call.parameters["erasureId"] ?? ""
        guard ErasureRequest.isValidErasureId(id), let status = ErasureRequests(stateDirectory: settings.stateDirectory).status(id) else {
            return Self.problem(404, "not_found", settings.events.erasureNotYetRecorded)
        }
        return Self.json(200, status.jsonValue)
    }

    /// `X-Pushspool-Device`: the device an event came from, when the app names it (Mindbox's
    /// `deviceUUID`, Infobip's `pushRegistrationId`); `nil` without the header. One that is
    /// there but empty, over 255 bytes or holding a control character (pushspoold would refuse
    /// such a device) is refused with a 400 naming the header.
    static func device(_ request: HTTPRequest) -> Result<String?, Refusal> {
        guard let device = request.headers["x-pushspool-device"] else { return .success(nil) }
        guard !device.isEmpty, device.utf8.count <= PushEvent.maxNameBytes, ControlCharacters.first(in: device) == nil else {
            return .failure(Refusal(problem(400, "invalid_device", "X-Pushspool-Device must be 1-\(PushEvent.maxNameBytes) bytes without control characters "
                                            + "(leave the header out when the device is not known)")))
        }
        return .success(device)
    }


    /// A change to the caller's `{item}`: seen, read, open, archive, an action, in-app shown,
    /// unread, unarchive, pin, unpin, delete. Answers 202 with the item as it will be once
    /// the event is applied (for a delete, ``deletedJSON(_:)``).
    private func itemEvent(_ call: Route.Call, type: EventType) -> HTTPResponse {
        let (user, request) = (call.user, call.request)
        guard let seq = Self.itemSeq(call.parameters["item"] ?? "") else { return Self.notFound }
        let device: String?
        switch Self.device(request) {
        case .success(let named): device = named
        case .failure(let refusal): return refusal.response
        }
        guard let index = openIndex() else { return Self.unavailable }
        let current: InboxItem
        let state: InboxItemState
        do {
            // Another user's item answers exactly like a missing one, and so does a deleted one
            // (except to a retry of the DELETE that deleted it, below).
            guard let found = try index.item(.user(user), seq: seq, deleted: type == .delete),
                  let flags = try index.itemState(.user(user), seq: seq) else { return Self.notFound }
            current = found
            state = flags
        } catch {
            return failure(error)
        }
        let now = Timestamp.now()
        var event: PushEvent
        switch type {
        case .open: event = .ncOpen(item: seq, user: user, device: device, at: now)
        case .inAppShown: event = .ncInAppShown(item: seq, user: user, device: device, at: now)
        // An action names its device too: Infobip's seen report and MO carry it as the push
        // registration id.
        case .action: event = PushEvent(type: type, eventId: "", user: user, device: device, item: seq, at: now)
        case .seen, .read, .archive, .actionRevert, .unread, .unarchive, .delete, .pin, .unpin, .snooze, .unsnooze,
             // Not about one item: no route sends these here.
             .readAll, .archiveRead, .opened, .inAppOptOut, .preferences:
            event = PushEvent(type: type, eventId: "", user: user, item: seq, at: now)
        }
        if type == .action || type == .actionRevert {
            guard let action = call.parameters["action"], !action.isEmpty, action.utf8.count <= PushEvent.maxNameBytes else { return Self.notFound }
            // Only an action the push offered can have been chosen (a revert of any other
            // changes nothing, so it stays accepted).
            if type == .action, !current.offersAction(action) { return Self.unknownAction(current) }
            event.action = action
            if type == .action, !request.body.isEmpty {
                guard let body = try? Self.parser.parse(request.body), case .object(let members) = body else {
                    return Self.problem(400, "invalid_body", "the body must be a JSON object like {\"text\": \"…\"}")
                }
                if let text = members["text"] {
                    guard let string = text.stringValue, string.utf8.count <= PushEvent.maxTextBytes else {
                        return Self.problem(400, "invalid_text", "text must be a string of at most \(PushEvent.maxTextBytes) bytes")
                    }
                    event.text = string
                }
            }
        }
        if type == .snooze {
            // `{"until": "<ISO-8601>"}`, after now and at most 366 days ahead: a time already
            // past is refused (422) rather than taken as "unsnooze", which has its own route.
            guard let body = try? Self.parser.parse(request.body), case .object(let members) = body,
                  case .string(let until)? = members["until"] else {
                return Self.problem(400, "invalid_body", "the body must be a JSON object like {\"until\": \"2026-12-01T09:00:00Z\"}")
            }
            if let problem = PushEvent.snoozeProblem(until: until, now: Posix.wallClockMillis()) {
                return Self.problem(422, "invalid_until", problem)
            }
            event.until = until
        }
        if current.deleted, !isRetry(event, user: user, request) { return Self.notFound }
        if let refusal = submit(&event, user: user, request) { return refusal }
        let id = event.eventId
        // As the index will apply it: the same rules on the same state, at about the event's time.
        let change = InboxItemEvent(type, action: event.action, text: event.text, until: event.until.flatMap(ISO8601.millis),
                                    at: Posix.wallClockMillis())
        let after = change.map { state.applying($0) } ?? state
        if after.deleted { return Self.json(202, .object(["eventId": .string(id), "item": Self.deletedJSON(seq)])) }
        let next = Self.itemJSON(current.with(after), Self.language(request))
        // Hidden until then: the answer says when it comes back.
        if type == .snooze {
            return Self.json(202, .object(["eventId": .string(id), "item": next, "snoozedUntil": .string(event.until ?? "")]))
        }
        return Self.json(202, .object(["eventId": .string(id), "item": next]))
    }

    /// The seq an `{item}` path parameter names, in its one text form: the decimal digits of
    /// a number from 1 to `Int64.max` (the index's range) without leading zeros. `nil` (404,
    /// like a missing item) for anything else: `0020`, `+20`, ` 20`, `20.0`, `0`, a number
    /// past the range. Never traps.
    static func itemSeq(_ text: String) -> UInt64? {
        guard let seq = UInt64(text), (1...UInt64(Int64.max)).contains(seq), String(seq).utf8.elementsEqual(text.utf8) else { return nil }
        return seq
    }

    /// What stands for a deleted item (the answer to DELETE, a stream's `state` event):
    /// `{"item": "<seq>", "deleted": true}`; its content is not served any more.
    static func deletedJSON(_ seq: UInt64, replacedBy: UInt64? = nil) -> JSONValue {
        var o: JSONObject = ["item": .string(String(seq)), "deleted": .bool(true)]
        if let replacedBy { o["replacedBy"] = .string(String(replacedBy)) }
        return .object(o)
    }

    /// Whether `request` repeats, under the same Idempotency-Key, a request already accepted
    /// for `event`: such a retry of a DELETE answers as the first did, even once the item is
    /// gone (the event id is the same, so the journal keeps one).
    private func isRetry(_ event: PushEvent, user: String, _ request: HTTPRequest) -> Bool {
        guard let key = request.headers["idempotency-key"], !key.isEmpty, key.utf8.count <= 255 else { return false }
        let scope = IdempotencyBindings.scope(user: user, key: key)
        let fingerprint = IdempotencyBindings.fingerprint(event)
        switch idempotency.bind(scope, fingerprint) {
        case .retry: return true
        case .bound:
            // Not bound before: this key was not used for that DELETE; leave it free.
            idempotency.unbind(scope, fingerprint)
            return false
        case .conflict: return false
        }
    }

    /// `POST /v1/inbox/read-all` and `/archive-read`, optionally `?feed=NAME` (only that
    /// feed's items; 404 `unknown_feed` for a feed the index does not have). Read-all answers
    /// the counts to expect (of the feed, with one).
    private func bulk(_ type: EventType, _ user: String, _ request: HTTPRequest) -> HTTPResponse {
        var event = PushEvent(type: type, eventId: "", user: user, at: Timestamp.now())
        if let feed = request.query["feed"], !feed.isEmpty {
            guard let index = openIndex() else { return Self.unavailable }
            do {
                try index.checkFeed(feed)
            } catch {
                return failure(error)
            }
            event.feed = feed
        }
        if let refusal = submit(&event, user: user, request) { return refusal }
        var body: JSONObject = ["eventId": .string(event.eventId)]
        if type == .readAll { body["counts"] = Self.countsJSON(InboxCounts(unseen: 0, unread: 0)) }
        if let feed = event.feed { body["feed"] = .string(feed) }
        return Self.json(202, .object(body))
    }

    private func ncOpen(_ user: String, _ request: HTTPRequest) -> HTTPResponse {
        let device: String?
        switch Self.device(request) {
        case .success(let named): device = named
        case .failure(let refusal): return refusal.response
        }
        var event = PushEvent(type: .opened, eventId: "", user: user, device: device, at: Timestamp.now())
        // The app's platform picks the Mindbox endpoint when there is one per platform.
        if let name = request.headers["x-pushspool-platform"] {
            guard let platform = EventPlatform(rawValue: name) else {
                return Self.problem(400, "invalid_platform", "X-Pushspool-Platform must be ios or android (the app's platform), or absent")
            }
            event.platform = platform
        }
        if let refusal = submit(&event, user: user, request) { return refusal }
        return Self.json(202, .object(["eventId": .string(event.eventId)]))
    }

    /// `PUT /v1/inapp/optout` with `{"enabled": true}` (the opt-out is on: no in-app messages)
    /// or `{"enabled": false}` (off: they are presented again), as `pushspoolctl nc
    /// inapp-optout on|off`.
    private func inAppOptOut(_ call: Route.Call) -> HTTPResponse {
        guard let body = try? Self.parser.parse(call.request.body), case .object(let members) = body,
              case .bool(let optedOut)? = members["enabled"] else {
            return Self.problem(400, "invalid_body", "the body must be a JSON object like {\"enabled\": true} (true opts out of in-app messages)")
        }
        let device: String?
        switch Self.device(call.request) {
        case .success(let named): device = named
        case .failure(let refusal): return refusal.response
        }
        var event = PushEvent.ncInAppOptOut(optedOut: optedOut, user: call.user, device: device, at: Timestamp.now())
        if let refusal = submit(&event, user: call.user, call.request) { return refusal }
        return Self.json(202, .object(["eventId": .string(event.eventId), "enabled": .bool(optedOut)]))
    }

    // MARK: preferences

    /// `{"muted": {CATEGORY: true, …}}`: the categories the user muted, as the index has applied them.
    private func preferences(_ owner: InboxOwner) -> HTTPResponse {
        guard let index = openIndex() else { return Self.unavailable }
        do {
            return Self.json(200, Self.preferencesJSON(try index.mutedCategories(owner)))
        } catch {
            return failure(error)
        }
    }

    static func preferencesJSON(_ muted: [String]) -> JSONValue {
        .object(["muted": .object(JSONObject(muted.map { ($0, JSONValue.bool(true)) }, uniquingKeysWith: { first, _ in first }))])
    }

    /// `PUT /v1/preferences` with `{"muted": {"promo": true, "news": false}}`: mutes and
    /// unmutes those categories (others keep their setting), as `pushspoolctl nc mute|unmute`.
    /// Answers 202 with the muted categories as they will be once applied.
    private func setPreferences(_ call: Route.Call) -> HTTPResponse {
        let refusal = Self.problem(400, "invalid_body", "the body must be a JSON object like {\"muted\": {\"promo\": true, \"news\": false}} "
                                       + "naming 1 to \(PushEvent.maxPreferences) categories")
        guard let body = try? Self.parser.parse(call.request.body), case .object(let members) = body,
              members.keys.allSatisfy({ $0 == "muted" }), case .object(let muted)? = members["muted"],
              (1...PushEvent.maxPreferences).contains(muted.count) else { return refusal }
        var flags: [String: Bool] = [:]
        for (category, value) in muted {
            guard case .bool(let flag) = value else { return refusal }
            guard !category.isEmpty, category.utf8.count <= PushEvent.maxNameBytes, ControlCharacters.first(in: category) == nil else {
                return Self.problem(400, "invalid_body", "muted: a category name is 1-\(PushEvent.maxNameBytes) bytes without control characters")
            }
            flags[category] = flag
        }
        guard let index = openIndex() else { return Self.unavailable }
        let current: [String]
        do { current = try index.mutedCategories(.user(call.user)) } catch { return failure(error) }
        var event = PushEvent(type: .preferences, eventId: "", user: call.user, at: Timestamp.now())
        event.muted = flags
        if let refusal = submit(&event, user: call.user, call.request) { return refusal }
        let next = Set(current).union(flags.filter(\.value).keys).subtracting(flags.filter { !$0.value }.keys).sorted()
        guard case .object(var answer) = Self.preferencesJSON(next) else { return refusal }
        answer["eventId"] = .string(event.eventId)
        return Self.json(202, .object(answer))
    }

    // MARK: live stream

    private func stream(_ owner: InboxOwner, _ request: HTTPRequest) -> HTTPResponse {
        guard let index = openIndex() else { return Self.unavailable }
        // The header, else `?lastEventId=`; empty is as without. Each given is digits (not
        // `UInt64`'s "+5"), as the document's pattern says.
        let header = request.headers["last-event-id"] ?? "", query = request.query["lastEventId"] ?? ""
        for (name, text) in [("Last-Event-ID", header), ("lastEventId", query)] where !text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            return Self.problem(400, "invalid_last_event_id", "\(name) must be an event id this stream sent (digits)")
        }
        let resumeText = header.isEmpty ? query : header
        guard let applied = try? index.appliedSeq() else { return Self.unavailable }
        var start = applied
        var resync = false
        if !resumeText.isEmpty {
            // Digits past UInt64 are no id of this journal: as one past its end, below.
            let seq = UInt64(resumeText) ?? .max
            start = seq
            // Past what the index applied: maybe it lags, maybe the id is from another journal
            // (a wiped state directory). Past the journal's end it can only be the latter.
            if seq > applied {
                let last = hub.journalLastSeq() ?? 0
                if seq > max(last, applied) {
                    resync = true
                    start = applied
                }
            }
        }
        let stream = EventStream(owner: owner, lastSeq: start, feed: self, hub: hub, language: Self.language(request))
        // Timed transitions from now on; what happened before is in the counts and lists.
        stream.lastTimed = (try? index.lastTimedChange()) ?? 0
        if resync { Self.appendResync(stream) }
        return HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"),
                                                   ("X-Accel-Buffering", "no")], body: .stream(stream))
    }

    /// `event: refresh` telling the client to refetch: the changes since its position are
    /// not known any more (or never were).
    static func appendResync(_ stream: EventStream) {
        stream.append(id: stream.lastSeq, event: "refresh", data: JSONValue.object(["type": .string("resync")]).serializedString())
    }

    package func fill(_ stream: EventStream) {
        guard let index = openIndex(), let applied = try? index.appliedSeq(), let coveredAfter = try? index.changesCoveredAfter() else { return }
        // One source: the index's items and its `changes` log, read by seq up to what it
        // applied (both written in the same transactions, so nothing is skipped).
        if stream.lastSeq < coveredAfter {
            // The log does not reach back to this position (pruned, or the index was started
            // after it): refetch rather than miss. One refresh covers the gap.
            stream.lastSeq = applied
            Self.appendResync(stream)
        } else if applied > stream.lastSeq {
            fill(stream, index: index, upTo: applied)
        }
        fillTimed(stream, index: index)
        // Counts change with new items and with every state change (seen, read, archive…).
        if let counts = try? allCountsJSON(stream.owner, index: index), counts != stream.lastCounts {
            stream.lastCounts = counts
            stream.append(id: stream.lastSeq, event: "counts", data: counts.serializedString())
        }
    }

    /// Appends the timed transitions applied since the stream's last one, at the moment the
    /// writer applied them: a snooze's end as the item's `state` (back, unread), an expiry as
    /// `refresh` `{"type":"nc.expired","item":"<seq>"}` (the item left the list and counts).
    private func fillTimed(_ stream: EventStream, index: InboxIndex) {
        guard let last = try? index.lastTimedChange() else { return }
        // A rebuilt index numbers its log afresh: go on from where it stands, not from an id
        // it may never reach.
        if stream.lastTimed > last { stream.lastTimed = last }
        guard last > stream.lastTimed, let changes = try? index.timedChanges(stream.owner, afterId: stream.lastTimed) else { return }
        stream.lastTimed = changes.last?.id ?? last
        for change in changes {
            if change.type == "nc.unsnoozed", let item = try? index.item(stream.owner, seq: change.item) {
                stream.append(id: stream.lastSeq, event: "state", data: Self.itemJSON(item, stream.language).serializedString())
            } else {
                stream.append(id: stream.lastSeq, event: "refresh", data: JSONValue.object([
                    "type": .string(change.type), "item": .string(String(change.item)),
                ]).serializedString())
            }
        }
        // Nothing of this owner's among a full page: skip to the newest (another page comes).
        if changes.isEmpty { stream.lastTimed = last }
    }

    /// Appends the items and state changes with `stream.lastSeq < seq <= known`, in journal
    /// order (a page of items at most), and advances the stream.
    private func fill(_ stream: EventStream, index: InboxIndex, upTo known: UInt64) {
        let limit = 200
        guard let items = try? index.items(stream.owner, afterSeq: stream.lastSeq, upToSeq: known, limit: limit) else { return }
        // A full page: stop at its last item this round (the reader asks again at once).
        let upTo = items.count == limit ? items[limit - 1].seq : known
        var events: [(seq: UInt64, event: String, data: String)] = items.map {
            ($0.seq, "item", Self.itemJSON($0, stream.language).serializedString())
        }
        // A new MODAL, listed or not: the app asks GET /v1/inapp what to present now.
        for seq in (try? index.modals(stream.owner, afterSeq: stream.lastSeq, upToSeq: upTo, limit: limit)) ?? [] {
            events.append((seq, "inapp", JSONValue.object(["item": .string(String(seq))]).serializedString()))
        }
        // A push that replaced an earlier item (its collapse id): the old one goes, at the
        // new item's seq, after it (a client shows the new content, then drops the old).
        for (seq, replaced) in (try? index.replacements(stream.owner, afterSeq: stream.lastSeq, upToSeq: upTo, limit: limit)) ?? [] {
            events.append((seq, "state", Self.deletedJSON(replaced, replacedBy: seq).serializedString()))
        }
        if case .user(let user) = stream.owner {
            for change in (try? index.changes(user: user, after: stream.lastSeq, upTo: upTo)) ?? [] {
                if let seq = change.item {
                    // The item's state now (after this and maybe later changes): idempotent for a client.
                    // An in-app-only MODAL's too (`"listed": false` says it is not in the list).
                    guard let item = try? index.item(stream.owner, seq: seq, deleted: true) else { continue }
                    let data = item.deleted ? Self.deletedJSON(seq, replacedBy: item.replacedBy) : Self.itemJSON(item, stream.language)
                    events.append((change.seq, "state", data.serializedString()))
                } else {
                    events.append((change.seq, "refresh", JSONValue.object(["type": .string(change.type)]).serializedString()))
                }
            }
        }
        // At one seq (a listed MODAL) the item comes before its `inapp`.
        events.sort { $0.seq != $1.seq ? $0.seq < $1.seq : ($0.event == "item" && $1.event != "item") }
        for event in events { stream.append(id: event.seq, event: event.event, data: event.data) }
        stream.lastSeq = upTo
    }

    // MARK: media

    /// Whether `If-None-Match` (RFC 9110 13.1.2: a list of entity tags or `*`, compared
    /// weakly, so `W/"x"` matches `"x"`) matches `etag`.
    static func noneMatchHits(_ header: String?, etag: String) -> Bool {
        guard let header else { return false }
        for candidate in header.split(separator: ",") {
            var tag = candidate.trimmingCharacters(in: .whitespaces)
            if tag == "*" { return true }
            if tag.hasPrefix("W/") { tag.removeFirst(2) }
            if tag == etag { return true }
        }
        return false
    }

    private func media(_ sha: String, thumbnail: Bool, _ request: HTTPRequest) -> HTTPResponse {
        guard Self.isSHA256(sha) else { return Self.notFound }
        let directory = settings.mediaDirectory + "/" + sha.prefix(2)
        let rest = String(sha.dropFirst(2))
        guard let names = try? MediaStore.listDirectory(directory) else { return Self.notFound }
        let candidates = names.filter { name in
            guard name.hasPrefix(rest + ".") else { return false }
            return name.dropFirst(rest.count + 1).hasPrefix("thumb") == thumbnail
        }.sorted()
        guard let name = candidates.first else { return Self.notFound }
        // Content-addressed, so a matching tag means the client's copy is this file: answer
        // 304 without reading it.
        let etag = "\"\(sha)\(thumbnail ? "-thumb" : "")\""
        let caching = [("ETag", etag), ("Cache-Control", "private, max-age=31536000, immutable")]
        if Self.noneMatchHits(request.headers["if-none-match"], etag: etag) {
            return HTTPResponse(status: 304, headers: caching)
        }
        guard let bytes = try? Posix.readFile(directory + "/" + name, limit: 64 << 20) else { return Self.notFound }
        let ext = name.split(separator: ".").last.map(String.init) ?? ""
        let type = ["jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp",
                    "heic": "image/heic", "avif": "image/avif", "bmp": "image/bmp"][ext] ?? "application/octet-stream"
        return HTTPResponse(status: 200, headers: [("Content-Type", type)] + caching + [("X-Content-Type-Options", "nosniff")],
                            body: .bytes(bytes))
    }
}
