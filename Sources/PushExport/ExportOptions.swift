import PushSystem

/// What the exporter needs from `[Export]`, already validated by PushConfig. `Sendable` value.
package struct ExportOptions: Sendable, Equatable {
    /// `<StateDirectory>`: holds `journal/` and `export/` (cursor, status).
    package var stateDirectory: String
    /// NATS server URLs (`nats://host:port`, `tls://host:port`); the client fails over between them.
    package var urls: [String] = ["nats://127.0.0.1:4222"]
    /// The subject template, with `{vendor}` and `{platform}` placeholders.
    package var subject = "pushspool.{vendor}.{platform}"
    package var stream = "PUSHSPOOL"
    /// Replicas of a stream the exporter creates (3 = R3 in a cluster).
    package var replicas = 1
    /// The stream's duplicate window, when the exporter creates it.
    package var duplicateWindow: Duration = .seconds(3600)
    /// Publishes in flight (not yet PubAck'ed) at most.
    package var maxPending = 1024
    /// How long a PubAck may take before the publish counts as failed and is sent again.
    package var ackTimeout: Duration = .seconds(5)
    /// The export lag (records) past which a journald event is logged.
    package var lagWarnRecords: UInt64 = 100_000
    /// `<host id>` in `Nats-Msg-Id`; empty = /etc/machine-id (with `.<instance>` for an instance).
    package var hostId = ""
    /// The `pushspoold@NAME` instance (`PUSHSPOOL_INSTANCE`, set by the template unit; `pushspoolctl
    /// --instance`): instances on one host share /etc/machine-id, and with the same default
    /// host id a payload id journaled by two of them would get one message id — the stream would
    /// drop all but the first. `nil` = the main daemon.
    package var instance: String?
    package var credentialsFile = ""
    package var tlsCAFile = ""
    package var tlsCertFile = ""
    package var tlsKeyFile = ""
    /// How often the acknowledged seq is written to `export/cursor` while records flow.
    package var checkpointInterval: Duration = .milliseconds(200)
    /// The exporter thread's niceness: 10 (like the inbox follower) so that under a burst
    /// export lags instead of taking a core from ingest. The benchmark also measures 0.
    package var niceness: Int32 = 10

    package init(stateDirectory: String) {
        self.stateDirectory = stateDirectory
    }

    package var journalDirectory: String { stateDirectory + "/journal" }
    package var exportDirectory: String { stateDirectory + "/export" }

    /// The configured host id, or /etc/machine-id's first line (plus `.<instance>` for an
    /// instance); refuses one that is empty or
    /// holds characters a message id should not (`:` is the separator, so it is refused too).
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
        return id
    }
}
