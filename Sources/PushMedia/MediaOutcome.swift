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

    /// The record as ordered key/value pairs; absent values are left out.
    package var jsonFields: [(String, MediaJSON)] {
        var fields: [(String, MediaJSON)] = [("url", .string(url)), ("status", .string(status.rawValue))]
        if let path { fields.append(("path", .string(path))) }
        if let sha256 { fields.append(("sha256", .string(sha256))) }
        if let contentType { fields.append(("contentType", .string(contentType))) }
        if let bytes { fields.append(("bytes", .int(bytes))) }
        fields.append(("attempts", .int(Int64(attempts))))
        fields.append(("durationMs", .int(durationMillis)))
        if let error {
            var object: [(String, MediaJSON)] = [("code", .string(error.code.rawValue)), ("message", .string(error.message))]
            if let curlCode = error.curlCode { object.append(("curlCode", .int(Int64(curlCode)))) }
            if let httpStatus = error.httpStatus { object.append(("httpStatus", .int(Int64(httpStatus)))) }
            fields.append(("error", .object(object)))
        }
        if let thumbnail {
            fields.append(("thumbnail", .object([
                ("path", .string(thumbnail.path)), ("width", .int(Int64(thumbnail.width))),
                ("height", .int(Int64(thumbnail.height))), ("bytes", .int(thumbnail.bytes)),
            ])))
        }
        if let decodable { fields.append(("decodable", .bool(decodable))) }
        if let thumbnailError { fields.append(("thumbnailError", .string(thumbnailError))) }
        if let skipReason { fields.append(("reason", .string(skipReason))) }
        if reused { fields.append(("reused", .bool(true))) }
        return fields
    }

    /// The record as one compact JSON object: `url, status, path, sha256, contentType, bytes,
    /// attempts, durationMs, error{code,message,curlCode,httpStatus}, thumbnail{path,width,height,bytes},
    /// decodable, thumbnailError, reason, reused`, nulls omitted.
    package func encodeJSON() -> String {
        MediaJSON.object(jsonFields).encoded()
    }
}

/// The few JSON shapes a media record needs, so PushMedia does not depend on PushPayload.
///
/// `Sendable`: a plain value.
package enum MediaJSON: Sendable {
    case string(String)
    case int(Int64)
    case bool(Bool)
    case object([(String, MediaJSON)])

    package func encoded() -> String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch self {
        case .string(let text): MediaJSON.writeString(text, to: &out)
        case .int(let value): out += String(value)
        case .bool(let value): out += value ? "true" : "false"
        case .object(let fields):
            out += "{"
            for (index, (key, value)) in fields.enumerated() {
                if index > 0 { out += "," }
                MediaJSON.writeString(key, to: &out)
                out += ":"
                value.write(to: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ text: String, to out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

/// The SFMC rich-notification fallback (vendors.md R8), the one place the rule lives: when
/// the payload names media that ended up not attached (failed or skipped — never cancelled,
/// whose payload is kept and fetched again) and carries a non-empty `_mediaAlt`, the body
/// becomes that text and the original body is kept.
package enum MediaFallback {
    /// The new body and the body it replaces, or `nil` when the body stays as it is.
    /// `mediaURL` is the payload's media URL; `nil` or empty means it named none.
    package static func apply(attached: Bool, cancelled: Bool, mediaURL: String?, body: String?,
                              mediaAlt: String?) -> (body: String, originalBody: String?)? {
        guard !attached, !cancelled, let mediaURL, !mediaURL.isEmpty, let alt = mediaAlt, !alt.isEmpty else { return nil }
        return (alt, body)
    }

    /// The rule for a fetch outcome (its URL is the payload's media URL).
    package static func apply(outcome: MediaOutcome, body: String?, mediaAlt: String?) -> (body: String, originalBody: String?)? {
        apply(attached: outcome.status == .stored, cancelled: outcome.wasCancelled, mediaURL: outcome.url, body: body,
              mediaAlt: mediaAlt)
    }
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

    package var failed: Int { failedByCode.values.reduce(0, +) }

    /// Aligned `key: value` lines, failures broken down by code.
    package func renderText() -> String {
        var text = "in flight:    \(inFlight)\nqueued:       \(queued)\nstored:       \(stored)\nfailed:       \(failed)\n"
        for (code, count) in failedByCode.sorted(by: { $0.key < $1.key }) { text += "  \(code): \(count)\n" }
        text += "skipped:      \(skipped)\nreused:       \(reused)\nretries:      \(retries)\nbytes stored: \(bytesStored)\n"
        text += "thumbnails:   \(thumbnails)\nundecodable:  \(undecodable)\n"
        return text
    }

    /// One compact JSON object (`failedByCode` keys sorted), for `--json` output and STATUS.
    package func encodeJSON() -> String {
        MediaJSON.object([
            ("inFlight", .int(Int64(inFlight))), ("queued", .int(Int64(queued))), ("stored", .int(Int64(stored))),
            ("failed", .int(Int64(failed))),
            ("failedByCode", .object(failedByCode.sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value))) })),
            ("skipped", .int(Int64(skipped))), ("reused", .int(Int64(reused))), ("retries", .int(Int64(retries))),
            ("bytesStored", .int(bytesStored)), ("thumbnails", .int(Int64(thumbnails))), ("undecodable", .int(Int64(undecodable))),
        ]).encoded()
    }
}
