@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushConfig

/// Issue 33, defect 6: `config check --for pushspool-inbox` passed a missing or short
/// `TokenSecretFile=`/`AdminTokenFile=`, which pushspool-inbox then refused (exit 78). Both
/// programs now run one start-up check (`Configuration.deploymentCheck`), the one
/// `config check --for` runs. This walks every refusal of that check
/// (`DeploymentProblem.Kind.allCases`) for every program that makes it, with files that
/// trigger it: the built program exits 78 naming the key, and `pushspoolctl config check
/// --for PROGRAM` exits 1 naming it too. A refusal added to the check without a case here
/// does not compile (the switch in `fixtures(for:)` is exhaustive); one whose programs the
/// fixtures do not cover fails.
@Suite struct StartupRefusalParityTests {
    typealias Program = Configuration.DeploymentProgram
    typealias Kind = Configuration.DeploymentProblem.Kind

    /// One way to trigger a refusal: the program's valid base configuration plus `extra`
    /// (`@DIR@` = the test's directory), the files it names, and the credentials directory
    /// both the program and the check run with (`nil` = none).
    struct Fixture: CustomStringConvertible {
        var name: String
        var programs: [Program]
        /// Whether the base is an inbox node's (`[Inbox] Source=nats`).
        var inboxNode = false
        var extra: String
        var files: [String: (bytes: Int, mode: mode_t)] = [:]
        var credentials: [String: Int]?
        /// `[Inbox] TokenSecretFile=` of the base (pushspool-inbox).
        var secretSetting = "@DIR@/token-secret"
        /// `CREDENTIALS_DIRECTORY=` set empty (no credentials) rather than unset.
        var credentialsVariableEmpty = false
        /// The key the messages must name.
        var key: String
        var description: String { name }
    }

    static let secret = "parity-secret-0123456789abcdef"

    /// The configuration `program` starts with when nothing is wrong (in `directory`).
    static func base(_ program: Program, inboxNode: Bool, secretSetting: String) -> String {
        var text = "[Media]\nEnabled=no\n"
        if inboxNode { text += "[Export]\nURL=nats://127.0.0.1:9\nHostId=node\n" }
        text += "[Inbox]\n"
        if inboxNode { text += "Source=nats\n" }
        if program == .pushspoolInbox { text += "TokenSecretFile=\(secretSetting)\n" }
        return text
    }

    /// A valid outbox (a key file of mode 0600), for the outbox's refusals to change one thing of.
    static let outbox = "[Outbox]\nEnabled=yes\nMindboxURL=https://127.0.0.1:9\nMindboxEndpointId=app\nMindboxSecretKeyFile=@DIR@/mindbox.key\n"
    static let outboxFiles: [String: (bytes: Int, mode: mode_t)] = ["mindbox.key": (24, 0o600)]

    static func fixtures(for kind: Kind) -> [Fixture] {
        switch kind {
        case .erasureKey:
            return [
                Fixture(name: "erase key of 16 bytes", programs: [.pushspoold], extra: "[Export]\nErasureKeyFile=@DIR@/erase.key\n",
                        files: ["erase.key": (16, 0o600)], key: "[Export] ErasureKeyFile="),
                Fixture(name: "erase key missing on an inbox node", programs: [.pushspoolInbox], inboxNode: true,
                        extra: "[Export]\nErasureKeyFile=@DIR@/erase.key\n", key: "[Export] ErasureKeyFile="),
                Fixture(name: "erase-key credential open to others", programs: [.pushspoold], extra: "",
                        files: [:], credentials: ["erase-key": 32], key: "[Export] ErasureKeyFile="),
            ]
        case .outboxPlainHTTP:
            return [Fixture(name: "plain http outbox", programs: [.pushspoold], extra: outbox + "InfobipURL=http://127.0.0.1:9\n",
                            files: outboxFiles, key: "[Outbox] InfobipURL="),
                    Fixture(name: "plain http fleet outbox", programs: [.pushspoolInbox], inboxNode: true,
                            extra: outbox + "InfobipURL=http://127.0.0.1:9\n", files: outboxFiles, key: "[Outbox] InfobipURL=")]
        case .outboxKeyFile:
            return [Fixture(name: "outbox key open to others", programs: [.pushspoold], extra: outbox,
                            files: ["mindbox.key": (24, 0o644)], key: "[Outbox] MindboxSecretKeyFile="),
                    Fixture(name: "fleet outbox key missing", programs: [.pushspoolInbox], inboxNode: true, extra: outbox,
                            key: "[Outbox] MindboxSecretKeyFile=")]
        case .outboxOnInboxNode:
            return [Fixture(name: "pushspoold's outbox on an inbox node", programs: [.pushspoold], inboxNode: true, extra: outbox,
                            files: outboxFiles, key: "[Outbox] Enabled=")]
        case .tokenSecretMissing:
            // No setting, no credentials (`CREDENTIALS_DIRECTORY=` empty: an operator's check of
            // a program run that way; unset, the check leaves the credential to the unit).
            return [Fixture(name: "no token secret", programs: [.pushspoolInbox], extra: "", secretSetting: "",
                            credentialsVariableEmpty: true, key: "[Inbox] TokenSecretFile=")]
        case .tokenSecretUnreadable:
            return [Fixture(name: "token secret file missing", programs: [.pushspoolInbox],
                            extra: "TokenSecretFile=@DIR@/no-such-secret\n", key: "[Inbox] TokenSecretFile="),
                    Fixture(name: "token secret of 15 bytes", programs: [.pushspoolInbox],
                            extra: "TokenSecretFile=@DIR@/short-secret\n", files: ["short-secret": (15, 0o600)],
                            key: "[Inbox] TokenSecretFile="),
                    Fixture(name: "token secret credential of 15 bytes", programs: [.pushspoolInbox], extra: "",
                            credentials: ["inbox-token-secret": 15], secretSetting: "", key: "[Inbox] TokenSecretFile="),
                    Fixture(name: "token secret credential absent", programs: [.pushspoolInbox], extra: "",
                            credentials: [:], secretSetting: "", key: "[Inbox] TokenSecretFile=")]
        case .adminTokenUnreadable:
            return [Fixture(name: "admin token file missing", programs: [.pushspoolInbox],
                            extra: "AdminTokenFile=@DIR@/no-such-token\n", key: "[Inbox] AdminTokenFile="),
                    Fixture(name: "admin token of 15 bytes", programs: [.pushspoolInbox],
                            extra: "AdminTokenFile=@DIR@/short-token\n", files: ["short-token": (15, 0o600)],
                            key: "[Inbox] AdminTokenFile="),
                    Fixture(name: "admin token credential of 15 bytes", programs: [.pushspoolInbox], extra: "",
                            credentials: ["inbox-token-secret": 32, "inbox-admin-token": 15], key: "[Inbox] AdminTokenFile=")]
        }
    }

    /// A directory of its own with the configuration and files of `fixture` for `program`.
    final class Setup {
        let root: String
        var config: String { root + "/pushspool.conf" }
        var environment: [String: String]

        init(_ fixture: Fixture, program: Program) throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("pushspool-parity-\(UUID().uuidString.prefix(8))").path
            try FileManager.default.createDirectory(atPath: root + "/state", withIntermediateDirectories: true)
            try FileManager.default.createDirectory(atPath: root + "/spool", withIntermediateDirectories: true)
            // The extra lines go under the base's last section unless they open their own.
            let text = (StartupRefusalParityTests.base(program, inboxNode: fixture.inboxNode, secretSetting: fixture.secretSetting) + fixture.extra)
                .replacingOccurrences(of: "@DIR@", with: root)
            try text.write(toFile: root + "/pushspool.conf", atomically: true, encoding: .utf8)
            try Self.write(root + "/token-secret", bytes: StartupRefusalParityTests.secret.count, mode: 0o600)
            for (name, file) in fixture.files { try Self.write(root + "/" + name, bytes: file.bytes, mode: file.mode) }
            environment = ProcessInfo.processInfo.environment
            for name in ["CREDENTIALS_DIRECTORY", "NOTIFY_SOCKET", "JOURNAL_STREAM", "LISTEN_FDS", "LISTEN_PID"] {
                environment.removeValue(forKey: name)
            }
            if let credentials = fixture.credentials {
                let directory = root + "/credentials"
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                // A credential open to others is refused where modes are checked (the erase key).
                for (name, size) in credentials { try Self.write(directory + "/" + name, bytes: size, mode: 0o644) }
                environment["CREDENTIALS_DIRECTORY"] = directory
            } else if fixture.credentialsVariableEmpty {
                environment["CREDENTIALS_DIRECTORY"] = ""
            }
        }

        deinit { try? FileManager.default.removeItem(atPath: root) }

        static func write(_ path: String, bytes count: Int, mode: mode_t) throws {
            try Data(String(repeating: "k", count: count).utf8).write(to: URL(fileURLWithPath: path))
            chmod(path, mode)
        }

        /// Runs the built `program` on this setup until it exits (killed after 30 s: a start
        /// that was not refused). pushspool-inbox gets no socket, so one that passes its
        /// checks exits 64 there.
        func runProgram(_ program: Program) throws -> (status: Int32, stderr: String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: ProcessRunner.executable(program.rawValue))
            process.arguments = ["--spool", root + "/spool", "--state-dir", root + "/state", "--config", config]
            process.environment = environment
            let stderrPath = root + "/\(program.rawValue).stderr"
            _ = FileManager.default.createFile(atPath: stderrPath, contents: nil)
            process.standardError = FileHandle(forWritingAtPath: stderrPath)
            process.standardOutput = FileHandle.nullDevice
            let exited = DispatchSemaphore(value: 0)
            process.terminationHandler = { _ in exited.signal() }
            try process.run()
            if exited.wait(timeout: .now() + 30) == .timedOut {
                kill(process.processIdentifier, SIGKILL)
                exited.wait()
                return (-1, (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "")
            }
            return (process.terminationStatus, (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "")
        }

        func check(for program: Program) throws -> ProcessResult {
            try ProcessRunner.run(ProcessRunner.executable("pushspoolctl"), ["config", "check", "--for", program.rawValue, config],
                                  environment: environment)
        }
    }

    @Test(arguments: Kind.allCases)
    func everyRefusalAtStartIsARefusalOfTheCheck(kind: Kind) throws {
        let fixtures = Self.fixtures(for: kind)
        #expect(Set(fixtures.flatMap(\.programs)) == kind.programs, "\(kind): a fixture for every program that refuses it")
        for fixture in fixtures {
            for program in fixture.programs {
                let setup = try Setup(fixture, program: program)
                let (status, stderr) = try setup.runProgram(program)
                #expect(status == 78, "\(program.rawValue), \(fixture): \(stderr)")
                #expect(stderr.contains(fixture.key), "\(program.rawValue), \(fixture): \(stderr)")
                // Refused before anything was opened.
                #expect(!FileManager.default.fileExists(atPath: setup.root + "/state/journal"), "\(fixture)")
                let check = try setup.check(for: program)
                #expect(check.status == 1, "config check --for \(program.rawValue), \(fixture): \(check.stdout) \(check.stderr)")
                #expect(check.stderr.contains(fixture.key), "config check --for \(program.rawValue), \(fixture): \(check.stderr)")
                #expect(check.stderr.contains("\(program.rawValue) would refuse to start"), "\(check.stderr)")
                #expect(!check.stdout.contains("configuration is valid"), "\(fixture)")
            }
        }
    }

    /// The control: each base passes the check, and pushspool-inbox gets past its own (to the
    /// missing socket, 64), so the refusals above come from what each fixture changed.
    @Test(arguments: Program.allCases, [false, true])
    func theBasesPass(program: Program, inboxNode: Bool) throws {
        let fixture = Fixture(name: "base", programs: [program], inboxNode: inboxNode, extra: "", key: "")
        let setup = try Setup(fixture, program: program)
        let check = try setup.check(for: program)
        #expect(check.status == 0, "\(check.stdout) \(check.stderr)")
        #expect(check.stdout.contains("configuration is valid"))
        if program == .pushspoolInbox && !inboxNode {
            let (status, stderr) = try setup.runProgram(program)
            #expect(status == 64, "\(stderr)")
            #expect(stderr.contains("no socket"), "\(stderr)")
        }
    }

    /// A file that does not load (a value out of its range) is refused by both programs and by
    /// the check for each, naming the key: the one loader.
    @Test(arguments: Program.allCases)
    func aFileThatDoesNotLoadIsRefusedByBoth(program: Program) throws {
        let fixture = Fixture(name: "retention out of range", programs: [program], extra: "RetentionSec=99999d\n", key: "RetentionSec")
        let setup = try Setup(fixture, program: program)
        let (status, stderr) = try setup.runProgram(program)
        #expect(status == 78, "\(stderr)")
        #expect(stderr.contains("[Inbox] RetentionSec"), "\(stderr)")
        let check = try setup.check(for: program)
        #expect(check.status == 1, "\(check.stdout)")
        #expect(check.stderr.contains("[Inbox] RetentionSec"), "\(check.stderr)")
    }

    /// The start-up code's exits with 78 (EX_CONFIG), counted in the source: each is the
    /// load (walked above), the check (walked above), or one of these, which depend on state
    /// no configuration check reads. A new one fails this test: put the refusal into
    /// `deploymentCheck` (a new `Kind`, and its fixture here), or list it with the reason.
    @Test func everyRefusalAtStartIsTheLoadTheCheckOrAKnownStateRefusal() throws {
        let outsideTheCheck: [String: [String]] = [
            "Sources/PushspoolDaemon/Entry.swift": [
                "load", "check",
                // <state>/erase.key exists and differs from the fleet key, or cannot be written.
                "ErasureSecret.provision",
            ],
            "Sources/PushInboxMain/InboxServerMain.swift": [
                "load", "check",
                "ErasureSecret.provision",
                // The host id: /etc/machine-id unreadable ([Export] HostId= itself is checked at load).
                "JetStreamInboxOptions",
                // The stream no longer holds what the index needs: at start, and later.
                "follower refused (gap, later)", "follower.prepare (gap)",
                // [Export] Subject= (checked at load) and the fleet outbox's key files and URLs
                // (the check's outbox kinds): kept as a second line of defence.
                "EventPublisher", "startFleetOutbox",
            ],
        ]
        for (path, expected) in outsideTheCheck {
            let text = try String(contentsOfFile: DaemonHarness.packageRoot + "/" + path, encoding: .utf8)
            let exits = text.split(separator: "\n").filter {
                $0.contains("return 78") || $0.contains(".exit(78)") || $0.contains("$0 = 78")
            }
            #expect(exits.count == expected.count, "\(path): \(exits.count) exits with 78, \(expected.count) accounted for")
        }
    }

    /// An operator's check outside the unit cannot see what its LoadCredential= gives: with no
    /// `TokenSecretFile=` and no `$CREDENTIALS_DIRECTORY` the secret is not checked, rather
    /// than refusing the shipped configuration, whose secret is a credential.
    @Test func anOperatorsCheckLeavesTheCredentialToTheUnit() throws {
        let fixture = Fixture(name: "credential", programs: [.pushspoolInbox], extra: "", secretSetting: "", key: "")
        let setup = try Setup(fixture, program: .pushspoolInbox)
        let check = try setup.check(for: .pushspoolInbox)
        #expect(check.status == 0, "\(check.stderr)")
        // The program itself, with no credentials, refuses.
        let (status, stderr) = try setup.runProgram(.pushspoolInbox)
        #expect(status == 78, "\(stderr)")
        #expect(stderr.contains("[Inbox] TokenSecretFile="), "\(stderr)")
    }
}
