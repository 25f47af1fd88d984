import PushConfig
import PushSpool
import PushSystem

extension CtlContext {
    /// The configuration the daemon would run with: file, drop-ins, then the global options.
    /// A `--config` file must exist; only the default one may be absent.
    package func loadConfiguration() throws(ConfigError) -> (Configuration, provenance: [String: ConfigurationSource]) {
        try ConfigurationLoader.load(mainFile: globals.config ?? ConfigurationLoader.defaultMainFile,
                                     mainFileRequired: globals.config != nil,
                                     overrides: ConfigOverride.paths(spool: globals.spool, stateDirectory: globals.stateDir))
    }

    /// Loads the configuration or reports why not (exit 1 for the caller).
    func configurationOrReport() -> Configuration? {
        do {
            return try loadConfiguration().0
        } catch {
            err("pushspoolctl: configuration error: \(error)\n")
            return nil
        }
    }

    func spoolLayout(_ configuration: Configuration) -> SpoolLayout {
        SpoolLayout(root: configuration.spool.directory)
    }

    func journalDirectory(_ configuration: Configuration) -> String {
        StateLayout(root: configuration.journal.stateDirectory).journal
    }
}
