@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushSystem

/// Issue 22, Infobip: a non-interactive MODAL offers Cancel and Open, an interactive one its
/// category's actions (Decline before Accept, as the SDK sets them), titled in the client's
/// language — through the real pushspoold (journal, index) and pushspool-inbox over HTTP, and
/// through `pushspoolctl nc`.
@Suite struct InAppActionsTests {
    /// An Infobip iOS mirror push shown as a modal (`inAppStyle` 0) for `user`; with
    /// `modal: false` a plain push (an inbox item, whatever the inbox does with modals).
    static func modal(user: String = "alice", id: String, title: String, category: String? = nil, modal: Bool = true) -> [UInt8] {
        let categoryMember = category.map { #","category":"\#($0)""# } ?? ""
        let style = modal ? #","internalData":{"inAppStyle":0}"# : ""
        return Array(#"""
            {"pushspool":1,"user":"\#(user)","payload":{"messageId":"\#(id)","aps":{"alert":{"title":"\#(title)","body":"b"}\#(categoryMember)}\#(style)}}
            """#.utf8)
    }

    /// The titles of the listed item called `title` (its category's actions).
    static func listedActions(_ server: InboxServerHarness, title: String, language: String?) throws -> [String] {
        var titles: [String] = []
        try waitUntil(timeout: 30, "\(title) listed") {
            let items = try server.request("GET", "/v1/inbox", headers: language.map { ["Accept-Language: \($0)"] } ?? []).json?["items"]
            guard let item = items?.arrayValue?.first(where: { $0["title"]?.stringValue == title }) else { return false }
            titles = (item["actions"]?.arrayValue ?? []).compactMap { $0["title"]?.stringValue }
            return true
        }
        return titles
    }

    static func actions(_ item: JSONValue?, _ member: String) -> [String] {
        (item?["inAppActions"]?.arrayValue ?? []).compactMap { $0[member]?.stringValue }
    }

    /// The modal served now, waiting for `title` to be it.
    static func served(_ server: InboxServerHarness, title: String, language: String? = nil) throws -> JSONValue {
        var item: JSONValue?
        try waitUntil(timeout: 30, "\(title) served") {
            item = try server.request("GET", "/v1/inapp", headers: language.map { ["Accept-Language: \($0)"] } ?? []).json?["item"]
            return item?["title"]?.stringValue == title
        }
        return item ?? .null
    }

    /// The journaled events as "type item[ action]".
    static func events(_ server: InboxServerHarness) throws -> [String] {
        try server.daemon.records().compactMap { record -> String? in
            guard record.key.hasPrefix("event:"), let body = try? JSONParser().parse(record.body) else { return nil }
            return ([body["type"]?.stringValue ?? "", body["item"]?.numberLexeme ?? ""] + (body["action"]?.stringValue.map { [$0] } ?? []))
                .joined(separator: " ")
        }
    }

    @Test func openCancelAndCategoryActionsOverHTTPInTheClientsLanguage() throws {
        let server = try InboxServerHarness(name: "inapp-actions")

        // Non-interactive: Cancel then Open, in German for a German client.
        try server.daemon.drop(Self.modal(id: "ib-act-1", title: "first"), name: "m1.json")
        let first = try Self.served(server, title: "first", language: "de-AT, de;q=0.9, en;q=0.5")
        let firstItem = try #require(first["item"]?.stringValue)
        #expect(Self.actions(first, "title") == ["Abbrechen", "Öffnen"])
        #expect(Self.actions(first, "event") == ["nc.inapp-shown", "nc.open"])
        #expect(Self.actions(first, "path") == ["/v1/inapp/\(firstItem)/shown", "/v1/inbox/\(firstItem)/open"])
        #expect(Self.actions(try Self.served(server, title: "first"), "title") == ["Cancel", "Open"], "English without a header")
        // Open: what a tap on the item in the inbox is (nc.open), then never presented again.
        let open = try server.request("POST", Self.actions(first, "path")[1], headers: ["Accept-Language: de"])
        #expect(open.status == 202, "\(open.body)")
        #expect(open.json?["item"]?["state"]?["read"]?.boolValue == true)
        try waitUntil(timeout: 30, "the open applied") { try server.request("GET", "/v1/inapp").json?["item"]?.isNull == true }

        // Interactive: the category's actions, Decline first, in French.
        try server.daemon.drop(Self.modal(id: "ib-act-2", title: "invite", category: "mm_accept_decline"), name: "m2.json")
        let invite = try Self.served(server, title: "invite", language: "fr-CA")
        let inviteItem = try #require(invite["item"]?.stringValue)
        #expect(Self.actions(invite, "id") == ["mm_decline", "mm_accept"])
        #expect(Self.actions(invite, "title") == ["Refuser", "Accepter"])
        #expect(Self.actions(invite, "path") == ["/v1/inbox/\(inviteItem)/actions/mm_decline", "/v1/inbox/\(inviteItem)/actions/mm_accept"])
        try server.daemon.drop(Self.modal(id: "ib-act-0", title: "listed", category: "mm_accept_decline", modal: false), name: "p.json")
        #expect(try Self.listedActions(server, title: "listed", language: "fr") == ["Refuser", "Accepter"])
        #expect(try Self.listedActions(server, title: "listed", language: nil) == ["Decline", "Accept"])
        let decline = try server.request("POST", Self.actions(invite, "path")[0])
        #expect(decline.status == 202 && decline.json?["item"]?["state"]?["acted"] == .string("mm_decline"), "\(decline.body)")
        try waitUntil(timeout: 30, "the action applied") { try server.request("GET", "/v1/inapp").json?["item"]?.isNull == true }

        // Cancel: reported shown, dismissed, not presented again; the item stays unread.
        try server.daemon.drop(Self.modal(id: "ib-act-3", title: "third"), name: "m3.json")
        let third = try Self.served(server, title: "third")
        let thirdItem = try #require(third["item"]?.stringValue)
        let cancel = try server.request("POST", Self.actions(third, "path")[0])
        #expect(cancel.status == 202 && cancel.json?["item"]?["state"]?["inAppShown"]?.boolValue == true, "\(cancel.body)")
        try waitUntil(timeout: 30, "the cancel applied") { try server.request("GET", "/v1/inapp").json?["item"]?.isNull == true }
        try waitUntil(timeout: 30, "the events journaled") { try Self.events(server).count >= 3 }
        #expect(try Self.events(server) == ["nc.open \(firstItem)", "nc.action \(inviteItem) mm_decline", "nc.inapp-shown \(thirdItem)"])

        // Hostile Accept-Language headers: thousands of entries, malformed weights, one over the
        // header buffer. Each is answered, and the server goes on answering.
        try server.daemon.drop(Self.modal(id: "ib-act-4", title: "fourth"), name: "m4.json")
        _ = try Self.served(server, title: "fourth")
        let many = String(repeating: "xx-YY;q=0.5,", count: 2_000) + "ru;q=0.6"
        let started = Date()
        let crowded = try server.request("GET", "/v1/inapp", headers: ["Accept-Language: " + many])
        #expect(crowded.status == 200 && Self.actions(crowded.json?["item"], "title") == ["Отмена", "Открыть"])
        #expect(Date().timeIntervalSince(started) < 5)
        for header in ["de;q=1.5, fr;q=x, ;;;, *;q=0.5", ";q=", "¿qué?;q=é, 😀", "de;q=" + String(repeating: "0", count: 20_000)] {
            let reply = try server.request("GET", "/v1/inapp", headers: ["Accept-Language: " + header])
            #expect(reply.status == 200 && Self.actions(reply.json?["item"], "title") == ["Cancel", "Open"], "\(header.prefix(30))")
        }
        let oversized = try server.request("GET", "/v1/inapp", headers: ["Accept-Language: " + String(repeating: "de,", count: 20_000)])
        #expect(oversized.status == 431)
        #expect(try server.request("GET", "/v1/inapp").status == 200)
        #expect(server.daemon.files(in: "failed").isEmpty)
    }

    @Test func ncInappAndListTakeLang() throws {
        let server = try InboxServerHarness(name: "inapp-lang")
        try server.daemon.drop(Self.modal(id: "ib-lang-0", title: "listed", category: "mm_accept_decline", modal: false), name: "p.json")
        try server.daemon.drop(Self.modal(id: "ib-lang-1", title: "invite", category: "mm_accept_decline"), name: "m1.json")
        let invite = try #require(try Self.served(server, title: "invite")["item"]?.stringValue)

        let (status, json, stderr) = try server.daemon.ctl(["nc", "inapp", "--user", "alice", "--lang", "de", "--json"])
        #expect(status == 0, "\(stderr)")
        let item = try JSONParser().parse(json)
        #expect(item["item"]?.stringValue == invite)
        #expect(Self.actions(item, "title") == ["Ablehnen", "Akzeptieren"])
        #expect(Self.actions(item, "event") == ["nc.action", "nc.action"])
        #expect(Self.actions(item, "path") == [], "paths are HTTP's")

        let (listStatus, list, _) = try server.daemon.ctl(["nc", "list", "--user", "alice", "--lang", "fr_FR"])
        #expect(listStatus == 0 && list.contains("actions: Refuser | Accepter"), "\(list)")
        let (_, english, _) = try server.daemon.ctl(["nc", "list", "--user", "alice"])
        #expect(english.contains("actions: Decline | Accept"), "\(english)")
        let (_, untranslated, _) = try server.daemon.ctl(["nc", "list", "--user", "alice", "--lang", "tlh"])
        #expect(untranslated.contains("actions: Decline | Accept"), "a language the SDK does not translate: English")

        // The shown report `nc inapp` dropped lands; the next modal is a plain one.
        try waitUntil(timeout: 30, "the invite reported shown") { try server.request("GET", "/v1/inapp").json?["item"]?.isNull == true }
        try server.daemon.drop(Self.modal(id: "ib-lang-2", title: "plain"), name: "m2.json")
        let plain = try #require(try Self.served(server, title: "plain")["item"]?.stringValue)
        let (textStatus, text, _) = try server.daemon.ctl(["nc", "inapp", "--user", "alice", "--lang", "pt-PT"])
        #expect(textStatus == 0)
        #expect(text.contains("    button Cancelar: dismisses it"), "\(text)")
        #expect(text.contains("    button Abrir: pushspoolctl nc open --user alice \(plain)"), "\(text)")

        for bad in ["de;q=1", "", "d3", "de,fr"] {
            let (badStatus, _, badError) = try server.daemon.ctl(["nc", "inapp", "--user", "alice", "--lang", bad])
            #expect(badStatus == 64 && badError.contains("--lang"), "\(bad): \(badError)")
        }
        #expect(try server.daemon.ctl(["nc", "count", "--user", "alice", "--lang", "de"]).0 == 64, "count shows no titles")
    }
}
