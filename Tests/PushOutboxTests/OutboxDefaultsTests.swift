import Testing
import PushConfig
import PushModuleOptions
import PushDaemonOptions
import PushOutbox

/// PushOutbox does not import the INI schema, so `OutboxOptions` carries defaults of its own:
/// every one must be `[Outbox]`'s (the crash tests' child builds its options without a
/// configuration).
@Suite struct OutboxDefaultsTests {
    @Test func plainDefaultsAreTheSectionsDefaults() {
        func fields(_ options: OutboxOptions) -> [String: String] {
            Dictionary(uniqueKeysWithValues: Mirror(reflecting: options).children.compactMap { child in
                child.label.map { ($0, String(describing: child.value)) }
            })
        }
        let plain = fields(OutboxOptions(stateDirectory: "/tmp"))
        let fromSettings = fields(OutboxOptions(settings: OutboxSettings(), stateDirectory: "/tmp"))
        #expect(!plain.isEmpty)
        #expect(plain == fromSettings)
    }
}
