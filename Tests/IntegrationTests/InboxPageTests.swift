@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushInbox
import PushSystem

/// The inbox page in Debian's headless Chromium against a live pushspool-inbox: the rendered
/// DOM shows the items, their unread state and the modal; a tap on an item opens it (nc.open),
/// a click on "Mark read" reads another (nc.read), "Mark unread", "Pin" and "Delete" do what
/// they say (nc.unread, nc.pin, nc.delete), the modal is reported shown (nc.inapp-shown),
/// each through the journal; a screenshot is kept as a CI artifact (`.build/test-artifacts/inbox-page.png`).
/// The modal offers Cancel and Open in the browser's language; each calls its route.
@Suite struct InboxPageTests {
    static let chromium = "/usr/bin/chromium"

    /// A non-interactive Infobip modal without button titles of its own.
    static func plainModal(id: String, title: String) -> [UInt8] {
        Array(#"""
            {"pushspool":1,"user":"alice","payload":{"messageId":"\#(id)","aps":{"alert":{"title":"\#(title)","body":"b"}},"internalData":{"inAppStyle":0}}}
            """#.utf8)
    }

    static func run(_ arguments: [String], profile: String) throws -> String {
        let result = try ProcessRunner.run(chromium, ["--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + profile,
                                                      "--virtual-time-budget=5000"] + arguments)
        return result.stdout
    }

    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: chromium), "needs Debian's chromium"))
    func thePageShowsTheInboxOpensATappedItemAndMarksRead() throws {
        let server = try InboxServerHarness(name: "inbox-page")
        for name in ["mindbox-ios-current.json", "apns-generic.json", "infobip-ios-mirror-modal.json"] {
            let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: DaemonHarness.packageRoot + "/spool-examples/" + name)))
            let envelope = #"{"pushspool":1,"user":"alice","payload":"# + String(decoding: bytes, as: UTF8.self) + "}"
            try server.daemon.drop(Array(envelope.utf8), name: name)
        }
        // Two listed items; the MODAL is presented in-app, not listed (ListModals=no).
        var modal: JSONValue = .null
        try waitUntil(timeout: 30, "the pushes indexed") {
            modal = try server.request("GET", "/v1/inapp").json?["item"] ?? .null
            return try server.items().count == 2 && !modal.isNull
        }
        let items = try server.items()
        let mindbox = try #require(items.first { $0["vendor"]?.stringValue == "mindbox" }?["item"]?.stringValue)
        let apns = try #require(items.first { $0["vendor"]?.stringValue == "apns" }?["item"]?.stringValue)
        let profile = server.daemon.root + "/chromium"
        let page = "\(server.base)/#user=alice&token=\(InboxServerHarness.token("alice"))&live=0"

        let dom = try Self.run(["--dump-dom", page + "&click=open:\(mindbox),read:\(apns)"], profile: profile)
        #expect(dom.contains("data-ready=\"1\""), "\(dom.prefix(2000))")
        let rows = dom.components(separatedBy: "<li class=\"item").dropFirst()
        #expect(rows.count == 2, "the modal is not in the list")
        #expect(dom.contains("<form id=\"signin\" hidden=\"\">"), "signed in: the form is hidden")
        #expect(dom.contains("<li class=\"item read\" data-item=\"\(mindbox)\">"), "the tapped item is read")
        #expect(dom.contains("<li class=\"item read\" data-item=\"\(apns)\">"), "the clicked item is read")
        #expect(rows.filter { $0.hasPrefix(" unread\"") }.isEmpty)
        #expect(dom.contains("<div class=\"title\">Скидка 20% 🎉</div>"))
        #expect(dom.contains("<button class=\"action\" data-action=\"btn-open\">Open</button>"), "the push's buttons")
        // The modal to present now: the Infobip mirror push, open over the list.
        #expect(dom.contains("<div id=\"modal\" role=\"dialog\" aria-modal=\"true\" class=\"open\">"))
        #expect(dom.contains("<div class=\"title\" id=\"modal-title\">\(modal["title"]?.stringValue ?? "?")</div>"))
        // The tap, the click and the modal's presentation went through the spool and the journal.
        try waitUntil(timeout: 30, "the open and the read applied") { try server.counts().unread == 0 }
        var events: [String] = []
        try waitUntil(timeout: 30, "the three events journaled") {
            events = try server.daemon.records().compactMap { record -> String? in
                guard record.key.hasPrefix("event:"), let body = try? JSONParser().parse(record.body) else { return nil }
                return (body["type"]?.stringValue ?? "") + " " + (body["item"]?.numberLexeme ?? "")
            }
            return events.count >= 3
        }
        #expect(Set(events) == ["nc.open \(mindbox)", "nc.read \(apns)", "nc.inapp-shown \(modal["item"]?.stringValue ?? "?")"])
        try waitUntil(timeout: 30, "the modal not served again") { try server.request("GET", "/v1/inapp").json?["item"]?.isNull == true }

        let artifacts = DaemonHarness.packageRoot + "/.build/test-artifacts"
        try FileManager.default.createDirectory(atPath: artifacts, withIntermediateDirectories: true)
        let shot = artifacts + "/inbox-page.png"
        try? FileManager.default.removeItem(atPath: shot)
        _ = try Self.run(["--window-size=720,900", "--screenshot=" + shot, page], profile: profile)
        let png = try Data(contentsOf: URL(fileURLWithPath: shot))
        #expect(png.starts(with: [0x89, 0x50, 0x4e, 0x47]))
    }

    /// "Mark unread", "Delete" and "Pin" clicked in the page: each goes through the spool and
    /// the journal (nc.unread, nc.delete, nc.pin); the deleted item leaves the list and the
    /// pinned one moves first.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: chromium), "needs Debian's chromium"))
    func thePageMarksUnreadDeletesAndPins() throws {
        let server = try InboxServerHarness(name: "inbox-page-states")
        for i in 1...3 {
            try server.push(user: "alice", title: "s\(i)")
            try waitUntil(timeout: 30, "push s\(i)") { try server.counts().unread == i }
        }
        let ids = try server.items().compactMap { $0["item"]?.stringValue }
        try #require(ids.count == 3)
        let (newest, middle, oldest) = (ids[0], ids[1], ids[2])
        #expect(try server.request("POST", "/v1/inbox/\(oldest)/read").status == 202)
        try waitUntil(timeout: 30, "the read applied") { try server.counts().unread == 2 }
        let profile = server.daemon.root + "/chromium"
        let page = "\(server.base)/#user=alice&token=\(InboxServerHarness.token("alice"))&live=0"
        func position(_ dom: String, _ item: String) -> String.Index? { dom.range(of: "data-item=\"\(item)\"")?.lowerBound }

        // Two different items, so neither answer overwrites the other's rendering.
        var dom = try Self.run(["--dump-dom", page + "&click=unread:\(oldest),delete:\(middle)"], profile: profile)
        #expect(dom.contains("data-ready=\"1\""), "\(dom.prefix(2000))")
        #expect(dom.contains("<li class=\"item unread\" data-item=\"\(oldest)\">"), "\(dom)")
        #expect(dom.contains("<button class=\"mark-read\">Mark read</button>"))
        #expect(position(dom, middle) == nil, "the deleted item left the list")
        try waitUntil(timeout: 30, "the unread and the delete applied") {
            try server.counts().unread == 2 && server.items().compactMap { $0["item"]?.stringValue } == [newest, oldest]
        }

        dom = try Self.run(["--dump-dom", page + "&click=pin:\(oldest)"], profile: profile)
        #expect(dom.contains("<li class=\"item unread pinned\" data-item=\"\(oldest)\">"), "\(dom)")
        #expect(dom.contains("<button class=\"mark-unpin\">Unpin</button>"))
        let pinned = try #require(position(dom, oldest)), other = try #require(position(dom, newest))
        #expect(pinned < other, "the pinned item moved first")
        try waitUntil(timeout: 30, "the pin applied") {
            try server.items().compactMap { $0["item"]?.stringValue } == [oldest, newest]
        }
        var events: [String] = []
        try waitUntil(timeout: 30, "the events journaled") {
            events = try server.daemon.records().compactMap { record -> String? in
                guard record.key.hasPrefix("event:"), let body = try? JSONParser().parse(record.body) else { return nil }
                return (body["type"]?.stringValue ?? "") + " " + (body["item"]?.numberLexeme ?? "")
            }
            return events.count >= 4
        }
        #expect(Set(events) == ["nc.read \(oldest)", "nc.unread \(oldest)", "nc.delete \(middle)", "nc.pin \(oldest)"])
    }

    /// An action chosen in the page is kept on the item and marked on its button; "Undo"
    /// reverts it (nc.action, nc.action-revert through the journal). "Snooze 1 h" hides the
    /// item for an hour (`POST /v1/inbox/{item}/snooze`, an nc.snooze event).
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: chromium), "needs Debian's chromium"))
    func thePageKeepsTheActionChosenAndUndoesIt() throws {
        let server = try InboxServerHarness(name: "inbox-page-actions")
        let bytes = try Array(Data(contentsOf: URL(fileURLWithPath: DaemonHarness.packageRoot + "/spool-examples/infobip-ios-accept-decline.json")))
        try server.daemon.drop(Array((#"{"pushspool":1,"user":"alice","payload":"# + String(decoding: bytes, as: UTF8.self) + "}").utf8), name: "ad.json")
        try waitUntil(timeout: 30, "the push") { try server.counts().unread == 1 }
        let item = try #require(try server.items().first?["item"]?.stringValue)
        func acted() throws -> JSONValue? { try server.items().first?["state"]?["acted"] }
        let profile = server.daemon.root + "/chromium"
        let page = "\(server.base)/#user=alice&token=\(InboxServerHarness.token("alice"))&live=0"

        var dom = try Self.run(["--dump-dom", page + "&click=action:\(item):mm_accept"], profile: profile)
        #expect(dom.contains("data-ready=\"1\""), "\(dom.prefix(2000))")
        #expect(dom.contains("<button class=\"action acted\" data-action=\"mm_accept\">Accept</button>"), "\(dom)")
        #expect(dom.contains("<button class=\"mark-revert\" data-action=\"mm_accept\">Undo Accept</button>"))
        #expect(dom.contains("<button class=\"mark-snooze\">Snooze 1 h</button>"))
        try waitUntil(timeout: 30, "the action applied") { try acted() == .string("mm_accept") }

        dom = try Self.run(["--dump-dom", page + "&click=revert:\(item)"], profile: profile)
        #expect(dom.contains("<button class=\"action\" data-action=\"mm_accept\">Accept</button>"), "\(dom)")
        #expect(!dom.contains("<button class=\"mark-revert\""))
        try waitUntil(timeout: 30, "the revert applied") { try acted() == .bool(false) }
        let events = try server.daemon.records().compactMap { record -> String? in
            guard record.key.hasPrefix("event:"), let body = try? JSONParser().parse(record.body) else { return nil }
            return (body["type"]?.stringValue ?? "") + " " + (body["action"]?.stringValue ?? "")
        }
        #expect(events == ["nc.action mm_accept", "nc.action-revert mm_accept"])

        // Snooze: the item leaves the page and the inbox, until an hour from the click.
        let clicked = Posix.wallClockMillis()
        dom = try Self.run(["--dump-dom", page + "&click=snooze:\(item)"], profile: profile)
        #expect(dom.contains("data-ready=\"1\""), "\(dom.prefix(2000))")
        #expect(!dom.contains("data-item=\"\(item)\""), "the snoozed item left the page")
        try waitUntil(timeout: 30, "the snooze applied") { try server.items().isEmpty && server.counts().unread == 0 }
        let snooze = try #require(try server.daemon.records().compactMap { record -> JSONValue? in
            guard record.key.hasPrefix("event:"), let body = try? JSONParser().parse(record.body),
                  body["type"]?.stringValue == "nc.snooze" else { return nil }
            return body
        }.first)
        #expect(snooze["item"]?.numberLexeme == item)
        let until = try #require(snooze["until"]?.stringValue.flatMap(ISO8601.millis))
        #expect(abs(until - clicked - 3_600_000) < 120_000, "until an hour from the click: \(snooze)")
    }

    /// Feeds as tabs: "All" and one per feed with its unread count; a tab lists that feed only,
    /// and an item marked read there is read through the journal (nc.read).
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: chromium), "needs Debian's chromium"))
    func thePageOffersFeedsAsTabs() throws {
        let server = try InboxServerHarness(name: "inbox-page-feeds", extraConfig: "[Feed promo]\nCategories=promo\n[Feed other]\nOther=yes\n")
        try server.push(user: "alice", title: "p1", category: "promo")
        try server.push(user: "alice", title: "p2", category: "promo")
        try server.push(user: "alice", title: "o1")
        try waitUntil(timeout: 30, "the pushes") { try server.counts().unread == 3 }
        let promo = try server.items(query: "?feed=promo").compactMap { $0["item"]?.stringValue }
        let other = try server.items(query: "?feed=other").compactMap { $0["item"]?.stringValue }
        try #require(promo.count == 2 && other.count == 1)
        let profile = server.daemon.root + "/chromium"
        let page = "\(server.base)/#user=alice&token=\(InboxServerHarness.token("alice"))&live=0"

        var dom = try Self.run(["--dump-dom", page], profile: profile)
        #expect(dom.contains("data-ready=\"1\""), "\(dom.prefix(2000))")
        #expect(dom.contains("<nav id=\"tabs\" role=\"tablist\">"), "the tabs are shown")
        #expect(dom.contains("<button class=\"tab active\" role=\"tab\" data-feed=\"\" data-unread=\"3\">All (3)</button>"), "\(dom)")
        #expect(dom.contains("<button class=\"tab\" role=\"tab\" data-feed=\"promo\" data-unread=\"2\">promo (2)</button>"))
        #expect(dom.contains("<button class=\"tab\" role=\"tab\" data-feed=\"other\" data-unread=\"1\">other (1)</button>"))
        #expect(dom.components(separatedBy: "<li class=\"item").count - 1 == 3)

        dom = try Self.run(["--dump-dom", page + "&click=tab:promo,read:\(promo[0])"], profile: profile)
        #expect(dom.contains("<button class=\"tab active\" role=\"tab\" data-feed=\"promo\""), "\(dom)")
        let rows = dom.components(separatedBy: "<li class=\"item").dropFirst()
        #expect(rows.count == 2, "only the promo feed is listed")
        #expect(!dom.contains("data-item=\"\(other[0])\""))
        #expect(dom.contains("<li class=\"item read\" data-item=\"\(promo[0])\">"))
        try waitUntil(timeout: 30, "the read applied") {
            try server.request("GET", "/v1/inbox/counts?feed=promo").json?["unread"]?.intValue == 1
        }
        dom = try Self.run(["--dump-dom", page + "&click=tab:other"], profile: profile)
        #expect(dom.contains("data-feed=\"promo\" data-unread=\"1\">promo (1)</button>"), "\(dom)")
        #expect(dom.components(separatedBy: "<li class=\"item").count - 1 == 1 && dom.contains("data-item=\"\(other[0])\""))
    }

    /// Open on one modal, Cancel on the next, clicked in the page of a German browser: the
    /// buttons carry the SDK's German titles; Open reads the item (nc.open), Cancel only
    /// reports it shown — once, although the page reports it on presentation and again on
    /// Cancel (one Idempotency-Key) — and neither modal is presented again.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: chromium), "needs Debian's chromium"))
    func theModalsCancelAndOpenButtons() throws {
        let server = try InboxServerHarness(name: "inbox-page-modal")
        let profile = server.daemon.root + "/chromium"
        let page = "\(server.base)/#user=alice&token=\(InboxServerHarness.token("alice"))&live=0"
        func present(_ id: String, _ title: String) throws -> UInt64 {
            try server.daemon.drop(Self.plainModal(id: id, title: title), name: id + ".json")
            var item: UInt64?
            try waitUntil(timeout: 30, "\(title) served") {
                let served = try server.request("GET", "/v1/inapp").json?["item"]
                item = served?["title"]?.stringValue == title ? served?["item"]?.stringValue.flatMap { UInt64($0) } : nil
                return item != nil
            }
            return item ?? 0
        }
        func state(_ seq: UInt64) throws -> InboxItem? {
            try InboxIndex(path: server.daemon.state + "/inbox/index.sqlite", readOnly: true).item(.user("alice"), seq: seq)
        }
        func events() throws -> [String] {
            try server.daemon.records().compactMap { record -> String? in
                guard record.key.hasPrefix("event:"), let body = try? JSONParser().parse(record.body) else { return nil }
                return (body["type"]?.stringValue ?? "") + " " + (body["item"]?.numberLexeme ?? "")
            }
        }

        let opened = try present("ib-page-1", "to open")
        let dom = try Self.run(["--accept-lang=de-DE,de", "--dump-dom", page + "&click=modal:mm_open"], profile: profile)
        #expect(dom.contains("data-ready=\"1\""), "\(dom.prefix(2000))")
        #expect(dom.contains("<button class=\"modal-action\" data-action=\"mm_cancel\">Abbrechen</button>"), "\(dom)")
        #expect(dom.contains("<button class=\"modal-action\" data-action=\"mm_open\">Öffnen</button>"))
        #expect(dom.contains("<div id=\"modal\" role=\"dialog\" aria-modal=\"true\" class=\"\">"), "the tap closed the modal")
        try waitUntil(timeout: 30, "the open applied") { try state(opened)?.read == true }
        #expect(try state(opened)?.inAppShown == true)
        try waitUntil(timeout: 30, "the opened modal not served again") { try server.request("GET", "/v1/inapp").json?["item"]?.isNull == true }

        let cancelled = try present("ib-page-2", "to cancel")
        _ = try Self.run(["--accept-lang=de-DE,de", "--dump-dom", page + "&click=modal:mm_cancel"], profile: profile)
        try waitUntil(timeout: 30, "the cancel applied") { try state(cancelled)?.inAppShown == true }
        try waitUntil(timeout: 30, "the cancelled modal not served again") { try server.request("GET", "/v1/inapp").json?["item"]?.isNull == true }
        // Let any stray event land before counting.
        try waitUntil(timeout: 30, "the spool drained") {
            server.daemon.files(in: "incoming").isEmpty && server.daemon.files(in: "processing").isEmpty
        }
        try server.waitAppliedPastMarker()
        #expect(try state(cancelled)?.read == false, "Cancel does not read the item")
        #expect(try events().sorted() == ["nc.inapp-shown \(cancelled)", "nc.inapp-shown \(opened)", "nc.open \(opened)"].sorted())
        #expect(server.daemon.files(in: "failed").isEmpty)
    }
}
