@preconcurrency import Glibc
import PushSystem
import PushPayload
import PushJournal
import PushMediaCore
import PushSystemd
import PushConfig
import PushCLI

/// `pushspoold`'s whole program; the executable only calls `main` and exits with its status.
package enum PushspoolDaemonMain {
    package static func main(_ argv: [String]) -> Int32 {
        // Before any thread exists, so that every thread inherits the mask: a SIGTERM that
        // comes during start-up waits pending for the signal thread `run()` starts, instead
        // of killing the process mid-recovery or being dropped (see `SignalWatcher`).
        SignalWatcher.blockInThisThread()
        // A daemon never dies of a write to a closed pipe or socket: the write fails with
        // EPIPE and the caller handles it (the fail-stop exit status must stay 1).
        signal(SIGPIPE, SIG_IGN)
        let arguments: DaemonArguments
        switch DaemonArguments.program.resolve(Array(argv.dropFirst()), version: pushspoolVersion) {
        case .exit(let status): return status
        case .run(let parsed, _): arguments = parsed
        }
        // `--instance NAME` names the export's host id exactly as the template unit's
        // PUSHSPOOL_INSTANCE= does; set here, before any thread exists, so both reach the
        // exporter one way.
        if let instance = arguments.instance { setenv("PUSHSPOOL_INSTANCE", instance, 1) }

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
        // What the file cannot say by itself (key files, vendor URLs): refused before the
        // journal is opened, with the status systemd reads as "configuration error" and the
        // same words `pushspoolctl config check` prints.
        let credentials = getenv("CREDENTIALS_DIRECTORY").map { String(cString: $0) }
        let problems = configuration.deploymentCheck(keyFileOwner: geteuid(), for: .pushspoold,
                                                     credentials: credentials.map { .directory($0) } ?? .none).problems
        if !problems.isEmpty {
            let text = problems.map(\.message).joined(separator: "; ")
            events.log(.fatal, "configuration error: \(text)", fields: [("CONFIG_FILE", arguments.configFile)])
            SystemdNotifier().failing(errno: EINVAL, status: "configuration error: \(text)")
            return 78  // EX_CONFIG
        }
        // The fleet erasure key becomes this instance's erase.key before anything reads it.
        if let keyFile = configuration.export.erasureKeyPath(credentialsDirectory: credentials) {
            let state = configuration.journal.stateDirectory
            do {
                try Posix.mkdirs(state)
                // Owner checked by deploymentCheck above for a named file; a credential's is systemd's.
                try ErasureSecret.provision(stateDirectory: state, keyFile: keyFile, owner: nil)
            } catch {
                events.log(.fatal, "configuration error: \(error)", fields: [("CONFIG_FILE", arguments.configFile)])
                SystemdNotifier().failing(errno: EINVAL, status: "configuration error: \(error)")
                return 78  // EX_CONFIG
            }
        }
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
        switch StopHook.decide(environment: { getenv($0).map { String(cString: $0) } }) {
        case .none:
            break
        case .ignored(let spec):
            events.log(.started, "ignoring \(StopHook.variable)=\(spec): it is a test hook and needs "
                       + "\(FaultHook.allowVariable)=1 too", priority: 4)
        case .invalid(let problem):
            events.log(.fatal, "\(StopHook.variable): \(problem)")
            notifier.failing(errno: EINVAL, status: "\(StopHook.variable): \(problem)")
            return 64
        case .arm(let point, let pass):
            StopPoints.arm(point, pass: pass)
            events.log(.started, "TEST STOP POINT ARMED (\(StopHook.variable)): SIGKILL at pass \(pass) of \(point.name)",
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
}

extension DaemonArguments {
    /// Command-line values as configuration overrides, so `config show` and reload agree with them.
    package var configOverrides: [ConfigOverride] {
        ConfigOverride.paths(spool: spoolDirectory, stateDirectory: stateDirectory)
    }
}
