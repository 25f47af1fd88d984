import Testing
import PushConfig
import PushJournal
import PushMediaModel
import PushSystem
@testable import PushspoolDaemon

/// `[Media]` and `[Journal]` defaults live in the schema (PushConfig); MediaOptions and
/// JournalOptions keep defaults of their own for the tests and the benchmark, because their
/// modules sit below PushConfig (the sandboxed fetcher links PushMediaModel and must not pull
/// in the configuration's ICU and inih). pushspoold always maps every configured value, so
/// the two sets must agree: a benchmark or test on the module defaults otherwise measures a
/// configuration no daemon runs. Checked here, where both are visible.
@Suite struct DefaultsAgreementTests {
    @Test func mediaOptionsDefaultsAreTheSchemaDefaults() {
        let mapped = Daemon.mediaOptions(for: Configuration())
        let own = MediaOptions(storeDirectory: mapped.storeDirectory)
        #expect(mapped.storeDirectory == StateLayout(root: Configuration().journal.stateDirectory).media)
        #expect(own.connectTimeout == mapped.connectTimeout)
        #expect(own.transferDeadline == mapped.transferDeadline)
        #expect(own.lowSpeedLimitBytesPerSecond == mapped.lowSpeedLimitBytesPerSecond)
        #expect(own.lowSpeedTime == mapped.lowSpeedTime)
        #expect(own.maxBytes == mapped.maxBytes)
        #expect(own.allowHTTP == mapped.allowHTTP)
        #expect(own.maxRedirects == mapped.maxRedirects)
        #expect(own.allowNetworks == mapped.allowNetworks)
        #expect(own.maxConcurrent == mapped.maxConcurrent)
        #expect(own.attempts == mapped.attempts)
        #expect(own.payloadDeadline == mapped.payloadDeadline)
        #expect(own.dedupWindow == mapped.dedupWindow, "[Media] DedupWindowSec=")
        #expect(own.thumbnailMaxEdge == mapped.thumbnailMaxEdge)
        #expect(own.thumbnailMaxPixels == mapped.thumbnailMaxPixels)
        #expect(own.caFile == mapped.caFile)
    }

    @Test func journalOptionsDefaultsAreTheSchemaDefaults() {
        let mapped = Daemon.journalOptions(for: Configuration(), quarantine: false)
        let own = JournalOptions()
        #expect(own.segmentBytes == mapped.segmentBytes)
        #expect(own.maxBatchDelay == mapped.maxBatchDelay)
        #expect(own.maxBatchRecords == mapped.maxBatchRecords)
        #expect(own.corruptionPolicy == mapped.corruptionPolicy)
    }
}
