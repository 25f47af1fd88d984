import PushSystem

/// Single-item and "since" queries for the HTTP server (`pushspool-inbox`): the ownership
/// check before an event is accepted, and the Server-Sent Events feed.
extension InboxIndex {
    /// Item `seq` when `owner` owns it (archived and expired ones included: an event on them
    /// is still that owner's to send), else `nil` — the same answer for "no such item" and
    /// "another owner's item", so a caller cannot tell them apart.
    package func item(_ owner: InboxOwner, seq: UInt64) throws(InboxError) -> InboxItem? {
        guard let seq = Int64(exactly: seq) else { return nil }
        do {
            let statement = try db.statement("""
                SELECT seq, user, device, vendor, id, title, subtitle, body, click_url, category, buttons, actions,
                    actions_cut, presentation, inapp_open_title, inapp_dismiss_title, media_path, thumbnail_path,
                    expires_at, ingested_at, push_name, push_date, seen, read, archived, acted, inapp_shown
                FROM items WHERE seq = ?1 AND owner = ?2
                """)
            defer { statement.reset() }
            try statement.bind(1, seq)
            try statement.bind(2, owner.key)
            return try statement.step() ? Self.item(statement) : nil
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
                    expires_at, ingested_at, push_name, push_date, seen, read, archived, acted, inapp_shown
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
}
