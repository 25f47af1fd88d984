/// Why a payload was refused. The raw values are stable: they name quarantine reason files,
/// journald fields and `validate --json` output. Documented in docs/reason-codes.md.
package enum ReasonCode: String, Sendable, CaseIterable {
    /// Not JSON (syntax error, invalid UTF-8, lone surrogate escape, empty input).
    case invalidJSON = "invalid_json"
    /// An object repeats a member name; parsers disagree on which value wins.
    case duplicateKeys = "duplicate_keys"
    /// Arrays/objects nest deeper than `NormalizerOptions.maxDepth`.
    case tooDeep = "too_deep"
    /// The vendor payload (compact) or the whole input exceeds its size bound.
    case payloadTooLarge = "payload_too_large"
    /// The top level is not a JSON object.
    case notAnObject = "not_an_object"
    /// A `pushspool` envelope with a wrong version or wrongly typed members.
    case invalidEnvelope = "invalid_envelope"
    /// No supported vendor, foreign vendor or generic APNs/FCM shape matched.
    case unrecognized = "unrecognized"
    /// Markers of two or more vendors are present.
    case ambiguousVendor = "ambiguous_vendor"
    /// A known vendor pushspool does not support (OneSignal, Airship, Braze, Expo).
    case unsupportedVendor = "unsupported_vendor"
    /// A known JSON shape that is not a push (Infobip MO message, Mindbox operation body).
    case notAPush = "not_a_push"
    /// The vendor requires an id and the payload has none.
    case missingId = "missing_id"
    /// No body, and the push is neither silent nor localised by `loc-key`.
    case missingBody = "missing_body"
    /// A member the vendor SDK decodes strictly has the wrong JSON type.
    case typeMismatch = "type_mismatch"
}

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
    /// A URL failed validation and was dropped; detail = its path.
    case invalidURL = "invalid_url"
    /// `_mediaAlt` without `_mediaUrl`: stored, never applied.
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
