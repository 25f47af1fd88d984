import PushSystem

/// The daemon's current configuration, replaced whole on SIGHUP.
///
/// `reload()` loads and validates the files again; only a configuration that is valid as a
/// whole replaces the current one, so a typo in a drop-in never leaves the daemon half
/// reconfigured. The outcome says which keys changed, and which of those only take effect
/// after a restart (directories the daemon has open).
///
/// `Sendable`: the current value is behind a lock.
package final class ConfigurationStore: Sendable {
    package let mainFile: String
    /// Whether `mainFile` was named explicitly and so must exist, at start and at each reload.
    package let mainFileRequired: Bool
    package let dropInDirectory: String?
    package let overrides: [ConfigOverride]
    private let state: Locked<(Configuration, [String: ConfigurationSource])>

    /// What a reload did.
    package enum ReloadOutcome: Sendable, Equatable {
        /// The new configuration is in force. `changed` lists `Section.Key` paths whose value
        /// differs; `restartRequired` is the subset that the running daemon cannot apply.
        case applied(changed: [String], restartRequired: [String])
        /// The files are invalid; the previous configuration stays in force.
        case rejected(ConfigError)
    }

    /// Loads the configuration for the first time; throws when it is invalid (the daemon
    /// should then exit with the message rather than run on defaults). `mainFileRequired`: see
    /// `ConfigurationLoader.load`.
    package init(mainFile: String = ConfigurationLoader.defaultMainFile, mainFileRequired: Bool = false,
                 dropInDirectory: String? = nil, overrides: [ConfigOverride] = []) throws(ConfigError) {
        self.mainFile = mainFile
        self.mainFileRequired = mainFileRequired
        self.dropInDirectory = dropInDirectory
        self.overrides = overrides
        let loaded = try ConfigurationLoader.load(mainFile: mainFile, mainFileRequired: mainFileRequired,
                                                  dropInDirectory: dropInDirectory, overrides: overrides)
        state = Locked((loaded.0, loaded.provenance))
    }

    package var current: Configuration { state.withLock { $0.0 } }
    package var provenance: [String: ConfigurationSource] { state.withLock { $0.1 } }

    /// Re-reads the files (the command-line overrides still apply last). `program` says
    /// which keys a change of waits for a restart: each program reloads its own.
    package func reload(for program: Configuration.DeploymentProgram = .pushspoold) -> ReloadOutcome {
        let loaded: (Configuration, provenance: [String: ConfigurationSource])
        do {
            loaded = try ConfigurationLoader.load(mainFile: mainFile, mainFileRequired: mainFileRequired,
                                                  dropInDirectory: dropInDirectory, overrides: overrides)
        } catch {
            return .rejected(error)
        }
        let old = state.withLock { state in
            let old = state.0
            state = (loaded.0, loaded.provenance)
            return old
        }
        let changed = changedKeys(from: old, to: loaded.0)
        return .applied(changed: changed, restartRequired: changed.filter { Schema.restartRequired($0, for: program) })
    }
}

/// `Section.Key` paths whose effective value differs between two configurations, in
/// `config show` order (`Category ID.Action` for categories).
package func changedKeys(from old: Configuration, to new: Configuration) -> [String] {
    var changed = Schema.keys.filter { $0.render(old) != $0.render(new) }.map(\.path)
    let ids = (old.categories.map(\.id) + new.categories.map(\.id)).reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
    for id in ids where old.categories.first(where: { $0.id == id }) != new.categories.first(where: { $0.id == id }) {
        changed.append("\(Schema.categoryPrefix)\(id).Action")
    }
    let names = (old.feeds.map(\.name) + new.feeds.map(\.name)).reduce(into: [String]()) { if !$0.contains($1) { $0.append($1) } }
    for name in names where old.feeds.first(where: { $0.name == name }) != new.feeds.first(where: { $0.name == name }) {
        changed.append("\(Schema.feedPrefix)\(name)")
    }
    return changed
}

extension Schema {
    /// Whether a change of `path` (a `Section.Key`, `Feed NAME`, `Category ID.Action`) waits
    /// for `program`'s next restart rather than taking effect at its reload.
    static func restartRequired(_ path: String, for program: Configuration.DeploymentProgram) -> Bool {
        switch program {
        case .pushspoold:
            // Feeds are held by the inbox follower made at start, like ListModals=.
            return restartRequired.contains(path) || path.hasPrefix(feedPrefix)
        case .pushspoolInbox:
            return inboxServerRestartRequired(path)
        }
    }

    /// pushspool-inbox reads its keys once at its start, but `[Inbox] RetentionSec=`, which a
    /// reload applies to the queries at once (as pushspoolctl nc does, which reads the file
    /// on each run): the directories, the rest of [Inbox] (secrets, limits, its Source=), and
    /// on an inbox node the [Export] stream, the [Outbox] fleet outbox and the feeds its
    /// follower was made with. Keys it does not read at all (pushspoold's) are no restart's
    /// business here.
    static func inboxServerRestartRequired(_ path: String) -> Bool {
        if inboxServerReloadable.contains(path) || path == "Inbox.Enabled" { return false }
        return ["Spool.Directory", "Journal.StateDirectory"].contains(path)
            || ["Inbox.", "Export.", "Outbox.", feedPrefix].contains { path.hasPrefix($0) }
    }

    /// What `systemctl reload pushspool-inbox` applies.
    static let inboxServerReloadable: Set<String> = ["Inbox.RetentionSec"]

    /// Keys the running daemon cannot switch on SIGHUP, so a reload reports them as waiting
    /// for a restart instead of as applied: the directories it holds open, the spool, journal
    /// and media fetcher it built with their settings at start, and the event log and
    /// sd_notify throttle made once before anything else. What a reload does apply: the
    /// rescan interval and stable age (the feed is rebuilt), the spool's file size limit,
    /// [Limits] and categories (the normaliser options are swapped), [Metrics].
    static let restartRequired: Set<String> = Set(
        keys.filter { ["Journal", "Media", "Log", "Outbox", "Export"].contains($0.section) || $0.path == "Inbox.Enabled" }.map(\.path)
            // Held by the inbox follower made at start (a change rebuilds the index).
            + ["Inbox.ListModals"]
            // Whether pushspoold runs the journal follower or pushspool-inbox the stream's,
            // each decided at its start.
            + ["Inbox.Source"]
            + ["Spool.Directory", "Spool.FailedRetainSec", "Status.IntervalSec"]
            // Read by pushspool-inbox once at its start.
            + ["Inbox.TokenSecretFile", "Inbox.AdminTokenFile", "Inbox.SelfErase", "Inbox.MaxConnections", "Inbox.MaxConnectionsPerIP", "Inbox.ConnectionTimeoutSec",
               "Inbox.MaxRequestSize"])
}
