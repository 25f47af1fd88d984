@preconcurrency import Glibc
import PushSystem
import PushPayload
import PushMediaModel
import PushJournal

/// Builds the journal record body: the normalised notification plus what the daemon knows
/// about where it came from and what happened to its media.
enum RecordBuilder {
    /// An event's record: its members (`"kind":"event"`) plus where it came from.
    static func body(event: PushEvent, source: SourceFile, ingestMillis: Int64) -> [UInt8] {
        event.recordBody(ingestMillis: ingestMillis, sourceFile: source.name, envelopeSHA256: source.sha256, envelopeSize: source.size)
    }

    private static func addSource(_ record: inout [String: JSONValue], source: SourceFile, ingestMillis: Int64) {
        record["ingestedAt"] = .string(Timestamp.iso8601(millis: ingestMillis))
        record["sourceFile"] = .string(source.name)
        record["sha256"] = .string(source.sha256)
        record["size"] = .number(String(source.size))
    }

    static func body(notification: PushNotification, source: SourceFile, media: RecordMedia?, ingestMillis: Int64) -> [UInt8] {
        var notification = notification
        // Cancelled downloads never get here (their payload is rolled back), so `media` is
        // either attached, failed, skipped, or absent because the payload named no usable
        // media URL (none, empty, or one the normaliser dropped as invalid): all but the
        // first take the alt text.
        if let fallback = MediaFallback.apply(attached: media?.attachable ?? false, cancelled: false, body: notification.body,
                                              mediaAlt: notification.mediaAlt) {
            notification.originalBody = fallback.originalBody
            notification.body = fallback.body
        }
        guard case .object(var record) = notification.jsonValue() else {
            preconditionFailure("a notification always encodes as a JSON object")
        }
        addSource(&record, source: source, ingestMillis: ingestMillis)
        switch media {
        case .fetched(let outcome)?:
            record["media"] = outcome.jsonValue
        case .skipped(let url, let reason)?:
            // The same shape as a fetched outcome, so `media.error` is always an object and
            // the skip reason is in `media.reason`.
            record["media"] = MediaOutcome.skipped(url: url, reason: reason).jsonValue
        case nil:
            break
        }
        return JSONValue.object(record).serialized()
    }
}

/// `<state>/status.json`: the daemon's live counts for `pushspoolctl stats`.
enum StatusFile {
    /// `media`: the fetcher's counters (per-code failures, reuse, bytes), under `"media"`.
    /// `more`: members the followers add (`fleetErasure`, `erasures`).
    static func render(counters: [(String, Int)], journal: JournalWriterStats, media: MediaStats?, lastError: String?,
                       more: [String: JSONValue] = [:]) -> [UInt8] {
        var object: [String: JSONValue] = more
        for (key, value) in counters { object[key] = .number(String(value)) }
        if let media { object["media"] = media.jsonValue }
        object["journalLastSeq"] = .number(String(journal.lastSeq))
        object["journalBytes"] = .number(String(journal.bytes))
        object["journalPaused"] = .bool(journal.paused)
        object["updatedAt"] = .string(Timestamp.now())
        object["pid"] = .number(String(getpid()))
        object["daemonVersion"] = .string(pushspoolVersion)
        if let lastError { object["lastError"] = .string(lastError) }
        return JSONValue.object(object).serialized() + [0x0a]
    }
}
