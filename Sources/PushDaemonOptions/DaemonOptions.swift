// `[Media]` and `[Outbox]` turned into their options: the part of the settings adapter
// (PushModuleOptions holds the rest) that pushspoolctl does not use. A module of its own so that
// pushspoolctl links no libcurl (PushOutbox's); PushMediaCore is also linked into the sandboxed
// pushspool-fetch, which must not link PushConfig (ICU, inih).
import PushConfig
import PushMediaCore
import PushOutbox
import PushOutboxStore

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

extension OutboxOptions {
    /// `settings` as the follower takes them, without the key files (both vendors off until
    /// `load` or a test sets the secrets). `journalDirectory` defaults to `<state>/journal`.
    package init(settings: OutboxSettings, stateDirectory: String, journalDirectory: String? = nil) {
        self.init(stateDirectory: stateDirectory, journalDirectory: journalDirectory)
        mindboxURL = settings.mindboxURL
        mindboxEndpointId = settings.mindboxEndpointId
        mindboxEndpointIOS = settings.mindboxEndpointIOS
        mindboxEndpointAndroid = settings.mindboxEndpointAndroid
        mindboxTransliteration = settings.mindboxTransliteration
        mindboxOperationNCOpen = settings.mindboxOperationNCOpen
        mindboxOperationNCPushOpen = settings.mindboxOperationNCPushOpen
        mindboxCustomerIdKey = settings.mindboxCustomerIdKey
        mindboxPushClicks = settings.mindboxPushClicks
        infobipURL = settings.infobipURL
        allowHTTP = settings.allowHTTP
        allowNetworks = settings.allowNetworks
        connectTimeout = settings.connectTimeout
        requestTimeout = settings.requestTimeout
        maxAttempts = settings.maxAttempts
        retryBase = settings.retryBase
        maxAge = settings.maxAge
    }

    /// `settings` with the key files named by `MindboxSecretKeyFile=` / `InfobipAppKeyFile=`
    /// loaded (empty = that vendor is off) and the URLs checked against `AllowHTTP=`: what the
    /// daemon runs the outbox with.
    package static func load(settings: OutboxSettings, stateDirectory: String) throws(OutboxError) -> OutboxOptions {
        var options = OutboxOptions(settings: settings, stateDirectory: stateDirectory)
        try options.load(mindboxSecretKeyFile: settings.mindboxSecretKeyFile, infobipAppKeyFile: settings.infobipAppKeyFile)
        return options
    }
}
