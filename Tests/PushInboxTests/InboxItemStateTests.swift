import PushInbox
import PushPayload
import Testing

/// `InboxItemState.applying(_:)`, the one set of item-state rules, without SQLite: every
/// event from every relevant starting state, idempotence, and `hidden` as derived.
@Suite struct InboxItemStateTests {
    typealias State = InboxItemState
    static let clock: Int64 = 1_800_000_000_000

    /// What a state adds to the unseen and unread counters, as an array (tuples are not `Equatable`).
    static func counts(_ state: State) -> [Int64] { [state.counted.unseen, state.counted.unread] }

    /// Starting states that exercise every guard the rules have.
    static let starts: [(name: String, state: State)] = {
        let fresh = State(listed: true, banner: true)
        var read = fresh; read.seen = true; read.read = true
        var archived = read; archived.archived = true
        var acted = read; acted.acted = .init(action: "reply", text: "hi")
        var pinned = fresh; pinned.pinned = true
        var shown = State(listed: false, banner: false); shown.inAppShown = true
        var snoozed = read; snoozed.snoozedUntil = clock + 5000
        var expired = fresh; expired.expired = true
        var muted = fresh; muted.muted = true
        var deleted = read; deleted.deleted = true
        return [("fresh", fresh), ("read", read), ("archived", archived), ("acted", acted), ("pinned", pinned),
                ("modal", shown), ("snoozed", snoozed), ("expired", expired), ("muted", muted), ("deleted", deleted)]
    }()

    static let events: [InboxItemEvent] = [
        .seen, .read, .archive, .unarchive, .action("reply", text: "hi"), .action("like", text: nil), .actionRevert("reply"),
        .actionRevert("other"), .inAppShown, .unread, .delete, .pin, .unpin, .mute, .unmute,
        .snooze(until: clock + 5000, clock: clock), .snooze(until: clock, clock: clock), .unsnooze, .snoozeEnded(at: clock + 5000),
        .snoozeEnded(at: clock + 1), .expire,
    ]

    // MARK: each event

    @Test func seenReadAndTheirUndoing() {
        let fresh = State(listed: true, banner: true)
        let seen = fresh.applying(.seen)
        #expect(seen.seen && !seen.read)
        let read = fresh.applying(.read)
        #expect(read.seen && read.read)
        // Unread is not unseen.
        let unread = read.applying(.unread)
        #expect(unread.seen && !unread.read)
        #expect(Self.counts(fresh) == [1, 1] && Self.counts(seen) == [0, 1] && Self.counts(read) == [0, 0] && Self.counts(unread) == [0, 1])
    }

    @Test func archiveHidesAndUnarchiveBringsBackWithThePin() {
        var pinned = State(listed: true, banner: true)
        pinned.pinned = true
        let archived = pinned.applying(.archive)
        #expect(archived.archived && archived.pinned && archived.hidden && Self.counts(archived) == [0, 0])
        let back = archived.applying(.unarchive)
        #expect(back == pinned && !back.hidden)
    }

    @Test func anActionIsKeptUntilItsRevertAndHidesABannerOnly() {
        let banner = State(listed: true, banner: true)
        let acted = banner.applying(.action("reply", text: "hi"))
        #expect(acted.seen && acted.read && acted.acted == .init(action: "reply", text: "hi"))
        #expect(acted.hidden, "a banner acted on leaves the inbox")
        // The latest choice is kept.
        let changed = acted.applying(.action("like", text: nil))
        #expect(changed.acted == .init(action: "like"))
        // Only the kept action is undone; seen and read stay.
        #expect(changed.applying(.actionRevert("reply")) == changed)
        let reverted = changed.applying(.actionRevert("like"))
        #expect(reverted.acted == nil && reverted.seen && reverted.read && !reverted.hidden)
        // A MODAL (not a banner) acted on stays where it is listed.
        let modal = State(listed: true, banner: false).applying(.action("open", text: nil))
        #expect(!modal.hidden)
    }

    @Test func inAppShownPinAndUnpin() {
        let modal = State(listed: false, banner: false)
        #expect(modal.hidden, "a MODAL presented in-app only is not listed")
        #expect(modal.applying(.inAppShown).inAppShown)
        let pinned = modal.applying(.pin)
        #expect(pinned.pinned && !pinned.applying(.unpin).pinned)
    }

    @Test func deleteIsFinal() {
        let deleted = State(listed: true, banner: true).applying(.delete)
        #expect(deleted.deleted && deleted.hidden)
        for event in Self.events {
            #expect(deleted.applying(event) == deleted, "\(event) on a deleted item")
        }
    }

    @Test func muteHidesAndUnmuteRecomputesHiddenFromTheOtherFlags() {
        let fresh = State(listed: true, banner: true)
        #expect(fresh.applying(.mute).hidden)
        #expect(!fresh.applying(.mute).applying(.unmute).hidden)
        // Unmuting an archived (or snoozed, expired) item leaves it hidden.
        #expect(fresh.applying(.archive).applying(.mute).applying(.unmute).hidden)
        #expect(fresh.applying(.snooze(until: Self.clock + 1, clock: Self.clock)).applying(.mute).applying(.unmute).hidden)
        #expect(fresh.applying(.expire).applying(.mute).applying(.unmute).hidden)
    }

    @Test func aSnoozeHidesUntilItsEndAndIsBounded() {
        var read = State(listed: true, banner: true)
        read.seen = true
        read.read = true
        let snoozed = read.applying(.snooze(until: Self.clock + 5000, clock: Self.clock))
        #expect(snoozed.snoozedUntil == Self.clock + 5000 && snoozed.hidden)
        // Not after the event: over already.
        #expect(read.applying(.snooze(until: Self.clock, clock: Self.clock)) == read)
        #expect(read.applying(.snooze(until: Self.clock - 1, clock: Self.clock)) == read)
        // Too far: 366 days past the event.
        let far = read.applying(.snooze(until: Self.clock + 5 * PushEvent.maxSnoozeMillis, clock: Self.clock))
        #expect(far.snoozedUntil == Self.clock + PushEvent.maxSnoozeMillis)
        // Its end brings it back unread, seen staying.
        let ended = snoozed.applying(.snoozeEnded(at: Self.clock + 5000))
        #expect(ended.snoozedUntil == nil && ended.seen && !ended.read && !ended.hidden && Self.counts(ended) == [0, 1])
        // Another snooze's end (the snooze changed since) is not this one's.
        #expect(snoozed.applying(.snoozeEnded(at: Self.clock + 1)) == snoozed)
        // An unsnooze ends it now, the same way; without a snooze it changes nothing.
        #expect(snoozed.applying(.unsnooze) == ended)
        #expect(read.applying(.unsnooze) == read)
        #expect(read.applying(.snoozeEnded(at: Self.clock + 5000)) == read)
        // A later snooze replaces the end.
        #expect(snoozed.applying(.snooze(until: Self.clock + 9000, clock: Self.clock + 10)).snoozedUntil == Self.clock + 9000)
    }

    @Test func expiryIsFinalForTimedChangesButNotForTheOthers() {
        var snoozed = State(listed: true, banner: true)
        snoozed.snoozedUntil = Self.clock + 5000
        let expired = snoozed.applying(.expire)
        #expect(expired.expired && expired.snoozedUntil == nil && expired.hidden)
        for event: InboxItemEvent in [.expire, .snooze(until: Self.clock + 5000, clock: Self.clock), .unsnooze, .snoozeEnded(at: Self.clock + 5000)] {
            #expect(expired.applying(event) == expired, "\(event) on an expired item")
        }
        // What a person did to it is still recorded (the index applies them as before).
        #expect(expired.applying(.read).read)
        #expect(expired.applying(.delete).deleted)
        #expect(expired.applying(.unarchive).hidden)
    }

    // MARK: every event from every state

    @Test(arguments: starts.map(\.name))
    func everyEventFromEveryStateKeepsHiddenDerivedAndTheCountsConsistent(_ name: String) throws {
        let start = try #require(Self.starts.first { $0.name == name }?.state)
        for event in Self.events {
            let next = start.applying(event)
            #expect(next.hidden == (!next.listed || next.archived || next.deleted || (next.banner && next.acted != nil) || next.muted
                                    || next.snoozedUntil != nil || next.expired))
            #expect(Self.counts(next) == (next.hidden ? [0, 0] : [next.seen ? 0 : 1, next.read ? 0 : 1]))
            // Set at ingest, never by an event.
            #expect(next.listed == start.listed && next.banner == start.banner, "\(event) from \(name)")
            // Seen is never taken back.
            #expect(!start.seen || next.seen, "\(event) from \(name)")
            if start.deleted { #expect(next == start, "\(event) from \(name)") }
        }
    }

    /// Applying an event twice is applying it once: every rule is idempotent (a second
    /// unsnooze or snooze's end finds no snooze, a second revert no action).
    @Test(arguments: starts.map(\.name))
    func applyingTwiceIsApplyingOnce(_ name: String) throws {
        let start = try #require(Self.starts.first { $0.name == name }?.state)
        for event in Self.events {
            let once = start.applying(event)
            #expect(once.applying(event) == once, "\(event) from \(name)")
        }
    }

    // MARK: decoding and scope

    @Test(arguments: EventType.allCases)
    func everyTypeIsAnItemEventExactlyWhenItsScopeIsAnItem(_ type: EventType) {
        let event = InboxItemEvent(type, action: "a", text: nil, until: Self.clock + 1, at: Self.clock)
        #expect((event != nil) == (type.inboxScope == .item), "\(type)")
    }

    @Test func decodingTheMembers() {
        #expect(InboxItemEvent(.open, action: nil, text: nil, until: nil, at: 0) == .read)
        #expect(InboxItemEvent(.action, action: "", text: nil, until: nil, at: 0) == nil, "an action without an id changes nothing")
        #expect(InboxItemEvent(.action, action: nil, text: "x", until: nil, at: 0) == nil)
        #expect(InboxItemEvent(.action, action: "a", text: "x", until: nil, at: 0) == .action("a", text: "x"))
        #expect(InboxItemEvent(.actionRevert, action: nil, text: nil, until: nil, at: 0) == nil)
        #expect(InboxItemEvent(.snooze, action: nil, text: nil, until: 9, at: 3) == .snooze(until: 9, clock: 3))
        // As the index has always applied it: a snooze without a readable end ends a snooze.
        #expect(InboxItemEvent(.snooze, action: nil, text: nil, until: nil, at: 3) == .unsnooze)
        #expect(EventType.readAll.inboxScope == .inbox && EventType.preferences.inboxScope == .inbox)
        #expect(EventType.opened.inboxScope == .none && EventType.inAppOptOut.inboxScope == .none)
    }
}
