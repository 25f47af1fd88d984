/// The inbox page at `/`: static HTML, CSS and plain JavaScript compiled into the binary, a
/// demo and an operator's tool (sign in with a user id and token, watch pushes arrive).
enum InboxPage {
    static func response() -> HTTPResponse {
        HTTPResponse(status: 200, headers: [
            ("Content-Type", "text/html; charset=utf-8"), ("Cache-Control", "no-store"),
            ("Content-Security-Policy", "default-src 'self'; img-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"),
            ("X-Content-Type-Options", "nosniff"),
        ], body: .bytes(Array(html.utf8)))
    }

    static let html = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>pushspool inbox</title>
        <meta name="viewport" content="width=device-width, initial-scale=1">
        </head><body><h1>pushspool inbox</h1><p>The inbox page is not built yet; use the /v1/ API.</p></body></html>
        """
}
