import PushConfig
import PushJournal
import PushMediaModel
import PushSystem

// The options of the modules below PushConfig, built from their settings. The configuration's
// settings types are the only place these defaults live; each options type is built from them
// here, by one initializer, for pushspoold, the benchmark and the tests alike. A module of its
// own because PushMediaModel is linked into the sandboxed pushspool-fetch, which must not link
// PushConfig (ICU, inih), and PushConfig must not link libcurl through PushMediaModel.

extension JournalOptions {
    /// The `[Journal]` settings as journal options. `quarantine` (pushspoold's
    /// `--quarantine-corrupt`) overrides `CorruptionPolicy=` with `quarantine-segment`.
    package init(settings: JournalSettings, quarantine: Bool = false) {
        self.init(segmentBytes: Int64(settings.segmentBytes), maxBatchDelay: settings.maxBatchDelay,
                  maxBatchRecords: settings.maxBatchRecords,
                  corruptionPolicy: quarantine ? .quarantineSegment : settings.corruptionPolicy,
                  checkpointInterval: settings.checkpointInterval)
    }
}

extension MediaOptions {
    /// The `[Media]` settings as download options, storing under `storeDirectory` (pushspoold:
    /// `StateLayout.media` of the state directory).
    package init(settings: MediaSettings, storeDirectory: String) {
        self.init(storeDirectory: storeDirectory, connectTimeout: settings.connectTimeout,
                  transferDeadline: settings.transferTimeout, lowSpeedLimitBytesPerSecond: settings.lowSpeedLimitBytes,
                  lowSpeedTime: settings.lowSpeedTime, maxBytes: Int64(settings.maxBytes), allowHTTP: settings.allowHTTP,
                  maxRedirects: settings.maxRedirects, allowNetworks: settings.allowNetworks,
                  maxConcurrent: settings.maxConcurrent, attempts: settings.attempts,
                  payloadDeadline: settings.payloadDeadline, dedupWindow: settings.dedupWindow,
                  thumbnailMaxEdge: settings.thumbnailMaxEdge, thumbnailMaxPixels: settings.thumbnailMaxPixels,
                  caFile: settings.caFile)
    }
}
