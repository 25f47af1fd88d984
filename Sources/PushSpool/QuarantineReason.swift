@preconcurrency import Glibc
import PushSystem

/// Why a file was moved to `failed/`: the content of `failed/NAME.reason.json`.
///
/// `Sendable`: a plain value. Keys are stable; operators and `pushspoolctl failed`
/// read them. Encoded with sorted keys, slashes unescaped, one line.
package struct QuarantineReason: Sendable, Equatable {
    /// The pipeline stage that refused the file.
    package enum Stage: String, Sendable, CaseIterable {
        case claim, read, parse, normalize, media, journal
    }

    /// Stable machine code, e.g. `"symlink"`, `"file_too_large"`, `"invalid_json"`.
    package var code: String
    /// What was wrong and what to do, for people.
    package var message: String
    package var stage: Stage
    /// When it was quarantined, ISO-8601 UTC with milliseconds.
    package var at: String
    package var daemonVersion: String
    /// The file's name in `incoming/`/`processing/` (its name in `failed/` may carry a `~N`
    /// suffix when that name was taken).
    package var file: String
    package var size: Int64?
    package var sha256: String?
    package var detail: [String: String]?

    package init(
        code: String, message: String, stage: Stage, daemonVersion: String, file: String,
        size: Int64? = nil, sha256: String? = nil, detail: [String: String]? = nil, at: String = Timestamp.now()
    ) {
        self.code = code
        self.message = message
        self.stage = stage
        self.at = at
        self.daemonVersion = daemonVersion
        self.file = file
        self.size = size
        self.sha256 = sha256
        self.detail = detail
    }

    /// A reason for a file whose bytes the caller read: fills in `size` and `sha256`.
    package init(
        code: String, message: String, stage: Stage, daemonVersion: String, file: String,
        contents: [UInt8], detail: [String: String]? = nil
    ) {
        self.init(code: code, message: message, stage: stage, daemonVersion: daemonVersion, file: file,
                  size: Int64(contents.count), sha256: SHA256.hex(of: contents), detail: detail)
    }

    /// The reason as a JSON object; absent values are left out.
    package var jsonValue: JSONValue {
        var object: JSONObject = [
            "code": .string(code), "message": .string(message), "stage": .string(stage.rawValue), "at": .string(at),
            "daemonVersion": .string(daemonVersion), "file": .string(file),
        ]
        if let size { object["size"] = .integer(size) }
        if let sha256 { object["sha256"] = .string(sha256) }
        if let detail { object["detail"] = .object(JSONObject(detail.mapValues { JSONValue.string($0) })) }
        return .object(object)
    }

    /// The JSON written to the reason file (one line, sorted keys, trailing newline).
    package func encoded() -> [UInt8] {
        jsonValue.serialized() + [0x0A]
    }

    /// Decodes a reason file.
    package static func decode(_ bytes: [UInt8]) throws(SpoolError) -> QuarantineReason {
        func invalid(_ why: String) -> SpoolError {
            SpoolError(.reasonFile, "reason file is not valid: \(why); inspect it with `pushspoolctl failed show`")
        }
        let value: JSONValue
        do { value = try JSONParser(maxDepth: 4).parse(bytes) } catch { throw invalid("\(error)") }
        func text(_ key: String) throws(SpoolError) -> String {
            guard let text = value[key]?.stringValue else { throw invalid("\"\(key)\" is missing or not a string") }
            return text
        }
        guard let stage = Stage(rawValue: try text("stage")) else { throw invalid("unknown stage") }
        var size: Int64?
        if let lexeme = value["size"]?.numberLexeme {
            guard let parsed = Int64(lexeme) else { throw invalid("\"size\" is not an integer") }
            size = parsed
        }
        var detail: [String: String]?
        if let members = value["detail"]?.objectValue {
            detail = members.compactMapValues(\.stringValue)
        }
        return QuarantineReason(code: try text("code"), message: try text("message"), stage: stage,
                                daemonVersion: try text("daemonVersion"), file: try text("file"), size: size,
                                sha256: value["sha256"]?.stringValue, detail: detail, at: try text("at"))
    }
}
