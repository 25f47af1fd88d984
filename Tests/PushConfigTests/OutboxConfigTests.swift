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
