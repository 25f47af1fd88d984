@preconcurrency import Glibc
internal import CCurl
import PushSystem
import PushMediaCore

/// libcurl's process-wide initialisation, done once (thread-safe through Swift's lazy globals).
enum CurlGlobal {
    static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK
}

/// One URL being fetched: attempts, deadline and the failure that ends it. Lives on the
/// network thread only.
final class Job {
    let url: String
    let startedNanos: UInt64
    let deadlineNanos: UInt64
    var attemptsMade = 0
    var notBeforeNanos: UInt64 = 0
    var lastFailure: MediaFailure?

    init(url: String, startedNanos: UInt64, deadlineNanos: UInt64) {
        self.url = url
        self.startedNanos = startedNanos
        self.deadlineNanos = deadlineNanos
    }
}

/// One attempt: an easy handle, its temp file and what the callbacks learned. Not `Sendable`:
/// created, driven (curl callbacks run inside `curl_multi_perform`) and destroyed on the
/// network thread.
final class Transfer {
    let job: Job
    let easy: UnsafeMutableRawPointer
    let options: MediaOptions
    let policy: AddressPolicy
    let tempPath: String
    var fd: Int32
    let hasher = SHA256()
    var received: Int64 = 0
    var prefix: [UInt8] = []
    var sniffed: MediaType?
    /// Set by a callback that stopped the transfer on purpose; wins over curl's own code.
    var abort: MediaFailure?
    var refusedAddress: String?
    var statusFromHeaders = 0
    var retryAfterSeconds: Double?
    let errorBuffer: UnsafeMutablePointer<CChar>
    private var retained: Unmanaged<Transfer>?

    init(job: Job, options: MediaOptions, policy: AddressPolicy, tempPath: String, fd: Int32) throws(MediaFailure) {
        guard let easy = curl_easy_init() else {
            throw MediaFailure(.io, "curl_easy_init failed (out of memory?)", transient: true)
        }
        self.job = job
        self.easy = easy
        self.options = options
        self.policy = policy
        self.tempPath = tempPath
        self.fd = fd
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    deinit {
        curl_easy_cleanup(easy)
        errorBuffer.deallocate()
        if fd >= 0 { Posix.close(fd) }
    }

    /// Sets every option for this attempt. The context pointer handed to curl holds a +1
    /// reference released by `release()` once the handle is out of the multi handle.
    func configure(timeoutMillis: Int) throws(MediaFailure) {
        let context = Unmanaged.passRetained(self)
        retained = context
        let pointer = context.toOpaque()
        let schemes = options.allowHTTP ? "http,https" : "https"
        var result = CURLE_OK
        func set(_ code: CURLcode) { if result == CURLE_OK { result = code } }
        set(ccurl_setopt_string(easy, CURLOPT_URL, job.url))
        set(ccurl_setopt_long(easy, CURLOPT_NOSIGNAL, 1))
        set(ccurl_setopt_string(easy, CURLOPT_PROTOCOLS_STR, schemes))
        set(ccurl_setopt_string(easy, CURLOPT_REDIR_PROTOCOLS_STR, schemes))
        set(ccurl_setopt_long(easy, CURLOPT_FOLLOWLOCATION, 1))
        set(ccurl_setopt_long(easy, CURLOPT_MAXREDIRS, options.maxRedirects))
        set(ccurl_setopt_long(easy, CURLOPT_CONNECTTIMEOUT_MS, Bounded.millis(options.connectTimeout)))
        set(ccurl_setopt_long(easy, CURLOPT_TIMEOUT_MS, max(1, timeoutMillis)))
        set(ccurl_setopt_long(easy, CURLOPT_LOW_SPEED_LIMIT, options.lowSpeedLimitBytesPerSecond))
        set(ccurl_setopt_long(easy, CURLOPT_LOW_SPEED_TIME, Bounded.wholeSeconds(options.lowSpeedTime)))
        set(ccurl_setopt_off_t(easy, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(options.maxBytes)))
        set(ccurl_setopt_string(easy, CURLOPT_USERAGENT, options.userAgent))
        // Environment proxies would make the SSRF check judge the proxy, not the target.
        set(ccurl_setopt_string(easy, CURLOPT_PROXY, ""))
        if let caFile = options.caFile { set(ccurl_setopt_string(easy, CURLOPT_CAINFO, caFile)) }
        set(ccurl_setopt_pointer(easy, CURLOPT_ERRORBUFFER, errorBuffer))
        set(ccurl_setopt_write_callback(easy, transferWrite))
        set(ccurl_setopt_pointer(easy, CURLOPT_WRITEDATA, pointer))
        set(ccurl_setopt_header_callback(easy, transferHeader))
        set(ccurl_setopt_pointer(easy, CURLOPT_HEADERDATA, pointer))
        set(ccurl_setopt_opensocket_callback(easy, transferOpenSocket))
        set(ccurl_setopt_pointer(easy, CURLOPT_OPENSOCKETDATA, pointer))
        if result != CURLE_OK {
            throw MediaFailure(.io, "curl_easy_setopt failed: \(String(cString: curl_easy_strerror(result)))", curlCode: Int32(result.rawValue))
        }
    }

    /// Drops the reference held for curl's callbacks.
    func release() {
        retained?.release()
        retained = nil
    }

    var responseCode: Int {
        var code = 0
        _ = ccurl_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &code)
        return code
    }

    var curlMessage: String {
        let detail = String(cString: errorBuffer)
        return detail
    }

    /// Turns an HTTP status that is not 2xx into a failure; 5xx and 429-with-Retry-After are
    /// worth retrying, other 4xx are not.
    func statusFailure(_ status: Int) -> MediaFailure? {
        guard !(200..<300).contains(status) else { return nil }
        let transient = status >= 500 || (status == 429 && retryAfterSeconds != nil)
        let advice = transient ? "the server may recover; retried with backoff" : "check the URL in the payload"
        return MediaFailure(.httpStatus, "server answered HTTP \(status); \(advice)", transient: transient, httpStatus: status)
    }

    /// Body bytes arrived: check status, size and type, then hash and write them.
    func write(_ data: UnsafeRawBufferPointer) -> Bool {
        if received == 0, let failure = statusFailure(responseCode) {
            abort = failure
            return false
        }
        // data.count is at most curl's buffer size; `received` is at most maxBytes: no overflow.
        if received + Int64(data.count) > options.maxBytes {
            abort = MediaFailure(.tooLarge, "body is larger than the \(options.maxBytes)-byte limit (MaxBytes=); cut off")
            return false
        }
        if sniffed == nil && prefix.count < MediaType.sniffLength {
            prefix.append(contentsOf: data.prefix(MediaType.sniffLength - prefix.count))
            if prefix.count >= MediaType.sniffLength {
                if let failure = checkType() {
                    abort = failure
                    return false
                }
            }
        }
        hasher.update(data)
        received += Int64(data.count)
        do {
            try Posix.writeAll(fd, data, subject: tempPath)
        } catch {
            abort = MediaFailure(.io, "writing \(tempPath) failed: \(error)", transient: false)
            return false
        }
        return true
    }

    /// Sniffs the buffered prefix; a failure when the type is unknown or not allowed.
    func checkType() -> MediaFailure? {
        guard let type = MediaType.sniff(prefix) else {
            let looksLikeText = prefix.first.map { $0 == UInt8(ascii: "<") || $0 == UInt8(ascii: "{") } ?? false
            let hint = looksLikeText ? " (looks like HTML or text, e.g. an error page)" : ""
            return MediaFailure(.unsupportedType, "content is not a supported image, video or audio type\(hint); the Content-Type header is not trusted")
        }
        guard options.allowedTypes.contains(type) else {
            return MediaFailure(.unsupportedType, "content is \(type.mimeType), which is not in the allowed types")
        }
        sniffed = type
        return nil
    }

    /// A header line arrived (for every response, redirects included).
    func header(_ line: String) {
        if line.hasPrefix("HTTP/") {
            let parts = line.split(separator: " ", maxSplits: 2)
            statusFromHeaders = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            retryAfterSeconds = nil
            return
        }
        let parts = line.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return }
        if parts[0].lowercased() == "retry-after" {
            let value = parts[1].trimmingSpaces
            retryAfterSeconds = Transfer.parseRetryAfter(value, nowEpochSeconds: Double(Posix.wallClockMillis()) / 1000)
        }
    }

    /// The longest `Retry-After` delay this parser returns, seconds (a year). Callers cap it
    /// further (`MaxRetryAfter=`, the payload deadline); this bound only keeps absurd values
    /// finite and well inside every conversion the scheduler makes.
    static let retryAfterCeiling: Double = 365 * 86_400

    /// Delay-seconds or an HTTP-date (RFC 9110 §10.2.3); `nil` when unparseable. The value is
    /// chosen by the server, so every field is range-checked before it meets a fixed-width
    /// type: a date in the year 99999999999 or a delay of 2^63 seconds once trapped here and
    /// killed the daemon at every restart. Out-of-range dates are refused (`nil`, as for any
    /// malformed header); a huge delay saturates at `retryAfterCeiling`.
    static func parseRetryAfter(_ value: String, nowEpochSeconds: Double) -> Double? {
        // The clock is ours, but a Double meets Int64 only when it fits.
        guard nowEpochSeconds.isFinite, abs(nowEpochSeconds) < 9.0e15 else { return nil }
        let ceiling = Int64(min(retryAfterCeiling, 9.0e12) * 1000)
        guard let millis = RetryAfter.delayMillis(value, nowMillis: Int64(nowEpochSeconds * 1000), ceiling: ceiling) else { return nil }
        return Double(millis) / 1000
    }

    /// The open-socket callback: the SSRF check on the address about to be connected to.
    func openSocket(_ address: UnsafePointer<curl_sockaddr>) -> curl_socket_t {
        let family = address.pointee.family
        var raw = [UInt8](repeating: 0, count: 16)
        let length = Int(ccurl_sockaddr_ip(address, &raw))
        guard length > 0 else {
            refusedAddress = "address family \(family) is not IP"
            return CCURL_SOCKET_BAD
        }
        let bytes = Array(raw.prefix(length))
        if let refusal = policy.refusal(for: bytes) {
            refusedAddress = refusal
            return CCURL_SOCKET_BAD
        }
        let fd = socket(family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue), address.pointee.protocol)
        return fd < 0 ? CCURL_SOCKET_BAD : fd
    }
}

private let transferWrite: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { data, size, count, context in
    let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
    let length = size * count
    guard length > 0, let data else { return 0 }
    return transfer.write(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
}

private let transferHeader: @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = { data, size, count, context in
    let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
    let length = size * count
    guard length > 0, let data else { return length }
    let line = String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self)
    transfer.header(line)
    return length
}

private let transferOpenSocket: @convention(c) (UnsafeMutableRawPointer?, curlsocktype, UnsafeMutablePointer<curl_sockaddr>?) -> curl_socket_t = { context, purpose, address in
    let transfer = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
    guard let address else { return CCURL_SOCKET_BAD }
    return transfer.openSocket(address)
}
