import PushSystem

/// Single-item and "since" queries for the HTTP server (`pushspool-inbox`): the ownership
/// check before an event is accepted, and the Server-Sent Events feed.
extension InboxIndex {
    /// Item `seq` when `owner` owns it (archived and expired ones included: an event on them
    /// is still that owner's to send), else `nil` — the same answer for "no such item",
    /// "another owner's item" and a deleted one (unless `deleted`, for the stream to announce
    /// a deletion), so a caller cannot tell them apart.
    package func item(_ owner: InboxOwner, seq: UInt64, deleted: Bool = false) throws(InboxError) -> InboxItem? {
        guard let seq = Int64(exactly: seq) else { return nil }
        do {
            let statement = try db.statement("""
                SELECT seq, user, device, vendor, id, title, subtitle, body, click_url, category, buttons, actions,
                    actions_cut, presentation, inapp_open_title, inapp_dismiss_title, media_path, thumbnail_path,
                    expires_at, ingested_at, push_name, push_date, seen, read, archived, acted, inapp_shown,
                    listed, sound, badge, loc_key, loc_args, title_loc_key, title_loc_args, deeplink, web_view_url,
                    browser_url, custom_payload, pinned, deleted, acted_action, acted_text, collapse_id, thread_id, replaces, replaced_by,
                    media_source_url, media_reason, request_id, hash_id
                FROM items WHERE seq = ?1 AND owner = ?2 AND (?3 = 1 OR deleted = 0)
                """)
            defer { statement.reset() }
            try statement.bind(1, seq)
            try statement.bind(2, owner.key)
            try statement.bind(3, deleted)
            return try statement.step() ? Self.item(statement) : nil
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }

    /// Item `seq`'s ``InboxItemState`` when `owner` owns it (deleted ones included), else
    /// `nil`: what pushspool-inbox applies an accepted event to, as the index will, to answer
    /// with the item as it will be.
    package func itemState(_ owner: InboxOwner, seq: UInt64) throws(InboxError) -> InboxItemState? {
        guard let seq = Int64(exactly: seq) else { return nil }
        do {
            guard let row = try itemRow(seq), let holder = row.owner, IdBytes.equal(holder, owner.key) else { return nil }
            return row.state
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }

    /// `owner`'s items with `afterSeq < seq <= upToSeq`, oldest first, at most `limit`
    /// (archived ones left out): what a live stream sends after a reconnect or a poll.
    package func items(_ owner: InboxOwner, afterSeq: UInt64, upToSeq: UInt64, limit: Int) throws(InboxError) -> [InboxItem] {
        let after = Int64(clamping: afterSeq), upTo = Int64(clamping: upToSeq)
        do {
            let statement = try db.statement("""
                SELECT seq, user, device, vendor, id, title, subtitle, body, click_url, category, buttons, actions,
                    actions_cut, presentation, inapp_open_title, inapp_dismiss_title, media_path, thumbnail_path,
                    expires_at, ingested_at, push_name, push_date, seen, read, archived, acted, inapp_shown,
                    listed, sound, badge, loc_key, loc_args, title_loc_key, title_loc_args, deeplink, web_view_url,
                    browser_url, custom_payload, pinned, deleted, acted_action, acted_text, collapse_id, thread_id, replaces, replaced_by,
                    media_source_url, media_reason, request_id, hash_id
                FROM items
                WHERE owner = ?1 AND seq > ?2 AND seq <= ?3 AND hidden = 0 ORDER BY seq ASC LIMIT ?4
                """)
            defer { statement.reset() }
            try statement.bind(1, owner.key)
            try statement.bind(2, after)
            try statement.bind(3, upTo)
            try statement.bind(4, Int64(max(1, min(limit, Self.maxLimit))))
            var items: [InboxItem] = []
            while try statement.step() { items.append(Self.item(statement)) }
            return items
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }

    /// The seqs of `owner`'s MODAL items with `afterSeq < seq <= upToSeq`, oldest first, at
    /// most `limit`, listed or not: a live stream's `inapp` events, which tell the app to ask
    /// ``inapp(_:now:retention:)`` what to present (a MODAL is not an `item` event unless the
    /// inbox lists modals).
    package func modals(_ owner: InboxOwner, afterSeq: UInt64, upToSeq: UInt64, limit: Int) throws(InboxError) -> [UInt64] {
        do {
            let statement = try db.statement("""
                SELECT seq FROM items INDEXED BY items_modal
                WHERE owner = ?1 AND presentation = 'modal' AND deleted = 0 AND muted = 0 AND seq > ?2 AND seq <= ?3 ORDER BY seq ASC LIMIT ?4
                """)
            defer { statement.reset() }
            try statement.bind(1, owner.key)
            try statement.bind(2, Int64(clamping: afterSeq))
            try statement.bind(3, Int64(clamping: upToSeq))
            try statement.bind(4, Int64(max(1, min(limit, Self.maxLimit))))
            var seqs: [UInt64] = []
            while try statement.step() { seqs.append(UInt64(clamping: statement.int64(0))) }
            return seqs
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }

    /// The replacements among `owner`'s items with `afterSeq < seq <= upToSeq`, oldest
    /// first, at most `limit`: (the new item, the one it replaced), hidden or not, for a live
    /// stream to announce that the old one went.
    package func replacements(_ owner: InboxOwner, afterSeq: UInt64, upToSeq: UInt64,
                              limit: Int) throws(InboxError) -> [(seq: UInt64, replaced: UInt64)] {
        do {
            let statement = try db.statement("""
                SELECT seq, replaces FROM items INDEXED BY items_owner
                WHERE owner = ?1 AND seq > ?2 AND seq <= ?3 AND replaces IS NOT NULL ORDER BY seq ASC LIMIT ?4
                """)
            defer { statement.reset() }
            try statement.bind(1, owner.key)
            try statement.bind(2, Int64(clamping: afterSeq))
            try statement.bind(3, Int64(clamping: upToSeq))
            try statement.bind(4, Int64(max(1, min(limit, Self.maxLimit))))
            var pairs: [(seq: UInt64, replaced: UInt64)] = []
            while try statement.step() {
                pairs.append((UInt64(clamping: statement.int64(0)), UInt64(clamping: statement.int64(1))))
            }
            return pairs
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }
}
