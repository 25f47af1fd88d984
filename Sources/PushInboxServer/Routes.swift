import PushSystem

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
    /// `/v1/`, which need none) and the placeholders' values by name, percent-decoded once by
    /// the router: valid UTF-8 without control characters (U+0000-U+001F, U+007F).
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

    /// The placeholders' values, in template order, when `parts` (a path split at `/`,
    /// without the leading empty component, each decoded once) fits the template, whatever
    /// the method; `nil` when it does not. A literal matches only text of the same bytes; a
    /// placeholder takes any component, one that did not decode too (the router refuses it,
    /// naming the placeholder).
    func match(_ parts: [PathComponent]) -> [(name: String, value: PathComponent)]? {
        guard parts.count == segments.count else { return nil }
        var parameters: [(name: String, value: PathComponent)] = []
        for (segment, part) in zip(segments, parts) {
            switch segment {
            case .literal(let text):
                guard case .text(let decoded) = part, decoded.utf8.elementsEqual(text.utf8) else { return nil }
            case .parameter(let name): parameters.append((name, part))
            }
        }
        return parameters
    }

    /// Whether a request with `method` is for this route: HEAD is answered as GET.
    func accepts(_ method: String) -> Bool {
        method == self.method.rawValue || (method == "HEAD" && self.method == .get)
    }
}

/// One component of a request path (between two `/`), percent-decoded once: the raw path
/// comes from libmicrohttpd undecoded (the shim's no-op `MHD_OPTION_UNESCAPE_CALLBACK`), the
/// router splits it at `/` and decodes each component here, so `%2F` is a `/` inside an id
/// and `%25` a `%`. `Sendable` value.
enum PathComponent: Equatable, Sendable {
    case text(String)
    /// A broken `%` escape, or bytes that are not UTF-8 once decoded.
    case undecodable

    /// The components of `rawPath` (`/v1/inbox/42/read` → `v1`, `inbox`, `42`, `read`),
    /// without the empty one before the leading `/`.
    static func split(rawPath: String) -> [PathComponent] {
        rawPath.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map { raw in
            PercentDecoding.decode(raw).map(PathComponent.text) ?? .undecodable
        }
    }
}

/// `%XX` decoding (RFC 3986 2.1), the one decoder of the server: path components in the
/// router, query arguments in ``HTTPServer``, each decoded once. Stateless.
enum PercentDecoding {
    /// `text` with its `%XX` escapes decoded; `nil` for a broken escape (`%`, `%4`, `%ZZ`) or
    /// bytes that are not UTF-8. `+` stays `+`: query arguments reach here with libmicrohttpd
    /// having made their `+` spaces already, and in a path it is a plus.
    static func decode(_ text: some StringProtocol) -> String? {
        guard text.utf8.contains(UInt8(ascii: "%")) else { return String(text) }
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        var bytes = text.utf8.makeIterator()
        while let byte = bytes.next() {
            guard byte == UInt8(ascii: "%") else { out.append(byte); continue }
            guard let high = bytes.next().flatMap(hexValue), let low = bytes.next().flatMap(hexValue) else { return nil }
            out.append(high << 4 | low)
        }
        return UTF8Text.string(out)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

/// Decoded components written as literals (`["v1", "inbox"]`), as the tests do.
extension PathComponent: ExpressibleByStringLiteral {
    init(stringLiteral value: String) { self = .text(value) }
}
