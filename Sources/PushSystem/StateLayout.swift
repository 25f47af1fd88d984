/// Where pushspool keeps its state: `[Journal] StateDirectory=` (`/var/lib/pushspool`) and
/// what lies under it. The state directory's counterpart of `SpoolLayout` (PushSpool); here in
/// PushSystem because every store under it (journal, inbox index, outbox, export, media, user
/// export) needs its paths and none of them depends on the spool.
///
/// `Sendable`: plain paths, computed, nothing created. Every process and command that finds a
/// store by path takes it from here, so the daemon, pushspool-inbox and pushspoolctl cannot
/// look in different places.
package struct StateLayout: Sendable, Equatable {
    package let root: String

    /// `root` without trailing slashes (`/` stays `/`).
    package init(root: String) {
        var root = root
        while root.count > 1 && root.hasSuffix("/") { root.removeLast() }
        self.root = root
    }

    /// The journal's segments, `LOCK`, the dedup checkpoint; pushspoold is its only writer.
    package var journal: String { path("journal") }
    /// Retired segments compressed with zstd (`[Journal] Archive=zstd`), inside the journal.
    package var journalArchive: String { journal + "/archive" }
    /// The Notification Center index's directory.
    package var inbox: String { path("inbox") }
    /// The Notification Center index (SQLite), kept by pushspoold or by pushspool-inbox.
    package var inboxIndex: String { inbox + "/index.sqlite" }
    /// pushspool-inbox's own writable directory (its Idempotency-Key bindings) when systemd
    /// gives it no `$STATE_DIRECTORY`.
    package var inboxHTTP: String { path("inbox-http") }
    /// Downloaded images and thumbnails (PushMediaCore).
    package var media: String { path("media") }
    /// The outbox's pending deliveries, dead letters and cursor (PushOutboxStore).
    package var outbox: String { path("outbox") }
    /// The fleet outbox's dead letters on a `Source=nats` inbox node (ids are stream seqs):
    /// under `inbox/`, the one part of the state directory pushspool-inbox may write.
    package var fleetOutbox: String { inbox + "/outbox" }
    /// The exporter's cursor and its status file.
    package var export: String { path("export") }
    /// The exporter's last status, for `pushspoolctl export status`.
    package var exportStatus: String { export + "/" + Self.statusFileName }
    /// The daemon's last status snapshot, for `pushspoolctl stats` and `media`.
    package var status: String { path(Self.statusFileName) }
    /// The name of both status files, for their writers (which write by directory and name).
    package static let statusFileName = "status.json"

    private func path(_ name: String) -> String { root == "/" ? "/" + name : root + "/" + name }
}
