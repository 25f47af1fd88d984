@preconcurrency import Glibc
import PushConfig
import PushExport
import PushInbox
import PushInboxStream
import PushJournal
import PushMediaModel
import PushOutbox
import PushOutboxStore
import PushSystem
import PushUserData

// The one adapter from the INI schema (PushConfig) to the options of the stores and followers:
// journal, media, export, outbox, inbox index and stream follower. Those modules take plain
// option structs and never import PushConfig; each section becomes its options here, by one
// initializer, for pushspoold, pushspool-inbox, pushspoolctl, the benchmark and the tests alike.
// A module of its own because PushMediaModel is linked into the sandboxed pushspool-fetch,
// which must not link PushConfig (ICU, inih), and PushConfig must not link libcurl or libnats.

extension JournalOptions {
    /// The `[Journal]` settings as journal options. `quarantine` (pushspoold's
    /// `--quarantine-corrupt`) overrides `CorruptionPolicy=` with `quarantine-segment`.
    package init(settings: JournalSettings, quarantine: Bool = false) {
        self.init(segmentBytes: Int64(settings.segmentBytes), maxBatchDelay: settings.maxBatchDelay,
                  maxBatchRecords: settings.maxBatchRecords,
                  corruptionPolicy: quarantine ? .quarantineSegment : settings.corruptionPolicy,
                  checkpointInterval: settings.checkpointInterval)
    }
}

extension MediaOptions {
    /// The `[Media]` settings as download options, storing under `storeDirectory` (pushspoold:
    /// `StateLayout.media` of the state directory).
    package init(settings: MediaSettings, storeDirectory: String) {
        self.init(storeDirectory: storeDirectory, connectTimeout: settings.connectTimeout,
                  transferDeadline: settings.transferTimeout, lowSpeedLimitBytesPerSecond: settings.lowSpeedLimitBytes,
                  lowSpeedTime: settings.lowSpeedTime, maxBytes: Int64(settings.maxBytes), allowHTTP: settings.allowHTTP,
                  maxRedirects: settings.maxRedirects, allowNetworks: settings.allowNetworks,
                  maxConcurrent: settings.maxConcurrent, attempts: settings.attempts,
                  payloadDeadline: settings.payloadDeadline, dedupWindow: settings.dedupWindow,
                  thumbnailMaxEdge: settings.thumbnailMaxEdge, thumbnailMaxPixels: settings.thumbnailMaxPixels,
                  caFile: settings.caFile)
    }
}

extension ExportOptions {
    /// `settings` as the exporter takes them. An empty credentials or TLS file falls back to
    /// the file `LoadCredential=` put in `credentialsDirectory` (`$CREDENTIALS_DIRECTORY`)
    /// under its conventional name, when that file is readable.
    package init(settings: ExportSettings = ExportSettings(), stateDirectory: String, instance: String?,
                 credentialsDirectory: String? = nil) {
        self.init(stateDirectory: stateDirectory, instance: instance)
        urls = settings.urls.isEmpty ? [ExportSettings.defaultURL] : settings.urls
        subject = settings.subject
        stream = settings.stream
        replicas = settings.replicas
        duplicateWindow = settings.duplicateWindow
        maxPending = settings.maxPending
        ackTimeout = settings.ackTimeout
        lagWarnRecords = UInt64(clamping: settings.lagWarnRecords)
        hostId = settings.hostId
        func credential(_ configured: String, _ name: String) -> String {
            if !configured.isEmpty { return configured }
            guard let credentialsDirectory, !credentialsDirectory.isEmpty else { return "" }
            let path = credentialsDirectory + "/" + name
            return access(path, R_OK) == 0 ? path : ""
        }
        credentialsFile = credential(settings.credentialsFile, "nats.creds")
        tlsCAFile = credential(settings.tlsCAFile, "nats-ca.pem")
        tlsCertFile = credential(settings.tlsCertFile, "nats-cert.pem")
        tlsKeyFile = credential(settings.tlsKeyFile, "nats-key.pem")
    }
}

extension OutboxOptions {
    /// `settings` as the follower takes them, without the key files (both vendors off until
    /// `load` or a test sets the secrets). `journalDirectory` defaults to `<state>/journal`.
    package init(settings: OutboxSettings, stateDirectory: String, journalDirectory: String? = nil) {
        self.init(stateDirectory: stateDirectory, journalDirectory: journalDirectory)
        mindboxURL = settings.mindboxURL
        mindboxEndpointId = settings.mindboxEndpointId
        mindboxEndpointIOS = settings.mindboxEndpointIOS
        mindboxEndpointAndroid = settings.mindboxEndpointAndroid
        mindboxTransliteration = settings.mindboxTransliteration
        mindboxOperationNCOpen = settings.mindboxOperationNCOpen
        mindboxOperationNCPushOpen = settings.mindboxOperationNCPushOpen
        mindboxCustomerIdKey = settings.mindboxCustomerIdKey
        mindboxPushClicks = settings.mindboxPushClicks
        infobipURL = settings.infobipURL
        allowHTTP = settings.allowHTTP
        allowNetworks = settings.allowNetworks
        connectTimeout = settings.connectTimeout
        requestTimeout = settings.requestTimeout
        maxAttempts = settings.maxAttempts
        retryBase = settings.retryBase
        maxAge = settings.maxAge
    }

    /// `settings` with the key files named by `MindboxSecretKeyFile=` / `InfobipAppKeyFile=`
    /// loaded (empty = that vendor is off) and the URLs checked against `AllowHTTP=`: what the
    /// daemon runs the outbox with.
    package static func load(settings: OutboxSettings, stateDirectory: String) throws(OutboxError) -> OutboxOptions {
        var options = OutboxOptions(settings: settings, stateDirectory: stateDirectory)
        try options.load(mindboxSecretKeyFile: settings.mindboxSecretKeyFile, infobipAppKeyFile: settings.infobipAppKeyFile)
        return options
    }
}

package extension Configuration {
    /// The `[Feed NAME]` sections as the inbox index applies them (``InboxFeed``), in order.
    var inboxFeeds: [InboxFeed] {
        feeds.map {
            InboxFeed(name: $0.name, categories: $0.categories, vendors: $0.vendors, payloadKey: $0.payloadKey,
                      payloadValue: $0.payloadValue, rest: $0.other)
        }
    }
}

extension StreamInboxOptions {
    /// `[Inbox] Source=nats` as the follower takes it: `[Export]`'s connection
    /// (``ExportOptions/init(settings:stateDirectory:instance:credentialsDirectory:)``),
    /// `[Inbox] ListModals=`, the `[Feed NAME]` sections and the consumer named after the resolved host id. The one
    /// mapping pushspool-inbox and `pushspoolctl nc reindex --from-stream` both use.
    /// - Throws: the host id cannot be resolved (no `HostId=` and /etc/machine-id unreadable).
    package init(configuration: Configuration, indexPath: String, instance: String?,
                 credentialsDirectory: String?) throws(ExportError) {
        let export = ExportOptions(settings: configuration.export, stateDirectory: configuration.journal.stateDirectory,
                                   instance: instance, credentialsDirectory: credentialsDirectory)
        let hostId = try export.resolvedHostId()
        self.init(export: export, indexPath: indexPath, listModals: configuration.inbox.listModals,
                  consumerName: Self.consumerName(hostId: hostId))
        self.hostId = hostId
        feeds = configuration.inboxFeeds
        retention = configuration.inbox.retention > .zero ? configuration.inbox.retention : nil
        let state = configuration.journal.stateDirectory
        erasure = NodeErasure(stateDirectory: state, indexPath: indexPath, fleetOutboxDirectory: StateLayout(root: state).fleetOutbox)
    }
}
