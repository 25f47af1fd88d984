@preconcurrency import Glibc
internal import CCurl
import PushOutboxStore
import PushSystem

/// libcurl's process-wide initialisation, done once (thread-safe through Swift's lazy globals).
enum OutboxCurlGlobal {
    static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
}

/// What one POST came back with.
package struct PostResult: Sendable {
    /// The HTTP status; 0 when no response arrived (connect, TLS, timeout, refused address).
    package var status: Int
    /// The first `HTTPPoster.captureLimit` bytes of the response body: more than is kept, so
    /// that a key straddling the kept length is still whole when it is redacted.
    package var body: [UInt8]
    /// curl's error text when the transfer failed.
    package var error: String?
    /// The final response's `Retry-After` value as sent (at most 64 bytes), if any.
    package var retryAfter: String? = nil
    /// The transfer was cut short because the follower is stopping: no answer, not an attempt.
    package var aborted = false

    package init(status: Int, body: [UInt8], error: String? = nil, retryAfter: String? = nil, aborted: Bool = false) {
        self.status = status
        self.body = body
        self.error = error
        self.retryAfter = retryAfter
        self.aborted = aborted
    }
}

/// Blocking POSTs with one easy handle per request, run on the outbox thread only. No
/// redirects are followed: a vendor API answering 3xx to a POST is a configuration error,
/// and following it would carry the Authorization header somewhere else.
///
/// A stop aborts a POST in flight (`shouldStop`, asked from curl's progress callback, which
/// curl calls at least about once a second even while nothing moves), so stopping never waits
/// for a hanging vendor's `RequestTimeoutSec=`.
///
/// Not `Sendable`: callbacks write into the per-request context.
package final class HTTPPoster {
    let connectTimeoutMillis: Int
    let requestTimeoutMillis: Int
    let allowHTTP: Bool
    let check: AddressCheck
    let shouldStop: @Sendable () -> Bool
    /// How much of a response body is kept in a delivery (`lastResponse`).
    package static let bodyLimit = 1024
    /// How much is read to redact from: the kept KiB plus the longest encoding of the longest
    /// key a key file may hold (4096 bytes as `\uXXXX` escapes: 24 KiB).
    static let captureLimit = 32 * 1024

    init(connectTimeoutMillis: Int, requestTimeoutMillis: Int, allowHTTP: Bool, check: AddressCheck,
         shouldStop: @escaping @Sendable () -> Bool = { false }) {
        self.connectTimeoutMillis = connectTimeoutMillis
        self.requestTimeoutMillis = requestTimeoutMillis
        self.allowHTTP = allowHTTP
        self.check = check
        self.shouldStop = shouldStop
        _ = OutboxCurlGlobal.initialized
    }

    /// Per-request state the C callbacks reach through their userdata pointer.
    final class Context {
        let check: AddressCheck
        let shouldStop: @Sendable () -> Bool
        var body: [UInt8] = []
        var refused: String?
        var retryAfter: String?
        var aborted = false
        init(check: AddressCheck, shouldStop: @escaping @Sendable () -> Bool) {
            self.check = check
            self.shouldStop = shouldStop
        }

        /// A header line of some response (curl passes each, the status lines included).
        func header(_ line: String) {
            if line.hasPrefix("HTTP/") {
                // A new response (after a 100 Continue, say): only the final one's headers count.
                retryAfter = nil
                return
            }
            let parts = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, parts[0].lowercased() == "retry-after" else { return }
            retryAfter = String(parts[1].trimmingSpaces.prefix(64))
        }
    }

    /// A poster with `options`' timeouts, schemes and address check.
    package convenience init(options: OutboxOptions, shouldStop: @escaping @Sendable () -> Bool) {
        self.init(connectTimeoutMillis: Int(options.connectTimeout.clampedMilliseconds),
                  requestTimeoutMillis: Int(options.requestTimeout.clampedMilliseconds),
                  allowHTTP: options.allowHTTP, check: AddressCheck(allowing: options.allowNetworks), shouldStop: shouldStop)
    }

    /// POSTs `body` to `url` and waits for the answer (at most the request timeout).
    package func post(url: String, headers: [String], body: [UInt8]) -> PostResult {
        if shouldStop() { return PostResult(status: 0, body: [], error: "stopping", aborted: true) }
        guard let easy = curl_easy_init() else { return PostResult(status: 0, body: [], error: "curl_easy_init failed (out of memory?)") }
        defer { curl_easy_cleanup(easy) }
        let context = Context(check: check, shouldStop: shouldStop)
        let unmanaged = Unmanaged.passRetained(context)
        defer { unmanaged.release() }
        let pointer = unmanaged.toOpaque()
        var list: UnsafeMutablePointer<curl_slist>? = nil
        // "Expect:" turns off curl's 100-continue wait for larger bodies.
        for header in headers + ["Expect:"] { list = curl_slist_append(list, header) }
        defer { curl_slist_free_all(list) }
        let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        defer { errorBuffer.deallocate() }
        let schemes = allowHTTP ? "http,https" : "https"
        var result = CURLE_OK
        func set(_ code: CURLcode) { if result == CURLE_OK { result = code } }
        set(ccurl_setopt_string(easy, CURLOPT_URL, url))
        set(ccurl_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        set(ccurl_setopt_string(easy, CURLOPT_PROTOCOLS_STR, schemes))
        set(ccurl_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 0))
        set(ccurl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, max(1, connectTimeoutMillis)))
        set(ccurl_setopt_long(easy, CURLOPT_TIMEOUT_MS, max(1, requestTimeoutMillis)))
        set(ccurl_setopt_string(easy, CURLOPT_USERAGENT, "pushspool-outbox"))
        // Environment proxies would make the address check judge the proxy, not the target.
        set(ccurl_setopt_string(easy, CURLOPT_PROXY, ""))
        set(ccurl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer))
        set(ccurl_post_headers(easy, list))
        // A trailing NUL keeps the pointer valid for an empty body; the length excludes it.
        let terminated = body + [0]
        set(terminated.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { ccurl_post_body(easy, $0.baseAddress!, curl_off_t(body.count)) }
        })
        set(ccurl_setopt_write_callback(easy, posterWrite))
        set(ccurl_setopt_pointer(easy, CURLOPT_WRITEDATA, pointer))
        set(ccurl_setopt_opensocket_callback(easy, posterOpenSocket))
        set(ccurl_setopt_pointer(easy, CURLOPT_OPENSOCKETDATA, pointer))
        set(ccurl_setopt_header_callback(easy, posterHeader))
        set(ccurl_setopt_pointer(easy, CURLOPT_HEADERDATA, pointer))
        set(ccurl_setopt_xferinfo_callback(easy, posterProgress))
        set(ccurl_setopt_pointer(easy, CURLOPT_XFERINFODATA, pointer))
        set(ccurl_setopt_long(easy, CURLOPT_NOPROGRESS, 0))
        if result != CURLE_OK {
            return PostResult(status: 0, body: [], error: "curl_easy_setopt failed: \(String(cString: curl_easy_strerror(result)))")
        }
        let code = curl_easy_perform(easy)
        var status = 0
        _ = ccurl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        if context.aborted {
            return PostResult(status: 0, body: [], error: "stopping", aborted: true)
        }
        if code != CURLE_OK {
            let detail = context.refused ?? String(cString: errorBuffer)
            let text = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
            return PostResult(status: status, body: context.body, error: text, retryAfter: context.retryAfter)
        }
        return PostResult(status: status, body: context.body, error: nil, retryAfter: context.retryAfter)
    }
}

private let posterWrite: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { data, size, count, userdata in
    let context = Unmanaged<HTTPPoster.Context>.fromOpaque(userdata!).takeUnretainedValue()
    let length = size * count
    guard length > 0, let data else { return length }
    let room = HTTPPoster.captureLimit - context.body.count
    if room > 0 {
        context.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: min(room, length)))
    }
    return length
}

private let posterHeader: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { data, size, count, userdata in
    let context = Unmanaged<HTTPPoster.Context>.fromOpaque(userdata!).takeUnretainedValue()
    let length = size * count
    guard length > 0, let data else { return length }
    context.header(String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self))
    return length
}

/// Nonzero makes curl end the transfer with CURLE_ABORTED_BY_CALLBACK.
private let posterProgress: @convention(c) (UnsafeMutableRawPointer?, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> Int32 = { userdata, _, _, _, _ in
    let context = Unmanaged<HTTPPoster.Context>.fromOpaque(userdata!).takeUnretainedValue()
    guard context.shouldStop() else { return 0 }
    context.aborted = true
    return 1
}

private let posterOpenSocket: @convention(c) (UnsafeMutableRawPointer?, curlsocktype, UnsafeMutablePointer<curl_sockaddr>?) -> curl_socket_t = { userdata, _, address in
    let context = Unmanaged<HTTPPoster.Context>.fromOpaque(userdata!).takeUnretainedValue()
    guard let address else { return CCURL_SOCKET_BAD }
    let family = address.pointee.family
    var raw = [UInt8](repeating: 0, count: 16)
    let length = Int(ccurl_sockaddr_ip(address, &raw))
    guard length > 0 else {
        context.refused = "address family \(family) is not IP"
        return CCURL_SOCKET_BAD
    }
    let bytes = Array(raw.prefix(length))
    if let refusal = context.check.refusal(for: bytes) {
        context.refused = refusal
        return CCURL_SOCKET_BAD
    }
    let fd = socket(family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue), address.pointee.protocol)
    return fd < 0 ? CCURL_SOCKET_BAD : fd
}
