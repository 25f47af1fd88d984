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
}
