import PushSystem
import PushPayload
import PushJournal
import PushMedia
import PushConfig

/// The options each part is opened with, derived from the configuration in one place.
extension Daemon {
    static func normalizerOptions(for configuration: Configuration) throws(CategoryTableError) -> NormalizerOptions {
        var options = NormalizerOptions()
        options.maxPayloadBytes = configuration.limits.maxPayloadBytes
        options.maxDepth = configuration.limits.maxDepth
        // The loader checks categories by the same rule, so this refuses only what it let through
        // by mistake; the caller reports that instead of dropping the category silently.
        options.categories = try configuration.categoryTable()
        return options
    }

    static func journalOptions(for configuration: Configuration, quarantine: Bool) -> JournalOptions {
        var options = JournalOptions()
        options.segmentBytes = Int64(configuration.journal.segmentBytes)
        options.maxBatchDelay = configuration.journal.maxBatchDelay
        options.maxBatchRecords = configuration.journal.maxBatchRecords
        options.checkpointInterval = configuration.journal.checkpointInterval
        options.corruptionPolicy = quarantine || configuration.journal.corruptionPolicy == PushConfig.CorruptionPolicy.quarantineSegment
            ? PushJournal.CorruptionPolicy.quarantineSegment : PushJournal.CorruptionPolicy.refuse
        return options
    }

    static func mediaOptions(for configuration: Configuration) -> MediaOptions {
        let settings = configuration.media
        var options = MediaOptions(storeDirectory: configuration.journal.stateDirectory + "/media")
        options.connectTimeout = settings.connectTimeout
        options.transferDeadline = settings.transferTimeout
        options.lowSpeedLimitBytesPerSecond = settings.lowSpeedLimitBytes
        options.lowSpeedTime = settings.lowSpeedTime
        options.maxBytes = Int64(settings.maxBytes)
        options.allowHTTP = settings.allowHTTP
        options.maxRedirects = settings.maxRedirects
        options.allowNetworks = settings.allowNetworks
        options.maxConcurrent = settings.maxConcurrent
        options.attempts = settings.attempts
        options.payloadDeadline = settings.payloadDeadline
        options.dedupWindow = settings.dedupWindow
        options.thumbnailMaxEdge = settings.thumbnailMaxEdge
        options.thumbnailMaxPixels = settings.thumbnailMaxPixels
        options.caFile = settings.caFile
        return options
    }
}
