@preconcurrency import Glibc
import PushConfig
import PushSystem

/// What the exporter needs from `[Export]`, already validated by PushConfig. `Sendable` value.
///
/// Built from `ExportSettings` by one initializer, so that the daemon and `pushspoolctl export
/// replay` cannot disagree on a value, above all on the host id in `Nats-Msg-Id`: a replay
/// with another id would put every record in the stream twice. The defaults live in the
/// settings only.
package struct ExportOptions: Sendable, Equatable {
    /// `<StateDirectory>`: holds `journal/` and `export/` (cursor, status).
    package var stateDirectory: String
    /// NATS server URLs (`nats://host:port`, `tls://host:port`); the client fails over between them.
    package var urls: [String]
    /// The subject template, with `{vendor}` and `{platform}` placeholders.
    package var subject: String
    package var stream: String
    /// Replicas of a stream the exporter creates (3 = R3 in a cluster).
    package var replicas: Int
    /// The stream's duplicate window, when the exporter creates it.
    package var duplicateWindow: Duration
    /// Publishes in flight (not yet PubAck'ed) at most.
    package var maxPending: Int
    /// How long a PubAck may take before the publish counts as failed and is sent again.
    package var ackTimeout: Duration
    /// The export lag (records) past which a journald event is logged.
    package var lagWarnRecords: UInt64
    /// `<host id>` in `Nats-Msg-Id`; empty = /etc/machine-id (with `.<instance>` for an instance).
    package var hostId: String
    /// The `pushspoold@NAME` instance (`PUSHSPOOL_INSTANCE`, set by the template unit; `pushspoolctl
    /// --instance`): instances on one host share /etc/machine-id, and with the same default
    /// host id a payload id journaled by two of them would get one message id — the stream would
    /// drop all but the first. `nil` = the main daemon.
    package var instance: String?
    package var credentialsFile: String
    package var tlsCAFile: String
    package var tlsCertFile: String
    package var tlsKeyFile: String
    /// How often the acknowledged seq is written to `export/cursor` while records flow.
    package var checkpointInterval: Duration = .milliseconds(200)
    /// The exporter thread's niceness during an ingest burst: 10 (like the inbox follower), so
    /// that export lags instead of taking a core from ingest. While ingest is steady the
    /// thread runs at 0 (``adaptiveNiceness``).
    package var niceness: Int32 = 10
    /// Nice 0 while ingest is steady and ``niceness`` only during a burst (``BurstDetector``).
    /// Needs the right to lower the niceness again (`LimitNICE=+0` in the unit, or
    /// CAP_SYS_NICE); without it, and with `false` (the benchmark's comparison), the thread
    /// runs at ``niceness`` throughout.
    package var adaptiveNiceness = true
    /// Journal growth in 100 ms that makes an ingest burst (``BurstDetector``): 256 = 2,560
    /// records/s, well above the 1,000 files/s of the latency target.
    package var burstRecords: UInt64 = 256
    /// Each publish written to the socket by the exporter's thread at once (`false`: by
    /// libnats' flusher thread, up to 1 ms later; the benchmark compares the two).
    package var sendAsap = true

    /// `settings` as the exporter takes them. An empty credentials or TLS file falls back to
    /// the file `LoadCredential=` put in `credentialsDirectory` (`$CREDENTIALS_DIRECTORY`)
    /// under its conventional name, when that file is readable.
    package init(settings: ExportSettings = ExportSettings(), stateDirectory: String, instance: String?,
                 credentialsDirectory: String? = nil) {
        self.stateDirectory = stateDirectory
        urls = settings.urls.isEmpty ? [ExportSettings.defaultURL] : settings.urls
        subject = settings.subject
        stream = settings.stream
        replicas = settings.replicas
        duplicateWindow = settings.duplicateWindow
        maxPending = settings.maxPending
        ackTimeout = settings.ackTimeout
        lagWarnRecords = UInt64(clamping: settings.lagWarnRecords)
        hostId = settings.hostId
        self.instance = instance
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

    package var journalDirectory: String { StateLayout(root: stateDirectory).journal }
    package var exportDirectory: String { StateLayout(root: stateDirectory).export }

    /// The configured host id, or /etc/machine-id's first line (plus `.<instance>` for an
    /// instance); refuses one that is empty, holds characters a message id should not (`:` is
    /// the separator, so it is refused too), or is the reserved `event`.
    package func resolvedHostId(machineIdPath: String = "/etc/machine-id") throws(ExportError) -> String {
        var id = hostId
        if id.isEmpty {
            let bytes: [UInt8]
            do { bytes = try Posix.readFile(machineIdPath, limit: 256) } catch {
                throw ExportError(.config, "no [Export] HostId= and \(machineIdPath) is unreadable", cause: error)
            }
            id = String(decoding: bytes, as: UTF8.self).trimmingSpaces
            if let instance, !instance.isEmpty {
                // systemd instance names may hold characters a message id should not: map them.
                id += "." + String(instance.map { $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) ? $0 : "_" })
            }
        }
        guard !id.isEmpty, id.utf8.count <= 64, id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) }) else {
            throw ExportError(.config, "host id '\(id.prefix(80))' must be 1 to 64 characters of [A-Za-z0-9._-]")
        }
        // `event:<id>` is the message id of an event an inbox node publishes itself
        // (EventPublisher): a host called `event` would share that form.
        guard id != "event" else {
            throw ExportError(.config, "host id 'event' is reserved (inbox nodes publish events as event:<id>); set another [Export] HostId=")
        }
        return id
    }
}
