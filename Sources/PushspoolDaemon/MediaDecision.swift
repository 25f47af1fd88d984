import PushPayload
import PushMediaCore

/// Whether a notification's media is fetched, and if not, why — decided before any I/O so
/// payloads without media never wait for downloads.
enum MediaDecision: Equatable {
    case none
    case fetch(String)
    case skip(String)

    init(notification: PushNotification, allowHTTP: Bool, enabled: Bool) {
        guard let url = notification.mediaUrl, !url.isEmpty else {
            self = .none
            return
        }
        let lowered = url.lowercased()
        if !enabled {
            self = .skip("media_disabled")
        } else if lowered.hasPrefix("https://") {
            self = .fetch(url)
        } else if lowered.hasPrefix("http://") {
            self = allowHTTP ? .fetch(url) : .skip("insecure_scheme")
        } else {
            self = .skip("invalid_url")
        }
    }
}

/// What a record says about its media.
enum RecordMedia: Sendable {
    case fetched(MediaOutcome)
    case skipped(url: String, reason: String)

    /// Stored and decodable as far as known: an attachment a device could show.
    var attachable: Bool {
        if case .fetched(let outcome) = self { return outcome.attachable }
        return false
    }
}
