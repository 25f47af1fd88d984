@preconcurrency import Glibc
import PushConfig
import PushExport
import PushInbox
import PushInboxJetStream
import PushJournal
import PushOutboxStore
import PushSystem
import PushErasure

// The one adapter from the INI schema (PushConfig) to the options of the stores and followers:
// journal, media, export, outbox, inbox index and stream follower. Those modules take plain
// option structs and never import PushConfig; each section becomes its options here, by one
// initializer, for pushspoold, pushspool-inbox, pushspoolctl, the benchmark and the tests alike.
// A module of its own because PushConfig must not link libcurl or libnats. The adapters for
// `[Media]` and `[Outbox]`, whose modules link libcurl, are in PushDaemonOptions, so that
// pushspoolctl (which uses these) links no libcurl.

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

package extension Configuration {
    /// The `[Feed NAME]` sections as the inbox index applies them (``InboxFeed``), in order.
    var inboxFeeds: [InboxFeed] {
        feeds.map {
            InboxFeed(name: $0.name, categories: $0.categories, vendors: $0.vendors, payloadKey: $0.payloadKey,
                      payloadValue: $0.payloadValue, rest: $0.other)
        }
    }
}

extension JetStreamInboxOptions {
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
