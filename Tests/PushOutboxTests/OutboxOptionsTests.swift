import Testing
import PushConfig
import PushOutbox
import PushDaemonOptions
import PushOutboxStore
import PushSystem
import TestSupport

/// The daemon builds the outbox's options with `OutboxOptions.load(settings:…)`, on the one
/// initializer `OutboxOptions(settings:…)`: the defaults live in `OutboxSettings` only.
@Suite struct OutboxOptionsTests {
    /// Every `[Outbox]` setting but `Enabled=` and the two key-file paths reaches the options
    /// under its own name, so a setting added later cannot be loaded and then ignored.
    @Test func everySettingIsCarried() throws {
        var settings = OutboxSettings()
        settings.mindboxURL = "https://mindbox.example"
        settings.mindboxEndpointId = "app"
        settings.mindboxEndpointIOS = "app-ios"
        settings.mindboxEndpointAndroid = "app-android"
        settings.mindboxTransliteration = "none"
        settings.infobipURL = "https://infobip.example"
        settings.allowHTTP = true
        settings.allowNetworks = ["10.0.0.0/8"]
        settings.connectTimeout = .seconds(2)
        settings.requestTimeout = .seconds(7)
        settings.maxAttempts = 4
        settings.retryBase = .milliseconds(300)
        settings.maxAge = .seconds(900)
        let options = OutboxOptions(settings: settings, stateDirectory: "/var/lib/pushspool")
        let carried = Dictionary(uniqueKeysWithValues: Mirror(reflecting: options).children.compactMap { child in
            child.label.map { ($0, String(describing: child.value)) }
        })
        for child in Mirror(reflecting: settings).children {
            guard let label = child.label, !["enabled", "mindboxSecretKeyFile", "infobipAppKeyFile"].contains(label) else { continue }
            #expect(carried[label] == String(describing: child.value), "[Outbox] \(label) is not carried")
        }
        #expect(options.journalDirectory == "/var/lib/pushspool/journal")
    }

    /// Without settings the options are the schema's defaults, not values of their own.
    @Test func defaultsAreTheSettingsDefaults() {
        let options = OutboxOptions(stateDirectory: "/tmp")
        let settings = OutboxSettings()
        #expect(options.mindboxURL == settings.mindboxURL && options.infobipURL == settings.infobipURL)
        #expect(options.mindboxTransliteration == settings.mindboxTransliteration)
        #expect(options.maxAttempts == settings.maxAttempts && options.maxAge == settings.maxAge)
        #expect(options.connectTimeout == settings.connectTimeout && options.requestTimeout == settings.requestTimeout)
    }

    /// `load` reads the key files the settings name and turns each vendor on by its file.
    @Test func loadReadsTheKeyFilesTheSettingsName() throws {
        let fixture = try OutboxFixture()
        var settings = OutboxSettings()
        settings.mindboxEndpointId = "app"
        settings.infobipAppKeyFile = fixture.dir.appending("infobip.key")
        let infobipOnly = try OutboxOptions.load(settings: settings, stateDirectory: fixture.state)
        #expect(infobipOnly.infobipEnabled && !infobipOnly.mindboxEnabled)
        settings.mindboxSecretKeyFile = fixture.dir.appending("mindbox.key")
        let both = try OutboxOptions.load(settings: settings, stateDirectory: fixture.state)
        #expect(both.infobipEnabled && both.mindboxEnabled)
        settings.mindboxURL = "http://127.0.0.1:9"
        #expect(throws: OutboxError.self) { try OutboxOptions.load(settings: settings, stateDirectory: fixture.state) }
    }
}
