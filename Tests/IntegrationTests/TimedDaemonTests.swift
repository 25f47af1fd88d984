@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushJournal
import PushSystem

/// Issue 25, the time-driven part, through pushspoold and pushspool-inbox: a snooze hides an
/// item at once and brings it back unread at its moment, with an SSE event then, also across
/// a kill -9 and a restart spanning the moment; an expiry (the envelope's `expiresAt`,
/// Infobip's `inAppExpiryDateTime`) takes the item out of lists and counts at its moment with
/// an SSE event then; `nc reindex` gives the same inbox.
@Suite struct TimedDaemonTests {
    static func iso(_ millis: Int64) -> String { Timestamp.iso8601(millis: millis) }

    /// Waits for `condition`; returns the wall-clock time (ms) at which it first held.
    @discardableResult
    static func whenTrue(timeout: Double, _ what: String, _ condition: () throws -> Bool) throws -> Int64 {
        try waitUntil(timeout: timeout, what, condition)
        return Posix.wallClockMillis()
    }

    static func titles(_ server: InboxServerHarness) throws -> [String] {
        try server.items().compactMap { $0["title"]?.stringValue }
    }

    static func item(_ server: InboxServerHarness, title: String) throws -> String {
        try #require(try server.items().first { $0["title"]?.stringValue == title }?["item"]?.stringValue)
    }

    @Test func aSnoozeHidesAtOnceAndBringsTheItemBackUnreadAtItsMoment() throws {
        let server = try InboxServerHarness(name: "inbox-snooze", extraConfig: "[Feed promo]\nCategories=promo\n[Feed other]\nOther=yes\n")
        try server.push(user: "alice", title: "a1", category: "promo")
        try server.push(user: "alice", title: "a2", category: "news")
        try waitUntil(timeout: 30, "the pushes") { try server.counts() == (2, 2) }
        let a1 = try Self.item(server, title: "a1")
        #expect(try server.request("POST", "/v1/inbox/\(a1)/read").status == 202)
        try waitUntil(timeout: 30, "a1 read") { try server.counts() == (1, 1) }
        let stream = try StreamClient(server: server)
        defer { stream.close() }

        // Refused: a time already past (422), more than 366 days ahead (422), no time (400).
        let now = Posix.wallClockMillis()
        for (body, status) in [(#"{"until":"\#(Self.iso(now - 1000))"}"#, 422), (#"{"until":"\#(Self.iso(now + 400 * 86_400_000))"}"#, 422),
                               (#"{"until":"tomorrow"}"#, 422), (#"{"at":"x"}"#, 400), ("", 400)] {
            let reply = try server.request("POST", "/v1/inbox/\(a1)/snooze", body: body)
            #expect(reply.status == status, "\(body): \(reply.body)")
        }
        let until = Posix.wallClockMillis() + 3000
        let reply = try server.request("POST", "/v1/inbox/\(a1)/snooze", body: #"{"until":"\#(Self.iso(until))"}"#,
                                       headers: ["Idempotency-Key: snooze-1"])
        #expect(reply.status == 202, "\(reply.body)")
        #expect(reply.json?["snoozedUntil"]?.stringValue == Self.iso(until))
        try waitUntil(timeout: 30, "a1 snoozed") { try Self.titles(server) == ["a2"] }
        #expect(Posix.wallClockMillis() < until, "the test machine was too slow to see the snooze before its end")
        #expect(try server.request("GET", "/v1/inbox?feed=promo").json?["items"]?.arrayValue?.isEmpty == true)
        #expect(try server.counts() == (1, 1))

        // Back at its moment, unread (it was read), in the list, the counts and on the stream.
        let back = try Self.whenTrue(timeout: 30, "a1 back") { try Self.titles(server) == ["a2", "a1"] }
        #expect(back >= until)
        #expect(back - until < 2000, "a1 came back \(back - until) ms after its moment")
        #expect(try server.counts() == (1, 2))
        #expect(try server.request("GET", "/v1/inbox/counts?feed=promo").json?["unread"]?.intValue == 1)
        try waitUntil(timeout: 10, "the state event") {
            stream.text.contains("event: state\ndata: {") && stream.text.contains(#""item":"\#(a1)""#)
                && stream.text.contains(#""read":false"#)
        }
        #expect(Posix.wallClockMillis() - until < 3000)

        // pushspoolctl: the same through the journal; unsnooze brings it back at once.
        #expect(try server.daemon.ctl(["nc", "snooze", "--user", "alice", a1, "--until", Self.iso(Posix.wallClockMillis() - 1)]).0 == 64)
        #expect(try server.daemon.ctl(["nc", "snooze", "--user", "alice", a1]).0 == 64)
        let (status, _, err) = try server.daemon.ctl(["nc", "snooze", "--user", "alice", a1, "--until", Self.iso(Posix.wallClockMillis() + 600_000)])
        #expect(status == 0, "\(err)")
        try waitUntil(timeout: 30, "a1 snoozed by nc") { try Self.titles(server) == ["a2"] }
        #expect(try server.daemon.ctl(["nc", "unsnooze", "--user", "alice", a1]).0 == 0)
        try waitUntil(timeout: 30, "a1 unsnoozed") { try Self.titles(server) == ["a2", "a1"] }

        // The journal alone gives the same inbox.
        let before = try server.daemon.ctl(["nc", "list", "--user", "alice", "--json"]).1
        let counts = try server.daemon.ctl(["nc", "count", "--user", "alice", "--json"]).1
        let (rebuilt, out, rebuildErr) = try server.daemon.ctl(["nc", "reindex"])
        #expect(rebuilt == 0, "\(out) \(rebuildErr)")
        #expect(try server.daemon.ctl(["nc", "list", "--user", "alice", "--json"]).1 == before)
        #expect(try server.daemon.ctl(["nc", "count", "--user", "alice", "--json"]).1 == counts)
    }

    /// pushspoold killed (SIGKILL) once a snooze is journaled and synced (applied or not,
    /// a race), and down past the snooze's end: after the restart the snooze applies once,
    /// ends at once, and the stream (pushspool-inbox kept running) hears of it then.
    @Test func aKillNineAndARestartSpanningTheEnd() throws {
        let server = try InboxServerHarness(name: "inbox-snooze-kill")
        try server.push(user: "alice", title: "k1")
        try server.push(user: "alice", title: "k2")
        try waitUntil(timeout: 30, "the pushes") { try server.counts() == (2, 2) }
        let k1 = try Self.item(server, title: "k1")
        let k2 = try Self.item(server, title: "k2")
        let stream = try StreamClient(server: server)
        defer { stream.close() }

        #expect(server.daemon.stop() == 0)
        let until = Posix.wallClockMillis() + 2000
        let (status, _, err) = try server.daemon.ctl(["nc", "snooze", "--user", "alice", k1, "--until", Self.iso(until), "--event-id", "kill-snooze"])
        #expect(status == 0, "\(err)")
        #expect(try server.daemon.crashAfterFirstSync(), "\(server.daemon.daemonStderr.suffix(1500))")
        // Down past the end: no writer applies the end meanwhile. Whether the follower applied
        // the snooze itself is a race with the kill (the stop point runs in the record's
        // completion, after followers were told of the commit): k1 is listed or snoozed.
        while Posix.wallClockMillis() < until + 500 { usleep(50_000) } // why: the scenario: the daemon stays down past the snooze's end
        let down = try server.counts()
        #expect((down.unseen, down.unread) == (2, 2) || (down.unseen, down.unread) == (1, 1), "\(down)")

        try server.daemon.start()
        try waitUntil(timeout: 60, "the spool drained") {
            server.daemon.files(in: "incoming").isEmpty && server.daemon.files(in: "processing").isEmpty
        }
        try waitUntil(timeout: 30, "k1 back after the restart") {
            stream.text.contains("event: state") && stream.text.contains(#""item":"\#(k1)""#)
        }
        #expect(try Self.titles(server) == ["k2", "k1"])
        #expect(try server.counts() == (2, 2))
        #expect(try server.daemon.records().map(\.key).filter { $0 == "event:kill-snooze" }.count == 1)

        // A graceful stop before the end, a start after it: back at the start, with an event.
        let until2 = Posix.wallClockMillis() + 3000
        #expect(try server.daemon.ctl(["nc", "snooze", "--user", "alice", k2, "--until", Self.iso(until2)]).0 == 0)
        try waitUntil(timeout: 30, "k2 snoozed") { try Self.titles(server) == ["k1"] }
        #expect(server.daemon.stop() == 0)
        let seen = stream.text.components(separatedBy: #""item":"\#(k2)""#).count
        while Posix.wallClockMillis() < until2 + 500 { usleep(50_000) } // why: the scenario: the daemon stays down past the snooze's end
        #expect(try Self.titles(server) == ["k1"], "no writer: still snoozed")
        try server.daemon.start()
        try waitUntil(timeout: 30, "k2 back after the restart") {
            try Self.titles(server) == ["k2", "k1"] && stream.text.components(separatedBy: #""item":"\#(k2)""#).count > seen
        }
    }

    /// The envelope's `expiresAt` and Infobip's `inAppExpiryDateTime`: each item leaves the
    /// list and the counts at its moment, and the stream gets `refresh` `nc.expired` then, not
    /// at the next request.
    @Test func anExpiryLeavesAtItsMomentWithAnEvent() throws {
        let server = try InboxServerHarness(name: "inbox-expiry")
        try server.push(user: "alice", title: "lasting")
        let expiry = Posix.wallClockMillis() + 4000
        let envelope = """
            {"pushspool":1,"user":"alice","platform":"ios","expiresAt":"\(Self.iso(expiry))","payload":{"aps":{"alert":{"title":"brief","body":"b"}},"n":"x1"}}
            """
        try server.daemon.drop(Array(envelope.utf8), name: "brief.json")
        let infobip = """
            {"pushspool":1,"user":"alice","payload":{"messageId":"ib-expiry-1","aps":{"alert":{"title":"banner","body":"b"}},
             "internalData":{"inAppStyle":1,"inAppExpiryDateTime":\(expiry + 1000)}}}
            """
        try server.daemon.drop(Array(infobip.utf8), name: "banner.json")
        try waitUntil(timeout: 30, "the pushes") { try server.counts() == (3, 3) }
        #expect(Posix.wallClockMillis() < expiry, "the test machine was too slow to see the items before they expired")
        let brief = try Self.item(server, title: "brief")
        let banner = try Self.item(server, title: "banner")
        let stream = try StreamClient(server: server)
        defer { stream.close() }
        try waitUntil(timeout: 10, "the stream's first counts") { stream.text.contains("event: counts") }

        // No request in between: the stream alone must hear of it, at the moment.
        try waitUntil(timeout: 30, "brief expired") { stream.text.contains(#"{"item":"\#(brief)","type":"nc.expired"}"#) }
        let heard = Posix.wallClockMillis()
        #expect(heard >= expiry && heard - expiry < 2000, "heard \(heard - expiry) ms after the expiry")
        try waitUntil(timeout: 30, "banner expired") { stream.text.contains(#"{"item":"\#(banner)","type":"nc.expired"}"#) }
        #expect(Posix.wallClockMillis() - (expiry + 1000) < 2000)
        #expect(stream.text.contains(#"event: counts\#ndata: {"feeds":{},"unread":1,"unseen":1}"#) || stream.text.contains(#""unread":1,"unseen":1"#))
        #expect(try Self.titles(server) == ["lasting"])
        #expect(try server.counts() == (1, 1))

        let before = try server.daemon.ctl(["nc", "list", "--user", "alice", "--json"]).1
        #expect(try server.daemon.ctl(["nc", "reindex"]).0 == 0)
        #expect(try server.daemon.ctl(["nc", "list", "--user", "alice", "--json"]).1 == before)
        #expect(try server.daemon.ctl(["nc", "count", "--user", "alice", "--json"]).1 == #"{"unread":1,"unseen":1}"# + "\n")
    }
}
