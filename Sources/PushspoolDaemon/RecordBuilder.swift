@preconcurrency import Glibc
import PushSystem
import PushPayload
import PushMedia
import PushJournal

/// Builds the journal record body: the normalised notification plus what the daemon knows
/// about where it came from and what happened to its media.
enum RecordBuilder {
    static func body(notification: PushNotification, source: SourceFile, media: RecordMedia?, ingestMillis: Int64) -> [UInt8] {
        var notification = notification
        if let media, !media.stored, notification.mediaUrl != nil,
           let alt = notification.mediaAlt, !alt.isEmpty {
            // The SFMC extension's fallback: no attachment, so the alt text becomes the body.
            notification.originalBody = notification.body
            notification.body = alt
        }
        guard case .object(var record) = notification.jsonValue() else {
            preconditionFailure("a notification always encodes as a JSON object")
        }
        record["ingestedAt"] = .string(Timestamp.iso8601(millis: ingestMillis))
        record["sourceFile"] = .string(source.name)
        record["sha256"] = .string(source.sha256)
        record["size"] = .number(String(source.size))
        switch media {
        case .fetched(let outcome)?:
            record["media"] = mediaJSON(outcome)
        case .skipped(let url, let reason)?:
            record["media"] = .object(["url": .string(url), "status": .string("skipped"), "error": .string(reason)])
        case nil:
            break
        }
        return JSONValue.object(record).serialized()
    }

    private static func mediaJSON(_ outcome: MediaOutcome) -> JSONValue {
        let text = Array(outcome.encodeJSON().utf8)
        return (try? JSONParser(maxDepth: 8).parse(text)) ?? .object(["url": .string(outcome.url), "status": .string("failed")])
    }
}

/// `<state>/status.json`: the daemon's live counts for `pushspoolctl stats`.
enum StatusFile {
    static func render(counters: [(String, Int)], journal: JournalWriterStats, lastError: String?) -> [UInt8] {
        var object: [String: JSONValue] = [:]
        for (key, value) in counters { object[key] = .number(String(value)) }
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
