@preconcurrency import Glibc
import PushSystem
import PushJournal
import PushPayload

/// The daemon's whole configuration, with the defaults it runs with when
/// /etc/pushspool/pushspool.conf is absent.
///
/// Durations are `Duration`s, bounded by the schema (at most a week), so a reader converts
/// them with `clampedNanoseconds`/`clampedMilliseconds`/`secondsValue` (PushSystem) and never
/// multiplies a `Double` out itself. Sizes are `Int` bytes, bounded likewise (at most 16 GiB).
///
/// `Sendable` and `Equatable`: a plain value, so a reload can build a new one, validate it
/// whole and swap it in, and tests can compare.
package struct Configuration: Sendable, Equatable {
    package var spool = SpoolSettings()
    package var journal = JournalSettings()
    package var media = MediaSettings()
    package var limits = LimitsSettings()
    package var categories: [CategoryDefinition] = []
    /// `[Feed NAME]` sections, in the order they first appear.
    package var feeds: [FeedDefinition] = []
    package var metrics = MetricsSettings()
    package var log = LogSettings()
    package var status = StatusSettings()
    package var outbox = OutboxSettings()
    package var inbox = InboxSettings()
    package var export = ExportSettings()

    package init() {}
}

/// `[Spool]`: where payloads arrive and how they are picked up.
package struct SpoolSettings: Sendable, Equatable {
    /// `Directory=`: the spool root holding tmp/, incoming/, processing/, failed/.
    package var directory = "/var/spool/pushspool"
    /// `RescanIntervalSec=`: the safety-net full rescan period (1s to 1d).
    package var rescanInterval: Duration = .seconds(60)
    /// `StableAgeSec=`: how long a file's size must stay unchanged before a rescan takes it
    /// (0 to 1h).
    package var stableAge: Duration = .seconds(1)
    /// `MaxFileSize=`: larger spool files are quarantined unread.
    package var maxFileBytes = 1 << 20
    /// `FailedRetainSec=`: quarantined files in failed/ older than this are removed with their
    /// reason files (Postfix's `maximal_queue_lifetime`); zero keeps them until an operator acts.
    package var failedRetain: Duration = .zero
}

/// Where the inbox index is built from (`[Inbox] Source=`).
package enum InboxSource: String, Sendable, Equatable, CaseIterable {
    /// pushspoold follows this host's journal into the index.
    case journal
    /// pushspool-inbox follows the `[Export]` JetStream stream (every ingest host's records)
    /// into the index through a durable pull consumer; pushspoold leaves the index alone.
    case nats
}

/// `[Journal]`: the durable record store.
package struct JournalSettings: Sendable, Equatable {
    /// `StateDirectory=`: journal segments, the dedup checkpoint and media live here.
    package var stateDirectory = "/var/lib/pushspool"
    /// `SegmentSize=`: a segment is sealed and a new one started beyond this size.
    package var segmentBytes = 64 << 20
    /// `MaxBatchDelaySec=`: the longest a record waits for its group-commit fsync (0 to 1s).
    package var maxBatchDelay: Duration = .milliseconds(2)
    /// `MaxBatchRecords=`: the most records one fsync covers.
    package var maxBatchRecords = 1024
    /// `CorruptionPolicy=`: `refuse` or `quarantine-segment`.
    package var corruptionPolicy = CorruptionPolicy.refuse
    /// `CheckpointIntervalSec=`: how often the dedup index is checkpointed (1s to 1d).
    package var checkpointInterval: Duration = .seconds(60)
    /// `RetainSec=`: sealed segments last written longer ago than this are retired (deleted or
    /// archived); zero = no age limit.
    package var retain: Duration = .zero
    /// `RetainBytes=`: the oldest sealed segments are retired while the journal is larger than
    /// this; zero = no size limit.
    package var retainBytes = 0
    /// `Archive=`: retired segments are compressed with zstd into archive/ instead of deleted.
    package var archive = JournalArchiveMode.no
    /// `DedupWindowSec=`: how long a payload id is remembered for dedup; zero = automatic
    /// (`effectiveDedupWindow`).
    package var dedupWindow: Duration = .zero

    /// The dedup window in force: `DedupWindowSec=` when set, else `RetainSec=` plus one day
    /// (longer than retention, so a re-delivery of a retired record is still a duplicate), else
    /// `nil` = unlimited (no retention, the index keeps every id as before).
    package var effectiveDedupWindow: Duration? {
        if dedupWindow > .zero { return dedupWindow }
        if retain > .zero { return retain + .seconds(86_400) }
        return nil
    }
}

/// `[Journal] Archive=`: what retention does with a retired segment.
package enum JournalArchiveMode: String, Sendable, Equatable, CaseIterable {
    /// Delete it.
    case no
    /// Compress it with zstd into archive/ (`journal cat --archive` reads it).
    case zstd
}

/// `[Media]`: downloading images referenced by payloads.
package struct MediaSettings: Sendable, Equatable {
    /// `Enabled=`
    package var enabled = true
    /// `ConnectTimeoutSec=` (1ms to 1h)
    package var connectTimeout: Duration = .seconds(5)
    /// `TransferTimeoutSec=`: the whole transfer, redirects included (1ms to 1d).
    package var transferTimeout: Duration = .seconds(20)
    /// `LowSpeedLimit=`: bytes per second below which a transfer counts as stalled.
    package var lowSpeedLimitBytes = 1024
    /// `LowSpeedTimeSec=`: how long a stall is tolerated (1s to 1h).
    package var lowSpeedTime: Duration = .seconds(10)
    /// `MaxSize=`
    package var maxBytes = 10 << 20
    /// `AllowHTTP=`: plain http is refused unless enabled.
    package var allowHTTP = false
    /// `MaxRedirects=`
    package var maxRedirects = 5
    /// `AllowNetworks=`: CIDRs exempt from the private/loopback/link-local refusal (SSRF
    /// guard), canonical `address/prefix`.
    package var allowNetworks: [String] = []
    /// `MaxConcurrent=`
    package var maxConcurrent = 16
    /// Payloads that may wait for their media at once; past it, records land with the media
    /// skipped (`media_backlog_full`) so a dead image server cannot hold up intake.
    package var maxWaiting = 1024
    /// A CA bundle for intranet image servers with a private CA (PEM); `nil` = the system's.
    package var caFile: String? = nil
    /// `Attempts=`: tries per URL, the first included.
    package var attempts = 3
    /// `PayloadDeadlineSec=`: all media of one payload must be done by then (1ms to 1d).
    package var payloadDeadline: Duration = .seconds(60)
    /// `DedupWindowSec=`: a URL fetched within this window is not fetched again (0 to 1w).
    package var dedupWindow: Duration = .seconds(3600)
    /// `ThumbnailMaxEdge=`: pixels on the longer side.
    package var thumbnailMaxEdge = 320
    /// `ThumbnailMaxPixels=`: larger images are not decoded (decompression bombs).
    package var thumbnailMaxPixels = 40_000_000
}

/// `[Limits]`: bounds on what a payload may be.
package struct LimitsSettings: Sendable, Equatable {
    /// `MaxPayloadSize=`
    package var maxPayloadBytes = 4096
    /// `MaxDepth=`: JSON nesting depth.
    package var maxDepth = 32
}

/// An interactive-notification category the app registered (`[Category ID]` sections), used
/// to resolve `aps.category` into actions.
package struct CategoryDefinition: Sendable, Equatable {
    package var id: String
    package var actions: [CategoryAction]

    package init(id: String, actions: [CategoryAction]) {
        self.id = id
        self.actions = actions
    }
}

/// A named filter of the inbox (`[Feed NAME]`): its list and counts (`?feed=NAME`, `nc list
/// --feed NAME`). The conditions that are set must all hold; a list matches any of its values.
package struct FeedDefinition: Sendable, Equatable {
    package var name: String
    /// `Categories=`: the item's category is one of these.
    package var categories: [String] = []
    /// `Vendors=`: the item's vendor is one of these.
    package var vendors: [String] = []
    /// `PayloadKey=`: the push's custom payload has this top-level member (not null).
    package var payloadKey: String?
    /// `PayloadValue=`: and the member's value, as text, is this.
    package var payloadValue: String?
    /// `Other=yes`: "everything else", the items no other feed takes; no other condition.
    package var other = false

    package init(name: String) { self.name = name }

    /// The most feeds (an index keeps an item's feeds in a 32-bit mask).
    package static let maximum = 32
}

/// The configuration's rules for a category's actions (`Action=ID:TITLE:OPTION,OPTION`, made
/// a text-input action by `TextInput=ID:BUTTON:PLACEHOLDER`). The action itself is the
/// payload model's ``PushPayload/CategoryAction``: one definition, which the loader fills.
extension CategoryAction {
    /// The option words `Action=` accepts: Infobip's SDKs' action flags.
    package static var knownOptions: [String] { ActionOption.allCases.map(\.rawValue) }
    /// iOS shows at most four actions of a category; more are an error rather than silently lost.
    package static let maximumPerCategory = 4
}

extension Configuration {
    /// The normaliser's category table: Infobip's built-in `mm_accept_decline` plus the
    /// configured categories, text inputs included. The loader checks categories by the same
    /// rule as ``CategoryTable/adding(_:)``, so this throws only for what it let through by
    /// mistake; the caller reports that rather than dropping the category silently.
    package func categoryTable() throws(CategoryTableError) -> CategoryTable {
        try CategoryTable.builtIn.adding(contentsOf: categories.map { definition in
            NotificationCategory(id: definition.id, actions: definition.actions)
        })
    }
}

/// `[Metrics]`: the Prometheus textfile.
package struct MetricsSettings: Sendable, Equatable {
    /// `TextfilePath=`: e.g. /var/lib/prometheus/node-exporter/pushspool.prom; empty = off.
    package var textfilePath: String? = nil
    /// `IntervalSec=`: how often the textfile is rewritten (1s to 1d).
    package var interval: Duration = .seconds(15)
}

/// `[Log]`: journald events.
package struct LogSettings: Sendable, Equatable {
    /// `Identifier=`: SYSLOG_IDENTIFIER.
    package var identifier = "pushspoold"
    /// `MaxEventsPerSec=`: per event kind; beyond it events are counted and summarised once a
    /// second instead of sent one by one (journald would drop them).
    package var maxEventsPerSecond = 100
    /// `UserIds=`: how events name a user (`PUSH_USER_HASH=` or `PUSH_USER=`).
    package var userIds = LogUserIds.hash
}

/// How journald events name the user a push or an event is for. journald keeps what it is
/// given until its own retention drops it, beyond the reach of an erasure; a keyed hash lets
/// an operator correlate (`pushspoolctl user hash USER`) without the journal revealing whom.
package enum LogUserIds: String, Sendable, Equatable, CaseIterable {
    /// `PUSH_USER_HASH=`: the first 16 hex digits of HMAC-SHA256 under `<state>/erase.key`.
    case hash
    /// `PUSH_USER=`: the id as the payload gave it.
    case plain
}

/// `[Inbox]`: the Notification Center's query index, a follower of the journal.
package struct InboxSettings: Sendable, Equatable {
    /// `Enabled=`: pushspoold keeps `<state>/inbox/index.sqlite` up to date.
    package var enabled = true
    /// `RetentionSec=`: items older than this are no longer listed or counted (0 = no limit;
    /// the journal keeps them).
    package var retention: Duration = .zero
    /// `ListModals=`: whether MODAL mirror pushes are listed and counted in the inbox like
    /// banners. Off by default: Infobip presents a MODAL in-app and, unlike a banner, does
    /// not add it to the Notification Center. Changing it rebuilds the index.
    package var listModals = false
    /// `Source=`: `journal` (pushspoold builds the index from this host's journal) or `nats`
    /// (pushspool-inbox builds it from the `[Export]` stream, with `[Export]`'s URL,
    /// credentials, TLS files, `Stream=` and `Subject=`).
    package var source: InboxSource = .journal
    /// `TokenSecretFile=`: pushspool-inbox's HMAC secret for user tokens; empty =
    /// `$CREDENTIALS_DIRECTORY/inbox-token-secret` (systemd `LoadCredential=`).
    package var tokenSecretFile = ""
    /// `AdminTokenFile=`: pushspool-inbox's admin bearer token for the `/v1/admin/` routes
    /// (erasure requests); empty = `$CREDENTIALS_DIRECTORY/inbox-admin-token` when that file
    /// exists, else the admin routes refuse every request.
    package var adminTokenFile = ""
    /// `SelfErase=`: a user's own token may request the erasure of that user (and nobody else).
    package var selfErase = false
    /// `MaxConnections=`: pushspool-inbox's connections at once (streams included).
    package var maxConnections = 256
    /// `MaxConnectionsPerIP=`: pushspool-inbox's connections at once from one address.
    package var maxConnectionsPerIP = 16
    /// `ConnectionTimeoutSec=`: pushspool-inbox closes a connection whose request is not in this
    /// long after it opened (or its previous response ended), trickling or idle (slowloris).
    /// Sub-second precision is kept by pushspool-inbox's own deadline.
    package var connectionTimeout: Duration = .seconds(30)
    /// `MaxRequestSize=`: the largest request body pushspool-inbox reads.
    package var maxRequestBytes = 16 << 10
}

/// `[Status]`: the sd_notify STATUS= line.
package struct StatusSettings: Sendable, Equatable {
    /// `IntervalSec=`: the least time between two STATUS= updates (100ms to 1h).
    package var interval: Duration = .seconds(1)
}

/// `[Outbox]`: delivery of Notification Center events (journaled `nc.*` events) to the
/// vendors' endpoints by HTTP POST.
package struct OutboxSettings: Sendable, Equatable {
    /// `Enabled=`: off by default; nothing is sent until an operator configures a vendor.
    package var enabled = false
    /// `MindboxURL=`: the Mindbox (Maestra) API base, without a trailing slash.
    package var mindboxURL = "https://api.mindbox.ru"
    /// `MindboxEndpointId=`: the app's endpoint id for both platforms, and the fallback of the
    /// two below; all three empty = Mindbox events are not delivered.
    package var mindboxEndpointId = ""
    /// `MindboxEndpointIOS=`: the endpoint for events about iOS pushes; empty = `MindboxEndpointId=`.
    package var mindboxEndpointIOS = ""
    /// `MindboxEndpointAndroid=`: the endpoint for events about Android pushes; empty =
    /// `MindboxEndpointId=`.
    package var mindboxEndpointAndroid = ""
    /// `MindboxTransliteration=`: the ICU transform that makes NCPushOpen's
    /// `mobPushTranslateName` from the push name; `none` sends the name as it came. Checked
    /// with ICU when the configuration is loaded.
    package var mindboxTransliteration = "Any-Latin; Latin-ASCII"
    /// `MindboxOperationNCOpen=` / `MindboxOperationNCPushOpen=`: the system names of the
    /// project's two Notification Center operations (a project names its own; the guide's
    /// names are the defaults).
    package var mindboxOperationNCOpen = "mobileapp.NCOpen"
    package var mindboxOperationNCPushOpen = "mobileapp.NCPushOpen"
    /// `MindboxCustomerIdKey=`: the system name of the Mindbox customer identifier that holds
    /// pushspool's user id (NCOpen/NCPushOpen carry `customer.ids.<name>`); empty = no
    /// `customer` block.
    package var mindboxCustomerIdKey = ""
    /// `MindboxPushClicks=`: report an item opened or a button acted on also as the SDK's push
    /// click (`MobilePush.TrackClick`). Off by default: the SDK reports a click for a tap on the
    /// system notification, and the guide reports an open in the Notification Center as
    /// NCPushOpen only; a project that counts both as clicks turns it on.
    package var mindboxPushClicks = false
    /// `MindboxSecretKeyFile=`: a file holding the secret key, readable only by the service;
    /// empty = Mindbox events are not delivered.
    package var mindboxSecretKeyFile = ""
    /// `InfobipURL=`: the Infobip Mobile Messaging API base, without a trailing slash.
    package var infobipURL = "https://mobile.infobip.com"
    /// `InfobipAppKeyFile=`: a file holding the application code, readable only by the
    /// service; empty = Infobip reports are not delivered.
    package var infobipAppKeyFile = ""
    /// `AllowHTTP=`: plain http endpoints are refused unless enabled.
    package var allowHTTP = false
    /// `AllowNetworks=`: CIDRs exempt from the private/loopback/link-local refusal.
    package var allowNetworks: [String] = []
    /// `ConnectTimeoutSec=` (1ms to 1h)
    package var connectTimeout: Duration = .seconds(5)
    /// `RequestTimeoutSec=`: one whole POST (1ms to 1h).
    package var requestTimeout: Duration = .seconds(20)
    /// `MaxAttempts=`: tries per delivery before it is parked, the first included.
    package var maxAttempts = 10
    /// `RetryBaseSec=`: the first backoff; doubled per attempt, with jitter (10ms to 1h).
    package var retryBase: Duration = .seconds(1)
    /// `MaxAgeSec=`: an event not delivered by then is parked instead of sent stale (1s to 7d).
    package var maxAge: Duration = .seconds(86_400)

    package init() {}
}

/// `[Export]`: journal records published to NATS JetStream (PushExport).
package struct ExportSettings: Sendable, Equatable {
    /// `Enabled=`: off by default.
    package var enabled = false
    /// `URL=`: NATS servers (`nats://host:port`, `tls://host:port`); the client fails over.
    /// Empty = `defaultURL`. Not that list itself: `URL=` appends, and a configured server must
    /// replace the local default, not join it.
    package var urls: [String] = []
    /// The server used when no `URL=` is set: a NATS server on this host.
    package static let defaultURL = "nats://127.0.0.1:4222"
    /// `Subject=`: with `{vendor}` and `{platform}` placeholders.
    package var subject = "pushspool.{vendor}.{platform}"
    /// `Stream=`: used as it is when it exists, created (file storage) when it does not.
    package var stream = "PUSHSPOOL"
    /// `Replicas=`: of a stream the exporter creates (1 to 5; 3 = R3 in a cluster).
    package var replicas = 1
    /// `DuplicateWindowSec=`: of a stream the exporter creates (1s to 7d).
    package var duplicateWindow: Duration = .seconds(3600)
    /// `MaxPending=`: publishes awaiting a PubAck at most (1 to 65536).
    package var maxPending = 1024
    /// `AckTimeoutSec=`: a PubAck not back by then fails the publish, which is sent again (100ms to 10min).
    package var ackTimeout: Duration = .seconds(5)
    /// `LagWarnRecords=`: a journald event when the export lag reaches this (1 to 1000000000).
    package var lagWarnRecords = 100_000
    /// `HostId=`: the message id's host part; empty = /etc/machine-id.
    package var hostId = ""
    /// `CredentialsFile=`: a NATS .creds file; empty = `$CREDENTIALS_DIRECTORY/nats.creds` if present.
    package var credentialsFile = ""
    /// `TLSCAFile=`, `TLSCertFile=`, `TLSKeyFile=`: empty = `$CREDENTIALS_DIRECTORY/nats-ca.pem`,
    /// `nats-cert.pem`, `nats-key.pem` if present.
    package var tlsCAFile = ""
    package var tlsCertFile = ""
    package var tlsKeyFile = ""
    /// `ErasureKeyFile=`: the fleet erasure key (32 raw bytes), installed as `<state>/erase.key`
    /// by pushspoold and by a `Source=nats` pushspool-inbox; empty =
    /// `$CREDENTIALS_DIRECTORY/erase-key` when present, else none (each instance its own key).
    package var erasureKeyFile = ""

    /// The fleet erasure key file in effect: `ErasureKeyFile=`, else `erase-key` in
    /// `credentialsDirectory` when that file exists, else `nil` (no fleet key).
    package func erasureKeyPath(credentialsDirectory: String?) -> String? {
        if !erasureKeyFile.isEmpty { return erasureKeyFile }
        guard let credentialsDirectory, !credentialsDirectory.isEmpty else { return nil }
        let path = credentialsDirectory + "/" + Self.erasureKeyCredential
        return access(path, F_OK) == 0 ? path : nil
    }

    /// The credential name `LoadCredential=` gives the fleet erasure key.
    package static let erasureKeyCredential = "erase-key"
    /// Its size: an HMAC-SHA256 key of 32 bytes, the size of the per-instance one.
    package static let erasureKeySize = 32

    package init() {}
}
