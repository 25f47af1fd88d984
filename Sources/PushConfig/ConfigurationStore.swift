import Synchronization

/// The daemon's current configuration, replaced whole on SIGHUP.
///
/// `reload()` loads and validates the files again; only a configuration that is valid as a
/// whole replaces the current one, so a typo in a drop-in never leaves the daemon half
/// reconfigured. The outcome says which keys changed, and which of those only take effect
/// after a restart (directories the daemon has open).
///
/// `Sendable`: the current value is behind a `Mutex`.
package final class ConfigurationStore: Sendable {
    package let mainFile: String
    package let dropInDirectory: String?
    package let overrides: [ConfigOverride]
    private let state: Mutex<(Configuration, [String: ConfigurationSource])>

    /// What a reload did.
    package enum ReloadOutcome: Sendable, Equatable {
        /// The new configuration is in force. `changed` lists `Section.Key` paths whose value
        /// differs; `restartRequired` is the subset that the running daemon cannot apply.
        case applied(changed: [String], restartRequired: [String])
        /// The files are invalid; the previous configuration stays in force.
        case rejected(ConfigError)
    }

    /// Loads the configuration for the first time; throws when it is invalid (the daemon
    /// should then exit with the message rather than run on defaults).
    package init(mainFile: String = ConfigurationLoader.defaultMainFile, dropInDirectory: String? = nil, overrides: [ConfigOverride] = []) throws(ConfigError) {
        self.mainFile = mainFile
        self.dropInDirectory = dropInDirectory
        self.overrides = overrides
        let loaded = try ConfigurationLoader.load(mainFile: mainFile, dropInDirectory: dropInDirectory, overrides: overrides)
        state = Mutex((loaded.0, loaded.provenance))
    }

    package var current: Configuration { state.withLock { $0.0 } }
    package var provenance: [String: ConfigurationSource] { state.withLock { $0.1 } }

    /// Re-reads the files (the command-line overrides still apply last).
    package func reload() -> ReloadOutcome {
        let loaded: (Configuration, provenance: [String: ConfigurationSource])
        do {
            loaded = try ConfigurationLoader.load(mainFile: mainFile, dropInDirectory: dropInDirectory, overrides: overrides)
        } catch {
            return .rejected(error)
        }
        let old = state.withLock { state in
            let old = state.0
            state = (loaded.0, loaded.provenance)
            return old
        }
        let changed = changedKeys(from: old, to: loaded.0)
        return .applied(changed: changed, restartRequired: changed.filter(Schema.restartRequired.contains))
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
    return changed
}

extension Schema {
    /// Keys the running daemon cannot switch: it holds these directories open.
    static let restartRequired: Set<String> = ["Spool.Directory", "Journal.StateDirectory", "Media.CacheDirectory", "Journal.SegmentSize"]
}
