@preconcurrency import Glibc
import Foundation
import PushSystem

/// Why a file was moved to `failed/`: the content of `failed/NAME.reason.json`.
///
/// `Sendable`, `Codable`: a plain value. Keys are stable; operators and `pushspoolctl failed`
/// read them. Encoded with sorted keys, slashes unescaped, one line.
package struct QuarantineReason: Sendable, Codable, Equatable {
    /// The pipeline stage that refused the file.
    package enum Stage: String, Sendable, Codable, CaseIterable {
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

    enum CodingKeys: String, CodingKey {
        case code, message, stage, at, daemonVersion, file, size, sha256, detail
    }

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

    /// The JSON written to the reason file (one line, trailing newline).
    package func encoded() -> [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Encoding a struct of strings and integers cannot fail.
        let data = (try? encoder.encode(self)) ?? Data("{}".utf8)
        return Array(data) + [0x0A]
    }

    /// Decodes a reason file.
    package static func decode(_ bytes: [UInt8]) throws(SpoolError) -> QuarantineReason {
        do {
            return try JSONDecoder().decode(QuarantineReason.self, from: Data(bytes))
        } catch {
            throw SpoolError(.reasonFile, "reason file is not valid: \(error); inspect it with `pushspoolctl failed show`")
        }
    }
}
