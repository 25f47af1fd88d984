@preconcurrency import Glibc
import PushSystem

/// What the exporter needs from `[Export]`, already validated by PushConfig. `Sendable` value.
///
/// A plain value: PushExport does not import the INI schema. `[Export]` becomes these options
/// by one initializer in PushModuleOptions (`init(settings:stateDirectory:instance:credentialsDirectory:)`),
/// so that the daemon and `pushspoolctl export replay` cannot disagree on a value, above all
/// on the host id in `Nats-Msg-Id`: a replay with another id would put every record in the
/// stream twice. The defaults below are `ExportSettings`' (PushExportTests' `ExportDefaultsTests`
/// compares the two).
package struct ExportOptions: Sendable, Equatable {
    /// `Subject=`'s default: a subject per vendor and platform, never a user.
    package static let defaultSubject = "pushspool.{vendor}.{platform}"

    /// `<StateDirectory>`: holds `journal/` and `export/` (cursor, status).
    package var stateDirectory: String
    /// NATS server URLs (`nats://host:port`, `tls://host:port`); the client fails over between them.
    package var urls: [String] = ["nats://127.0.0.1:4222"]
    /// The subject template, with `{vendor}` and `{platform}` placeholders.
    package var subject = ExportOptions.defaultSubject
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

    /// The `[Export]` defaults, for `stateDirectory`; `urls` = the local server.
    package init(stateDirectory: String, instance: String?) {
        self.stateDirectory = stateDirectory
        self.instance = instance
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
