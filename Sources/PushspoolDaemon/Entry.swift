@preconcurrency import Glibc
import PushSystem
import PushPayload
import PushJournal
import PushMedia
import PushSystemd
import PushConfig

/// `pushspoold`'s whole program; the executable only calls `main` and exits with its status.
package enum PushspoolDaemonMain {
    package static func main(_ argv: [String]) -> Int32 {
        let arguments: DaemonArguments
        do {
            arguments = try DaemonArguments.parse(Array(argv.dropFirst()))
        } catch {
            writeStderr("pushspoold: \(error)\n\n\(DaemonArguments.usage)\n")
            return 64
        }
        if arguments.showHelp {
            print(DaemonArguments.usage)
            return 0
        }
        if arguments.showVersion {
            print("pushspoold \(pushspoolVersion)")
            return 0
        }

        MemoryPolicy.apply()
        let metrics = Metrics()
        // The configuration comes first: the event log and the sd_notify throttle are made
        // with its [Log] and [Status] settings, which are fixed for the process's lifetime.
        let store: ConfigurationStore
        do {
            store = try ConfigurationStore(mainFile: arguments.configFile, mainFileRequired: arguments.configFileGiven,
                                           overrides: arguments.configOverrides)
        } catch {
            // No configured identifier exists yet; the default one (the program's name) is
            // what an operator greps for after a failed start, on journald or stderr alike.
            let events = EventLog(identifier: Configuration().log.identifier, metrics: metrics)
            events.log(.fatal, "configuration error: \(error)", fields: [("CONFIG_FILE", arguments.configFile)])
            SystemdNotifier().failing(errno: EINVAL, status: "configuration error: \(error)")
            return 78  // EX_CONFIG
        }
        let configuration = store.current
        let events = EventLog(identifier: configuration.log.identifier,
                              maxEventsPerSecond: configuration.log.maxEventsPerSecond, metrics: metrics)
        let notifier = SystemdNotifier(statusInterval: configuration.status.interval)
        switch FaultHook.decide(environment: { getenv($0).map { String(cString: $0) } }) {
        case .none:
            break
        case .ignored(let spec):
            events.log(.started, "ignoring \(FaultHook.specVariable)=\(spec): fault injection is a test hook and needs "
                       + "\(FaultHook.allowVariable)=1 too", priority: 4)
        case .invalid(let problem):
            events.log(.fatal, "\(FaultHook.specVariable): \(problem)")
            notifier.failing(errno: EINVAL, status: "\(FaultHook.specVariable): \(problem)")
            return 64
        case .arm(let rules):
            FaultHook.arm(rules)
            events.log(.started, "TEST FAULT INJECTION ARMED (\(FaultHook.specVariable)): "
                       + rules.map { "\($0.call) fails with errno \($0.errno) after \($0.skip) calls" }.joined(separator: "; "),
                       priority: 4)
        }
        events.log(.started, "pushspoold \(pushspoolVersion) starting",
                   fields: [("SPOOL_DIR", configuration.spool.directory), ("STATE_DIR", configuration.journal.stateDirectory)])
        let daemon: Daemon
        do {
            daemon = try Daemon(arguments: arguments, store: store, events: events, notifier: notifier,
                                metrics: metrics)
        } catch {
            events.log(.fatal, "cannot start: \(error)", fields: [("ERRNO", String(error.errno))])
            notifier.failing(errno: error.errno, status: "cannot start: \(error)")
            return 1
        }
        let status = daemon.run()
        // Leave without running atexit handlers: on a fatal path worker threads (the
        // processing queue, media threads) may still be inside libcrypto or libcurl, and
        // OpenSSL's exit-time cleanup tearing down their locks crashed the process with
        // SIGSEGV instead of the exit status systemd must see. Everything that had to be
        // durable is, and events went out unbuffered.
        fflush(nil)
        _exit(status)
    }

    private static func writeStderr(_ text: String) {
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    }
}

extension DaemonArguments {
    /// Command-line values as configuration overrides, so `config show` and reload agree with them.
    package var configOverrides: [ConfigOverride] {
        ConfigOverride.paths(spool: spoolDirectory, stateDirectory: stateDirectory)
    }
}

extension Daemon {
    static func normalizerOptions(for configuration: Configuration) -> NormalizerOptions {
        var options = NormalizerOptions()
        options.maxPayloadBytes = configuration.limits.maxPayloadBytes
        options.maxDepth = configuration.limits.maxDepth
        var table = CategoryTable.builtIn
        for definition in configuration.categories {
            let category = NotificationCategory(id: definition.id, actions: definition.actions.map {
                PushPayload.CategoryAction(id: $0.id, title: $0.title, options: $0.options.compactMap(ActionOption.init(rawValue:)))
            })
            // The configuration loader already refused reserved `mm_` ids and bad options.
            if let extended = try? table.adding(category) { table = extended }
        }
        options.categories = table
        return options
    }

    static func journalOptions(for configuration: Configuration, quarantine: Bool) -> JournalOptions {
        var options = JournalOptions()
        options.segmentBytes = Int64(configuration.journal.segmentBytes)
        options.maxBatchDelay = configuration.journal.maxBatchDelay
        options.maxBatchRecords = configuration.journal.maxBatchRecords
        options.corruptionPolicy = quarantine || configuration.journal.corruptionPolicy == PushConfig.CorruptionPolicy.quarantineSegment
            ? PushJournal.CorruptionPolicy.quarantineSegment : PushJournal.CorruptionPolicy.refuse
        return options
    }

    static func mediaOptions(for configuration: Configuration) -> MediaOptions {
        let settings = configuration.media
        var options = MediaOptions(storeDirectory: configuration.journal.stateDirectory + "/media")
        // MediaOptions still takes seconds as Double (PushMedia converts them); the values are
        // bounded by the schema, so its `* 1e9`/`* 1000` cannot overflow.
        options.connectTimeout = settings.connectTimeout.secondsValue
        options.transferDeadline = settings.transferTimeout.secondsValue
        options.lowSpeedLimitBytesPerSecond = settings.lowSpeedLimitBytes
        options.lowSpeedTime = settings.lowSpeedTime.secondsValue
        options.maxBytes = Int64(settings.maxBytes)
        options.allowHTTP = settings.allowHTTP
        options.maxRedirects = settings.maxRedirects
        options.allowNetworks = settings.allowNetworks
        options.maxConcurrent = settings.maxConcurrent
        options.attempts = settings.attempts
        options.payloadDeadline = settings.payloadDeadline.secondsValue
        options.dedupWindow = settings.dedupWindow.secondsValue
        options.thumbnailMaxEdge = settings.thumbnailMaxEdge
        options.thumbnailMaxPixels = settings.thumbnailMaxPixels
        options.caFile = settings.caFile
        return options
    }
}
