import Testing
import PushConfig
import PushJournal
import PushMediaCore
import PushModuleOptions
import PushDaemonOptions

/// The one mapping from `[Media]` and `[Journal]` settings to the options their modules open
/// with: every setting arrives in its own field. Each value differs from its default and from
/// the others, so a setting dropped or wired to the wrong field shows.
@Suite struct ModuleOptionsTests {
    @Test func mediaOptionsCarryEverySetting() {
        var settings = Configuration().media
        settings.connectTimeout = .seconds(7)
        settings.transferTimeout = .seconds(31)
        settings.lowSpeedLimitBytes = 2048
        settings.lowSpeedTime = .seconds(13)
        settings.maxBytes = 5 << 20
        settings.allowHTTP = true
        settings.maxRedirects = 2
        settings.allowNetworks = ["127.0.0.1/32"]
        settings.maxConcurrent = 3
        settings.attempts = 4
        settings.payloadDeadline = .seconds(45)
        settings.dedupWindow = .seconds(17)
        settings.thumbnailMaxEdge = 100
        settings.thumbnailMaxPixels = 1000
        settings.caFile = "/etc/pushspool/ca.pem"
        let options = MediaOptions(settings: settings, storeDirectory: "/state/media")
        #expect(options.storeDirectory == "/state/media")
        #expect(options.connectTimeout == .seconds(7))
        #expect(options.transferDeadline == .seconds(31))
        #expect(options.lowSpeedLimitBytesPerSecond == 2048)
        #expect(options.lowSpeedTime == .seconds(13))
        #expect(options.maxBytes == 5 << 20)
        #expect(options.allowHTTP)
        #expect(options.maxRedirects == 2)
        #expect(options.allowNetworks == ["127.0.0.1/32"])
        #expect(options.maxConcurrent == 3)
        #expect(options.attempts == 4)
        #expect(options.payloadDeadline == .seconds(45))
        #expect(options.dedupWindow == .seconds(17))
        #expect(options.thumbnailMaxEdge == 100)
        #expect(options.thumbnailMaxPixels == 1000)
        #expect(options.caFile == "/etc/pushspool/ca.pem")
    }

    @Test func journalOptionsCarryEverySetting() {
        var settings = Configuration().journal
        settings.segmentBytes = 1 << 20
        settings.maxBatchDelay = .milliseconds(7)
        settings.maxBatchRecords = 99
        settings.corruptionPolicy = .quarantineSegment
        settings.checkpointInterval = .seconds(11)
        let options = JournalOptions(settings: settings)
        #expect(options.segmentBytes == 1 << 20)
        #expect(options.maxBatchDelay == .milliseconds(7))
        #expect(options.maxBatchRecords == 99)
        #expect(options.corruptionPolicy == .quarantineSegment)
        #expect(options.checkpointInterval == .seconds(11))
    }

    /// `--quarantine-corrupt` wins over `CorruptionPolicy=refuse`; without it the setting holds.
    @Test func quarantineOverridesTheCorruptionPolicy() {
        #expect(JournalOptions(settings: Configuration().journal).corruptionPolicy == .refuse)
        #expect(JournalOptions(settings: Configuration().journal, quarantine: true).corruptionPolicy == .quarantineSegment)
    }

    /// The defaults are usable options: what tests and the benchmark open with is what an
    /// unconfigured pushspoold runs.
    @Test func defaultSettingsMakeUsableMediaOptions() {
        #expect(MediaOptions(settings: Configuration().media, storeDirectory: "/state/media").problem == nil)
    }
}
