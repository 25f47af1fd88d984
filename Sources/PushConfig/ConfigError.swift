/// A configuration that cannot be used: where it is wrong and why.
///
/// `description` reads like a compiler diagnostic so editors and operators can jump to it:
/// `/etc/pushspool/pushspool.conf:12: [Media] ConnectTimeoutSec: expected a duration like 5s ...`.
package struct ConfigError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file, `"command line"`, or empty when the problem is not tied to one place.
    package var file: String
    /// 1-based; 0 when not tied to a line.
    package var line: Int
    package var section: String
    package var key: String
    package var message: String

    package init(file: String, line: Int, section: String = "", key: String = "", message: String) {
        self.file = file
        self.line = line
        self.section = section
        self.key = key
        self.message = message
    }

    package var description: String {
        var text = file
        if line > 0 { text += ":\(line)" }
        if !text.isEmpty { text += ": " }
        if !section.isEmpty { text += "[\(section)] " }
        if !key.isEmpty { text += "\(key): " }
        return text + message
    }
}

/// Where the effective value of a setting came from, for `pushspoolctl config show`.
package enum ConfigurationSource: Sendable, Equatable, CustomStringConvertible {
    case defaultValue
    case file(path: String, line: Int)
    case commandLine

    package var description: String {
        switch self {
        case .defaultValue: "default"
        case .file(let path, let line): "\(path):\(line)"
        case .commandLine: "command line"
        }
    }
}

/// A `--set Section.Key=value` from the command line; applied after every file.
package struct ConfigOverride: Sendable, Equatable {
    package var section: String
    package var key: String
    package var value: String

    package init(section: String, key: String, value: String) {
        self.section = section
        self.key = key
        self.value = value
    }

    /// Parses `Section.Key=value` (`Media.ConnectTimeoutSec=3s`, `Category chat.Action=...`).
    package init(parsing text: String) throws(ConfigError) {
        guard let equals = text.firstIndex(of: "="),
              let dot = text[..<equals].lastIndex(of: "."),
              dot > text.startIndex, text.index(after: dot) < equals
        else {
            throw ConfigError(file: "command line", line: 0, message: "expected Section.Key=value, got '\(text)'")
        }
        section = String(text[..<dot]).trimmingSpaces
        key = String(text[text.index(after: dot)..<equals]).trimmingSpaces
        value = String(text[text.index(after: equals)...]).trimmingSpaces
    }
}
