/// One key of pushspool.conf: how to parse it into the configuration and how to print it back.
///
/// The table is the single place that names keys, so loading, `config show` and the shipped
/// default file cannot drift apart (a test checks the shipped file against it).
struct KeySpec: Sendable {
    var section: String
    var key: String
    /// List keys append on repetition and an empty value resets them, as in systemd units.
    var isList = false
    var apply: @Sendable (inout Configuration, String) -> ValueError?
    var render: @Sendable (Configuration) -> [String]

    var path: String { "\(section).\(key)" }
}

extension KeySpec {
    static func duration(_ section: String, _ key: String, _ field: WritableKeyPath<Configuration, Double> & Sendable, minimum: Double = 0) -> KeySpec {
        KeySpec(section: section, key: key, apply: { config, text in
            switch ConfigValue.duration(text) {
            case .success(let seconds) where seconds >= minimum:
                config[keyPath: field] = seconds
                return nil
            case .success:
                return ValueError("must be at least \(ConfigValue.formatDuration(minimum)), got '\(text)'")
            case .failure(let error):
                return error
            }
        }, render: { [ConfigValue.formatDuration($0[keyPath: field])] })
    }

    static func millis(_ section: String, _ key: String, _ field: WritableKeyPath<Configuration, Int> & Sendable, range: ClosedRange<Int>) -> KeySpec {
        KeySpec(section: section, key: key, apply: { config, text in
            switch ConfigValue.duration(text) {
            case .success(let seconds):
                let millis = Int((seconds * 1000).rounded())
                guard range.contains(millis) else {
                    return ValueError("must be from \(range.lowerBound)ms to \(ConfigValue.formatDuration(Double(range.upperBound) / 1000)), got '\(text)'")
                }
                config[keyPath: field] = millis
                return nil
            case .failure(let error):
                return error
            }
        }, render: { [ConfigValue.formatDuration(Double($0[keyPath: field]) / 1000)] })
    }

    static func size(_ section: String, _ key: String, _ field: WritableKeyPath<Configuration, Int> & Sendable, range: ClosedRange<Int>) -> KeySpec {
        KeySpec(section: section, key: key, apply: { config, text in
            switch ConfigValue.size(text) {
            case .success(let bytes):
                guard range.contains(bytes) else {
                    return ValueError("must be from \(ConfigValue.formatSize(range.lowerBound)) to \(ConfigValue.formatSize(range.upperBound)), got '\(text)'")
                }
                config[keyPath: field] = bytes
                return nil
            case .failure(let error):
                return error
            }
        }, render: { [ConfigValue.formatSize($0[keyPath: field])] })
    }

    static func integer(_ section: String, _ key: String, _ field: WritableKeyPath<Configuration, Int> & Sendable, range: ClosedRange<Int>) -> KeySpec {
        KeySpec(section: section, key: key, apply: { config, text in
            switch ConfigValue.integer(text, in: range) {
            case .success(let value): config[keyPath: field] = value; return nil
            case .failure(let error): return error
            }
        }, render: { [String($0[keyPath: field])] })
    }

    static func boolean(_ section: String, _ key: String, _ field: WritableKeyPath<Configuration, Bool> & Sendable) -> KeySpec {
        KeySpec(section: section, key: key, apply: { config, text in
            switch ConfigValue.boolean(text) {
            case .success(let value): config[keyPath: field] = value; return nil
            case .failure(let error): return error
            }
        }, render: { [$0[keyPath: field] ? "yes" : "no"] })
    }

    static func absolutePath(_ section: String, _ key: String, _ field: WritableKeyPath<Configuration, String> & Sendable) -> KeySpec {
        KeySpec(section: section, key: key, apply: { config, text in
            guard let error = validateAbsolutePath(text) else { config[keyPath: field] = text; return nil }
            return error
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
    static let sections = ["Spool", "Journal", "Media", "Limits", "Metrics", "Log", "Status"]
    /// Categories are open-ended sections named `[Category ID]`.
    static let categoryPrefix = "Category "

    static let keys: [KeySpec] = [
        .absolutePath("Spool", "Directory", \.spool.directory),
        .duration("Spool", "RescanIntervalSec", \.spool.rescanIntervalSeconds, minimum: 1),
        .millis("Spool", "StableAgeSec", \.spool.stableAgeMillis, range: 0...3_600_000),
        .size("Spool", "MaxFileSize", \.spool.maxFileBytes, range: 1...(1 << 30)),

        .absolutePath("Journal", "StateDirectory", \.journal.stateDirectory),
        .size("Journal", "SegmentSize", \.journal.segmentBytes, range: (64 << 10)...(1 << 40)),
        .millis("Journal", "MaxBatchDelaySec", \.journal.maxBatchDelayMillis, range: 0...1000),
        .integer("Journal", "MaxBatchRecords", \.journal.maxBatchRecords, range: 1...1_000_000),
        KeySpec(section: "Journal", key: "CorruptionPolicy", apply: { config, text in
            guard let policy = CorruptionPolicy(rawValue: text) else {
                return ValueError("expected one of \(CorruptionPolicy.allCases.map(\.rawValue).joined(separator: ", ")), got '\(text)'")
            }
            config.journal.corruptionPolicy = policy
            return nil
        }, render: { [$0.journal.corruptionPolicy.rawValue] }),
        .duration("Journal", "CheckpointIntervalSec", \.journal.checkpointIntervalSeconds, minimum: 1),

        .boolean("Media", "Enabled", \.media.enabled),
        .duration("Media", "ConnectTimeoutSec", \.media.connectTimeoutSeconds, minimum: 0.001),
        .duration("Media", "TransferTimeoutSec", \.media.transferTimeoutSeconds, minimum: 0.001),
        .size("Media", "LowSpeedLimit", \.media.lowSpeedLimitBytes, range: 0...(1 << 30)),
        .duration("Media", "LowSpeedTimeSec", \.media.lowSpeedTimeSeconds, minimum: 1),
        .size("Media", "MaxSize", \.media.maxBytes, range: 1...(1 << 32)),
        .boolean("Media", "AllowHTTP", \.media.allowHTTP),
        .integer("Media", "MaxRedirects", \.media.maxRedirects, range: 0...50),
        KeySpec(section: "Media", key: "AllowNetworks", isList: true, apply: { config, text in
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
        KeySpec(section: "Media", key: "CAFile", apply: { config, text in
            if text.isEmpty { config.media.caFile = nil; return nil }
            if let error = KeySpec.validateAbsolutePath(text) { return error }
            config.media.caFile = text
            return nil
        }, render: { [$0.media.caFile ?? ""] }),
        .integer("Media", "Attempts", \.media.attempts, range: 1...20),
        .duration("Media", "PayloadDeadlineSec", \.media.payloadDeadlineSeconds, minimum: 0.001),
        .duration("Media", "DedupWindowSec", \.media.dedupWindowSeconds),
        .integer("Media", "ThumbnailMaxEdge", \.media.thumbnailMaxEdge, range: 16...8192),
        .integer("Media", "ThumbnailMaxPixels", \.media.thumbnailMaxPixels, range: 1...1_000_000_000),
        .absolutePath("Media", "CacheDirectory", \.media.cacheDirectory),

        .size("Limits", "MaxPayloadSize", \.limits.maxPayloadBytes, range: 64...(16 << 20)),
        .integer("Limits", "MaxDepth", \.limits.maxDepth, range: 1...1024),

        KeySpec(section: "Metrics", key: "TextfilePath", apply: { config, text in
            if text.isEmpty { config.metrics.textfilePath = nil; return nil }
            if let error = KeySpec.validateAbsolutePath(text) { return error }
            guard text.hasSuffix(".prom") else {
                return ValueError("node_exporter's textfile collector reads only *.prom files, got '\(text)'")
            }
            config.metrics.textfilePath = text
            return nil
        }, render: { [$0.metrics.textfilePath ?? ""] }),
        .duration("Metrics", "IntervalSec", \.metrics.intervalSeconds, minimum: 1),

        KeySpec(section: "Log", key: "Identifier", apply: { config, text in
            guard !text.isEmpty, text.count <= 64, text.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "[" && $0 != ":" }) else {
                return ValueError("expected a short word without spaces, '[' or ':', got '\(text)'")
            }
            config.log.identifier = text
            return nil
        }, render: { [$0.log.identifier] }),
        .integer("Log", "MaxEventsPerSec", \.log.maxEventsPerSecond, range: 1...100_000),

        .duration("Status", "IntervalSec", \.status.intervalSeconds, minimum: 0.1),
    ]

    static let byPath: [String: KeySpec] = Dictionary(uniqueKeysWithValues: keys.map { ($0.path, $0) })

    static func keys(in section: String) -> [KeySpec] { keys.filter { $0.section == section } }
}
