@preconcurrency import Glibc
import PushSystem

/// What a configuration needs from the host beyond its own syntax and ranges: key files that
/// exist with safe modes, vendor URLs the outbox may use. The daemon runs it before it opens
/// the journal (exit 78, EX_CONFIG; the `[Outbox]` keys take effect only at a restart, so a
/// reload does not need it), and `pushspoolctl config check` runs the same code, so the check
/// cannot pass what the daemon refuses.
extension Configuration {
    /// Every problem found, each a sentence naming the setting; empty = the daemon can start.
    /// - Parameter keyFileOwner: the uid key files must belong to (the daemon's own); `nil`
    ///   skips that one check (`config check` run by an operator rather than the service).
    package func deploymentProblems(keyFileOwner: uid_t?) -> [String] {
        var problems: [String] = []
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
        if outbox.enabled && inbox.source == .nats {
            // Items on a stream-built index are stream seqs; the outbox reads the events' items
            // as this host's journal seqs and would report another push's name, date or message
            // id to the vendor. Until the outbox follows the stream (docs/design/fleet-inbox.md),
            // the two do not run together.
            problems.append("[Outbox] Enabled=yes with [Inbox] Source=nats: the outbox cannot yet map stream item ids; "
                + "run the outbox on a Source=journal host, or set [Outbox] Enabled=no here")
        }
        return problems
    }
}
