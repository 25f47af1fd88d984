@preconcurrency import Glibc
import PushSystem
import PushPayload
import PushMediaCore
import PushJournal

/// Builds the journal record body: the normalised notification plus what the daemon knows
/// about where it came from and what happened to its media.
enum RecordBuilder {
    /// An event's record: its members (`"kind":"event"`) plus where it came from.
    static func body(event: PushEvent, source: SourceFile, ingestMillis: Int64) -> [UInt8] {
        event.recordBody(ingestMillis: ingestMillis, sourceFile: source.name, envelopeSHA256: source.sha256, envelopeSize: source.size)
    }

    private static func addSource(_ record: inout [(String, JSONValue)], source: SourceFile, ingestMillis: Int64) {
        record.append(("ingestedAt", .string(Timestamp.iso8601(millis: ingestMillis))))
        record.append(("sourceFile", .string(source.name)))
        record.append(("sha256", .string(source.sha256)))
        record.append(("size", .number(String(source.size))))
    }

    /// `members` as one compact JSON object, byte for byte what `JSONValue.object(...)
    /// .serialized()` writes for the same members (keys sorted by their UTF-8 bytes), without
    /// the dictionary: the keys are unique (the notification's, then the daemon's own, which
    /// it never uses). Indices are sorted, not members, so no reference-counted value moves.
    static func serializedObject(_ members: [(String, JSONValue)]) -> [UInt8] {
        var order = Array(members.indices)
        order.sort { members[$0].0.utf8.lexicographicallyPrecedes(members[$1].0.utf8) }
        var out: [UInt8] = []
        out.reserveCapacity(1024)
        out.append(UInt8(ascii: "{"))
        for (position, index) in order.enumerated() {
            if position > 0 { out.append(UInt8(ascii: ",")) }
            JSONValue.string(members[index].0).write(into: &out)
            out.append(UInt8(ascii: ":"))
            members[index].1.write(into: &out)
        }
        out.append(UInt8(ascii: "}"))
        return out
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
        var record = notification.jsonMembers()
        addSource(&record, source: source, ingestMillis: ingestMillis)
        switch media {
        case .fetched(let outcome)?:
            record.append(("media", outcome.jsonValue))
        case .skipped(let url, let reason)?:
            // The same shape as a fetched outcome, so `media.error` is always an object and
            // the skip reason is in `media.reason`.
            record.append(("media", MediaOutcome.skipped(url: url, reason: reason).jsonValue))
        case nil:
            break
        }
        return serializedObject(record)
    }
}

/// `<state>/status.json`: the daemon's live counts for `pushspoolctl stats`.
enum StatusFile {
    /// `media`: the fetcher's counters (per-code failures, reuse, bytes), under `"media"`.
    /// `more`: members the followers add (`fleetErasure`, `erasures`).
    static func render(counters: [(String, Int)], journal: JournalWriterStats, media: MediaStats?, lastError: String?,
                       more: JSONObject = [:]) -> [UInt8] {
        var object: JSONObject = more
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
