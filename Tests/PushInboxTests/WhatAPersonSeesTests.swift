@preconcurrency import Glibc
import PushInbox
import PushJournal
import PushSystem
import Testing
import TestSupport

/// Issue 22, "What a person sees": silent pushes are journaled but are not items; a MODAL is
/// presented in-app, listed only with `[Inbox] ListModals=yes`; an item carries what the app
/// needs to render it (loc keys, badge, sound, Infobip's three link kinds, the custom payload).
@Suite struct WhatAPersonSeesTests {
    let now: Int64 = 1_800_000_100_000

    @Test func silentPushesAreJournaledButAreNotItems() async throws {
        let f = try InboxFixture()
        let visible = try await f.notification(title: "visible")
        // APNs content-available only, an FCM data message: no title, no body.
        try await f.append(["kind": .string("notification"), "vendor": .string("apns"), "id": .string("s1"), "user": .string("alice"),
                            "silent": .bool(true), "buttons": .array([]), "badge": .number("3")])
        try await f.append(["vendor": .string("fcm"), "id": .string("s2"), "user": .string("alice"), "silent": .bool(true),
                            "buttons": .array([]), "customPayload": .object(["type": .string("sync")])])
        // Infobip's silent message carries a title and body, yet iOS shows nothing.
        let infobip = try await f.notification(title: "quiet", vendor: "infobip", extra: ["silent": .bool(true)])
        // A silent banner is silent too: only a MODAL is presented for silent pushes.
        try await f.notification(title: "quiet banner", vendor: "infobip", presentation: "banner", extra: ["silent": .bool(true)])
        let index = try f.openIndex()
        let last = try await f.notification(title: "after")
        try index.catchUp(journalDirectory: f.journalDirectory)

        #expect(try index.appliedSeq() == last, "journaled and applied")
        #expect(try index.list(.user("alice"), limit: 500, now: now).items.map(\.title) == ["after", "visible"])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 2, unread: 2))
        #expect(try index.items(.user("alice"), afterSeq: 0, upToSeq: last, limit: 100).map(\.seq) == [visible, last])
        #expect(try index.item(.user("alice"), seq: infobip) == nil, "no item: events on it are refused as for a missing one")
        #expect(try index.inapp(.user("alice"), now: now) == nil)
        #expect(try index.itemCount() == 2)
        // An event naming the silent push changes nothing.
        try await f.event("nc.read", item: .seq(infobip))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 2, unread: 2))
    }

    /// Infobip: "Modal Mirror push notification is supported for silent push notifications as
    /// well": a silent MODAL with something to show is presented in-app, never listed.
    @Test func aSilentModalIsPresentedInAppButNeverListed() async throws {
        for listModals in [false, true] {
            let f = try InboxFixture("silentModal\(listModals)")
            let index = try InboxIndex(path: f.indexPath, listModals: listModals)
            try await f.notification(title: "inbox")
            let modal = try await f.notification(title: "Quiet", vendor: "infobip", presentation: "modal", extra: ["silent": .bool(true)])
            try index.catchUp(journalDirectory: f.journalDirectory)
            #expect(try index.inapp(.user("alice"), now: now)?.seq == modal)
            #expect(try index.list(.user("alice"), now: now).items.map(\.title) == ["inbox"])
            #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 1, unread: 1))
            // With nothing to show it is not kept at all.
            try await f.append(["vendor": .string("infobip"), "id": .string("blank"), "user": .string("alice"), "silent": .bool(true),
                                "presentation": .string("modal"), "title": .string(""), "buttons": .array([])])
            try index.catchUp(journalDirectory: f.journalDirectory)
            #expect(try index.inapp(.user("alice"), now: now)?.seq == modal)
            #expect(try index.itemCount() == 2)
        }
    }

    @Test func aModalIsPresentedInAppAndNotListedUnlessListModals() async throws {
        let f = try InboxFixture()
        try await f.notification(title: "banner", presentation: "banner")
        let modal = try await f.notification(title: "modal", presentation: "modal")
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.list(.user("alice"), now: now).items.map(\.title) == ["banner"])
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 1, unread: 1))
        #expect(try index.items(.user("alice"), afterSeq: 0, upToSeq: modal, limit: 10).map(\.title) == ["banner"])
        #expect(try index.modals(.user("alice"), afterSeq: 0, upToSeq: modal, limit: 10) == [modal])
        let presented = try #require(try index.inapp(.user("alice"), now: now))
        #expect(presented.seq == modal && !presented.listed)
        #expect(presented.jsonValue()["listed"] == .bool(false), "a client can tell it is not in the list")
        #expect(try index.list(.user("alice"), now: now).items.first?.jsonValue()["listed"] == nil)
        #expect(try index.item(.user("alice"), seq: modal)?.listed == false, "still the user's item for in-app events")

        // Reading the whole inbox leaves the modal waiting to be presented; events on the
        // modal itself never make the counts move.
        try await f.event("nc.read-all")
        try await f.event("nc.archive-read")
        try await f.event("nc.seen", item: .seq(modal))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 0, unread: 0))
        #expect(try index.list(.user("alice"), now: now).items.isEmpty)
        #expect(try index.inapp(.user("alice"), now: now)?.seq == modal)
        try await f.event("nc.open", item: .seq(modal))
        try await f.event("nc.archive", item: .seq(modal))
        try index.catchUp(journalDirectory: f.journalDirectory)
        #expect(try index.inapp(.user("alice"), now: now) == nil, "opened: not presented again")
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 0, unread: 0))

        // [Inbox] ListModals=yes: listed and counted like a banner.
        let listing = f.temp.appending("listing.sqlite")
        _ = try InboxIndex.rebuild(path: listing, journalDirectory: f.journalDirectory, listModals: true)
        let lists = try InboxIndex(path: listing, readOnly: true)
        let again = try await f.notification(title: "modal 2", presentation: "modal")
        let writer = try InboxIndex(path: listing, listModals: true)
        try writer.catchUp(journalDirectory: f.journalDirectory)
        #expect(try lists.list(.user("alice"), now: now).items.map(\.title) == ["modal 2"])
        #expect(try lists.count(.user("alice"), now: now) == InboxCounts(unseen: 1, unread: 1))
        #expect(try lists.inapp(.user("alice"), now: now)?.seq == again)
        try await f.event("nc.read-all")
        try writer.catchUp(journalDirectory: f.journalDirectory)
        #expect(try lists.count(.user("alice"), now: now) == InboxCounts(unseen: 0, unread: 0))
        #expect(try lists.inapp(.user("alice"), now: now) == nil, "listed, read with the rest")
    }

    @Test func anItemCarriesLocKeysBadgeSoundLinksAndPayload() async throws {
        let f = try InboxFixture()
        let localised = try await f.append([
            "vendor": .string("infobip"), "id": .string("loc"), "user": .string("alice"), "silent": .bool(false), "buttons": .array([]),
            "locKey": .string("ORDER_SHIPPED"), "locArgs": .array([.string("A-1001"), .string("2")]),
            "titleLocKey": .string("ORDER_TITLE"), "titleLocArgs": .array([]),
            "sound": .string("chime.caf"), "badge": .number("7"),
            "clickUrl": .string("myapp://offers/7"), "deeplink": .string("myapp://offers/7"),
            "webViewUrl": .string("https://e.example/w"), "browserUrl": .string("https://e.example/b"),
            "customPayload": .object(["expires": .string("2026-12-31"), "n": .number("1")]),
        ])
        let text = try await f.notification(title: "text payload", extra: ["customPayload": .string("Пример полезной нагрузки")])
        // Older records or odd producers: an array payload is carried as its text; hostile
        // values are dropped, never trapped on.
        let odd = try await f.notification(title: "odd", extra: [
            "customPayload": .array([.number("1")]), "badge": .number("1e999"), "locArgs": .array([.number("1")]), "sound": .number("5"),
        ])
        let index = try f.openIndex()
        try index.catchUp(journalDirectory: f.journalDirectory)
        let item = try #require(try index.item(.user("alice"), seq: localised))
        #expect(item.title == nil && item.body == nil)
        #expect(item.locKey == "ORDER_SHIPPED" && item.locArgs == ["A-1001", "2"])
        #expect(item.titleLocKey == "ORDER_TITLE" && item.titleLocArgs == [])
        #expect(item.sound == "chime.caf" && item.badge == 7)
        #expect(item.deeplink == "myapp://offers/7" && item.webViewUrl == "https://e.example/w" && item.browserUrl == "https://e.example/b")
        #expect(item.clickUrl == "myapp://offers/7")
        #expect(item.customPayload == .object(["expires": .string("2026-12-31"), "n": .number("1")]))
        let json = item.jsonValue()
        #expect(json["locKey"]?.stringValue == "ORDER_SHIPPED" && json["locArgs"] == .array([.string("A-1001"), .string("2")]))
        #expect(json["titleLocArgs"] == .array([]) && json["badge"]?.numberLexeme == "7" && json["sound"]?.stringValue == "chime.caf")
        #expect(json["deeplink"]?.stringValue == "myapp://offers/7" && json["webViewUrl"]?.stringValue == "https://e.example/w"
                && json["browserUrl"]?.stringValue == "https://e.example/b")
        #expect(json["customPayload"]?["expires"]?.stringValue == "2026-12-31")
        #expect(try index.count(.user("alice"), now: now) == InboxCounts(unseen: 3, unread: 3), "a localised push is an item")

        #expect(try index.item(.user("alice"), seq: text)?.customPayload == .string("Пример полезной нагрузки"))
        let oddItem = try #require(try index.item(.user("alice"), seq: odd))
        #expect(oddItem.customPayload == .string("[1]"))
        #expect(oddItem.badge == nil && oddItem.locArgs == nil && oddItem.sound == nil)
        #expect(oddItem.jsonValue()["badge"] == nil && oddItem.jsonValue()["locArgs"] == nil)
    }

    @Test func reindexReproducesTheIndexForEitherListing() async throws {
        for listModals in [false, true] {
            let f = try InboxFixture("reindex\(listModals)")
            let index = try InboxIndex(path: f.indexPath, listModals: listModals)
            for i in 0..<30 {
                let presentation: String? = i % 4 == 0 ? "modal" : i % 4 == 1 ? "banner" : nil
                let seq = try await f.notification(title: "n\(i)", presentation: presentation, extra: [
                    "silent": .bool(i % 6 == 5), "badge": .number(String(i)), "locArgs": .array([.string("a\(i)")]),
                    "customPayload": i % 2 == 0 ? .object(["i": .number(String(i))]) : .string("text \(i)"),
                ])
                if i % 5 == 0 { try await f.event("nc.read", item: .seq(seq)) }
                if i % 7 == 0 { try index.catchUp(journalDirectory: f.journalDirectory, batchSize: 4) }
            }
            try await f.event("nc.read-all")
            try await f.notification(title: "last", presentation: "modal")
            try index.catchUp(journalDirectory: f.journalDirectory, batchSize: 3)
            let rebuilt = f.temp.appending("rebuilt.sqlite")
            _ = try InboxIndex.rebuild(path: rebuilt, journalDirectory: f.journalDirectory, listModals: listModals)
            #expect(try InboxIndex(path: rebuilt, readOnly: true).canonicalDump() == index.canonicalDump())
            #expect(try index.canonicalDump().contains("meta|list_modals|\(listModals ? 1 : 0)"))
        }
    }

    /// An index written by the previous schema (or with the other `ListModals=`) used to stop
    /// pushspoold until someone ran `nc reindex`; the follower now replaces and rebuilds it.
    @Test func theFollowerRebuildsAnIndexOfAnotherSchemaOrListing() async throws {
        let f = try InboxFixture()
        try await f.notification(title: "banner", presentation: "banner")
        try await f.notification(title: "modal", presentation: "modal")
        do {
            let old = try f.openIndex()
            try old.catchUp(journalDirectory: f.journalDirectory)
        }
        do {
            let db = try SQLiteDatabase(path: f.indexPath, mode: .readWriteCreate)
            try db.execute("UPDATE meta SET value = 1 WHERE key = 'schema_version'")
            try db.execute("DELETE FROM meta WHERE key = 'list_modals'")
        }
        #expect(throws: InboxError.self) { try InboxIndex(path: f.indexPath, readOnly: true) }
        var notices = Locked([InboxNotice]())
        var follower = try InboxFollower(stateDirectory: f.stateDirectory, notify: { [notices] notice in notices.withLock { $0.append(notice) } })
        #expect(notices.withLock { $0 } == [.indexOutdated(reason: "schema-mismatch")])
        #expect(follower.status.rebuilding && follower.status.corruptIndexes == 0)
        try follower.catchUp()
        try follower.catchUp()
        #expect(!follower.status.rebuilding)
        let reader = try InboxIndex(path: f.indexPath, readOnly: true)
        #expect(try reader.list(.user("alice"), now: now).items.map(\.title) == ["banner"])

        // The same index under ListModals=yes: replaced again, the modal listed.
        notices = Locked([InboxNotice]())
        follower = try InboxFollower(stateDirectory: f.stateDirectory, listModals: true,
                                     notify: { [notices] notice in notices.withLock { $0.append(notice) } })
        #expect(notices.withLock { $0 } == [.indexOutdated(reason: "listing-mismatch")])
        try follower.catchUp()
        #expect(try InboxIndex(path: f.indexPath, readOnly: true).list(.user("alice"), now: now).items.map(\.title) == ["modal", "banner"])
        // A writer that is not the follower (nc update) is told what to do instead.
        do {
            _ = try InboxIndex(path: f.indexPath, listModals: false)
            Issue.record("opened an index built with the other listing")
        } catch {
            guard case .listingMismatch(indexed: true) = error.kind else { Issue.record("\(error)"); return }
            #expect(error.description.contains("nc reindex"))
        }
        _ = follower
    }
}
