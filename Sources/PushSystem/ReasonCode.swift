/// Why a spool file was refused: the one list of refusal codes, whichever stage found the
/// problem. The raw values are stable: they name quarantine reason files (`code`), journald
/// `REASON_CODE=` fields and `validate --json` output. Every case is documented in
/// docs/reason-codes.md (a test checks).
///
/// It lives in PushSystem, the module every stage depends on, so the spool reader, the
/// normaliser and the journal stage draw from one enum instead of each keeping strings.
package enum ReasonCode: String, Sendable, CaseIterable {
    // MARK: read stage (the spool)

    /// The entry is a symbolic link (or became one while being opened); never followed.
    case symlink = "symlink"
    /// A FIFO, socket, device or directory.
    case notRegularFile = "not_regular_file"
    /// Over `[Spool] MaxFileSize` (or grew past it while being read).
    case fileTooLarge = "file_too_large"
    /// Cannot be opened or read, or was replaced while being opened.
    case unreadable = "unreadable"
    /// The daemon died while processing this file alone, after it had already been in flight
    /// at an earlier crash (the crash guard's poison-pill rule); quarantined before it is read
    /// again so it cannot stop the daemon a third time.
    case crashedDaemon = "crashed_daemon"

    // MARK: normalise stage (PushPayload)

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
    /// The dedup key (vendor, id and envelope user) is longer than the journal can hold.
    case idTooLong = "id_too_long"
    /// No body, and the push is neither silent nor localised by `loc-key` / `title-loc-key`.
    case missingBody = "missing_body"
    /// A member the vendor SDK decodes strictly has the wrong JSON type.
    case typeMismatch = "type_mismatch"
    /// The envelope's `user` or `device`, or the push's id, holds a control character
    /// (U+0000–U+001F, U+007F; in JSON only as an escape such as `\u0000`).
    case controlCharacter = "control_character"
    /// An event envelope (`"event"` instead of `"payload"`) whose event has an unknown type,
    /// lacks a required member, has one it does not take, or a member out of range.
    case invalidEvent = "invalid_event"

    // MARK: journal stage

    /// The journal refused the record as too large for its frame. The normaliser bounds the
    /// key and the payload first, so seeing this means those bounds and the journal's drifted.
    case recordTooLarge = "record_too_large"

    /// The stage that produces a code, as the reason file's `stage` names it.
    package enum Stage: String, Sendable, CaseIterable {
        case read, normalize, journal
    }

    package var stage: Stage {
        switch self {
        case .symlink, .notRegularFile, .fileTooLarge, .unreadable, .crashedDaemon: .read
        case .recordTooLarge: .journal
        case .invalidJSON, .duplicateKeys, .tooDeep, .payloadTooLarge, .notAnObject, .invalidEnvelope, .unrecognized,
             .ambiguousVendor, .unsupportedVendor, .notAPush, .missingId, .idTooLong, .missingBody, .typeMismatch, .invalidEvent,
             .controlCharacter: .normalize
        }
    }
}
