import PushSystem

/// Whose inbox: a user's, or the shared inbox of a device (items stored without a user).
package enum InboxOwner: Sendable, Equatable {
    case user(String)
    case device(String)

    /// Byte equality: NFC and NFD `josé` are two owners, though Swift's `==` on their ids
    /// would equate them.
    package static func == (a: InboxOwner, b: InboxOwner) -> Bool {
        switch (a, b) {
        case (.user(let x), .user(let y)), (.device(let x), .device(let y)): IdBytes.equal(x, y)
        case (.user, .device), (.device, .user): false
        }
    }

    /// The `owner` column value; an empty id matches nothing (no item is stored under one).
    var key: String {
        switch self {
        case .user(let id): "u:" + id
        case .device(let id): "d:" + id
        }
    }
}

/// Ids are bytes (users, devices, owner keys): compared by their UTF-8, never with `String`'s
/// `==`, which equates canonically equivalent text (NFC and NFD `josé`, two different users).
/// Stateless.
package enum IdBytes {
    /// Whether `a` and `b` are the same bytes.
    package static func equal(_ a: String, _ b: String) -> Bool {
        a.utf8.elementsEqual(b.utf8)
    }

    /// `ids` without repeats of the same bytes, in their first order (a `Set<String>` would
    /// keep one of two canonically equivalent ids and lose the other).
    package static func unique(_ ids: some Sequence<String>) -> [String] {
        var seen = Set<[UInt8]>()
        return ids.filter { seen.insert(Array($0.utf8)).inserted }
    }
}

/// One inbox item as stored. `Sendable` value; ``jsonValue`` is what `nc list --json` prints
/// and what an HTTP layer would serve.
package struct InboxItem: Sendable, Equatable {
    /// The public id: the record's journal seq.
    package var seq: UInt64
    package var user: String?
    package var device: String?
    package var vendor: String
    package var id: String
    package var title: String?
    package var subtitle: String?
    /// After the `_mediaAlt` fallback (the record's `body`).
    package var body: String?
    package var clickUrl: String?
    package var category: String?
    /// The record's `buttons` array, as stored.
    package var buttons: JSONValue
    /// The category's resolved actions (at most 4), `nil` when the record has none.
    package var actions: JSONValue?
    package var actionsCut: Int64
    package var presentation: String?
    package var inAppOpenTitle: String?
    package var inAppDismissTitle: String?
    package var mediaPath: String?
    package var thumbnailPath: String?
    /// The push's media URL as it came (the record's `media.url`), when it named one.
    package var mediaSourceUrl: String?
    /// Why pushspool holds no image to show for that URL (``InboxIndex/unservedMedia(_:)``):
    /// `nil` when the image is stored and decodable, or when the push named no media.
    package var mediaNotStoredReason: String?
    package var expiresAtMillis: Int64?
    package var ingestedAtMillis: Int64
    package var pushName: String?
    package var pushDate: String?
    package var seen: Bool
    package var read: Bool
    package var archived: Bool
    package var acted: Bool
    package var inAppShown: Bool
    /// Kept first in lists (`nc.pin`); `state.pinned` in ``jsonValue()``.
    package var pinned = false
    /// Deleted (`nc.delete`, or replaced by a push with its collapse id): never listed,
    /// counted or served again; only ``InboxIndex``'s tombstone lookups see such an item.
    package var deleted = false
    /// The action chosen (`nc.action`, until another one or its `nc.action-revert`): `acted`
    /// is true exactly when this is set. `state.acted` in ``jsonValue()``: the id, or false.
    package var actedAction: String?
    /// What the user typed into that text-input action (`state.actedText`).
    package var actedText: String?
    /// The push's collapse id (the envelope's `collapseId`, FCM's collapse key, APNs'
    /// `apns-collapse-id`): it replaced the owner's earlier item of the vendor with that id.
    package var collapseId: String?
    /// APNs `aps.thread-id`: a group for the app to show together; never replaces.
    package var threadId: String?
    /// The item this one replaced (same collapse id), and for a replaced item its successor.
    package var replaces: UInt64?
    package var replacedBy: UInt64?
    /// Whether the inbox lists (and counts) it; `false` for a MODAL presented in-app only
    /// (`[Inbox] ListModals=no`). In ``jsonValue()`` only when `false` (lists hold listed
    /// items only; `inapp`, a state change's answer and a `state` event may not).
    package var listed = true
    /// As the push gave them: APNs `aps.sound` (a name; `sound.name` of a critical-sound
    /// dictionary) or the Android sound, and `aps.badge`.
    package var sound: String?
    package var badge: Int64?
    /// `loc-key` / `loc-args` and `title-loc-key` / `title-loc-args` (FCM `body_loc_*`,
    /// `title_loc_*`): the app's strings to show, with their arguments, when the push names
    /// keys instead of (or besides) text.
    package var locKey: String?
    package var locArgs: [String]?
    package var titleLocKey: String?
    package var titleLocArgs: [String]?
    /// Infobip's three link kinds, apart (``clickUrl`` is the first of them).
    package var deeplink: String?
    package var webViewUrl: String?
    package var browserUrl: String?
    /// The push's custom data for the app to render (Mindbox `payload`, Infobip
    /// `customPayload`, SFMC and APNs custom keys, the FCM data map): an object, or a string
    /// when the vendor sent text that is not a JSON object.
    package var customPayload: JSONValue?
    /// SFMC's request id (`_r`) and hash id (`_h`), for attribution of what the app reports
    /// about the item (with `id`, SFMC's `_m`).
    package var requestId: String?
    package var hashId: String?

    package func jsonValue() -> JSONValue {
        var o: JSONObject = [
            "item": .string(String(seq)), "vendor": .string(vendor), "id": .string(id), "buttons": buttons,
            "ingestedAt": .string(Timestamp.iso8601(millis: ingestedAtMillis)),
            "state": .object(["seen": .bool(seen), "read": .bool(read), "archived": .bool(archived),
                              "acted": actedAction.map { .string($0) } ?? .bool(acted), "inAppShown": .bool(inAppShown),
                              "pinned": .bool(pinned)]),
        ]
        if let actedText, case .object(var state)? = o["state"] {
            state["actedText"] = .string(actedText)
            o["state"] = .object(state)
        }
        func put(_ key: String, _ value: String?) { if let value { o[key] = .string(value) } }
        put("user", user)
        put("device", device)
        put("title", title)
        put("subtitle", subtitle)
        put("body", body)
        put("clickUrl", clickUrl)
        put("category", category)
        put("presentation", presentation)
        put("inAppOpenTitle", inAppOpenTitle)
        put("inAppDismissTitle", inAppDismissTitle)
        put("pushName", pushName)
        put("pushDate", pushDate)
        put("sound", sound)
        put("locKey", locKey)
        put("titleLocKey", titleLocKey)
        put("deeplink", deeplink)
        put("webViewUrl", webViewUrl)
        put("browserUrl", browserUrl)
        put("collapseId", collapseId)
        put("threadId", threadId)
        put("requestId", requestId)
        put("hashId", hashId)
        if let replaces { o["replaces"] = .string(String(replaces)) }
        if let badge { o["badge"] = .integer(badge) }
        if let locArgs { o["locArgs"] = .array(locArgs.map { .string($0) }) }
        if let titleLocArgs { o["titleLocArgs"] = .array(titleLocArgs.map { .string($0) }) }
        if let customPayload { o["customPayload"] = customPayload }
        if !listed { o["listed"] = .bool(false) }
        if let actions { o["actions"] = actions }
        if actionsCut > 0 { o["actionsCut"] = .integer(actionsCut) }
        if let media = mediaJSON(stored: { media in
            if let mediaPath { media["path"] = .string(mediaPath) }
            if let thumbnailPath { media["thumbnail"] = .string(thumbnailPath) }
        }) {
            o["media"] = media
        }
        if let expiresAtMillis { o["expiresAt"] = .string(Timestamp.iso8601(millis: expiresAtMillis)) }
        return .object(o)
    }
}

extension InboxItem {
    /// Whether the item has an image to show: stored, and not known to be undecodable.
    package var mediaServed: Bool { mediaPath != nil && mediaNotStoredReason == nil }

    /// The item's `media` member: for a served image what `stored` puts in (its paths or
    /// URLs) plus `sourceUrl` and `stored: true`; for a push whose image pushspool does not
    /// hold (or cannot decode) `{sourceUrl, stored: false, reason}`, so an app can fetch it
    /// itself; `nil` when the push named no media.
    package func mediaJSON(stored: (inout JSONObject) -> Void) -> JSONValue? {
        var media: JSONObject = [:]
        if let mediaSourceUrl { media["sourceUrl"] = .string(mediaSourceUrl) }
        if let mediaNotStoredReason {
            media["stored"] = .bool(false)
            media["reason"] = .string(mediaNotStoredReason)
            return .object(media)
        }
        guard mediaPath != nil || thumbnailPath != nil else { return nil }
        stored(&media)
        media["stored"] = .bool(true)
        return .object(media)
    }
}

/// One page of an inbox, newest first. `nextCursor` is `nil` on the last page.
package struct InboxPage: Sendable, Equatable {
    package var items: [InboxItem]
    package var nextCursor: String?

    package init(items: [InboxItem], nextCursor: String?) {
        self.items = items
        self.nextCursor = nextCursor
    }
}

/// Exact counts of visible, unexpired items.
package struct InboxCounts: Sendable, Equatable {
    package var unseen: Int64
    package var unread: Int64

    package init(unseen: Int64, unread: Int64) {
        self.unseen = unseen
        self.unread = unread
    }
}

/// Opaque page cursors: the hex seq of the last item of the previous page after `c1.` (among
/// the items that are not pinned) or `c2.` (among the pinned ones, which come first). Keyset
/// paging (`(pinned, seq) < cursor`) stays correct while newer items arrive, unlike offsets.
package enum InboxCursor {
    static func make(afterSeq seq: Int64, pinned: Bool = false) -> String { (pinned ? "c2." : "c1.") + String(seq, radix: 16) }

    /// The position a cursor names, or `nil` for anything this index did not hand out: the
    /// form ``make(afterSeq:pinned:)`` writes only (lowercase hex without leading zeros), so
    /// one position has one cursor and docs/openapi.yaml's pattern says exactly which are taken.
    package static func parse(_ text: String) -> (seq: Int64, pinned: Bool)? {
        guard text.utf8.count <= 20, text.hasPrefix("c1.") || text.hasPrefix("c2.") else { return nil }
        let hex = text.dropFirst(3)
        guard !hex.isEmpty, hex.first != "0", hex.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }),
              let seq = Int64(hex, radix: 16), seq > 0 else { return nil }
        return (seq, text.hasPrefix("c2."))
    }
}

extension InboxIndex {
    /// The cut-off below which `retention` hides items (`Int64.min` = none).
    static func cutoff(now: Int64, retention: Duration?) -> Int64 {
        guard let retention else { return .min }
        let (difference, overflow) = now.subtractingReportingOverflow(retention.clampedMilliseconds)
        return overflow ? .min : difference
    }

    /// A page of `owner`'s inbox: pinned items first, then the rest, each newest first; not
    /// archived or deleted, not expired (`expiresAt` before `now`, or ingested longer than
    /// `retention` ago), optionally unread only, of one category or of one feed. Throws
    /// `.invalidLimit` outside 1...500, `.invalidCursor` for a cursor this index did not hand
    /// out and `.unknownFeed` for a feed it does not have.
    package func list(_ owner: InboxOwner, unread: Bool = false, category: String? = nil, feed: String? = nil, limit: Int = 50,
                      cursor: String? = nil, now: Int64 = Posix.wallClockMillis(), retention: Duration? = nil) throws(InboxError) -> InboxPage {
        guard (1...Self.maxLimit).contains(limit) else { throw InboxError(.invalidLimit(limit), path: path) }
        let feed = try feed.map { name throws(InboxError) in try feedBit(name) }
        var position: (seq: Int64, pinned: Bool) = (.max, true)
        if let cursor {
            guard let parsed = InboxCursor.parse(cursor) else { throw InboxError(.invalidCursor, path: path) }
            position = parsed
        }
        // Two keyset scans, pinned items and then the others: each walks an index in seq order.
        var items: [InboxItem] = []
        if position.pinned {
            let (pinned, more) = try listPart(owner, pinned: true, before: position.seq, unread: unread, category: category, feed: feed,
                                              limit: limit, now: now, retention: retention)
            items = pinned
            if more { return InboxPage(items: items, nextCursor: InboxCursor.make(afterSeq: Int64(clamping: items[limit - 1].seq), pinned: true)) }
            position.seq = .max
        }
        guard items.count < limit else {
            // Exactly a page of pinned items: the rest may follow.
            return InboxPage(items: items, nextCursor: InboxCursor.make(afterSeq: Int64(clamping: items[limit - 1].seq), pinned: true))
        }
        let (rest, more) = try listPart(owner, pinned: false, before: position.seq, unread: unread, category: category, feed: feed,
                                        limit: limit - items.count, now: now, retention: retention)
        items += rest
        guard more, let last = items.last else { return InboxPage(items: items, nextCursor: nil) }
        return InboxPage(items: items, nextCursor: InboxCursor.make(afterSeq: Int64(clamping: last.seq)))
    }

    /// Up to `limit` listed items with `pinned` and `seq < before`, newest first, and whether
    /// there are more (of `feed`, a bit of ``InboxIndex/feeds``, when given).
    private func listPart(_ owner: InboxOwner, pinned: Bool, before: Int64, unread: Bool, category: String?, feed: Int64?, limit: Int,
                          now: Int64, retention: Duration?) throws(InboxError) -> ([InboxItem], Bool) {
        // Static statements: the pinned part names `pinned = 1` literally so that SQLite
        // reads it through the small partial index items_pinned (a bound value could not
        // select a partial index, and the scan would walk the whole inbox to find the pins).
        // A feed's other items are read in seq order from item_feeds (owner, feed, seq),
        // the feed's own index, each joined to its row by seq.
        do {
            let statement = try feed != nil ? (pinned ? db.statement("""
                SELECT seq, user, device, vendor, id, title, subtitle, body, click_url, category, buttons, actions,
                    actions_cut, presentation, inapp_open_title, inapp_dismiss_title, media_path, thumbnail_path,
                    expires_at, ingested_at, push_name, push_date, seen, read, archived, acted, inapp_shown,
                    listed, sound, badge, loc_key, loc_args, title_loc_key, title_loc_args, deeplink, web_view_url,
                    browser_url, custom_payload, pinned, deleted, acted_action, acted_text, collapse_id, thread_id, replaces, replaced_by,
                    media_source_url, media_reason, request_id, hash_id
                FROM items INDEXED BY items_pinned
                WHERE owner = ?1 AND seq < ?2 AND pinned = 1 AND hidden = 0 AND (?3 = 0 OR read = 0)
                    AND (?4 IS NULL OR category = ?4) AND (expires_at IS NULL OR expires_at >= ?5) AND ingested_at >= ?6
                    AND (feeds >> ?8) & 1 = 1
                ORDER BY seq DESC LIMIT ?7
                """) : db.statement("""
                SELECT i.seq, i.user, i.device, i.vendor, i.id, i.title, i.subtitle, i.body, i.click_url, i.category, i.buttons, i.actions,
                    i.actions_cut, i.presentation, i.inapp_open_title, i.inapp_dismiss_title, i.media_path, i.thumbnail_path,
                    i.expires_at, i.ingested_at, i.push_name, i.push_date, i.seen, i.read, i.archived, i.acted, i.inapp_shown,
                    i.listed, i.sound, i.badge, i.loc_key, i.loc_args, i.title_loc_key, i.title_loc_args, i.deeplink, i.web_view_url,
                    i.browser_url, i.custom_payload, i.pinned, i.deleted, i.acted_action, i.acted_text, i.collapse_id, i.thread_id,
                    i.replaces, i.replaced_by, i.media_source_url, i.media_reason, i.request_id, i.hash_id
                FROM item_feeds f CROSS JOIN items i ON i.seq = f.seq
                WHERE f.owner = ?1 AND f.feed = ?8 AND f.seq < ?2 AND i.hidden = 0 AND i.pinned = 0 AND (?3 = 0 OR i.read = 0)
                    AND (?4 IS NULL OR i.category = ?4) AND (i.expires_at IS NULL OR i.expires_at >= ?5) AND i.ingested_at >= ?6
                ORDER BY f.seq DESC LIMIT ?7
                """)) : pinned ? db.statement("""
                SELECT seq, user, device, vendor, id, title, subtitle, body, click_url, category, buttons, actions,
                    actions_cut, presentation, inapp_open_title, inapp_dismiss_title, media_path, thumbnail_path,
                    expires_at, ingested_at, push_name, push_date, seen, read, archived, acted, inapp_shown,
                    listed, sound, badge, loc_key, loc_args, title_loc_key, title_loc_args, deeplink, web_view_url,
                    browser_url, custom_payload, pinned, deleted, acted_action, acted_text, collapse_id, thread_id, replaces, replaced_by,
                    media_source_url, media_reason, request_id, hash_id
                FROM items INDEXED BY items_pinned
                WHERE owner = ?1 AND seq < ?2 AND pinned = 1 AND hidden = 0 AND (?3 = 0 OR read = 0)
                    AND (?4 IS NULL OR category = ?4) AND (expires_at IS NULL OR expires_at >= ?5) AND ingested_at >= ?6
                ORDER BY seq DESC LIMIT ?7
                """) : db.statement("""
                SELECT seq, user, device, vendor, id, title, subtitle, body, click_url, category, buttons, actions,
                    actions_cut, presentation, inapp_open_title, inapp_dismiss_title, media_path, thumbnail_path,
                    expires_at, ingested_at, push_name, push_date, seen, read, archived, acted, inapp_shown,
                    listed, sound, badge, loc_key, loc_args, title_loc_key, title_loc_args, deeplink, web_view_url,
                    browser_url, custom_payload, pinned, deleted, acted_action, acted_text, collapse_id, thread_id, replaces, replaced_by,
                    media_source_url, media_reason, request_id, hash_id
                FROM items
                WHERE owner = ?1 AND seq < ?2 AND hidden = 0 AND pinned = 0 AND (?3 = 0 OR read = 0)
                    AND (?4 IS NULL OR category = ?4) AND (expires_at IS NULL OR expires_at >= ?5) AND ingested_at >= ?6
                ORDER BY seq DESC LIMIT ?7
                """)
            defer { statement.reset() }
            try statement.bind(1, owner.key)
            try statement.bind(2, before)
            try statement.bind(3, unread)
            try statement.bind(4, category)
            try statement.bind(5, now)
            try statement.bind(6, Self.cutoff(now: now, retention: retention))
            try statement.bind(7, Int64(limit + 1))
            if let feed { try statement.bind(8, feed) }
            var items: [InboxItem] = []
            while try statement.step() {
                if items.count == limit { return (items, true) }
                items.append(Self.item(statement))
            }
            return (items, false)
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }

    private static let parser = JSONParser(maxDepth: 64)

    /// A stored JSON array of strings (`loc_args`), `nil` when absent or not one.
    private static func strings(_ text: String?) -> [String]? {
        guard let text, case .array(let elements)? = try? parser.parse(text) else { return nil }
        return elements.compactMap(\.stringValue)
    }

    /// An item from a row of `SELECT seq, user, … browser_url, custom_payload, pinned, deleted, acted_action, …, replaced_by` (the column
    /// list every item query spells out, in this order: statements are static SQL).
    static func item(_ s: SQLiteStatement) -> InboxItem {
        var item = InboxItem(seq: UInt64(clamping: s.int64(0)), user: s.text(1), device: s.text(2), vendor: s.text(3) ?? "", id: s.text(4) ?? "",
                             title: s.text(5), subtitle: s.text(6), body: s.text(7), clickUrl: s.text(8), category: s.text(9),
                             buttons: s.text(10).flatMap { try? parser.parse($0) } ?? .array([]),
                             actions: s.text(11).flatMap { try? parser.parse($0) }, actionsCut: s.int64(12),
                             presentation: s.text(13), inAppOpenTitle: s.text(14), inAppDismissTitle: s.text(15),
                             mediaPath: s.text(16), thumbnailPath: s.text(17), expiresAtMillis: s.optionalInt64(18),
                             ingestedAtMillis: s.int64(19), pushName: s.text(20), pushDate: s.text(21),
                             seen: s.bool(22), read: s.bool(23), archived: s.bool(24), acted: s.bool(25), inAppShown: s.bool(26))
        item.listed = s.bool(27)
        item.sound = s.text(28)
        item.badge = s.optionalInt64(29)
        item.locKey = s.text(30)
        item.locArgs = strings(s.text(31))
        item.titleLocKey = s.text(32)
        item.titleLocArgs = strings(s.text(33))
        item.deeplink = s.text(34)
        item.webViewUrl = s.text(35)
        item.browserUrl = s.text(36)
        item.customPayload = s.text(37).flatMap { try? parser.parse($0) }
        item.pinned = s.bool(38)
        item.deleted = s.bool(39)
        item.actedAction = s.text(40)
        item.actedText = s.text(41)
        item.collapseId = s.text(42)
        item.threadId = s.text(43)
        item.replaces = s.optionalInt64(44).map { UInt64(clamping: $0) }
        item.replacedBy = s.optionalInt64(45).map { UInt64(clamping: $0) }
        item.mediaSourceUrl = s.text(46)
        item.mediaNotStoredReason = s.text(47)
        item.requestId = s.text(48)
        item.hashId = s.text(49)
        return item
    }

    /// Exact counts of `owner`'s visible unseen and unread items, not capped: the per-owner
    /// counters less the counted items that have expired by `now` or fall outside `retention`.
    package func count(_ owner: InboxOwner, now: Int64 = Posix.wallClockMillis(), retention: Duration? = nil) throws(InboxError) -> InboxCounts {
        do {
            let totals = try db.statement("SELECT unseen, unread FROM owners WHERE owner = ?1")
            try totals.bind(1, owner.key)
            guard try totals.step() else { return InboxCounts(unseen: 0, unread: 0) }
            var counts = InboxCounts(unseen: totals.int64(0), unread: totals.int64(1))
            totals.reset()
            let cutoff = Self.cutoff(now: now, retention: retention)
            if cutoff != .min {
                let old = try db.statement("""
                    SELECT coalesce(sum(seen = 0), 0), coalesce(sum(read = 0), 0) FROM items
                    WHERE owner = ?1 AND ingested_at < ?2 AND hidden = 0
                    """)
                try old.bind(1, owner.key)
                try old.bind(2, cutoff)
                if try old.step() {
                    counts.unseen -= old.int64(0)
                    counts.unread -= old.int64(1)
                }
                old.reset()
            }
            let expired = try db.statement("""
                SELECT coalesce(sum(seen = 0), 0), coalesce(sum(read = 0), 0) FROM items INDEXED BY items_expiry
                WHERE owner = ?1 AND expires_at IS NOT NULL AND expires_at < ?2 AND hidden = 0 AND ingested_at >= ?3
                """)
            try expired.bind(1, owner.key)
            try expired.bind(2, now)
            try expired.bind(3, cutoff)
            if try expired.step() {
                counts.unseen -= expired.int64(0)
                counts.unread -= expired.int64(1)
            }
            expired.reset()
            return counts
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }

    /// The in-app message to present now, as the Infobip SDK decides on the device: the most
    /// recent MODAL of `owner`, if it is unexpired and not yet shown, acted on, read or
    /// archived; older modals are never presented later, and nothing is presented to an owner
    /// who opted out. A modal of a category the owner muted is passed over as if it were not
    /// there (until the category is unmuted). Banners only appear in the inbox. This does not mark the message shown:
    /// the caller drops an `nc.inapp-shown` event.
    package func inapp(_ owner: InboxOwner, now: Int64 = Posix.wallClockMillis(), retention: Duration? = nil) throws(InboxError) -> InboxItem? {
        do {
            let optout = try db.statement("SELECT optout FROM owners WHERE owner = ?1")
            try optout.bind(1, owner.key)
            let optedOut = try optout.step() && optout.bool(0)
            optout.reset()
            if optedOut { return nil }
            let statement = try db.statement("""
                SELECT seq, user, device, vendor, id, title, subtitle, body, click_url, category, buttons, actions,
                    actions_cut, presentation, inapp_open_title, inapp_dismiss_title, media_path, thumbnail_path,
                    expires_at, ingested_at, push_name, push_date, seen, read, archived, acted, inapp_shown,
                    listed, sound, badge, loc_key, loc_args, title_loc_key, title_loc_args, deeplink, web_view_url,
                    browser_url, custom_payload, pinned, deleted, acted_action, acted_text, collapse_id, thread_id, replaces, replaced_by,
                    media_source_url, media_reason, request_id, hash_id, expired, snoozed_until
                FROM items INDEXED BY items_modal
                WHERE owner = ?1 AND presentation = 'modal' AND muted = 0 ORDER BY seq DESC LIMIT 1
                """)
            defer { statement.reset() }
            try statement.bind(1, owner.key)
            guard try statement.step() else { return nil }
            let item = Self.item(statement)
            if item.inAppShown || item.acted || item.read || item.archived || item.deleted { return nil }
            // Expired (applied at its moment) or snoozed: not presented.
            if statement.bool(50) || !statement.isNull(51) { return nil }
            if let expires = item.expiresAtMillis, expires < now { return nil }
            if item.ingestedAtMillis < Self.cutoff(now: now, retention: retention) { return nil }
            return item
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }
}

/// Exact counts of one feed: its name and its visible, unexpired unseen and unread items.
package struct InboxFeedCounts: Sendable, Equatable {
    package var feed: String
    package var counts: InboxCounts

    package init(feed: String, counts: InboxCounts) {
        self.feed = feed
        self.counts = counts
    }
}

extension InboxIndex {
    /// The names of the feeds this index was built with, in configuration order (a reader
    /// learns them here, not from its own configuration: the index's are the ones applied).
    package func feedNames() throws(InboxError) -> [String] {
        do { return try Self.storedFeeds(db).map(\.name) } catch { throw InboxError(.sqlite(error), path: path) }
    }

    /// Throws `.unknownFeed` unless the index has a feed `name`.
    package func checkFeed(_ name: String) throws(InboxError) { _ = try feedBit(name) }

    /// The bit of feed `name` in the items' `feeds` mask; throws `.unknownFeed`.
    func feedBit(_ name: String) throws(InboxError) -> Int64 {
        let bit: Int64?
        do {
            let statement = try db.statement("SELECT id FROM feeds WHERE name = ?1")
            defer { statement.reset() }
            try statement.bind(1, name)
            bit = try statement.step() ? statement.int64(0) : nil
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
        guard let bit else { throw InboxError(.unknownFeed(name, known: try feedNames()), path: path) }
        return bit
    }

    /// Exact counts of `owner`'s items in feed `name` (``count(_:now:retention:)`` for one
    /// feed); throws `.unknownFeed` for a feed this index does not have.
    package func count(_ owner: InboxOwner, feed name: String, now: Int64 = Posix.wallClockMillis(),
                       retention: Duration? = nil) throws(InboxError) -> InboxCounts {
        _ = try feedBit(name)
        return try feedCounts(owner, now: now, retention: retention).first { $0.feed == name }?.counts
            ?? InboxCounts(unseen: 0, unread: 0)
    }

    /// Exact counts of `owner`'s items in every feed, in configuration order: the per-feed
    /// counters, less the counted items that have expired by `now` or fall outside `retention`
    /// (read once for all feeds, grouped by their feed masks).
    package func feedCounts(_ owner: InboxOwner, now: Int64 = Posix.wallClockMillis(),
                            retention: Duration? = nil) throws(InboxError) -> [InboxFeedCounts] {
        do {
            let names = try Self.storedFeeds(db).map(\.name)
            guard !names.isEmpty else { return [] }
            var counts = Array(repeating: InboxCounts(unseen: 0, unread: 0), count: names.count)
            let totals = try db.statement("SELECT feed, unseen, unread FROM feed_counts WHERE owner = ?1")
            try totals.bind(1, owner.key)
            while try totals.step() {
                let feed = totals.int64(0)
                guard feed >= 0, feed < Int64(counts.count) else { continue }
                counts[Int(feed)] = InboxCounts(unseen: totals.int64(1), unread: totals.int64(2))
            }
            totals.reset()
            func subtract(_ statement: SQLiteStatement) throws(SQLiteError) {
                defer { statement.reset() }
                while try statement.step() {
                    for bit in InboxFeed.bits(statement.int64(0)) where bit < Int64(counts.count) {
                        counts[Int(bit)].unseen -= statement.int64(1)
                        counts[Int(bit)].unread -= statement.int64(2)
                    }
                }
            }
            let cutoff = Self.cutoff(now: now, retention: retention)
            if cutoff != .min {
                let old = try db.statement("""
                    SELECT feeds, coalesce(sum(seen = 0), 0), coalesce(sum(read = 0), 0) FROM items
                    WHERE owner = ?1 AND ingested_at < ?2 AND hidden = 0 AND feeds != 0 GROUP BY feeds
                    """)
                try old.bind(1, owner.key)
                try old.bind(2, cutoff)
                try subtract(old)
            }
            let expired = try db.statement("""
                SELECT feeds, coalesce(sum(seen = 0), 0), coalesce(sum(read = 0), 0) FROM items INDEXED BY items_expiry
                WHERE owner = ?1 AND expires_at IS NOT NULL AND expires_at < ?2 AND hidden = 0 AND ingested_at >= ?3 AND feeds != 0
                GROUP BY feeds
                """)
            try expired.bind(1, owner.key)
            try expired.bind(2, now)
            try expired.bind(3, cutoff)
            try subtract(expired)
            return zip(names, counts).map { InboxFeedCounts(feed: $0, counts: $1) }
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }
}

extension InboxIndex {
    /// The categories `owner` muted (`nc.preferences`), in name order.
    package func mutedCategories(_ owner: InboxOwner) throws(InboxError) -> [String] {
        do {
            let statement = try db.statement("SELECT category FROM preferences WHERE owner = ?1 ORDER BY category")
            defer { statement.reset() }
            try statement.bind(1, owner.key)
            var categories: [String] = []
            while try statement.step() { categories.append(statement.text(0) ?? "") }
            return categories
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }
}
