@preconcurrency import Glibc
import PushPayload
import PushSystem

/// Builds the effective configuration: defaults, then the main file, then drop-ins in name
/// order, then command-line overrides — each later assignment winning, as systemd does.
package enum ConfigurationLoader {
    package static let defaultMainFile = "/etc/pushspool/pushspool.conf"

    /// Loads and validates the whole configuration.
    ///
    /// - Parameters:
    ///   - mainFile: the main file; when it is missing, the defaults and drop-ins apply.
    ///   - mainFileRequired: `true` when the operator named `mainFile` (`--config`,
    ///     `config check FILE`): a mistyped path must not run on defaults silently, so a
    ///     missing file is then an error. Only the default path may be absent.
    ///   - dropInDirectory: default `mainFile + ".d"`; `*.conf` files in it are read in byte
    ///     order of their names. A missing directory is fine.
    ///   - overrides: command-line `Section.Key=value` assignments, applied last.
    /// - Returns: the configuration and, per `Section.Key` (`Category ID.Action` for
    ///   categories), where its value came from. Keys absent from `provenance` are defaults.
    /// - Throws: the first problem, naming file and line. Nothing is applied partially: on a
    ///   SIGHUP the caller keeps its old configuration.
    package static func load(
        mainFile: String = defaultMainFile,
        mainFileRequired: Bool = false,
        dropInDirectory: String? = nil,
        overrides: [ConfigOverride] = []
    ) throws(ConfigError) -> (Configuration, provenance: [String: ConfigurationSource]) {
        var builder = Builder()
        if let assignments = try IniFile.parseFile(mainFile) {
            try builder.apply(assignments, path: mainFile)
        } else if mainFileRequired {
            throw ConfigError(file: mainFile, line: 0, message: "no such file; a configuration file given explicitly must exist "
                              + "(only the default \(defaultMainFile) may be absent)")
        }
        for path in try dropInFiles(in: dropInDirectory ?? mainFile + ".d") {
            guard let assignments = try IniFile.parseFile(path) else { continue }  // raced with removal
            try builder.apply(assignments, path: path)
        }
        for assignment in overrides {
            try builder.apply(section: assignment.section, key: assignment.key, value: assignment.value, source: .commandLine)
        }
        try builder.validate()
        return (builder.configuration, builder.provenance)
    }

    /// Parses INI text as if it were the file `path` (no drop-ins): for tests and
    /// `pushspoolctl config check FILE`.
    package static func load(text: String, path: String) throws(ConfigError) -> (Configuration, provenance: [String: ConfigurationSource]) {
        var builder = Builder()
        try builder.apply(IniFile.parse(Array(text.utf8), path: path), path: path)
        try builder.validate()
        return (builder.configuration, builder.provenance)
    }

    /// The `*.conf` regular files in `directory`, sorted by name; hidden files are skipped.
    static func dropInFiles(in directory: String) throws(ConfigError) -> [String] {
        guard let dir = opendir(directory) else {
            let code = errno
            if code == ENOENT || code == ENOTDIR { return [] }
            throw ConfigError(file: directory, line: 0, message: "cannot read drop-in directory: \(SystemError(call: "opendir", errno: code, subject: directory))")
        }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasSuffix(".conf"), !name.hasPrefix(".") else { continue }
            var st = stat()
            guard stat(directory + "/" + name, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { continue }
            names.append(name)
        }
        // Byte order, not locale order: 10-x.conf sorts before 9-x.conf, as in systemd.
        names.sort { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        return names.map { directory + "/" + $0 }
    }

    /// Applies assignments in order and records where each value came from.
    struct Builder {
        var configuration = Configuration()
        var provenance: [String: ConfigurationSource] = [:]

        mutating func apply(_ assignments: [IniAssignment], path: String) throws(ConfigError) {
            for assignment in assignments {
                try apply(section: assignment.section, key: assignment.key, value: assignment.value,
                          source: .file(path: path, line: assignment.line))
            }
        }

        mutating func apply(section: String, key: String, value: String, source: ConfigurationSource) throws(ConfigError) {
            func failure(_ message: String) -> ConfigError {
                switch source {
                case .file(let path, let line): ConfigError(file: path, line: line, section: section, key: key, message: message)
                case .commandLine: ConfigError(file: "command line", line: 0, section: section, key: key, message: message)
                case .defaultValue: ConfigError(file: "", line: 0, section: section, key: key, message: message)
                }
            }
            if section.isEmpty {
                throw failure("assignment outside any section; put it under [Spool], [Journal], [Media], ...")
            }
            if section.hasPrefix(Schema.categoryPrefix) {
                let id = String(section.dropFirst(Schema.categoryPrefix.count)).trimmingSpaces
                try applyCategory(id: id, key: key, value: value, failure: failure)
                provenance["\(section).\(key)"] = source
                return
            }
            if section.hasPrefix(Schema.feedPrefix) {
                let name = String(section.dropFirst(Schema.feedPrefix.count)).trimmingSpaces
                try applyFeed(name: name, key: key, value: value, failure: failure)
                provenance["\(Schema.feedPrefix)\(name).\(key)"] = source
                return
            }
            guard Schema.sections.contains(section) else {
                throw failure("unknown section; known sections are \(Schema.sections.map { "[\($0)]" }.joined(separator: ", ")), [Category ID] and [Feed NAME]")
            }
            guard let spec = Schema.byPath["\(section).\(key)"] else {
                throw failure("unknown key; [\(section)] knows \(Schema.keys(in: section).map(\.key).joined(separator: ", "))")
            }
            if let error = spec.apply(&configuration, value) {
                throw failure(error.message)
            }
            provenance[spec.path] = source
        }

        private mutating func applyCategory(id: String, key: String, value: String, failure: (String) -> ConfigError) throws(ConfigError) {
            if let problem = CategoryRules.validateIdentifier(id, what: "category id") { throw failure(problem) }
            guard key == "Action" || key == "TextInput" else { throw failure("unknown key; [Category \(id)] knows Action and TextInput") }
            var index = configuration.categories.firstIndex { $0.id == id }
            if index == nil {
                configuration.categories.append(CategoryDefinition(id: id, actions: []))
                index = configuration.categories.count - 1
            }
            guard let index else { return }
            if key == "TextInput" {
                try applyTextInput(value, category: index, failure: failure)
                return
            }
            if value.isEmpty {
                configuration.categories[index].actions = []
                return
            }
            let action: CategoryAction
            switch CategoryRules.parseAction(value) {
            case .success(let parsed): action = parsed
            case .failure(let error): throw failure(error.message)
            }
            if configuration.categories[index].actions.contains(where: { $0.id == action.id }) {
                throw failure("action '\(action.id)' is defined twice in this category")
            }
            if configuration.categories[index].actions.count >= CategoryAction.maximumPerCategory {
                throw failure("more than \(CategoryAction.maximumPerCategory) actions; iOS shows only the first \(CategoryAction.maximumPerCategory)")
            }
            configuration.categories[index].actions.append(action)
        }

        /// One key of `[Feed NAME]`. Lists (`Categories=`, `Vendors=`: words separated by spaces
        /// or commas) append on repetition and an empty value resets them, as elsewhere.
        private mutating func applyFeed(name: String, key: String, value: String, failure: (String) -> ConfigError) throws(ConfigError) {
            if let problem = FeedName.problem(name) { throw failure(problem) }
            guard Schema.feedKeys.contains(key) else {
                throw failure("unknown key; [Feed \(name)] knows \(Schema.feedKeys.joined(separator: ", "))")
            }
            var index = configuration.feeds.firstIndex { $0.name == name }
            if index == nil {
                guard configuration.feeds.count < FeedDefinition.maximum else {
                    throw failure("more than \(FeedDefinition.maximum) feeds; merge some of them")
                }
                configuration.feeds.append(FeedDefinition(name: name))
                index = configuration.feeds.count - 1
            }
            guard let index else { return }
            let words = value.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "," }).map(String.init)
            switch key {
            case "Categories":
                if value.isEmpty { configuration.feeds[index].categories = []; return }
                for word in words {
                    guard word.utf8.count <= 255, !word.contains(where: { $0.isASCII && ($0.asciiValue ?? 0) < 0x20 }) else {
                        throw failure("a category is at most 255 bytes without control characters, got '\(word.prefix(40))'")
                    }
                    if !configuration.feeds[index].categories.contains(word) { configuration.feeds[index].categories.append(word) }
                }
            case "Vendors":
                if value.isEmpty { configuration.feeds[index].vendors = []; return }
                for word in words {
                    guard Vendor(rawValue: word) != nil else {
                        throw failure("unknown vendor '\(word.prefix(40))'; known: \(Vendor.allCases.map(\.rawValue).joined(separator: ", "))")
                    }
                    if !configuration.feeds[index].vendors.contains(word) { configuration.feeds[index].vendors.append(word) }
                }
            case "PayloadKey":
                guard value.utf8.count <= 255, !value.contains(where: { $0.isASCII && ($0.asciiValue ?? 0) < 0x20 }) else {
                    throw failure("a payload key is at most 255 bytes without control characters")
                }
                configuration.feeds[index].payloadKey = value.isEmpty ? nil : value
            case "PayloadValue":
                guard value.utf8.count <= 1024, !value.contains(where: { $0.isASCII && ($0.asciiValue ?? 0) < 0x20 }) else {
                    throw failure("a payload value is at most 1024 bytes without control characters")
                }
                configuration.feeds[index].payloadValue = value.isEmpty ? nil : value
            default:
                switch ConfigValue.boolean(value) {
                case .success(let other): configuration.feeds[index].other = other
                case .failure(let error): throw failure(error.message)
                }
            }
        }

        /// `TextInput=ACTION:BUTTON:PLACEHOLDER` makes an action of this category, defined by an
        /// earlier `Action=`, a text-input action; an empty value removes every text input.
        private mutating func applyTextInput(_ value: String, category index: Int, failure: (String) -> ConfigError) throws(ConfigError) {
            if value.isEmpty {
                for i in configuration.categories[index].actions.indices { configuration.categories[index].actions[i].textInput = nil }
                return
            }
            let parsed: (id: String, input: TextInput)
            switch CategoryRules.parseTextInput(value) {
            case .success(let p): parsed = p
            case .failure(let error): throw failure(error.message)
            }
            let actions = configuration.categories[index].actions
            guard let position = actions.firstIndex(where: { $0.id == parsed.id }) else {
                let known = actions.map(\.id)
                throw failure("no action '\(parsed.id)' in this category yet; put TextInput= after its Action= line\(known.isEmpty ? "" : " (actions: \(known.joined(separator: ", ")))")")
            }
            if actions[position].textInput != nil {
                throw failure("action '\(parsed.id)' has a text input already")
            }
            configuration.categories[index].actions[position].textInput = parsed.input
        }

        /// Checks that span keys, reported at the line of the key that made them inconsistent.
        func validate() throws(ConfigError) {
            func failure(_ path: String, _ message: String) -> ConfigError {
                let parts = path.split(separator: ".", maxSplits: 1).map(String.init)
                switch provenance[path] ?? .defaultValue {
                case .file(let file, let line): return ConfigError(file: file, line: line, section: parts[0], key: parts[1], message: message)
                case .commandLine: return ConfigError(file: "command line", line: 0, section: parts[0], key: parts[1], message: message)
                case .defaultValue: return ConfigError(file: "", line: 0, section: parts[0], key: parts[1], message: message)
                }
            }
            let media = configuration.media
            if media.connectTimeout > media.transferTimeout {
                throw failure("Media.ConnectTimeoutSec", "is longer than TransferTimeoutSec=\(ConfigValue.formatDuration(media.transferTimeout)); the connect phase is part of the transfer")
            }
            if media.transferTimeout > media.payloadDeadline {
                throw failure("Media.TransferTimeoutSec", "is longer than PayloadDeadlineSec=\(ConfigValue.formatDuration(media.payloadDeadline)); one transfer could never finish in time")
            }
            let outbox = configuration.outbox
            if outbox.connectTimeout > outbox.requestTimeout {
                // Blame the key the file set: RequestTimeoutSec=3s alone is under the default connect timeout.
                if provenance["Outbox.ConnectTimeoutSec"] == nil, provenance["Outbox.RequestTimeoutSec"] != nil {
                    throw failure("Outbox.RequestTimeoutSec", "is shorter than ConnectTimeoutSec=\(ConfigValue.formatDuration(outbox.connectTimeout)) (the default); the connect phase is part of the request, so set ConnectTimeoutSec= at most as long")
                }
                throw failure("Outbox.ConnectTimeoutSec", "is longer than RequestTimeoutSec=\(ConfigValue.formatDuration(outbox.requestTimeout)); the connect phase is part of the request")
            }
            if configuration.spool.maxFileBytes < configuration.limits.maxPayloadBytes {
                throw failure("Spool.MaxFileSize", "is smaller than [Limits] MaxPayloadSize=\(ConfigValue.formatSize(configuration.limits.maxPayloadBytes)); a spool file carries the payload plus its envelope")
            }
            var otherFeed: String?
            for feed in configuration.feeds {
                let path = "\(Schema.feedPrefix)\(feed.name)"
                func key(_ preferred: [String]) -> String {
                    "\(path).\(preferred.first { provenance["\(path).\($0)"] != nil } ?? preferred[0])"
                }
                let conditions = !feed.categories.isEmpty || !feed.vendors.isEmpty || feed.payloadKey != nil
                if feed.payloadValue != nil, feed.payloadKey == nil {
                    throw failure(key(["PayloadValue"]), "feed '\(feed.name)' has PayloadValue= without PayloadKey=; name the member it is the value of")
                }
                if feed.other {
                    if conditions {
                        throw failure(key(["Other"]), "feed '\(feed.name)' is Other=yes (everything no other feed takes) and has conditions too; keep one or the other")
                    }
                    if let first = otherFeed {
                        throw failure(key(["Other"]), "feeds '\(first)' and '\(feed.name)' are both Other=yes; at most one feed takes everything else")
                    }
                    otherFeed = feed.name
                } else if !conditions {
                    throw failure(key(Schema.feedKeys), "feed '\(feed.name)' is empty; give it Categories=, Vendors=, PayloadKey= or Other=yes, or remove the section")
                }
            }
            for category in configuration.categories where category.actions.isEmpty {
                throw failure("\(Schema.categoryPrefix)\(category.id).Action", "category '\(category.id)' has no actions; add Action=ID:TITLE:OPTIONS or remove the section")
            }
        }
    }
}

/// Rules for app-defined interactive categories (Infobip's `MMNotificationCategory` rules).
enum CategoryRules {
    /// Identifiers follow Infobip's rule (not empty, no reserved `mm_` prefix; the one copy
    /// is `CategoryTable.identifierProblem`) and are words, so they stay one INI token.
    static func validateIdentifier(_ id: String, what: String) -> String? {
        if let problem = CategoryTable.identifierProblem(id, what: what) { return problem }
        if !id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" || $0 == ".") }) {
            return "\(what) '\(id)' may contain only letters, digits, '_', '-' and '.'"
        }
        return nil
    }

    /// `ID:TITLE:OPTIONS` — the id has no ':', the options follow the last ':' (so a title
    /// may contain ':'), options are comma-separated and may be empty.
    static func parseAction(_ value: String) -> Result<CategoryAction, ValueError> {
        guard let first = value.firstIndex(of: ":"), let last = value.lastIndex(of: ":"), first < last else {
            return .failure(ValueError("expected ID:TITLE:OPTIONS (options may be empty, e.g. 'accept:Accept:foreground'), got '\(value)'"))
        }
        let id = String(value[..<first]).trimmingSpaces
        let title = String(value[value.index(after: first)..<last]).trimmingSpaces
        let optionText = String(value[value.index(after: last)...])
        if let problem = validateIdentifier(id, what: "action id") { return .failure(ValueError(problem)) }
        if title.isEmpty { return .failure(ValueError("action '\(id)' has an empty title")) }
        var options: [ActionOption] = []
        for word in optionText.split(separator: ",").map({ String($0).trimmingSpaces }) where !word.isEmpty {
            guard let option = ActionOption(rawValue: word) else {
                return .failure(ValueError("unknown action option '\(word)'; known: \(CategoryAction.knownOptions.joined(separator: ", "))"))
            }
            if !options.contains(option) { options.append(option) }
        }
        return .success(CategoryAction(id: id, title: title, options: options))
    }

    /// `ACTION:BUTTON:PLACEHOLDER` — the action id and the button title have no ':', the
    /// placeholder is the rest (it may contain ':' and may be empty: iOS shows an empty field).
    static func parseTextInput(_ value: String) -> Result<(id: String, input: TextInput), ValueError> {
        let parts = value.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3 else {
            return .failure(ValueError("expected ACTION:BUTTON:PLACEHOLDER (e.g. 'reply:Send:Your answer'), got '\(value)'"))
        }
        let id = parts[0].trimmingSpaces
        let button = parts[1].trimmingSpaces
        if let problem = validateIdentifier(id, what: "action id") { return .failure(ValueError(problem)) }
        if button.isEmpty { return .failure(ValueError("the text input of '\(id)' has an empty button title")) }
        return .success((id, TextInput(buttonTitle: button, placeholder: parts[2].trimmingSpaces)))
    }
}
