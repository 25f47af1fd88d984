import PushPayload

/// The part of an inbox item that events change, and the rules by which they change it: the
/// one place the index (applying journal records and timed transitions), pushspool-inbox's
/// 202 answer (the item as it will be) and the stream hub (which events concern one item)
/// read them. Pure: no SQLite, no clock; tested on its own (`InboxItemStateTests`).
///
/// The flags are independent: archiving a pinned item keeps the pin (hidden items are not
/// listed anyway), so an unarchive brings it back pinned. ``hidden`` is derived, never stored
/// apart from them (the index writes it next to them for its queries).
///
/// `Sendable` value.
package struct InboxItemState: Sendable, Equatable {
    /// The action chosen on an item (`nc.action`) and the text typed into it.
    package struct Acted: Sendable, Equatable {
        package var action: String
        package var text: String?

        package init(action: String, text: String? = nil) {
            self.action = action
            self.text = text
        }
    }

    /// Whether the inbox lists it: `false` for a MODAL presented in-app only. Set at ingest.
    package var listed: Bool
    /// A banner (`presentation` "banner"): acting on it hides it. Set at ingest.
    package var banner: Bool
    package var seen = false
    package var read = false
    package var archived = false
    package var inAppShown = false
    package var pinned = false
    /// A tombstone (`nc.delete`, or replaced by a push with its collapse id): final, no later
    /// event changes the item.
    package var deleted = false
    /// Its category is muted by its owner (`nc.preferences`, applied in bulk by the index).
    package var muted = false
    /// The action kept (the latest chosen, until its revert); the item is "acted" exactly
    /// when there is one.
    package var acted: Acted? = nil
    /// Snoozed until then (epoch ms on the journal's clock): hidden until the snooze ends.
    package var snoozedUntil: Int64? = nil
    /// Its expiry fell due: hidden for good; snoozes no longer apply.
    package var expired = false

    /// A fresh item as ingested.
    package init(listed: Bool, banner: Bool, muted: Bool = false, expired: Bool = false) {
        self.listed = listed
        self.banner = banner
        self.muted = muted
        self.expired = expired
    }

    /// Not listed and not counted: the one rule for `hidden`. The index stores it as a
    /// column so SQL can filter on it, but only ever writes the value derived here (bulk
    /// mute, unmute and archive-read apply an event to each row, never `SET hidden = 1`).
    package var hidden: Bool {
        !listed || archived || deleted || (banner && acted != nil) || muted || snoozedUntil != nil || expired
    }

    /// What it adds to its owner's (and its feeds') unseen and unread counters.
    package var counted: (unseen: Int64, unread: Int64) {
        hidden ? (0, 0) : (seen ? 0 : 1, read ? 0 : 1)
    }

    /// The state after `event`; `self` when the event changes nothing (a deleted item, an
    /// action revert of another action, a snooze of an expired item…).
    package func applying(_ event: InboxItemEvent) -> InboxItemState {
        // Deleting is final: no later event changes a deleted item (an unarchive does not
        // bring it back).
        guard !deleted else { return self }
        var next = self
        switch event {
        case .seen:
            next.seen = true
        case .read:
            next.seen = true
            next.read = true
        case .archive:
            next.archived = true
        case .unarchive:
            next.archived = false
        case .action(let action, let text):
            // The latest choice is the one kept (an app may let the user change it).
            next.seen = true
            next.read = true
            next.acted = Acted(action: action, text: text)
        case .actionRevert(let action):
            // Only the action the item keeps is undone; seen and read stay (the user saw it).
            guard acted?.action == action else { return self }
            next.acted = nil
        case .inAppShown:
            next.inAppShown = true
        case .unread:
            // Unread is not unseen: the user has seen the item and chose to keep it to read later.
            next.read = false
        case .delete:
            next.deleted = true
        case .pin:
            next.pinned = true
        case .unpin:
            next.pinned = false
        case .mute:
            next.muted = true
        case .unmute:
            next.muted = false
        case .snooze(let until, let clock):
            // One whose end is not after the event (journaled late, a producer's clock) is
            // over already; an expired item stays as it is. Bounded to 366 days past the event.
            guard !expired, until > clock else { return self }
            let (bound, overflow) = clock.addingReportingOverflow(PushEvent.maxSnoozeMillis)
            next.snoozedUntil = overflow ? until : min(until, bound)
        case .unsnooze:
            // Ends a snooze now, as its end would: back, unread.
            guard !expired, snoozedUntil != nil else { return self }
            next.snoozedUntil = nil
            next.read = false
        case .snoozeEnded(let at):
            // A due time left by a snooze that was changed since is not this snooze's end.
            guard !expired, snoozedUntil == at else { return self }
            next.snoozedUntil = nil
            next.read = false
        case .expire:
            guard !expired else { return self }
            next.expired = true
            // Expired is final: a snooze's end has nothing to bring back.
            next.snoozedUntil = nil
        }
        return next
    }
}

/// What happens to one inbox item: an app's event on it (``init(_:action:text:until:at:)``
/// decodes one), a bulk preference applied to it, or a timed transition falling due.
/// `Sendable` value.
package enum InboxItemEvent: Sendable, Equatable {
    case seen
    /// `nc.read` and `nc.open` (opened from the Notification Center).
    case read
    case archive
    case unarchive
    /// The action chosen (non-empty) and the text typed into it.
    case action(String, text: String?)
    /// Undoes the action named when it is the one the item keeps.
    case actionRevert(String)
    case inAppShown
    case unread
    case delete
    case pin
    case unpin
    /// Its category was muted or unmuted (`nc.preferences`).
    case mute
    case unmute
    /// Hidden until `until`, an event journaled at `clock` (both epoch ms).
    case snooze(until: Int64, clock: Int64)
    case unsnooze
    /// The snooze ending at `at` fell due.
    case snoozeEnded(at: Int64)
    /// Its expiry (or retention, or time to live) fell due.
    case expire

    /// The item event an event of `type` is, from its members as the record holds them; `nil`
    /// when it changes no item (see ``EventType/inboxScope``; an action without an id).
    /// `until`: a snooze's end, parsed; a snooze without a readable one ends a snooze, as
    /// the index has always applied it (a rebuild must apply records as the live index did).
    package init?(_ type: EventType, action: String?, text: String?, until: Int64?, at clock: Int64) {
        switch type {
        case .seen: self = .seen
        case .read, .open: self = .read
        case .archive: self = .archive
        case .unarchive: self = .unarchive
        case .action:
            guard let action, !action.isEmpty else { return nil }
            self = .action(action, text: text)
        case .actionRevert:
            guard let action else { return nil }
            self = .actionRevert(action)
        case .inAppShown: self = .inAppShown
        case .unread: self = .unread
        case .delete: self = .delete
        case .pin: self = .pin
        case .unpin: self = .unpin
        case .snooze: self = until.map { .snooze(until: $0, clock: clock) } ?? .unsnooze
        case .unsnooze: self = .unsnooze
        case .readAll, .archiveRead, .preferences, .opened, .inAppOptOut: return nil
        }
    }
}

/// What an event changes in an inbox, by its type alone.
package enum InboxEventScope: Sendable, Equatable {
    /// The one item its `item` names (``InboxItemEvent``).
    case item
    /// Many of the owner's items at once (read-all, archive-read, muted categories).
    case inbox
    /// No item (the Notification Center screen opened, the in-app opt-out).
    case none
}

extension EventType {
    /// What an event of this type changes: the index applies it by this, and the stream hub
    /// sends an item's `state` or a `refresh` by it.
    package var inboxScope: InboxEventScope {
        switch self {
        case .seen, .read, .open, .archive, .action, .actionRevert, .inAppShown, .unread, .unarchive, .delete, .pin, .unpin,
             .snooze, .unsnooze:
            .item
        case .readAll, .archiveRead, .preferences: .inbox
        case .opened, .inAppOptOut: .none
        }
    }
}

extension InboxItem {
    /// This item with the event-changed flags of `state` (what pushspool-inbox answers for a
    /// change it accepted, before the index applies it).
    package func with(_ state: InboxItemState) -> InboxItem {
        var item = self
        item.seen = state.seen
        item.read = state.read
        item.archived = state.archived
        item.inAppShown = state.inAppShown
        item.pinned = state.pinned
        item.deleted = state.deleted
        item.acted = state.acted != nil
        item.actedAction = state.acted?.action
        item.actedText = state.acted?.text
        return item
    }
}
