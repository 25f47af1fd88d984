/// One route of pushspool-inbox: a method, a path template and what answers it. The server's
/// routes are one table (``InboxAPI/routes``): the router matches requests against it, the
/// auth-failure event names a refused request by its template, and the OpenAPI test compares
/// it with `docs/openapi.yaml`.
///
/// `Sendable`: immutable; the handler is a `@Sendable` function of the API and the call.
struct Route: Sendable {
    enum Method: String, Sendable, CaseIterable {
        case get = "GET"
        case post = "POST"
        case put = "PUT"
        case delete = "DELETE"
    }

    /// A path component: fixed text, or a `{name}` placeholder that takes any one component.
    enum Segment: Equatable, Sendable {
        case literal(String)
        case parameter(String)
    }

    /// What a handler gets: the request, the authenticated user (empty on the routes outside
    /// `/v1/`, which need none) and the placeholders' values by name.
    struct Call {
        var request: HTTPRequest
        var user: String
        var parameters: [String: String]
        /// The admin token authenticated the request (`/v1/admin/` only).
        var admin = false
    }

    let method: Method
    /// The path's components after the leading `/` (`["v1", "inbox", {item}, "read"]`).
    let segments: [Segment]
    /// The `route` label of `/metrics` (stable: dashboards use it).
    let name: String
    let handler: @Sendable (InboxAPI, Call) -> HTTPResponse

    /// `path`: the template as OpenAPI writes it, `/v1/inbox/{item}/read`.
    init(_ method: Method, _ path: String, _ name: String, _ handler: @escaping @Sendable (InboxAPI, Call) -> HTTPResponse) {
        self.method = method
        segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map { part in
            part.hasPrefix("{") && part.hasSuffix("}") ? .parameter(String(part.dropFirst().dropLast())) : .literal(String(part))
        }
        self.name = name
        self.handler = handler
    }

    /// The template: `/v1/inbox/{item}/read` (`/` for the page).
    var template: String {
        "/" + segments.map { segment in
            switch segment {
            case .literal(let text): text
            case .parameter(let name): "{" + name + "}"
            }
        }.joined(separator: "/")
    }

    /// Whether the route needs a user's token: every route under `/v1/`.
    var authenticated: Bool { segments.first == .literal("v1") }

    /// The placeholders' values when `parts` (a path split at `/`, without the leading empty
    /// component) fits the template, whatever the method; `nil` when it does not.
    func match(_ parts: [String]) -> [String: String]? {
        guard parts.count == segments.count else { return nil }
        var parameters: [String: String] = [:]
        for (segment, part) in zip(segments, parts) {
            switch segment {
            case .literal(let text): guard part == text else { return nil }
            case .parameter(let name): parameters[name] = part
            }
        }
        return parameters
    }

    /// Whether a request with `method` is for this route: HEAD is answered as GET.
    func accepts(_ method: String) -> Bool {
        method == self.method.rawValue || (method == "HEAD" && self.method == .get)
    }
}
