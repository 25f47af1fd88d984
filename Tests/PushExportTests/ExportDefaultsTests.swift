import Testing
import PushConfig
import PushExport
import PushModuleOptions

/// PushExport does not import the INI schema, so `ExportOptions` carries defaults of its own:
/// they must be `[Export]`'s, or a program that builds options without a configuration (the
/// benchmark, a test) would run with values no configuration gives.
@Suite struct ExportDefaultsTests {
    @Test func plainDefaultsAreTheSectionsDefaults() {
        let plain = ExportOptions(stateDirectory: "/tmp", instance: "a")
        let fromSettings = ExportOptions(settings: ExportSettings(), stateDirectory: "/tmp", instance: "a")
        #expect(plain == fromSettings)
    }
}
