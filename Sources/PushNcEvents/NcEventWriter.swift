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

/// The events an app reports, built in one place for `pushspoolctl nc` and pushspool-inbox's
/// routes, so the two can never write a different envelope for the same act. `eventId` is
/// empty and `at` unset unless given: the writer's caller draws them.
extension PushEvent {
    /// `nc.open`: the user opened `item` from the Notification Center. The index marks it read
    /// (and seen); the outbox sends Mindbox `mobileapp.NCPushOpen` or an Infobip seen report.
    package static func ncOpen(item: UInt64, user: String?, device: String?, eventId: String = "", at: String? = nil) -> PushEvent {
        PushEvent(type: .open, eventId: eventId, user: user, device: device, item: item, at: at)
    }

    /// `nc.inapp-shown`: the in-app message of `item` was presented; it is not served again.
    package static func ncInAppShown(item: UInt64, user: String?, device: String?, eventId: String = "", at: String? = nil) -> PushEvent {
        PushEvent(type: .inAppShown, eventId: eventId, user: user, device: device, item: item, at: at)
    }

    /// `nc.inapp-optout`: `optedOut` true stops in-app messages for the inbox, false lets them
    /// be presented again. The event's `enabled` says whether presentation is on, so it is the
    /// opposite of `optedOut`.
    package static func ncInAppOptOut(optedOut: Bool, user: String?, device: String?, eventId: String = "", at: String? = nil) -> PushEvent {
        PushEvent(type: .inAppOptOut, eventId: eventId, user: user, device: device, enabled: !optedOut, at: at)
    }
}
