/// The rule for `[Export] Subject=`, shared by the configuration check (PushConfig) and the
/// exporter's `SubjectTemplate` (PushExport), which do not depend on each other.
package enum ExportSubjectRule {
    /// 1 to 200 bytes, dot-separated non-empty tokens of printable ASCII without `*`, `>` or
    /// whitespace (a wildcard cannot be published to), placeholders only as `{vendor}` and
    /// `{platform}`. `nil` = valid; otherwise says what is wrong.
    package static func problem(_ text: String) -> String? {
        guard !text.isEmpty, text.utf8.count <= 200 else { return "must be 1 to 200 characters" }
        for token in text.split(separator: ".", omittingEmptySubsequences: false) {
            guard !token.isEmpty else { return "has an empty token (leading, trailing or double '.')" }
            guard token.allSatisfy({ $0.isASCII && $0 != "*" && $0 != ">" && ($0.asciiValue ?? 0) > 0x20 && ($0.asciiValue ?? 0) < 0x7f }) else {
                return "tokens must be printable ASCII without '*', '>' or spaces"
            }
            let stripped = token.replacing("{vendor}", with: "").replacing("{platform}", with: "")
            guard !stripped.contains("{"), !stripped.contains("}") else { return "only {vendor} and {platform} are placeholders" }
        }
        return nil
    }
}
