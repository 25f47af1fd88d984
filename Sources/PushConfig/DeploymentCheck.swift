@preconcurrency import Glibc
import PushSystem

/// What a configuration needs from the host beyond its own syntax and ranges: key files that
/// exist with safe modes, vendor URLs the outbox may use. The daemon runs it before it opens
/// the journal (exit 78, EX_CONFIG; the `[Outbox]` keys take effect only at a restart, so a
/// reload does not need it), and `pushspoolctl config check` runs the same code, so the check
/// cannot pass what the daemon refuses.
extension Configuration {
    /// Which program a configuration is checked for: one file serves both on a host, and
    /// they differ in what they do with `[Outbox]` beside `[Inbox] Source=nats`.
    package enum DeploymentProgram: String, Sendable, CaseIterable {
        case pushspoold
        case pushspoolInbox = "pushspool-inbox"
    }

    /// Every problem found, each a sentence naming the setting; empty = the program can start.
    /// - Parameter keyFileOwner: the uid key files must belong to (the daemon's own); `nil`
    ///   skips that one check (`config check` run by an operator rather than the service).
    /// - Parameter credentialsDirectory: `$CREDENTIALS_DIRECTORY`, where an unset
    ///   `[Export] ErasureKeyFile=` finds `erase-key`.
    package func deploymentProblems(keyFileOwner: uid_t?, for program: DeploymentProgram = .pushspoold,
                                    credentialsDirectory: String? = nil) -> [String] {
        var problems: [String] = []
        // The fleet erasure key is installed by pushspoold and by a stream-fed
        // pushspool-inbox; a journal-fed one shares pushspoold's state directory and leaves
        // it to pushspoold.
        if program == .pushspoold || inbox.source == .nats, let path = export.erasureKeyPath(credentialsDirectory: credentialsDirectory) {
            do throws(KeyFile.Problem) {
                // A credential's owner is systemd's choice (the service's user, or root with an
                // ACL); only a file the configuration names must be the service's own.
                _ = try KeyFile.readSecret(path: path, size: ExportSettings.erasureKeySize,
                                           owner: export.erasureKeyFile.isEmpty ? nil : keyFileOwner)
            } catch {
                problems.append("[Export] ErasureKeyFile=: \(error.message)")
            }
        }
        if outbox.enabled {
            for (key, url) in [("MindboxURL", outbox.mindboxURL), ("InfobipURL", outbox.infobipURL)] {
                let lower = url.lowercased()
                if !lower.hasPrefix("https://") && !lower.hasPrefix("http://") {
                    problems.append("[Outbox] \(key)=\(url) is not an http(s) URL")
                } else if lower.hasPrefix("http://") && !outbox.allowHTTP {
                    problems.append("[Outbox] \(key)=\(url) is plain http; use https or set AllowHTTP=yes")
                }
            }
            for (key, path) in [("MindboxSecretKeyFile", outbox.mindboxSecretKeyFile), ("InfobipAppKeyFile", outbox.infobipAppKeyFile)]
            where !path.isEmpty {
                do throws(KeyFile.Problem) {
                    _ = try KeyFile.read(path: path, owner: keyFileOwner)
                } catch {
                    problems.append("[Outbox] \(key)=: \(error.message)")
                }
            }
        }
        if outbox.enabled && inbox.source == .nats && program == .pushspoold {
            // Items on a stream-built index are stream seqs; pushspoold's outbox reads the
            // events' items as this host's journal seqs and would report another push's name,
            // date or message id to the vendor. On such a node pushspool-inbox's fleet outbox
            // delivers (docs/design/fleet-inbox.md); pushspoold has no part there.
            problems.append("[Outbox] Enabled=yes with [Inbox] Source=nats: this is an inbox node, whose vendor deliveries "
                + "pushspool-inbox makes (its fleet outbox); pushspoold's outbox maps items by journal seq and cannot run "
                + "here: do not run pushspoold on an inbox node (systemctl disable --now pushspoold), or give it a "
                + "configuration with [Outbox] Enabled=no")
        }
        return problems
    }
}
