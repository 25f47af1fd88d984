import PushPayload
import PushSpool
import PushSystem

/// Writes Notification Center events into the spool, where pushspoold journals them like
/// payloads (deduplicated by event id, crash-safe). For `pushspoolctl nc …` and for any code
/// that reports an event (e.g. `nc inapp` marking a message shown).
///
/// `Sendable`: case-less namespace.
package enum NcEventWriter {
    /// A fresh event id: 128 random bits as 32 lower-case hex digits.
    package static func newEventId() -> String {
        var generator = SystemRandomNumberGenerator()
        func hex(_ value: UInt64) -> String {
            let digits = String(value, radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }
        return hex(generator.next()) + hex(generator.next())
    }

    /// The envelope bytes of `event`: compact JSON plus a newline.
    package static func envelopeBytes(_ event: PushEvent) -> [UInt8] {
        event.envelope().serialized() + [0x0a]
    }

    /// Stages `event`'s envelope in the spool's `tmp/` and renames it into `incoming/`
    /// (``SpoolDropper``); returns the name in `incoming/`.
    @discardableResult
    package static func write(_ event: PushEvent, layout: SpoolLayout) throws(SpoolError) -> String {
        try SpoolDropper.drop(bytes: envelopeBytes(event), layout: layout)
    }
}
