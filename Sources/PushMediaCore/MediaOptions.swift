/// Limits and knobs for media downloads. The values a `[Media]` setting names have no default
/// here: the configuration's `MediaSettings` holds them (following rule R7 of
/// docs/design/vendor-payloads.md), and `MediaOptions(settings:storeDirectory:)` in
/// PushModuleOptions builds these options from it. That initializer lives above this module
/// because the sandboxed pushspool-fetch links this one and must not link PushConfig (ICU,
/// inih). The rest are not settings and keep their defaults here.
///
/// `Sendable`: a plain value.
package struct MediaOptions: Sendable {
    /// Where stored files go, e.g. `<state>/media`; created if missing.
    package var storeDirectory: String
    /// TCP (and TLS) connect timeout per attempt.
    package var connectTimeout: Duration
    /// Whole-transfer deadline per attempt (connect, redirects and body together).
    package var transferDeadline: Duration
    /// Below this many bytes per second for `lowSpeedTime` seconds the attempt is cut off.
    package var lowSpeedLimitBytesPerSecond: Int
    package var lowSpeedTime: Duration
    /// Largest body accepted, bytes (Apple's attachment limit for images). Bodies are
    /// streamed to disk; a larger one is cut off and its partial file removed.
    package var maxBytes: Int64
    /// `http://` URLs (and redirects to them) are refused unless this is set.
    package var allowHTTP: Bool
    package var maxRedirects: Int
    /// CIDRs exempt from the SSRF guard (`AllowNetworks=`), e.g. `127.0.0.1/32` for tests.
    package var allowNetworks: [String]
    /// Transfers running at once; further requests wait in a queue.
    package var maxConcurrent: Int
    /// Attempts per URL, counting the first.
    package var attempts: Int
    /// Budget for all attempts and backoff of one URL.
    package var payloadDeadline: Duration
    /// First retry delay, seconds; doubles per attempt, with jitter.
    package var retryBaseDelay: Double = 0.5
    /// Longest delay honoured from `Retry-After`, seconds (still bounded by `payloadDeadline`).
    package var maxRetryAfter: Double = 30
    /// A URL fetched within this window is not fetched again; its outcome is reused.
    package var dedupWindow: Duration
    /// Most URLs remembered for the dedup window; past it the oldest half is forgotten.
    package var dedupMaxEntries: Int = 100_000
    /// Types accepted after sniffing; everything else is `unsupported_type`.
    package var allowedTypes: Set<MediaType> = Set(MediaType.allCases)
    /// Thumbnails: longest edge in pixels; 0 turns thumbnails off.
    package var thumbnailMaxEdge: Int
    /// Images whose header declares more pixels than this are not decoded (decompression
    /// bombs); they stay stored and are marked not decodable.
    package var thumbnailMaxPixels: Int
    /// Threads that verify, store and thumbnail finished downloads.
    package var finishThreads: Int = 2
    /// PEM bundle of CAs trusted for https instead of the system store (CURLOPT_CAINFO), for
    /// intranets with a private CA; `nil` uses the system's.
    package var caFile: String?
    /// `User-Agent` sent with requests.
    package var userAgent: String = "pushspool-media/1"

    /// Every value a setting names, given; the others at their defaults. Callers outside the
    /// wire codec use `init(settings:storeDirectory:)` (PushModuleOptions).
    package init(storeDirectory: String, connectTimeout: Duration, transferDeadline: Duration,
                 lowSpeedLimitBytesPerSecond: Int, lowSpeedTime: Duration, maxBytes: Int64, allowHTTP: Bool,
                 maxRedirects: Int, allowNetworks: [String], maxConcurrent: Int, attempts: Int,
                 payloadDeadline: Duration, dedupWindow: Duration, thumbnailMaxEdge: Int, thumbnailMaxPixels: Int,
                 caFile: String?) {
        self.storeDirectory = storeDirectory
        self.connectTimeout = connectTimeout
        self.transferDeadline = transferDeadline
        self.lowSpeedLimitBytesPerSecond = lowSpeedLimitBytesPerSecond
        self.lowSpeedTime = lowSpeedTime
        self.maxBytes = maxBytes
        self.allowHTTP = allowHTTP
        self.maxRedirects = maxRedirects
        self.allowNetworks = allowNetworks
        self.maxConcurrent = maxConcurrent
        self.attempts = attempts
        self.payloadDeadline = payloadDeadline
        self.dedupWindow = dedupWindow
        self.thumbnailMaxEdge = thumbnailMaxEdge
        self.thumbnailMaxPixels = thumbnailMaxPixels
        self.caFile = caFile
    }

    /// What makes these options unusable, or `nil`.
    package var problem: String? {
        if storeDirectory.isEmpty { return "the media store directory is empty" }
        if connectTimeout <= .zero || transferDeadline <= .zero || payloadDeadline <= .zero {
            return "ConnectTimeout=, TransferDeadline= and PayloadDeadline= must be positive"
        }
        if maxBytes <= 0 { return "MaxBytes= must be positive" }
        if maxConcurrent < 1 { return "MaxConcurrent= must be at least 1" }
        if dedupMaxEntries < 2 { return "the dedup table needs room for at least 2 entries" }
        if attempts < 1 { return "Attempts= must be at least 1" }
        if maxRedirects < 0 { return "MaxRedirects= must not be negative" }
        if !(retryBaseDelay >= 0) || !(maxRetryAfter >= 0) || dedupWindow < .zero || lowSpeedTime < .zero || lowSpeedLimitBytesPerSecond < 0 {
            return "delays, windows and low-speed limits must not be negative"
        }
        if thumbnailMaxEdge < 0 || thumbnailMaxPixels < 1 { return "ThumbnailMaxEdge= must not be negative and ThumbnailMaxPixels= must be positive" }
        return nil
    }
}
