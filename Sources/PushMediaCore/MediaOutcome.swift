import PushSystem
/// What happened to a media URL.
package enum MediaStatus: String, Sendable {
    case stored, failed, skipped
}

/// Why a media download failed, with the stable `code` the record and metrics use.
///
/// `Sendable`: a plain value.
package struct MediaFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// Stable codes, one per kind of failure.
    package enum Code: String, Sendable, CaseIterable {
        case timeout, tooLarge = "too_large", ssrfRefused = "ssrf_refused", httpStatus = "http_status"
        case unsupportedType = "unsupported_type", connectFailed = "connect_failed", dnsFailed = "dns_failed"
        case tooManyRedirects = "too_many_redirects", insecureScheme = "insecure_scheme", invalidURL = "invalid_url"
        case cancelled, io, tls, network
        /// A `MediaOptions` value is unusable (e.g. a malformed `AllowNetworks=` entry).
        case config
    }

    package var code: Code
    /// The libcurl result, when curl reported the failure.
    package var curlCode: Int32?
    /// The final HTTP status, when a response arrived.
    package var httpStatus: Int?
    /// What happened and what to do, for people.
    package var message: String
    /// Worth another attempt (connect errors, timeouts, 5xx, 429 with `Retry-After`).
    package var isTransient: Bool

    package init(_ code: Code, _ message: String, transient: Bool = false, curlCode: Int32? = nil, httpStatus: Int? = nil) {
        self.code = code
        self.message = message
        self.isTransient = transient
        self.curlCode = curlCode
        self.httpStatus = httpStatus
    }

    /// Short and without dynamic data, for metrics labels and journald fields.
    package var shortDescription: String { code.rawValue }

    package var description: String { "\(code.rawValue): \(message)" }
}

/// Thumbnail written next to a stored image.
///
/// `Sendable`: a plain value.
package struct MediaThumbnail: Sendable, Equatable {
    package var path: String
    package var width: Int
    package var height: Int
    package var bytes: Int64

    package init(path: String, width: Int, height: Int, bytes: Int64) {
        self.path = path
        self.width = width
        self.height = height
        self.bytes = bytes
    }
}

/// The media part of a journal record. Every fetch ends in one, whatever happened.
///
/// `Sendable`: a plain value.
package struct MediaOutcome: Sendable {
    package var url: String
    package var status: MediaStatus
    package var path: String?
    package var sha256: String?
    /// Sniffed from the bytes, not the `Content-Type` header.
    package var contentType: String?
    package var bytes: Int64?
    /// Transfer attempts made for this outcome (0 when it was reused).
    package var attempts: Int
    package var durationMillis: Int64
    package var error: MediaFailure?
    package var thumbnail: MediaThumbnail?
    /// For images: whether the decoder could read it (`false` for a refused decompression bomb
    /// or a truncated file, which are still stored). `nil` when not attempted.
    package var decodable: Bool?
    /// Why a stored image has no thumbnail.
    package var thumbnailError: String?
    /// True when an earlier or concurrent download of the same URL supplied this outcome.
    package var reused: Bool = false

    package init(url: String, status: MediaStatus, attempts: Int = 0, durationMillis: Int64 = 0, error: MediaFailure? = nil) {
        self.url = url
        self.status = status
        self.attempts = attempts
        self.durationMillis = durationMillis
        self.error = error
    }

    /// Why the daemon did not fetch (`skipped` outcomes only), e.g. `media_disabled`.
    package var skipReason: String?

    /// An outcome for media the daemon decided not to fetch (media disabled, http not allowed).
    package static func skipped(url: String, reason: String) -> MediaOutcome {
        var outcome = MediaOutcome(url: url, status: .skipped)
        outcome.skipReason = reason
        return outcome
    }

    /// Cancelled by shutdown: the payload should be kept and processed again at next start.
    package var wasCancelled: Bool { error?.code == .cancelled }

    /// The record as a JSON object; absent values are left out.
    package var jsonValue: JSONValue {
        var fields: JSONObject = ["url": .string(url), "status": .string(status.rawValue)]
        if let path { fields["path"] = .string(path) }
        if let sha256 { fields["sha256"] = .string(sha256) }
        if let contentType { fields["contentType"] = .string(contentType) }
        if let bytes { fields["bytes"] = .integer(bytes) }
        fields["attempts"] = .integer(attempts)
        fields["durationMs"] = .integer(durationMillis)
        if let error {
            var object: JSONObject = ["code": .string(error.code.rawValue), "message": .string(error.message)]
            if let curlCode = error.curlCode { object["curlCode"] = .integer(curlCode) }
            if let httpStatus = error.httpStatus { object["httpStatus"] = .integer(httpStatus) }
            fields["error"] = .object(object)
        }
        if let thumbnail {
            fields["thumbnail"] = .object([
                "path": .string(thumbnail.path), "width": .integer(thumbnail.width),
                "height": .integer(thumbnail.height), "bytes": .integer(thumbnail.bytes),
            ])
        }
        if let decodable { fields["decodable"] = .bool(decodable) }
        if let thumbnailError { fields["thumbnailError"] = .string(thumbnailError) }
        if let skipReason { fields["reason"] = .string(skipReason) }
        if reused { fields["reused"] = .bool(true) }
        return .object(fields)
    }

    /// The record as one compact JSON object: `url, status, path, sha256, contentType, bytes,
    /// attempts, durationMs, error{code,message,curlCode,httpStatus}, thumbnail{path,width,height,bytes},
    /// decodable, thumbnailError, reason, reused`, nulls omitted.
    package func encodeJSON() -> String {
        jsonValue.serializedString()
    }
}

/// The SFMC rich-notification fallback (docs/vendor-rules.md, "Salesforce Marketing Cloud"),
/// the one place the rule lives. SFMC's sample service extension puts a non-empty `_mediaAlt`
/// in the body whenever the push ends up without an attachment: `_mediaUrl` missing or empty,
/// a URL it cannot use, a failed or non-2xx download, a timeout, or a file that cannot be made
/// into an attachment. So here: unless the media was attached, or its fetch was cancelled by a
/// stop (the payload is kept and fetched again), the body becomes the alt text and the
/// original body is kept.
package enum MediaFallback {
    /// The new body and the body it replaces, or `nil` when the body stays as it is.
    /// `attached`: a stored file a device could show (see ``MediaOutcome/attachable``).
    package static func apply(attached: Bool, cancelled: Bool, body: String?, mediaAlt: String?) -> (body: String, originalBody: String?)? {
        guard !attached, !cancelled, let alt = mediaAlt, !alt.isEmpty else { return nil }
        return (alt, body)
    }

    /// The rule for a fetch outcome.
    package static func apply(outcome: MediaOutcome, body: String?, mediaAlt: String?) -> (body: String, originalBody: String?)? {
        apply(attached: outcome.attachable, cancelled: outcome.wasCancelled, body: body, mediaAlt: mediaAlt)
    }
}

extension MediaOutcome {
    /// Stored, and not known to be undecodable: what a device could attach. An image stored
    /// but unreadable (truncated, corrupt, a refused decompression bomb) is no attachment on
    /// a device either (`UNNotificationAttachment` refuses it), so it does not count.
    package var attachable: Bool { status == .stored && decodable != false }
}

/// Counters for `STATUS=`, metrics and `pushspoolctl media stats`.
///
/// `Sendable`: a plain value (a snapshot).
package struct MediaStats: Sendable, Equatable {
    /// Transfers running now.
    package var inFlight = 0
    /// URLs waiting for a transfer slot or for their retry time.
    package var queued = 0
    package var stored = 0
    package var failedByCode: [String: Int] = [:]
    package var skipped = 0
    /// Outcomes served from a download shared with another payload or from the dedup window.
    package var reused = 0
    package var retries = 0
    package var bytesStored: Int64 = 0
    package var thumbnails = 0
    package var undecodable = 0

    /// All zero (pushspool-fetch's supervisor counts its own).
    package init() {}

    package var failed: Int { failedByCode.values.reduce(0, +) }

    /// Aligned `key: value` lines, failures broken down by code.
    package func renderText() -> String {
        var text = "in flight:    \(inFlight)\nqueued:       \(queued)\nstored:       \(stored)\nfailed:       \(failed)\n"
        for (code, count) in failedByCode.sorted(by: { $0.key < $1.key }) { text += "  \(code): \(count)\n" }
        text += "skipped:      \(skipped)\nreused:       \(reused)\nretries:      \(retries)\nbytes stored: \(bytesStored)\n"
        text += "thumbnails:   \(thumbnails)\nundecodable:  \(undecodable)\n"
        return text
    }

    /// The counters as a JSON object, for `--json` output and status.json.
    package var jsonValue: JSONValue {
        .object([
            "inFlight": .integer(inFlight), "queued": .integer(queued), "stored": .integer(stored),
            "failed": .integer(failed), "failedByCode": .object(JSONObject(failedByCode.mapValues { JSONValue.integer($0) })),
            "skipped": .integer(skipped), "reused": .integer(reused), "retries": .integer(retries),
            "bytesStored": .integer(bytesStored), "thumbnails": .integer(thumbnails), "undecodable": .integer(undecodable),
        ])
    }

    /// ``jsonValue`` as one compact line, keys sorted.
    package func encodeJSON() -> String {
        jsonValue.serializedString()
    }
}
