import PushJournal
import PushPayload
import PushTransliteration

/// One key of pushspool.conf: how to parse it into the configuration and how to print it back.
///
/// The table is the single place that names keys and says what they do, so loading,
/// `config show`, docs/configuration.md and pushspool.conf(5) (both rendered from it by
/// `ConfigReference`) and the shipped default file cannot drift apart (tests walk it against
/// the shipped file and fail when a rendered document is stale).
struct KeySpec: Sendable {
    var section: String
    var key: String
    /// List keys append on repetition and an empty value resets them, as in systemd units.
    var isList = false
    /// The accepted range of a number, duration or size; `nil` for other kinds.
    var bounds: KeyBounds? = nil
    /// A value this key must refuse (for the schema walk test): past the range, or malformed.
    var invalidExample: String
    /// What the key does, for the reference documents: one sentence fragment, `code` in
    /// backticks, links as `[text](file.md)` relative to docs/.
    var summary = ""
    /// The values a key without `bounds` takes (`boolean`, `absolute path`, ...), in the same
    /// light markup; a bounded key's range is `bounds.rangeText`.
    var valuesText: String? = nil
    var apply: @Sendable (inout Configuration, String) -> ValueError?
    var render: @Sendable (Configuration) -> [String]

    var path: String { "\(section).\(key)" }

    /// The accepted values as the reference documents state them.
    var rangeDescription: String { bounds?.rangeText ?? valuesText ?? "" }

    /// This key with its documentation; `values` replaces what the factory says it takes.
    func described(_ summary: String, values: String? = nil) -> KeySpec {
        var spec = self
        spec.summary = summary
        if let values { spec.valuesText = values }
        return spec
    }
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
        KeySpec(section: section, key: key, invalidExample: "maybe", valuesText: "boolean", apply: { config, text in
            switch ConfigValue.boolean(text) {
            case .success(let value): config[keyPath: field] = value; return nil
            case .failure(let error): return error
            }
        }, render: { [$0[keyPath: field] ? "yes" : "no"] })
    }

    static func absolutePath(_ section: String, _ key: String, _ field: WritableKeyPath<Configuration, String> & Sendable) -> KeySpec {
        KeySpec(section: section, key: key, invalidExample: "relative/path", valuesText: "absolute path", apply: { config, text in
            guard let error = validateAbsolutePath(text) else { config[keyPath: field] = text; return nil }
            return error
        }, render: { [$0[keyPath: field]] })
    }

    /// An absolute path, or empty for "not set".
    static func optionalAbsolutePath(_ section: String, _ key: String, _ field: WritableKeyPath<Configuration, String> & Sendable) -> KeySpec {
        KeySpec(section: section, key: key, invalidExample: "relative/path", valuesText: "absolute path", apply: { config, text in
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
        KeySpec(section: "Outbox", key: key, invalidExample: "has space", valuesText: "`[A-Za-z0-9._-]`, up to 128", apply: { config, text in
            guard text.count <= 128, text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
                return ValueError("expected up to 128 characters of [A-Za-z0-9._-], got '\(text)'")
            }
            config[keyPath: field] = text
            return nil
        }, render: { [$0[keyPath: field]] })
    }

    /// A Mindbox system name (an operation, a customer identifier): it goes into a query string
    /// or is a JSON member name the project defined in Mindbox, from the same alphabet as the
    /// endpoint ids.
    static func mindboxSystemName(_ key: String, _ field: WritableKeyPath<Configuration, String> & Sendable, allowEmpty: Bool) -> KeySpec {
        KeySpec(section: "Outbox", key: key, invalidExample: "has space", valuesText: allowEmpty ? "`[A-Za-z0-9._-]`, up to 128, or empty" : "`[A-Za-z0-9._-]`, 1 to 128", apply: { config, text in
            guard text.count <= 128, allowEmpty || !text.isEmpty, text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
                return ValueError("expected \(allowEmpty ? "up to" : "1 to") 128 characters of [A-Za-z0-9._-], got '\(text)'")
            }
            config[keyPath: field] = text
            return nil
        }, render: { [$0[keyPath: field]] })
    }

    static func endpointURL(_ section: String, _ key: String, _ field: WritableKeyPath<Configuration, String> & Sendable) -> KeySpec {
        KeySpec(section: section, key: key, invalidExample: "ftp://example.com", valuesText: "http(s) base URL", apply: { config, text in
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
        .absolutePath("Spool", "Directory", \.spool.directory)
            .described("the spool root holding `tmp/`, `incoming/`, `processing/`, `failed/`"),
        .duration("Spool", "RescanIntervalSec", \.spool.rescanInterval, range: .seconds(1) ... .day)
            .described("full rescan period, a safety net behind inotify"),
        .duration("Spool", "StableAgeSec", \.spool.stableAge, range: .zero ... .hour)
            .described("a file a rescan finds is taken once its size has not changed for this long"),
        .size("Spool", "MaxFileSize", \.spool.maxFileBytes, range: 1...(1 << 30))
            .described("larger spool files are quarantined unread; at least `[Limits] MaxPayloadSize=`"),
        .duration("Spool", "FailedRetainSec", \.spool.failedRetain, range: .zero ... .seconds(10 * 366 * 86_400))
            .described("quarantined files in `failed/` older than this are removed with their reason files and a log event, like Postfix's `maximal_queue_lifetime` (0 = keep until an operator acts)"),

        .absolutePath("Journal", "StateDirectory", \.journal.stateDirectory)
            .described("journal segments, dedup checkpoint and media"),
        .size("Journal", "SegmentSize", \.journal.segmentBytes, range: (64 << 10)...(16 << 30))
            .described("a segment is sealed and a new one started beyond this size"),
        .duration("Journal", "MaxBatchDelaySec", \.journal.maxBatchDelay, range: .zero ... .seconds(1))
            .described("group commit: the longest a record waits for company before its fsync — only after a batch of several, and never longer than the last fsync took"),
        .integer("Journal", "MaxBatchRecords", \.journal.maxBatchRecords, range: 1...1_000_000)
            .described("group commit: the most records one fsync covers"),
        KeySpec(section: "Journal", key: "CorruptionPolicy", invalidExample: "ignore", apply: { config, text in
            guard let policy = CorruptionPolicy(rawValue: text) else {
                return ValueError("expected one of \(CorruptionPolicy.allCases.map(\.rawValue).joined(separator: ", ")), got '\(text)'")
            }
            config.journal.corruptionPolicy = policy
            return nil
        }, render: { [$0.journal.corruptionPolicy.rawValue] })
            .described("a corrupt record mid-segment: refuse to start, or move the segment aside", values: "`refuse`, `quarantine-segment`"),
        .duration("Journal", "CheckpointIntervalSec", \.journal.checkpointInterval, range: .seconds(1) ... .day)
            .described("how often the dedup index is checkpointed (on its own thread, when records were committed since the last one; also every 50,000 records and at stop), so a restart reads the index instead of rescanning segments"),
        .duration("Journal", "RetainSec", \.journal.retain, range: .zero ... .seconds(10 * 366 * 86_400))
            .described("sealed segments last written longer ago than this are retired (deleted, or archived with `Archive=`) by retention; never one holding records a follower (inbox index, outbox, export) has not made durable yet (0 = no age limit)"),
        .size("Journal", "RetainBytes", \.journal.retainBytes, range: 0...(64 << 30))
            .described("the oldest sealed segments are retired while the journal is larger than this (0 = no size limit)"),
        KeySpec(section: "Journal", key: "Archive", invalidExample: "gzip", apply: { config, text in
            // "yes" names the one compressor there is, so a boolean reads naturally too.
            switch text {
            case "zstd", "yes", "true", "on": config.journal.archive = .zstd
            case "no", "false", "off": config.journal.archive = .no
            default: return ValueError("expected no or zstd (yes = zstd), got '\(text)'")
            }
            return nil
        }, render: { [$0.journal.archive.rawValue] })
            .described("retired segments are compressed with zstd into `archive/` instead of deleted; `pushspoolctl journal cat --archive` reads them", values: "`no`, `zstd` (`yes` = `zstd`)"),
        .duration("Journal", "DedupWindowSec", \.journal.dedupWindow, range: .zero ... .seconds(10 * 366 * 86_400))
            .described("how long a payload id is remembered for dedup; 0 = automatic: `RetainSec=` plus one day, or forever without `RetainSec=`. A re-delivery after the window is journaled again as a new record"),

        .boolean("Media", "Enabled", \.media.enabled)
            .described("download images referenced by payloads"),
        .duration("Media", "ConnectTimeoutSec", \.media.connectTimeout, range: .milliseconds(1) ... .hour)
            .described("TCP and TLS connect; at most `TransferTimeoutSec=`"),
        .duration("Media", "TransferTimeoutSec", \.media.transferTimeout, range: .milliseconds(1) ... .day)
            .described("one whole transfer, redirects included; at most `PayloadDeadlineSec=`"),
        .size("Media", "LowSpeedLimit", \.media.lowSpeedLimitBytes, range: 0...(1 << 30))
            .described("bytes per second below which a transfer counts as stalled"),
        .duration("Media", "LowSpeedTimeSec", \.media.lowSpeedTime, range: .seconds(1) ... .hour)
            .described("how long a stall is tolerated"),
        .size("Media", "MaxSize", \.media.maxBytes, range: 1...(1 << 32))
            .described("larger images are cut off"),
        .boolean("Media", "AllowHTTP", \.media.allowHTTP)
            .described("allow plain `http://` URLs"),
        .integer("Media", "MaxRedirects", \.media.maxRedirects, range: 0...50)
            .described("redirects followed per URL"),
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
        }, render: { [$0.media.allowNetworks.joined(separator: " ")] })
            .described("networks exempt from the private/loopback/link-local refusal (SSRF guard)", values: "CIDR list"),
        .integer("Media", "MaxConcurrent", \.media.maxConcurrent, range: 1...1024)
            .described("transfers at once"),
        .integer("Media", "MaxWaiting", \.media.maxWaiting, range: 1...65536)
            .described("payloads waiting for media; past it records land with `media_backlog_full`"),
        KeySpec(section: "Media", key: "CAFile", invalidExample: "relative/ca.pem", apply: { config, text in
            if text.isEmpty { config.media.caFile = nil; return nil }
            if let error = KeySpec.validateAbsolutePath(text) { return error }
            config.media.caFile = text
            return nil
        }, render: { [$0.media.caFile ?? ""] })
            .described("PEM CA bundle for image servers; empty = the system's store", values: "absolute path"),
        .integer("Media", "Attempts", \.media.attempts, range: 1...20)
            .described("tries per URL, the first included"),
        .duration("Media", "PayloadDeadlineSec", \.media.payloadDeadline, range: .milliseconds(1) ... .day)
            .described("all media of one payload must be done by then"),
        .duration("Media", "DedupWindowSec", \.media.dedupWindow, range: .zero ... .week)
            .described("a URL fetched within this window is not fetched again"),
        .integer("Media", "ThumbnailMaxEdge", \.media.thumbnailMaxEdge, range: 16...8192)
            .described("thumbnail size, pixels on the longer side"),
        .integer("Media", "ThumbnailMaxPixels", \.media.thumbnailMaxPixels, range: 1...1_000_000_000)
            .described("larger images are not decoded (decompression bombs)"),

        .size("Limits", "MaxPayloadSize", \.limits.maxPayloadBytes, range: 64...(16 << 20))
            .described("the largest payload accepted (APNs allows 4 KiB)"),
        .integer("Limits", "MaxDepth", \.limits.maxDepth, range: 1...1024)
            .described("JSON nesting depth"),

        KeySpec(section: "Metrics", key: "TextfilePath", invalidExample: "/var/lib/pushspool.txt", apply: { config, text in
            if text.isEmpty { config.metrics.textfilePath = nil; return nil }
            if let error = KeySpec.validateAbsolutePath(text) { return error }
            guard text.hasSuffix(".prom") else {
                return ValueError("node_exporter's textfile collector reads only *.prom files, got '\(text)'")
            }
            config.metrics.textfilePath = text
            return nil
        }, render: { [$0.metrics.textfilePath ?? ""] })
            .described("Prometheus textfile for node_exporter; empty = not written", values: "absolute path ending in `.prom`"),
        .duration("Metrics", "IntervalSec", \.metrics.interval, range: .seconds(1) ... .day)
            .described("how often the textfile is rewritten"),

        KeySpec(section: "Log", key: "Identifier", invalidExample: "push spool", apply: { config, text in
            guard !text.isEmpty, text.count <= 64, text.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "[" && $0 != ":" }) else {
                return ValueError("expected a short word without spaces, '[' or ':', got '\(text)'")
            }
            config.log.identifier = text
            return nil
        }, render: { [$0.log.identifier] })
            .described("`SYSLOG_IDENTIFIER` of events (a configuration error at start is logged as `pushspoold`)", values: "word without spaces, `[` or `:`"),
        .integer("Log", "MaxEventsPerSec", \.log.maxEventsPerSecond, range: 1...100_000)
            .described("per event kind; beyond it events are counted and summarised once a second"),
        KeySpec(section: "Log", key: "UserIds", invalidExample: "clear", apply: { config, text in
            guard let choice = LogUserIds(rawValue: text) else {
                return ValueError("expected one of \(LogUserIds.allCases.map(\.rawValue).joined(separator: ", ")), got '\(text)'")
            }
            config.log.userIds = choice
            return nil
        }, render: { [$0.log.userIds.rawValue] })
            .described("how events name a user: `hash` logs `PUSH_USER_HASH=` (16 hex digits of a keyed hash under `<state>/erase.key`; `pushspoolctl user hash USER` prints it), `plain` logs `PUSH_USER=` with the id, which journald then keeps until its own retention drops it — an erasure cannot reach it", values: "`hash` or `plain`"),

        .duration("Status", "IntervalSec", \.status.interval, range: .milliseconds(100) ... .hour)
            .described("the least time between two `sd_notify` `STATUS=` updates"),

        .boolean("Inbox", "Enabled", \.inbox.enabled)
            .described("pushspoold keeps the Notification Center index (`<state>/inbox/index.sqlite`) up to date"),
        .duration("Inbox", "RetentionSec", \.inbox.retention, range: .zero ... .seconds(10 * 366 * 86_400))
            .described("items older than this are no longer listed or counted (0 = no limit; the journal keeps them): they leave at that moment, like an expiry; a reload applies a new value to queries at once, and the index is rebuilt for it when pushspoold next starts"),
        .boolean("Inbox", "ListModals", \.inbox.listModals)
            .described("list and count Infobip MODAL mirror pushes in the inbox like banners; `no`: a modal is presented in-app only (`GET /v1/inapp`, `nc inapp`), as Infobip does ([vendor-rules.md](vendor-rules.md)); a change makes pushspoold rebuild the index"),
        KeySpec(section: "Inbox", key: "Source", invalidExample: "kafka", apply: { config, text in
            guard let source = InboxSource(rawValue: text) else {
                return ValueError("expected one of \(InboxSource.allCases.map(\.rawValue).joined(separator: ", ")), got '\(text)'")
            }
            config.inbox.source = source
            return nil
        }, render: { [$0.inbox.source.rawValue] })
            .described("where the index is built from: this host's journal (pushspoold keeps it), or the `[Export]` stream, followed by pushspool-inbox itself with item ids = stream seqs; a `nats` node publishes the state changes it accepts (HTTP, `pushspoolctl nc`) to that stream instead of the spool; see [design/fleet-inbox.md](design/fleet-inbox.md)", values: "`journal` or `nats`"),
        .optionalAbsolutePath("Inbox", "TokenSecretFile", \.inbox.tokenSecretFile)
            .described("pushspool-inbox: file holding the HMAC-SHA256 secret user tokens are made with; empty = `$CREDENTIALS_DIRECTORY/inbox-token-secret` (`LoadCredential=`)"),
        .optionalAbsolutePath("Inbox", "AdminTokenFile", \.inbox.adminTokenFile)
            .described("pushspool-inbox: file holding the admin bearer token (at least 16 bytes) of the `/v1/admin/` routes (erasure requests); empty = `$CREDENTIALS_DIRECTORY/inbox-admin-token` when it exists, else those routes refuse every request"),
        .boolean("Inbox", "SelfErase", \.inbox.selfErase)
            .described("pushspool-inbox: a user's own token may request the erasure of that user (`POST /v1/admin/users/{user}/erase`), and of nobody else; `no`: admin token only"),
        .integer("Inbox", "MaxConnections", \.inbox.maxConnections, range: 1...10_000)
            .described("pushspool-inbox: connections at once, live streams included; with `--threads N` libmicrohttpd gives each worker thread MaxConnections/N (a thread whose share is full refuses a connection even if another has room), so raise it with N"),
        .integer("Inbox", "MaxConnectionsPerIP", \.inbox.maxConnectionsPerIP, range: 1...10_000)
            .described("pushspool-inbox: connections at once from one client address"),
        .duration("Inbox", "ConnectionTimeoutSec", \.inbox.connectionTimeout, range: .seconds(1) ... .hour)
            .described("pushspool-inbox: a request (line, headers, body) not complete this long after the accept or the end of the previous response closes the connection, however steadily it trickles (slowloris); also the idle time of a kept-alive connection; fractions are kept"),
        .size("Inbox", "MaxRequestSize", \.inbox.maxRequestBytes, range: 1024...(1 << 20))
            .described("pushspool-inbox: the largest request body read (413 past it); request line and headers are bounded at 32K"),

        .boolean("Outbox", "Enabled", \.outbox.enabled)
            .described("deliver Notification Center events (`nc.opened`, `nc.open`, `nc.action`) to Mindbox and Infobip: pushspoold those it journals; pushspool-inbox with `[Inbox] Source=nats` those inbox nodes publish to the stream, each by one node (the shared consumer `pushspool-outbox`; give every node the same `[Outbox]`)"),
        .endpointURL("Outbox", "MindboxURL", \.outbox.mindboxURL)
            .described("Mindbox API base; operations go to `/v3/operations/async`"),
        .mindboxEndpoint("MindboxEndpointId", \.outbox.mindboxEndpointId)
            .described("the app's Mindbox endpoint id for both platforms, and the fallback of the two keys below; all three empty = Mindbox events are not sent"),
        .mindboxEndpoint("MindboxEndpointIOS", \.outbox.mindboxEndpointIOS)
            .described("the endpoint for events about iOS pushes (Mindbox apps have one per platform); empty = `MindboxEndpointId=`"),
        .mindboxEndpoint("MindboxEndpointAndroid", \.outbox.mindboxEndpointAndroid)
            .described("the endpoint for events about Android pushes; empty = `MindboxEndpointId=`. `nc.opened` names no push: it goes to the endpoint of the platform it names (`event.platform`), else to `MindboxEndpointId=`; one naming no platform without `MindboxEndpointId=` is parked"),
        KeySpec(section: "Outbox", key: "MindboxTransliteration", invalidExample: "Cyrillic-Klingon", apply: { config, text in
            // ICU itself judges the id, so what loads here is what the outbox can open.
            if text.lowercased() != "none", let error = Transliterator.check(id: text) {
                return ValueError("\(error.message), or 'none' to send the push name as it came")
            }
            config.outbox.mindboxTransliteration = text
            return nil
        }, render: { [$0.outbox.mindboxTransliteration] })
            .described("how NCPushOpen's `mobPushTranslateName` is made from the push name (ICU from Debian's libicu; \"Весенняя распродажа\" → \"Vesennaa rasprodaza\"); checked with ICU when the configuration loads; `none` sends the name as the push had it. See [vendor-rules.md](vendor-rules.md#mindbox)", values: "an ICU transform id, or `none`"),
        .mindboxSystemName("MindboxOperationNCOpen", \.outbox.mindboxOperationNCOpen, allowEmpty: false)
            .described("the system name of the project's \"Notification Center opened\" operation (`nc.opened`); projects name their operations themselves. See [vendor-rules.md](vendor-rules.md#mindbox)"),
        .mindboxSystemName("MindboxOperationNCPushOpen", \.outbox.mindboxOperationNCPushOpen, allowEmpty: false)
            .described("the system name of the project's \"push opened from the Notification Center\" operation (`nc.open` of a Mindbox push)"),
        .mindboxSystemName("MindboxCustomerIdKey", \.outbox.mindboxCustomerIdKey, allowEmpty: true)
            .described("the system name of the Mindbox customer identifier (an external id such as `websiteID`) that holds pushspool's user id: NCOpen and NCPushOpen of an event with a user carry `customer: {ids: {<name>: <user>}}`, as the SDK's operations do; empty = no `customer` block (Mindbox knows the customer by the device only)"),
        .boolean("Outbox", "MindboxPushClicks", \.outbox.mindboxPushClicks)
            .described("also report an item opened (`nc.open`) or a Mindbox button acted on (`nc.action`) as the SDK's push click: `MobilePush.TrackClick` with the push's `uniqueKey` and the button's. Off: the SDK reports a click for a tap on the system notification, and the guide reports an open in the Notification Center as NCPushOpen only. See [vendor-rules.md](vendor-rules.md#mindbox)"),
        .optionalAbsolutePath("Outbox", "MindboxSecretKeyFile", \.outbox.mindboxSecretKeyFile)
            .described("file holding the Mindbox secret key, mode 0600 or stricter, owned by the daemon's user; empty = Mindbox events are not sent"),
        .endpointURL("Outbox", "InfobipURL", \.outbox.infobipURL)
            .described("Infobip Mobile Messaging API base; seen reports go to `/mobile/2/messages/seen`, MO to `/mobile/1/messages/mo`"),
        .optionalAbsolutePath("Outbox", "InfobipAppKeyFile", \.outbox.infobipAppKeyFile)
            .described("file holding the Infobip application code, mode 0600 or stricter, owned by the daemon's user; empty = Infobip reports are not sent"),
        .boolean("Outbox", "AllowHTTP", \.outbox.allowHTTP)
            .described("allow plain `http://` endpoints"),
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
        }, render: { [$0.outbox.allowNetworks.joined(separator: " ")] })
            .described("networks exempt from the private/loopback/link-local refusal", values: "CIDR list"),
        .duration("Outbox", "ConnectTimeoutSec", \.outbox.connectTimeout, range: .milliseconds(1) ... .hour)
            .described("TCP and TLS connect of one POST; at most `RequestTimeoutSec=`"),
        .duration("Outbox", "RequestTimeoutSec", \.outbox.requestTimeout, range: .milliseconds(1) ... .hour)
            .described("one whole POST; on a `[Inbox] Source=nats` node the fleet outbox's consumer hands an unanswered event to another node after this + 5 s"),
        .integer("Outbox", "MaxAttempts", \.outbox.maxAttempts, range: 1...100)
            .described("tries per event (5xx, 429, network errors) before it is parked; fleet-wide (`[Inbox] Source=nats`) also the most POSTs a vendor gets for one event, across nodes (the shared consumer hands an event out at most this + 1 times)"),
        .duration("Outbox", "RetryBaseSec", \.outbox.retryBase, range: .milliseconds(10) ... .hour)
            .described("first retry delay; doubled per attempt (at most 10 min), with jitter; a 429/503 `Retry-After` is honoured up to that ceiling"),
        .duration("Outbox", "MaxAgeSec", \.outbox.maxAge, range: .seconds(1) ... .week)
            .described("an event not delivered by then is parked instead of sent stale"),
        .boolean("Export", "Enabled", \.export.enabled)
            .described("publish every journal record to NATS JetStream (see Export)"),
        KeySpec(section: "Export", key: "URL", isList: true, invalidExample: "http://example.com", apply: { config, text in
            if text.isEmpty { config.export.urls = []; return nil }
            for url in text.split(whereSeparator: { $0 == " " || $0 == "," }).map(String.init) {
                if let error = natsURLError(url) { return error }
                if !config.export.urls.contains(url) { config.export.urls.append(url) }
            }
            return nil
        }, render: { [$0.export.urls.joined(separator: " ")] })
            .described("NATS servers; empty = `nats://127.0.0.1:4222`; the client fails over among them and the servers the cluster announces", values: "`nats://` or `tls://` host:port list"),
        KeySpec(section: "Export", key: "Subject", invalidExample: "push.*", apply: { config, text in
            if let problem = subjectTemplateProblem(text) { return ValueError("subject '\(text)' \(problem)") }
            config.export.subject = text
            return nil
        }, render: { [$0.export.subject] })
            .described("subject each record is published to; placeholders become `[A-Za-z0-9_-]` tokens", values: "subject with `{vendor}`, `{platform}`"),
        KeySpec(section: "Export", key: "Stream", invalidExample: "has.dot", apply: { config, text in
            guard !text.isEmpty, text.utf8.count <= 64, text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }) else {
                return ValueError("expected a stream name of 1 to 64 characters [A-Za-z0-9_-], got '\(text)'")
            }
            config.export.stream = text
            return nil
        }, render: { [$0.export.stream] })
            .described("JetStream stream; used as it is when it exists, created (file storage, subjects from `Subject=`) when not", values: "`[A-Za-z0-9_-]`, up to 64"),
        .integer("Export", "Replicas", \.export.replicas, range: 1...5)
            .described("replicas of a stream the exporter creates (3 = R3, recommended in a cluster)"),
        .duration("Export", "DuplicateWindowSec", \.export.duplicateWindow, range: .seconds(1) ... .week)
            .described("duplicate window of a stream the exporter creates: a re-publish within it is dropped by `Nats-Msg-Id`"),
        .integer("Export", "MaxPending", \.export.maxPending, range: 1...65_536)
            .described("publishes awaiting a PubAck at most"),
        .duration("Export", "AckTimeoutSec", \.export.ackTimeout, range: .milliseconds(100) ... .seconds(600))
            .described("a PubAck not back by then fails the publish; export resends from the cursor"),
        .integer("Export", "LagWarnRecords", \.export.lagWarnRecords, range: 1...1_000_000_000)
            .described("a journald event (`export-lag`) when the export lag reaches this many records"),
        KeySpec(section: "Export", key: "HostId", invalidExample: "a:b", apply: { config, text in
            guard text.utf8.count <= 64, text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
                return ValueError("expected up to 64 characters [A-Za-z0-9._-] (empty = /etc/machine-id), got '\(text)'")
            }
            // Inbox nodes publish events with the message id `event:<id>`, the form an
            // exporter with this host id would give its records.
            guard text != "event" else { return ValueError("'event' is reserved (the message ids of events inbox nodes publish)") }
            config.export.hostId = text
            return nil
        }, render: { [$0.export.hostId] })
            .described("host part of `Nats-Msg-Id` (`<host id>:<key>`, the key percent-encoded; `event` is reserved for the events inbox nodes publish); empty = `/etc/machine-id`, `<machine-id>.NAME` for `pushspoold@NAME`; one per inbox node (`Source=nats`): a node finding another live node with its host id refuses to start (exit 78)", values: "`[A-Za-z0-9._-]`, up to 64"),
        .optionalAbsolutePath("Export", "CredentialsFile", \.export.credentialsFile)
            .described("NATS `.creds` file; empty = `$CREDENTIALS_DIRECTORY/nats.creds` when present (`LoadCredential=`)"),
        .optionalAbsolutePath("Export", "TLSCAFile", \.export.tlsCAFile)
            .described("CA bundle for `tls://`; empty = `$CREDENTIALS_DIRECTORY/nats-ca.pem` when present"),
        .optionalAbsolutePath("Export", "TLSCertFile", \.export.tlsCertFile)
            .described("client certificate; empty = `$CREDENTIALS_DIRECTORY/nats-cert.pem` when present"),
        .optionalAbsolutePath("Export", "TLSKeyFile", \.export.tlsKeyFile)
            .described("client key; empty = `$CREDENTIALS_DIRECTORY/nats-key.pem` when present"),
        .optionalAbsolutePath("Export", "ErasureKeyFile", \.export.erasureKeyFile)
            .described("the fleet erasure key (32 raw bytes, mode 0600), the same file on every ingest host and inbox node: "
                       + "installed at start as `<state>/erase.key`, so erasure hashes agree fleet-wide; a different `erase.key` "
                       + "already there refuses the start; empty = `$CREDENTIALS_DIRECTORY/erase-key` when present, else none "
                       + "(each instance keeps its own key)"),
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
