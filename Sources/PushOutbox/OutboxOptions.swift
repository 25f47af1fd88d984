import PushOutboxStore
import PushSystem
import PushTransliteration

/// Everything the follower needs, resolved: `[Outbox]` of PushConfig as the follower takes it,
/// with the key files loaded (`OutboxOptions.load(settings:stateDirectory:)`).
///
/// A plain value: PushOutbox does not import the INI schema. `[Outbox]` becomes these options
/// by one initializer in PushModuleOptions, so nothing maps the section a second time; the
/// defaults below are `OutboxSettings`' (PushOutboxTests' `OutboxDefaultsTests`
/// compares the two). What is not configurable (the backoff ceiling, the batch size) is set here.
///
/// `Sendable`: a plain value. Secrets are `Secret`s, whose description is redacted.
package struct OutboxOptions: Sendable {
    /// `[Journal] StateDirectory=`: the journal is `<state>/journal`, outbox state `<state>/outbox`.
    package var stateDirectory: String
    package var journalDirectory: String
    package var mindboxURL = "https://api.mindbox.ru"
    /// `MindboxEndpointId=`: the endpoint for both platforms, or the fallback when a
    /// platform's own is empty.
    package var mindboxEndpointId = ""
    /// `MindboxEndpointIOS=` / `MindboxEndpointAndroid=`: a Mindbox app has one endpoint per
    /// platform; empty = `mindboxEndpointId`.
    package var mindboxEndpointIOS = ""
    package var mindboxEndpointAndroid = ""
    /// `MindboxTransliteration=`: the ICU transform for NCPushOpen's push name; `none` = the
    /// name as the push had it.
    package var mindboxTransliteration = "Any-Latin; Latin-ASCII"
    /// `MindboxOperationNCOpen=` / `MindboxOperationNCPushOpen=`: the project's operation names.
    package var mindboxOperationNCOpen = "mobileapp.NCOpen"
    package var mindboxOperationNCPushOpen = "mobileapp.NCPushOpen"
    /// `MindboxCustomerIdKey=`: the identifier the user id is sent under; empty = no `customer`.
    package var mindboxCustomerIdKey = ""
    /// `MindboxPushClicks=`: opens and button actions are also reported as push clicks.
    package var mindboxPushClicks = false
    package var mindboxSecret: Secret?
    package var infobipURL = "https://mobile.infobip.com"
    package var infobipAppKey: Secret?
    package var allowHTTP = false
    package var allowNetworks: [String] = []
    package var connectTimeout: Duration = .seconds(5)
    package var requestTimeout: Duration = .seconds(20)
    package var maxAttempts = 10
    package var retryBase: Duration = .seconds(1)
    /// The longest backoff between two attempts.
    package var retryCeiling: Duration = .seconds(600)
    package var maxAge: Duration = .seconds(86_400)
    /// The most Infobip reports one POST carries.
    package var batchLimit = 50

    /// The `[Outbox]` defaults, without key files (both vendors off until `load` or a test
    /// sets the secrets). `journalDirectory` defaults to `<state>/journal`.
    package init(stateDirectory: String, journalDirectory: String? = nil) {
        self.stateDirectory = stateDirectory
        self.journalDirectory = journalDirectory ?? StateLayout(root: stateDirectory).journal
    }

    /// Mindbox is configured: an endpoint id (either kind) and a secret key.
    package var mindboxEnabled: Bool {
        mindboxSecret != nil && !(mindboxEndpointId.isEmpty && mindboxEndpointIOS.isEmpty && mindboxEndpointAndroid.isEmpty)
    }

    /// The endpoint for a push or app of `platform`: its own, else `MindboxEndpointId=`. An
    /// event that names no platform (an NCOpen sent without one) goes to `MindboxEndpointId=`
    /// only: with per-platform endpoints alone its endpoint cannot be decided, and guessing
    /// sent Android apps' NCOpen to the iOS endpoint. `nil` = none fits (the delivery is
    /// parked as `unconfigured`, ``unconfiguredMessage(_:)`` says what to set or send).
    package func mindboxEndpoint(platform: String?) -> String? {
        let candidates: [String]
        switch platform {
        case "ios"?: candidates = [mindboxEndpointIOS, mindboxEndpointId]
        case "android"?: candidates = [mindboxEndpointAndroid, mindboxEndpointId]
        default: candidates = [mindboxEndpointId]
        }
        return candidates.first { !$0.isEmpty }
    }

    /// The transliterator `mindboxTransliteration` names; `nil` for `none`.
    /// - Throws: `configuration` when ICU has no such transform.
    package func transliterator() throws(OutboxError) -> Transliterator? {
        if mindboxTransliteration.lowercased() == "none" { return nil }
        do {
            return try Transliterator(id: mindboxTransliteration)
        } catch {
            throw OutboxError(.configuration, "[Outbox] MindboxTransliteration=\(mindboxTransliteration): \(error.message), or 'none'")
        }
    }
    package var infobipEnabled: Bool { infobipAppKey != nil }

    /// The mapper both outboxes (the journal's and the fleet's) run with these options, so
    /// they make the same deliveries from the same events.
    /// - Throws: `configuration` when ICU has no such transform.
    package func eventMapper() throws(OutboxError) -> EventMapper {
        var mindbox = EventMapper.MindboxReports(fields: MindboxFields(transliterator: try transliterator()))
        mindbox.ncOpenOperation = mindboxOperationNCOpen
        mindbox.ncPushOpenOperation = mindboxOperationNCPushOpen
        mindbox.customerIdKey = mindboxCustomerIdKey.isEmpty ? nil : mindboxCustomerIdKey
        mindbox.pushClicks = mindboxPushClicks
        return EventMapper(mindbox: mindboxEnabled, infobip: infobipEnabled, mindboxReports: mindbox)
    }

    /// Loads the key files named by `[Outbox] MindboxSecretKeyFile=` / `InfobipAppKeyFile=`
    /// (empty = that vendor is off) and checks the URLs against `AllowHTTP=`.
    package mutating func load(mindboxSecretKeyFile: String, infobipAppKeyFile: String) throws(OutboxError) {
        mindboxSecret = mindboxSecretKeyFile.isEmpty ? nil : try Secret.load(path: mindboxSecretKeyFile)
        infobipAppKey = infobipAppKeyFile.isEmpty ? nil : try Secret.load(path: infobipAppKeyFile)
        try validate()
    }

    package func validate() throws(OutboxError) {
        // PushConfig refuses this already; the check here covers every other caller.
        if connectTimeout > requestTimeout {
            throw OutboxError(.configuration, "[Outbox] ConnectTimeoutSec= (\(connectTimeout)) is longer than RequestTimeoutSec= (\(requestTimeout)); the connect phase is part of the request")
        }
        for (key, url) in [("MindboxURL", mindboxURL), ("InfobipURL", infobipURL)] {
            if url.hasPrefix("http://") && !allowHTTP {
                throw OutboxError(.configuration, "[Outbox] \(key)=\(url) is plain http; use https or set AllowHTTP=yes")
            }
            guard url.hasPrefix("https://") || url.hasPrefix("http://") else {
                throw OutboxError(.configuration, "[Outbox] \(key)=\(url) is not an http(s) URL")
            }
        }
    }
}

/// A snapshot for STATUS= and metrics.
///
/// `Sendable`: a plain value.
package struct OutboxStatus: Sendable, Equatable {
    /// Deliveries waiting (including those in backoff).
    package var pending = 0
    /// Dead letters in `parked/`.
    package var parked = 0
    /// Deliveries that got a 2xx since start.
    package var delivered = 0
    /// POSTs that failed and were scheduled again, since start.
    package var retried = 0
    /// Deliveries dropped unsent because their user or device was erased, since start.
    package var erased = 0
    /// The last journal seq handled (all its deliveries queued).
    package var cursor: UInt64 = 0
    /// The last failure (delivery or state I/O), without secrets.
    package var lastError: String?

    package init() {}

    /// `outbox 3 pending, 1 parked`, for the STATUS= line.
    package var summary: String { "outbox \(pending) pending, \(parked) parked" }
}

/// Something worth a journald event; the daemon maps these to `EventKind.outboxParked` and
/// `.outboxFailed` (fields `OUTBOX_DELIVERY`, `OUTBOX_TARGET`, `HTTP_STATUS`) and
/// `.outboxFieldProblem` (`OUTBOX_DELIVERY`, `OUTBOX_TARGET`, `OUTBOX_FIELD`, `REASON_CODE`).
///
/// `Sendable`: a plain value.
package enum OutboxNotice: Sendable, Equatable {
    /// `reason`: `http_<status>`, `attempts`, `max_age`.
    case parked(id: String, target: String, status: Int, reason: String, message: String)
    /// One POST failed; retried after `retryInMillis`.
    case failed(id: String, target: String, status: Int, message: String, retryInMillis: Int64)
    /// A field of a delivery could not be normalised (a push date pushspool cannot read, a
    /// name ICU could not transliterate): left out or sent as received, as `message` says.
    /// `reason`: `unparseable_date`, `name_not_text`, `transliteration_failed`.
    case fieldProblem(id: String, target: String, field: String, reason: String, message: String)
}
