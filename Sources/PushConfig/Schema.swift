import PushPayload
import PushTransliteration

/// One key of pushspool.conf: how to parse it into the configuration and how to print it back.
///
/// The table is the single place that names keys, so loading, `config show` and the shipped
/// default file cannot drift apart (a test walks it against docs/configuration.md and the shipped file).
struct KeySpec: Sendable {
    var section: String
    var key: String
    /// List keys append on repetition and an empty value resets them, as in systemd units.
    var isList = false
    /// The accepted range of a number, duration or size; `nil` for other kinds.
    var bounds: KeyBounds? = nil
    /// A value this key must refuse (for the schema walk test): past the range, or malformed.
    var invalidExample: String
    var apply: @Sendable (inout Configuration, String) -> ValueError?
    var render: @Sendable (Configuration) -> [String]

    var path: String { "\(section).\(key)" }
}

/// The range of a bounded key. Every duration and size has an upper bound: the daemon turns
/// them into nanoseconds, milliseconds and `Int64`s, and an unbounded value would overflow
/// there (a trap) instead of being refused here with the key named.
enum KeyBounds: Sendable, Equatable {
    case duration(ClosedRange<Duration>)
    case size(ClosedRange<Int>)
    case integer(ClosedRange<Int>)

    /// `1s to 1d`, as error messages and docs/configuration.md say it.
    var rangeText: String {
        switch self {
        case .duration(let range): "\(ConfigValue.formatDuration(range.lowerBound)) to \(ConfigValue.formatDuration(range.upperBound))"
        case .size(let range): "\(ConfigValue.formatSize(range.lowerBound)) to \(ConfigValue.formatSize(range.upperBound))"
        case .integer(let range): "\(range.lowerBound) to \(range.upperBound)"
        }
    }

    /// The largest accepted value, as configuration text.
    var maximumText: String {
        switch self {
        case .duration(let range): ConfigValue.formatDuration(range.upperBound)
        case .size(let range): ConfigValue.formatSize(range.upperBound)
        case .integer(let range): String(range.upperBound)
        }
    }

    /// The smallest step past the maximum (one nanosecond, byte or unit), as configuration text.
    var beyondMaximumText: String {
        switch self {
        case .duration(let range): ConfigValue.formatDuration(range.upperBound + .nanoseconds(1))
        case .size(let range): String(range.upperBound + 1)
        case .integer(let range): String(range.upperBound + 1)
        }
    }

    func refusal(_ text: String) -> ValueError {
        ValueError("must be from \(rangeText), got '\(text)'")
    }
}

extension KeySpec {
    static func duration(_ section: String, _ key: String, _ field: WritableKeyPath<Configuration, Duration> & Sendable,
                         range: ClosedRange<Duration>) -> KeySpec {
        let bounds = KeyBounds.duration(range)
        return KeySpec(section: section, key: key, bounds: bounds, invalidExample: "99999999999", apply: { config, text in
            switch ConfigValue.duration(text) {
            case .success(let duration) where range.contains(duration):
                config[keyPath: field] = duration
                return nil
            case .success:
                return bounds.refusal(text)
            case .failure(let error) where error.outOfRange:
                return bounds.refusal(text)
            case .failure(let error):
                return ValueError("\(error.message); must be from \(bounds.rangeText)")
            }
        }, render: { [ConfigValue.formatDuration($0[keyPath: field])] })
    }

    static func size(_ section: String, _ key: String, _ field: WritableKeyPath<Configuration, Int> & Sendable, range: ClosedRange<Int>) -> KeySpec {
        let bounds = KeyBounds.size(range)
        return KeySpec(section: section, key: key, bounds: bounds, invalidExample: "99999999999T", apply: { config, text in
            switch ConfigValue.size(text) {
            case .success(let bytes):
                guard range.contains(bytes) else { return bounds.refusal(text) }
                config[keyPath: field] = bytes
                return nil
            case .failure(let error) where error.outOfRange:
                return bounds.refusal(text)
            case .failure(let error):
                return ValueError("\(error.message); must be from \(bounds.rangeText)")
            }
        }, render: { [ConfigValue.formatSize($0[keyPath: field])] })
    }

    static func integer(_ section: String, _ key: String, _ field: WritableKeyPath<Configuration, Int> & Sendable, range: ClosedRange<Int>) -> KeySpec {
        KeySpec(section: section, key: key, bounds: .integer(range), invalidExample: "99999999999", apply: { config, text in
            switch ConfigValue.integer(text, in: range) {
            case .success(let value): config[keyPath: field] = value; return nil
            case .failure(let error): return error
            }
        }, render: { [String($0[keyPath: field])] })
    }

    static func boolean(_ section: String, _ key: String, _ field: WritableKeyPath<Configuration, Bool> & Sendable) -> KeySpec {
        KeySpec(section: section, key: key, invalidExample: "maybe", apply: { config, text in
            switch ConfigValue.boolean(text) {
            case .success(let value): config[keyPath: field] = value; return nil
            case .failure(let error): return error
            }
        }, render: { [$0[keyPath: field] ? "yes" : "no"] })
    }

    static func absolutePath(_ section: String, _ key: String, _ field: WritableKeyPath<Configuration, String> & Sendable) -> KeySpec {
        KeySpec(section: section, key: key, invalidExample: "relative/path", apply: { config, text in
            guard let error = validateAbsolutePath(text) else { config[keyPath: field] = text; return nil }
            return error
        }, render: { [$0[keyPath: field]] })
    }

    /// An absolute path, or empty for "not set".
    static func optionalAbsolutePath(_ section: String, _ key: String, _ field: WritableKeyPath<Configuration, String> & Sendable) -> KeySpec {
        KeySpec(section: section, key: key, invalidExample: "relative/path", apply: { config, text in
            if text.isEmpty { config[keyPath: field] = ""; return nil }
            guard let error = validateAbsolutePath(text) else { config[keyPath: field] = text; return nil }
            return error
        }, render: { [$0[keyPath: field]] })
    }

    /// An `http(s)://host[:port][/path]` base URL without query, fragment or credentials; a
    /// trailing slash is dropped so paths can be appended. Whether plain http is allowed is
    /// decided where it is used (`AllowHTTP=`).
    /// A Mindbox endpoint id: it goes into a query string, and a conservative alphabet keeps
    /// it from needing escapes.
    static func mindboxEndpoint(_ key: String, _ field: WritableKeyPath<Configuration, String> & Sendable) -> KeySpec {
        KeySpec(section: "Outbox", key: key, invalidExample: "has space", apply: { config, text in
            guard text.count <= 128, text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
                return ValueError("expected up to 128 characters of [A-Za-z0-9._-], got '\(text)'")
            }
            config[keyPath: field] = text
            return nil
        }, render: { [$0[keyPath: field]] })
    }

    static func endpointURL(_ section: String, _ key: String, _ field: WritableKeyPath<Configuration, String> & Sendable) -> KeySpec {
        KeySpec(section: section, key: key, invalidExample: "ftp://example.com", apply: { config, text in
            var value = text
            while value.hasSuffix("/") { value.removeLast() }
            let rest: Substring
            if value.hasPrefix("https://") { rest = value.dropFirst(8) } else if value.hasPrefix("http://") { rest = value.dropFirst(7) } else {
                return ValueError("expected an http:// or https:// URL, got '\(text)'")
            }
            let host = rest.prefix { $0 != "/" }
            guard !host.isEmpty, value.count <= 512,
                  value.allSatisfy({ $0.isASCII && !$0.isWhitespace && !"?#@\\\"".contains($0) }) else {
                return ValueError("expected a base URL with a host and without query, fragment or user, got '\(text)'")
            }
            config[keyPath: field] = value
            return nil
        }, render: { [$0[keyPath: field]] })
    }

    static func validateAbsolutePath(_ text: String) -> ValueError? {
        guard text.hasPrefix("/"), !text.split(separator: "/").contains(".."), !text.contains("\0") else {
            return ValueError("expected an absolute path without '..', got '\(text)'")
        }
        return nil
    }
}

/// The known sections and keys, in the order `config show` prints them.
enum Schema {
    static let sections = ["Spool", "Journal", "Media", "Limits", "Metrics", "Log", "Status", "Inbox", "Outbox", "Export"]
    /// Categories are open-ended sections named `[Category ID]`.
    static let categoryPrefix = "Category "
    /// Feeds are open-ended sections named `[Feed NAME]`.
    static let feedPrefix = "Feed "
    /// The keys of a `[Feed NAME]` section.
    static let feedKeys = ["Categories", "Vendors", "PayloadKey", "PayloadValue", "Other"]

    static let keys: [KeySpec] = [
        .absolutePath("Spool", "Directory", \.spool.directory),
        .duration("Spool", "RescanIntervalSec", \.spool.rescanInterval, range: .seconds(1) ... .day),
        .duration("Spool", "StableAgeSec", \.spool.stableAge, range: .zero ... .hour),
        .size("Spool", "MaxFileSize", \.spool.maxFileBytes, range: 1...(1 << 30)),
        .duration("Spool", "FailedRetainSec", \.spool.failedRetain, range: .zero ... .seconds(10 * 366 * 86_400)),

        .absolutePath("Journal", "StateDirectory", \.journal.stateDirectory),
        .size("Journal", "SegmentSize", \.journal.segmentBytes, range: (64 << 10)...(16 << 30)),
        .duration("Journal", "MaxBatchDelaySec", \.journal.maxBatchDelay, range: .zero ... .seconds(1)),
        .integer("Journal", "MaxBatchRecords", \.journal.maxBatchRecords, range: 1...1_000_000),
        KeySpec(section: "Journal", key: "CorruptionPolicy", invalidExample: "ignore", apply: { config, text in
            guard let policy = CorruptionPolicy(rawValue: text) else {
                return ValueError("expected one of \(CorruptionPolicy.allCases.map(\.rawValue).joined(separator: ", ")), got '\(text)'")
            }
            config.journal.corruptionPolicy = policy
            return nil
        }, render: { [$0.journal.corruptionPolicy.rawValue] }),
        .duration("Journal", "CheckpointIntervalSec", \.journal.checkpointInterval, range: .seconds(1) ... .day),
        .duration("Journal", "RetainSec", \.journal.retain, range: .zero ... .seconds(10 * 366 * 86_400)),
        .size("Journal", "RetainBytes", \.journal.retainBytes, range: 0...(64 << 30)),
        KeySpec(section: "Journal", key: "Archive", invalidExample: "gzip", apply: { config, text in
            // "yes" names the one compressor there is, so a boolean reads naturally too.
            switch text {
            case "zstd", "yes", "true", "on": config.journal.archive = .zstd
            case "no", "false", "off": config.journal.archive = .no
            default: return ValueError("expected no or zstd (yes = zstd), got '\(text)'")
            }
            return nil
        }, render: { [$0.journal.archive.rawValue] }),
        .duration("Journal", "DedupWindowSec", \.journal.dedupWindow, range: .zero ... .seconds(10 * 366 * 86_400)),

        .boolean("Media", "Enabled", \.media.enabled),
        .duration("Media", "ConnectTimeoutSec", \.media.connectTimeout, range: .milliseconds(1) ... .hour),
        .duration("Media", "TransferTimeoutSec", \.media.transferTimeout, range: .milliseconds(1) ... .day),
        .size("Media", "LowSpeedLimit", \.media.lowSpeedLimitBytes, range: 0...(1 << 30)),
        .duration("Media", "LowSpeedTimeSec", \.media.lowSpeedTime, range: .seconds(1) ... .hour),
        .size("Media", "MaxSize", \.media.maxBytes, range: 1...(1 << 32)),
        .boolean("Media", "AllowHTTP", \.media.allowHTTP),
        .integer("Media", "MaxRedirects", \.media.maxRedirects, range: 0...50),
        KeySpec(section: "Media", key: "AllowNetworks", isList: true, invalidExample: "10.0.0.0/33", apply: { config, text in
            if text.isEmpty { config.media.allowNetworks = []; return nil }
            for word in text.split(whereSeparator: { $0 == " " || $0 == "\t" }) {
                switch ConfigValue.cidr(String(word)) {
                case .success(let network):
                    if !config.media.allowNetworks.contains(network) { config.media.allowNetworks.append(network) }
                case .failure(let error):
                    return error
                }
            }
            return nil
        }, render: { [$0.media.allowNetworks.joined(separator: " ")] }),
        .integer("Media", "MaxConcurrent", \.media.maxConcurrent, range: 1...1024),
        .integer("Media", "MaxWaiting", \.media.maxWaiting, range: 1...65536),
        KeySpec(section: "Media", key: "CAFile", invalidExample: "relative/ca.pem", apply: { config, text in
            if text.isEmpty { config.media.caFile = nil; return nil }
            if let error = KeySpec.validateAbsolutePath(text) { return error }
            config.media.caFile = text
            return nil
        }, render: { [$0.media.caFile ?? ""] }),
        .integer("Media", "Attempts", \.media.attempts, range: 1...20),
        .duration("Media", "PayloadDeadlineSec", \.media.payloadDeadline, range: .milliseconds(1) ... .day),
        .duration("Media", "DedupWindowSec", \.media.dedupWindow, range: .zero ... .week),
        .integer("Media", "ThumbnailMaxEdge", \.media.thumbnailMaxEdge, range: 16...8192),
        .integer("Media", "ThumbnailMaxPixels", \.media.thumbnailMaxPixels, range: 1...1_000_000_000),

        .size("Limits", "MaxPayloadSize", \.limits.maxPayloadBytes, range: 64...(16 << 20)),
        .integer("Limits", "MaxDepth", \.limits.maxDepth, range: 1...1024),

        KeySpec(section: "Metrics", key: "TextfilePath", invalidExample: "/var/lib/pushspool.txt", apply: { config, text in
            if text.isEmpty { config.metrics.textfilePath = nil; return nil }
            if let error = KeySpec.validateAbsolutePath(text) { return error }
            guard text.hasSuffix(".prom") else {
                return ValueError("node_exporter's textfile collector reads only *.prom files, got '\(text)'")
            }
            config.metrics.textfilePath = text
            return nil
        }, render: { [$0.metrics.textfilePath ?? ""] }),
        .duration("Metrics", "IntervalSec", \.metrics.interval, range: .seconds(1) ... .day),

        KeySpec(section: "Log", key: "Identifier", invalidExample: "push spool", apply: { config, text in
            guard !text.isEmpty, text.count <= 64, text.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "[" && $0 != ":" }) else {
                return ValueError("expected a short word without spaces, '[' or ':', got '\(text)'")
            }
            config.log.identifier = text
            return nil
        }, render: { [$0.log.identifier] }),
        .integer("Log", "MaxEventsPerSec", \.log.maxEventsPerSecond, range: 1...100_000),

        .duration("Status", "IntervalSec", \.status.interval, range: .milliseconds(100) ... .hour),

        .boolean("Inbox", "Enabled", \.inbox.enabled),
        .duration("Inbox", "RetentionSec", \.inbox.retention, range: .zero ... .seconds(10 * 366 * 86_400)),
        .boolean("Inbox", "ListModals", \.inbox.listModals),
        KeySpec(section: "Inbox", key: "Source", invalidExample: "kafka", apply: { config, text in
            guard let source = InboxSource(rawValue: text) else {
                return ValueError("expected one of \(InboxSource.allCases.map(\.rawValue).joined(separator: ", ")), got '\(text)'")
            }
            config.inbox.source = source
            return nil
        }, render: { [$0.inbox.source.rawValue] }),
        .optionalAbsolutePath("Inbox", "TokenSecretFile", \.inbox.tokenSecretFile),
        .integer("Inbox", "MaxConnections", \.inbox.maxConnections, range: 1...10_000),
        .integer("Inbox", "MaxConnectionsPerIP", \.inbox.maxConnectionsPerIP, range: 1...10_000),
        .duration("Inbox", "ConnectionTimeoutSec", \.inbox.connectionTimeout, range: .seconds(1) ... .hour),
        .size("Inbox", "MaxRequestSize", \.inbox.maxRequestBytes, range: 1024...(1 << 20)),

        .boolean("Outbox", "Enabled", \.outbox.enabled),
        .endpointURL("Outbox", "MindboxURL", \.outbox.mindboxURL),
        .mindboxEndpoint("MindboxEndpointId", \.outbox.mindboxEndpointId),
        .mindboxEndpoint("MindboxEndpointIOS", \.outbox.mindboxEndpointIOS),
        .mindboxEndpoint("MindboxEndpointAndroid", \.outbox.mindboxEndpointAndroid),
        KeySpec(section: "Outbox", key: "MindboxTransliteration", invalidExample: "Cyrillic-Klingon", apply: { config, text in
            // ICU itself judges the id, so what loads here is what the outbox can open.
            if text.lowercased() != "none", let error = Transliterator.check(id: text) {
                return ValueError("\(error.message), or 'none' to send the push name as it came")
            }
            config.outbox.mindboxTransliteration = text
            return nil
        }, render: { [$0.outbox.mindboxTransliteration] }),
        .optionalAbsolutePath("Outbox", "MindboxSecretKeyFile", \.outbox.mindboxSecretKeyFile),
        .endpointURL("Outbox", "InfobipURL", \.outbox.infobipURL),
        .optionalAbsolutePath("Outbox", "InfobipAppKeyFile", \.outbox.infobipAppKeyFile),
        .boolean("Outbox", "AllowHTTP", \.outbox.allowHTTP),
        KeySpec(section: "Outbox", key: "AllowNetworks", isList: true, invalidExample: "10.0.0.0/33", apply: { config, text in
            if text.isEmpty { config.outbox.allowNetworks = []; return nil }
            for word in text.split(whereSeparator: { $0 == " " || $0 == "\t" }) {
                switch ConfigValue.cidr(String(word)) {
                case .success(let network):
                    if !config.outbox.allowNetworks.contains(network) { config.outbox.allowNetworks.append(network) }
                case .failure(let error):
                    return error
                }
            }
            return nil
        }, render: { [$0.outbox.allowNetworks.joined(separator: " ")] }),
        .duration("Outbox", "ConnectTimeoutSec", \.outbox.connectTimeout, range: .milliseconds(1) ... .hour),
        .duration("Outbox", "RequestTimeoutSec", \.outbox.requestTimeout, range: .milliseconds(1) ... .hour),
        .integer("Outbox", "MaxAttempts", \.outbox.maxAttempts, range: 1...100),
        .duration("Outbox", "RetryBaseSec", \.outbox.retryBase, range: .milliseconds(10) ... .hour),
        .duration("Outbox", "MaxAgeSec", \.outbox.maxAge, range: .seconds(1) ... .week),
        .boolean("Export", "Enabled", \.export.enabled),
        KeySpec(section: "Export", key: "URL", isList: true, invalidExample: "http://example.com", apply: { config, text in
            if text.isEmpty { config.export.urls = []; return nil }
            for url in text.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init) {
                if let error = natsURLError(url) { return error }
                if !config.export.urls.contains(url) { config.export.urls.append(url) }
            }
            return nil
        }, render: { [$0.export.urls.joined(separator: " ")] }),
        KeySpec(section: "Export", key: "Subject", invalidExample: "push.*", apply: { config, text in
            if let problem = subjectTemplateProblem(text) { return ValueError("subject '\(text)' \(problem)") }
            config.export.subject = text
            return nil
        }, render: { [$0.export.subject] }),
        KeySpec(section: "Export", key: "Stream", invalidExample: "has.dot", apply: { config, text in
            guard !text.isEmpty, text.utf8.count <= 64, text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }) else {
                return ValueError("expected a stream name of 1 to 64 characters [A-Za-z0-9_-], got '\(text)'")
            }
            config.export.stream = text
            return nil
        }, render: { [$0.export.stream] }),
        .integer("Export", "Replicas", \.export.replicas, range: 1...5),
        .duration("Export", "DuplicateWindowSec", \.export.duplicateWindow, range: .seconds(1) ... .week),
        .integer("Export", "MaxPending", \.export.maxPending, range: 1...65_536),
        .duration("Export", "AckTimeoutSec", \.export.ackTimeout, range: .milliseconds(100) ... .seconds(600)),
        .integer("Export", "LagWarnRecords", \.export.lagWarnRecords, range: 1...1_000_000_000),
        KeySpec(section: "Export", key: "HostId", invalidExample: "a:b", apply: { config, text in
            guard text.utf8.count <= 64, text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
                return ValueError("expected up to 64 characters [A-Za-z0-9._-] (empty = /etc/machine-id), got '\(text)'")
            }
            // Inbox nodes publish events with the message id `event:<id>`, the form an
            // exporter with this host id would give its records.
            guard text != "event" else { return ValueError("'event' is reserved (the message ids of events inbox nodes publish)") }
            config.export.hostId = text
            return nil
        }, render: { [$0.export.hostId] }),
        .optionalAbsolutePath("Export", "CredentialsFile", \.export.credentialsFile),
        .optionalAbsolutePath("Export", "TLSCAFile", \.export.tlsCAFile),
        .optionalAbsolutePath("Export", "TLSCertFile", \.export.tlsCertFile),
        .optionalAbsolutePath("Export", "TLSKeyFile", \.export.tlsKeyFile),
    ]

    /// `nats://host:port` or `tls://host:port` (port optional), without user or path.
    static func natsURLError(_ url: String) -> ValueError? {
        let rest: Substring
        if url.hasPrefix("nats://") { rest = url.dropFirst(7) } else if url.hasPrefix("tls://") { rest = url.dropFirst(6) } else {
            return ValueError("expected a nats:// or tls:// URL, got '\(url)'")
        }
        guard !rest.isEmpty, url.utf8.count <= 256, !rest.hasPrefix(":"),
              rest.allSatisfy({ $0.isASCII && !$0.isWhitespace && !"/?#@\\\"".contains($0) }) else {
            return ValueError("expected nats://host[:port] without user, path or query, got '\(url)'")
        }
        if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
            guard let port = Int(rest[rest.index(after: colon)...]), (1...65_535).contains(port) else {
                return ValueError("port of '\(url)' must be from 1 to 65535")
            }
        }
        return nil
    }

    static func subjectTemplateProblem(_ text: String) -> String? { ExportSubjectRule.problem(text) }

    static let byPath: [String: KeySpec] = Dictionary(uniqueKeysWithValues: keys.map { ($0.path, $0) })

    static func keys(in section: String) -> [KeySpec] { keys.filter { $0.section == section } }
}

extension Duration {
    static let hour = Duration.seconds(3600)
    static let day = Duration.seconds(86_400)
    static let week = Duration.seconds(604_800)
}
