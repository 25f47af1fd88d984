import PushSystem

/// Whose data an access request asks for: a user id, or a device (its token or id) — the
/// `user` and `device` the envelopes name.
///
/// `Sendable`: a plain value.
package enum DataSubject: Sendable, Equatable {
    case user(String)
    case device(String)
}

extension InboxIndex {
    /// The per-owner counters and opt-out flag of `owner`, `nil` when the index has no row.
    package func ownerRow(_ owner: InboxOwner) throws(InboxError) -> (unseen: Int64, unread: Int64, optout: Bool)? {
        do {
            let statement = try db.statement("SELECT unseen, unread, optout FROM owners WHERE owner = ?1")
            defer { statement.reset() }
            try statement.bind(1, owner.key)
            guard try statement.step() else { return nil }
            return (statement.int64(0), statement.int64(1), statement.int64(2) != 0)
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }

    /// Every item that names `subject` (its `user` or its `device` column), in seq order,
    /// hidden, archived and expired ones included: an access request covers all of them, not
    /// what the inbox lists. One row at a time, so a 100,000-item inbox is not held in memory.
    package func forEachItem(naming subject: DataSubject, _ body: (InboxItem) -> Void) throws(InboxError) {
        do {
            // Static SQL: two statements that differ only in the column matched. A user's items
            // are exactly those owned by "u:<user>" (the owner is the user whenever there is
            // one), which items_owner finds without a scan; a device's items include those
            // of the users who had it, so `device` is matched, over the whole table.
            let statement = switch subject {
            case .user: try db.statement("""
                SELECT seq, user, device, vendor, id, title, subtitle, body, click_url, category, buttons, actions,
                    actions_cut, presentation, inapp_open_title, inapp_dismiss_title, media_path, thumbnail_path,
                    expires_at, ingested_at, push_name, push_date, seen, read, archived, acted, inapp_shown,
                    listed, sound, badge, loc_key, loc_args, title_loc_key, title_loc_args, deeplink, web_view_url,
                    browser_url, custom_payload, pinned, deleted, acted_action, acted_text, collapse_id, thread_id, replaces, replaced_by,
                    media_source_url, media_reason, request_id, hash_id
                FROM items WHERE owner = ?1 ORDER BY seq
                """)
            case .device: try db.statement("""
                SELECT seq, user, device, vendor, id, title, subtitle, body, click_url, category, buttons, actions,
                    actions_cut, presentation, inapp_open_title, inapp_dismiss_title, media_path, thumbnail_path,
                    expires_at, ingested_at, push_name, push_date, seen, read, archived, acted, inapp_shown,
                    listed, sound, badge, loc_key, loc_args, title_loc_key, title_loc_args, deeplink, web_view_url,
                    browser_url, custom_payload, pinned, deleted, acted_action, acted_text, collapse_id, thread_id, replaces, replaced_by,
                    media_source_url, media_reason, request_id, hash_id
                FROM items WHERE device = ?1 ORDER BY seq
                """)
            }
            defer { statement.reset() }
            switch subject {
            case .user(let id): try statement.bind(1, InboxOwner.user(id).key)
            case .device(let id): try statement.bind(1, id)
            }
            while try statement.step() {
                body(Self.item(statement))
            }
        } catch {
            throw InboxError(.sqlite(error), path: path)
        }
    }
}
