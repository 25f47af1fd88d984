@preconcurrency import Glibc
import PushSystem

/// What a configuration needs from the host beyond its own syntax and ranges: key files that
/// exist with safe modes, vendor URLs the outbox may use, pushspool-inbox's token secret and
/// admin token. Each program runs ``Configuration/deploymentCheck(keyFileOwner:for:credentials:)``
/// at start, before it opens anything (exit 78, EX_CONFIG), and `pushspoolctl config check
/// --for PROGRAM` runs the same function, so the check cannot pass what a program refuses.
/// The `[Outbox]` and `[Inbox]` keys it reads take effect only at a restart, so a reload does
/// not need it.
extension Configuration {
    /// Which program a configuration is checked for: one file serves both on a host, and
    /// they differ in what they do with `[Outbox]` beside `[Inbox] Source=nats`.
    package enum DeploymentProgram: String, Sendable, CaseIterable {
        case pushspoold
        case pushspoolInbox = "pushspool-inbox"
    }

    /// Where settings left empty find their files: systemd's `$CREDENTIALS_DIRECTORY`.
    /// `Sendable` value.
    package enum Credentials: Sendable, Equatable {
        /// The program runs with this `$CREDENTIALS_DIRECTORY`.
        case directory(String)
        /// The program runs without one: nothing comes from `LoadCredential=`.
        case none
        /// An operator's `config check` outside the unit: the unit's `LoadCredential=` files
        /// are not visible here, so what is left to them is not checked.
        case unseen

        /// `$CREDENTIALS_DIRECTORY`: a directory when set, ``none`` when set empty, `unset`
        /// when not set at all (so `CREDENTIALS_DIRECTORY= pushspoolctl config check` checks
        /// as for a program run without credentials).
        package static func fromEnvironment(unset: Credentials) -> Credentials {
            guard let value = getenv("CREDENTIALS_DIRECTORY").map({ String(cString: $0) }) else { return unset }
            return value.isEmpty ? .none : .directory(value)
        }

        /// The directory, when there is one to look in.
        package var directory: String? {
            if case .directory(let path) = self { return path }
            return nil
        }
    }

    /// One reason a program refuses to start, naming the setting.
    /// `Sendable` value.
    package struct DeploymentProblem: Sendable, Equatable, CustomStringConvertible {
        /// Every refusal the check makes; a refusal added to a program's start belongs here.
        package enum Kind: String, Sendable, CaseIterable {
            /// `[Export] ErasureKeyFile=` (or the credential `erase-key`) unreadable, of the
            /// wrong size, or open to group or others.
            case erasureKey
            /// `[Outbox] MindboxURL=` / `InfobipURL=` plain http without `AllowHTTP=yes`.
            case outboxPlainHTTP
            /// `[Outbox] MindboxSecretKeyFile=` / `InfobipAppKeyFile=` unreadable or unsafe.
            case outboxKeyFile
            /// `[Outbox] Enabled=yes` for pushspoold beside `[Inbox] Source=nats`.
            case outboxOnInboxNode
            /// No `[Inbox] TokenSecretFile=` and no credential `inbox-token-secret`.
            case tokenSecretMissing
            /// The token secret unreadable, or shorter than ``InboxSecrets/minBytes``.
            case tokenSecretUnreadable
            /// `[Inbox] AdminTokenFile=` (or the credential `inbox-admin-token`) unreadable,
            /// or shorter than ``InboxSecrets/minBytes``.
            case adminTokenUnreadable

            /// The programs that can refuse to start for this reason.
            package var programs: Set<DeploymentProgram> {
                switch self {
                case .erasureKey, .outboxPlainHTTP, .outboxKeyFile: [.pushspoold, .pushspoolInbox]
                case .outboxOnInboxNode: [.pushspoold]
                case .tokenSecretMissing, .tokenSecretUnreadable, .adminTokenUnreadable: [.pushspoolInbox]
                }
            }
        }

        package var kind: Kind
        /// The setting, as `[Section] Key=`.
        package var key: String
        /// The sentence an operator reads; it starts with ``key``.
        package var message: String
        package var description: String { message }
    }

    /// pushspool-inbox's secrets as the check read them: the program runs with these bytes.
    /// `Sendable` value.
    package struct InboxSecrets: Sendable, Equatable {
        /// The least secret length accepted: an HMAC key shorter than the hash is weak.
        package static let minBytes = 16
        /// The most read from a secret file.
        package static let maxBytes = 4096
        /// The credential names `LoadCredential=` gives the two files.
        package static let tokenSecretCredential = "inbox-token-secret"
        package static let adminTokenCredential = "inbox-admin-token"

        /// The HMAC secret user tokens are made with.
        package var tokenSecret: [UInt8]
        /// The admin bearer token of `/v1/admin/`; `nil` = none configured.
        package var adminToken: [UInt8]?

        /// Reads a secret file: trailing whitespace dropped, at least ``minBytes`` left.
        package static func read(_ path: String) throws(KeyFile.Problem) -> [UInt8] {
            var bytes: [UInt8]
            do { bytes = try Posix.readFile(path, limit: maxBytes) } catch {
                throw KeyFile.Problem(path: path, message: "cannot read \(path) (at least \(minBytes) bytes): \(error)", errno: error.errno)
            }
            while let last = bytes.last, last == 0x0a || last == 0x0d || last == 0x20 || last == 0x09 { bytes.removeLast() }
            guard bytes.count >= minBytes else {
                throw KeyFile.Problem(path: path, message: "\(path) holds \(bytes.count) bytes, fewer than \(minBytes)", errno: nil)
            }
            return bytes
        }
    }

    /// What ``deploymentCheck(keyFileOwner:for:credentials:)`` found. `Sendable` value.
    package struct DeploymentCheck: Sendable {
        /// Empty = the program can start.
        package var problems: [DeploymentProblem]
        /// pushspool-inbox's secrets, read by the check (`nil` for pushspoold, when refused,
        /// or when ``Credentials/unseen`` hid them).
        package var inboxSecrets: InboxSecrets?
    }

    /// The start-up check of `program`: every problem found, each naming the setting.
    /// - Parameter keyFileOwner: the uid key files must belong to (the daemon's own); `nil`
    ///   skips that one check (`config check` run by an operator rather than the service).
    /// - Parameter credentials: where settings left empty find their files.
    package func deploymentCheck(keyFileOwner: uid_t?, for program: DeploymentProgram,
                                 credentials: Credentials) -> DeploymentCheck {
        var problems: [DeploymentProblem] = []
        // `text` follows the key: ": why", or the value and why.
        func refuse(_ kind: DeploymentProblem.Kind, _ key: String, _ text: String) {
            problems.append(DeploymentProblem(kind: kind, key: key, message: key + text))
        }
        // pushspool-inbox on a journal node leaves the fleet erasure key and [Outbox] to
        // pushspoold (they share the state directory and the journal); on an inbox node
        // ([Inbox] Source=nats) it installs the key and runs the fleet outbox itself.
        let runsFleetParts = program == .pushspoold || inbox.source == .nats
        if runsFleetParts, let path = export.erasureKeyPath(credentialsDirectory: credentials.directory) {
            do throws(KeyFile.Problem) {
                // A credential's owner is systemd's choice (the service's user, or root with an
                // ACL); only a file the configuration names must be the service's own.
                _ = try KeyFile.readSecret(path: path, size: ExportSettings.erasureKeySize,
                                           owner: export.erasureKeyFile.isEmpty ? nil : keyFileOwner)
            } catch {
                refuse(.erasureKey, "[Export] ErasureKeyFile=", ": " + error.message)
            }
        }
        if outbox.enabled && runsFleetParts {
            // The loader takes only http:// and https:// URLs (`endpointURL`); plain http needs AllowHTTP=.
            for (key, url) in [("MindboxURL", outbox.mindboxURL), ("InfobipURL", outbox.infobipURL)]
            where url.lowercased().hasPrefix("http://") && !outbox.allowHTTP {
                refuse(.outboxPlainHTTP, "[Outbox] \(key)=", "\(url) is plain http; use https or set AllowHTTP=yes")
            }
            for (key, path) in [("MindboxSecretKeyFile", outbox.mindboxSecretKeyFile), ("InfobipAppKeyFile", outbox.infobipAppKeyFile)]
            where !path.isEmpty {
                do throws(KeyFile.Problem) {
                    _ = try KeyFile.read(path: path, owner: keyFileOwner)
                } catch {
                    refuse(.outboxKeyFile, "[Outbox] \(key)=", ": " + error.message)
                }
            }
        }
        if outbox.enabled && inbox.source == .nats && program == .pushspoold {
            // Items on a stream-built index are stream seqs; pushspoold's outbox reads the
            // events' items as this host's journal seqs and would report another push's name,
            // date or message id to the vendor. On such a node pushspool-inbox's fleet outbox
            // delivers (docs/design/fleet-inbox.md); pushspoold has no part there.
            refuse(.outboxOnInboxNode, "[Outbox] Enabled=", "yes with [Inbox] Source=nats: this is an inbox node, whose vendor "
                + "deliveries pushspool-inbox makes (its fleet outbox); pushspoold's outbox maps items by journal seq and cannot "
                + "run here: do not run pushspoold on an inbox node (systemctl disable --now pushspoold), or give it a "
                + "configuration with [Outbox] Enabled=no")
        }
        var secrets: InboxSecrets?
        if program == .pushspoolInbox {
            secrets = inboxSecrets(credentials: credentials, refuse: refuse)
        }
        return DeploymentCheck(problems: problems, inboxSecrets: problems.isEmpty ? secrets : nil)
    }

    /// pushspool-inbox's token secret (required) and admin token (optional), each from its
    /// setting or else its credential. `nil` when one is refused or ``Credentials/unseen``
    /// hides the secret.
    private func inboxSecrets(credentials: Credentials,
                              refuse: (DeploymentProblem.Kind, String, String) -> Void) -> InboxSecrets? {
        let secretKey = "[Inbox] TokenSecretFile=", adminKey = "[Inbox] AdminTokenFile="
        var secret: [UInt8]?
        var secretPath = inbox.tokenSecretFile
        if secretPath.isEmpty {
            switch credentials {
            case .directory(let directory): secretPath = directory + "/" + InboxSecrets.tokenSecretCredential
            case .none:
                refuse(.tokenSecretMissing, secretKey, ": empty and no $CREDENTIALS_DIRECTORY: set it, or run pushspool-inbox with "
                       + "LoadCredential=\(InboxSecrets.tokenSecretCredential):…")
            case .unseen: break
            }
        }
        if !secretPath.isEmpty {
            do throws(KeyFile.Problem) { secret = try InboxSecrets.read(secretPath) } catch {
                refuse(.tokenSecretUnreadable, secretKey, ": the token secret: \(error.message)")
            }
        }
        // The admin token is optional: an unset setting takes the credential only when it exists.
        var adminPath = inbox.adminTokenFile
        if adminPath.isEmpty, let directory = credentials.directory,
           access(directory + "/" + InboxSecrets.adminTokenCredential, F_OK) == 0 {
            adminPath = directory + "/" + InboxSecrets.adminTokenCredential
        }
        var admin: [UInt8]?
        if !adminPath.isEmpty {
            do throws(KeyFile.Problem) { admin = try InboxSecrets.read(adminPath) } catch {
                refuse(.adminTokenUnreadable, adminKey, ": the admin token: \(error.message)")
                return nil
            }
        }
        return secret.map { InboxSecrets(tokenSecret: $0, adminToken: admin) }
    }

    /// ``deploymentCheck(keyFileOwner:for:credentials:)``'s problems as sentences, with
    /// `credentialsDirectory` `nil` meaning ``Credentials/unseen``.
    package func deploymentProblems(keyFileOwner: uid_t?, for program: DeploymentProgram = .pushspoold,
                                    credentialsDirectory: String? = nil) -> [String] {
        deploymentCheck(keyFileOwner: keyFileOwner, for: program,
                        credentials: credentialsDirectory.map { .directory($0) } ?? .unseen).problems.map(\.message)
    }
}
