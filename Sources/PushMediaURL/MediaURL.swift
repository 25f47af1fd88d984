internal import CCurl
import PushMediaCore

/// A media URL's scheme and host as libcurl's URL parser reads them: the one parser behind the
/// fetcher's checks and the `MEDIA_HOST=` field of log events (never the path or query, which
/// may carry tokens).
package struct MediaURL: Sendable, Equatable {
    /// Lowercased.
    package var scheme: String
    /// Lowercased, without a trailing dot; an IPv6 literal in brackets.
    package var host: String

    /// Parses `url`, demanding `scheme://host` literally (curl alone is lenient: "https:///x"
    /// becomes host "x").
    package static func parse(_ url: String) -> Result<MediaURL, MediaFailure> {
        let afterScheme = url.split(separator: ":", maxSplits: 1).last.map { $0.hasPrefix("//") && !$0.hasPrefix("///") } ?? false
        guard afterScheme, let handle = curl_url() else {
            return .failure(MediaFailure(.invalidURL, "\"\(url)\" is not an absolute URL; the payload's media URL must be https://host/..."))
        }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK else {
            return .failure(MediaFailure(.invalidURL, "\"\(url)\" is not an absolute URL; the payload's media URL must be https://host/..."))
        }
        func part(_ which: CURLUPart) -> String? {
            var value: UnsafeMutablePointer<CChar>?
            guard curl_url_get(handle, which, &value, 0) == CURLUE_OK, let value else { return nil }
            defer { curl_free(value) }
            return String(cString: value)
        }
        let scheme = part(CURLUPART_SCHEME)?.lowercased() ?? ""
        guard var host = part(CURLUPART_HOST)?.lowercased(), !host.isEmpty else {
            return .failure(MediaFailure(.invalidURL, "\"\(url)\" has no host"))
        }
        if host.hasSuffix(".") { host.removeLast() }
        return .success(MediaURL(scheme: scheme, host: host))
    }

    /// The host for logs; "" when `url` does not parse.
    package static func host(of url: String) -> String {
        if case .success(let parsed) = parse(url) { return parsed.host }
        return ""
    }
}
