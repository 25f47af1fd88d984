import PushSystem

/// What was tolerated in an accepted payload. Raw values are stable.
package enum WarningCode: String, Sendable, CaseIterable {
    /// The payload has no id; one was derived from the SHA-256 of the canonical payload.
    case derivedId = "derived_id"
    /// More buttons than the vendor shows; detail = how many there were.
    case buttonsTruncated = "buttons_truncated"
    /// A button without a non-empty text was dropped; detail = its path.
    case buttonDropped = "button_dropped"
    /// `buttons` was a string that is not a JSON array; no buttons kept.
    case buttonsInvalid = "buttons_invalid"
    /// The category has more than 4 actions; iOS shows the first 4; detail = action count.
    case actionsTruncated = "actions_truncated"
    /// The media URL is `http`; the media fetcher will not download it.
    case mediaInsecureScheme = "media_insecure_scheme"
    /// A URL failed validation and was dropped; detail = its path. For `_mediaUrl`, a
    /// non-empty `_mediaAlt` then becomes the body.
    case invalidURL = "invalid_url"
    /// `_mediaAlt` without `_mediaUrl` (or with an empty one): informational; the alt text
    /// becomes the body, as in SFMC's sample extension.
    case mediaAltWithoutURL = "media_alt_without_url"
    /// An `mm_` category that is not predefined; no actions.
    case reservedCategoryUnknown = "reserved_category_unknown"
    /// A category not in the configured table; no actions.
    case categoryUnknown = "category_unknown"
    /// A member had the wrong JSON type and was ignored; detail = its path.
    case wrongType = "wrong_type"
    /// A member had a value outside its vocabulary and was ignored; detail = its path.
    case invalidValue = "invalid_value"
    /// The envelope's `platform` disagrees with the detected one; detail = envelope value.
    case platformMismatch = "platform_mismatch"
}

/// A warning code plus optional detail (a path or a count). Rendered `code` or `code:detail`.
package struct PayloadWarning: Sendable, Equatable, CustomStringConvertible {
    package var code: WarningCode
    package var detail: String?

    package init(_ code: WarningCode, _ detail: String? = nil) {
        self.code = code
        self.detail = detail
    }

    package var description: String {
        if let detail { return "\(code.rawValue):\(detail)" }
        return code.rawValue
    }
}

/// A refused payload: a stable code plus a message for people.
package struct PayloadRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    package var code: ReasonCode
    package var message: String
    /// The vendor, when detection got that far.
    package var vendor: Vendor?
    package var platform: Platform?
    /// A JSON path (`aps.alert`) or byte offset (`@17`) locating the problem, when known.
    package var path: String?

    package init(_ code: ReasonCode, _ message: String, vendor: Vendor? = nil, platform: Platform? = nil, path: String? = nil) {
        self.code = code
        self.message = message
        self.vendor = vendor
        self.platform = platform
        self.path = path
    }

    package var description: String { "\(code.rawValue): \(message)" }
}

extension PayloadRefusal {
    /// The parser's refusal of the bytes, before any vendor is known.
    package init(_ error: JSONParseError) {
        self.init(error.code, error.message, path: error.path)
    }
}

extension JSONParser {
    /// ``parse(_:)`` for payload bytes, refusing as the normaliser does.
    func parsePayload(_ bytes: [UInt8]) throws(PayloadRefusal) -> JSONValue {
        do { return try parse(bytes) } catch { throw PayloadRefusal(error) }
    }

    func parsePayload(_ text: String) throws(PayloadRefusal) -> JSONValue {
        do { return try parse(text) } catch { throw PayloadRefusal(error) }
    }
}
