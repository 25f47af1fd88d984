import Foundation
import Testing
@testable import PushConfig

@Suite struct ConfigurationStoreTests {
    @Test func reloadAppliesAValidConfigurationAndReportsWhatChanged() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Media]\nAttempts=2\n")
        let store = try ConfigurationStore(mainFile: dir.main, overrides: [ConfigOverride(section: "Limits", key: "MaxDepth", value: "7")])
        #expect(store.current.media.attempts == 2)

        try dir.write("pushspool.conf", "[Media]\nAttempts=4\n[Spool]\nDirectory=/srv/other\n[Category chat]\nAction=r:Reply:\n[Limits]\nMaxDepth=9\n")
        #expect(store.reload() == .applied(changed: ["Spool.Directory", "Media.Attempts", "Category chat.Action"], restartRequired: ["Spool.Directory", "Media.Attempts"]))
        #expect(store.current.media.attempts == 4)
        // The command line still wins over the re-read files.
        #expect(store.current.limits.maxDepth == 7)
        #expect(store.provenance["Media.Attempts"] == .file(path: dir.main, line: 2))
        #expect(store.reload() == .applied(changed: [], restartRequired: []))
    }

    @Test func invalidReloadKeepsTheOldConfigurationWhole() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Media]\nAttempts=2\n")
        let store = try ConfigurationStore(mainFile: dir.main)
        let before = store.current
        // The first key is fine, the drop-in is not: nothing of either may be applied.
        try dir.write("pushspool.conf", "[Media]\nAttempts=5\n")
        try dir.write("pushspool.conf.d/50-bad.conf", "[Media]\nMaxRedirects=many\n")
        guard case .rejected(let error) = store.reload() else {
            Issue.record("an invalid drop-in was applied")
            return
        }
        #expect(error.file == dir.dropIns + "/50-bad.conf")
        #expect(error.line == 2)
        #expect(store.current == before)
        #expect(store.provenance["Media.Attempts"] == .file(path: dir.main, line: 2))
    }

    @Test func invalidInitialConfigurationThrows() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Nope]\nX=1\n")
        #expect(throws: ConfigError.self) { try ConfigurationStore(mainFile: dir.main) }
    }
}
