@preconcurrency import Glibc
import Testing
@testable import PushConfig

/// Issue 21 #12: `[Outbox] ConnectTimeoutSec=` longer than `RequestTimeoutSec=` was accepted
/// (curl then gives up at the request timeout whatever the connect timeout says), where
/// `[Media]` refuses the same mistake. The loader's validation is what `pushspoolctl config
/// check` and the daemon both run.
@Suite struct OutboxConfigTests {
    @Test func aConnectTimeoutLongerThanTheRequestTimeoutIsRefusedAtItsLine() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Outbox]\nRequestTimeoutSec=10s\nConnectTimeoutSec=15s\n")
        let error = try #require(dir.error())
        #expect(error.section == "Outbox" && error.key == "ConnectTimeoutSec")
        #expect(error.line == 3)
        #expect(error.message.contains("RequestTimeoutSec=10s"))
    }

    @Test func aRequestTimeoutUnderTheDefaultConnectTimeoutNamesTheKeyThatWasSet() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Outbox]\nRequestTimeoutSec=3s\n")
        let error = try #require(dir.error())
        #expect(error.key == "RequestTimeoutSec" && error.line == 2)
        #expect(error.message.contains("ConnectTimeoutSec=5s"))
    }

    @Test func equalOrShorterConnectTimeoutsAreAccepted() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Outbox]\nRequestTimeoutSec=3s\nConnectTimeoutSec=3s\n")
        let (config, _) = try dir.load()
        #expect(config.outbox.requestTimeout == .seconds(3))
        #expect(try ConfigurationLoader.load(text: "[Outbox]\nConnectTimeoutSec=1s\nRequestTimeoutSec=2s\n", path: "x.conf").0.outbox.connectTimeout == .seconds(1))
        #expect(throws: ConfigError.self) { try ConfigurationLoader.load(text: "[Outbox]\nConnectTimeoutSec=2s\nRequestTimeoutSec=1s\n", path: "x.conf") }
    }

    /// Issue 22: one endpoint per platform, the single key as fallback; the push name's
    /// transliteration scheme is judged by ICU at load, so a typo is a config error at its line.
    @Test func mindboxPlatformEndpointsAndTransliterationLoad() throws {
        let (config, _) = try ConfigurationLoader.load(text: """
            [Outbox]
            MindboxEndpointId=app
            MindboxEndpointIOS=app-ios
            MindboxEndpointAndroid=app.android-2
            MindboxTransliteration=Russian-Latin/BGN; Any-Latin; Latin-ASCII

            """, path: "x.conf")
        #expect(config.outbox.mindboxEndpointId == "app")
        #expect(config.outbox.mindboxEndpointIOS == "app-ios")
        #expect(config.outbox.mindboxEndpointAndroid == "app.android-2")
        #expect(config.outbox.mindboxTransliteration == "Russian-Latin/BGN; Any-Latin; Latin-ASCII")
        #expect(Configuration().outbox.mindboxTransliteration == "Any-Latin; Latin-ASCII")
        #expect(try ConfigurationLoader.load(text: "[Outbox]\nMindboxTransliteration=none\n", path: "x.conf").0.outbox.mindboxTransliteration == "none")
    }

    @Test func anUnknownTransliterationIsRefusedWithICUsReason() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Outbox]\nEnabled=yes\nMindboxTransliteration=Any-Latin; Latin-ASCI\n")
        let error = try #require(dir.error())
        #expect(error.section == "Outbox" && error.key == "MindboxTransliteration" && error.line == 3)
        #expect(error.message.contains("'Any-Latin; Latin-ASCI'"), "\(error)")
        #expect(error.message.contains("U_INVALID_ID"), "\(error)")
        #expect(error.message.contains("'none'"), "\(error)")
        for bad in ["MindboxEndpointIOS=has space", "MindboxEndpointAndroid=a/b"] {
            #expect(throws: ConfigError.self) { try ConfigurationLoader.load(text: "[Outbox]\n\(bad)\n", path: "x.conf") }
        }
    }
}

/// A stream-built inbox numbers items by stream seq; pushspoold's outbox maps events through
/// this host's journal seqs, so pushspoold (and `config check`) refuse the two together, and
/// `config check --for pushspool-inbox` does not (its fleet outbox reads stream seqs).
@Suite struct OutboxWithStreamInboxTests {
    @Test func theOutboxIsRefusedBesideAStreamBuiltInbox() {
        var configuration = Configuration()
        configuration.outbox.enabled = true
        configuration.outbox.mindboxURL = "https://api.mindbox.ru"
        configuration.inbox.source = .nats
        #expect(configuration.deploymentProblems(keyFileOwner: nil).contains { $0.contains("Source=nats") })
        configuration.inbox.source = .journal
        #expect(!configuration.deploymentProblems(keyFileOwner: nil).contains { $0.contains("Source=nats") })
        configuration.inbox.source = .nats
        // An inbox node: pushspool-inbox's fleet outbox runs there.
        #expect(configuration.deploymentProblems(keyFileOwner: nil, for: .pushspoolInbox).isEmpty)
        configuration.outbox.enabled = false
        #expect(configuration.deploymentProblems(keyFileOwner: nil).isEmpty)
    }
}

/// `[Export] ErasureKeyFile=` (or the credential `erase-key`): `config check` and both
/// daemons' start refuse a key file they cannot read, of the wrong size, or open to group or
/// others; a journal-fed pushspool-inbox does not install the key (pushspoold does), so its
/// check skips it.
@Suite struct ErasureKeyFileCheckTests {
    static func directory() -> String {
        var template = Array("/tmp/pushspool-erasekey-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }

    static func write(_ count: Int, to path: String, mode: mode_t) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let bytes = [UInt8](repeating: 7, count: count)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
        chmod(path, mode)
    }

    static func problems(_ configuration: Configuration, credentials: String? = nil,
                         for program: Configuration.DeploymentProgram = .pushspoold) -> [String] {
        configuration.deploymentProblems(keyFileOwner: nil, for: program, credentialsDirectory: credentials)
            .filter { $0.contains("ErasureKeyFile") }
    }

    @Test func aKeyFileIsCheckedForReadabilitySizeAndMode() throws {
        let dir = Self.directory()
        var configuration = try ConfigurationLoader.load(text: "[Export]\nErasureKeyFile=\(dir)/key\n", path: "x.conf").0
        #expect(configuration.export.erasureKeyFile == dir + "/key")
        #expect(Self.problems(configuration).first?.contains("cannot open") == true)
        Self.write(32, to: dir + "/key", mode: 0o600)
        #expect(Self.problems(configuration).isEmpty)
        Self.write(32, to: dir + "/key", mode: 0o644)
        #expect(Self.problems(configuration).first?.contains("chmod 600") == true)
        Self.write(16, to: dir + "/key", mode: 0o600)
        #expect(Self.problems(configuration).first?.contains("holds 16 bytes, not 32") == true)
        // A journal-fed pushspool-inbox leaves the key to pushspoold; a stream-fed one installs it.
        #expect(Self.problems(configuration, for: .pushspoolInbox).isEmpty)
        configuration.inbox.source = .nats
        #expect(!Self.problems(configuration, for: .pushspoolInbox).isEmpty)
    }

    @Test func withoutASettingTheCredentialIsUsedWhenPresent() throws {
        let dir = Self.directory()
        let configuration = Configuration()
        #expect(configuration.export.erasureKeyPath(credentialsDirectory: dir) == nil)
        #expect(Self.problems(configuration, credentials: dir).isEmpty)
        Self.write(32, to: dir + "/erase-key", mode: 0o640)
        #expect(configuration.export.erasureKeyPath(credentialsDirectory: dir) == dir + "/erase-key")
        #expect(Self.problems(configuration, credentials: dir).first?.contains("chmod 600") == true)
        #expect(configuration.export.erasureKeyPath(credentialsDirectory: nil) == nil)
    }
}
