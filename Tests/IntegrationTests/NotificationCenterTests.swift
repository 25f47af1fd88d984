@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem
import TestSupport

/// The Notification Center through the real daemon: pushes and events dropped into the spool,
/// the daemon's inbox follower indexing them, `pushspoolctl nc` reading the index, and the
/// outbox delivering the events to a receiver on 127.0.0.1.
@Suite struct NotificationCenterTests {
    static func jsonLines(_ text: String) throws -> [JSONValue] {
        try text.split(separator: "\n").map { try JSONParser().parse(String($0)) }
    }

    /// A harness whose daemon delivers Mindbox events to `server`, with a key file (mode 0600)
    /// that lives as long as the returned cleanup is not called.
    static func outboxHarness(_ name: String, server: LoopbackHTTPServer, key: String, extra: String = "") throws -> (DaemonHarness, () -> Void) {
        let keyFile = NSTemporaryDirectory() + "pushspool-mindbox-key-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try (key + "\n").write(toFile: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile, 0o600)
        let harness = try DaemonHarness(name: name, config: """
            [Media]
            Enabled=no
            [Outbox]
            Enabled=yes
            AllowHTTP=yes
            AllowNetworks=127.0.0.1/32
            MindboxURL=\(server.url(""))
            MindboxEndpointId=app-ios
            MindboxSecretKeyFile=\(keyFile)
            \(extra)
            """)
        return (harness, { unlink(keyFile) })
    }

    @Test func aUsersInboxFromDropToReadAndTheEventDelivered() throws {
        let server = try LoopbackHTTPServer()
        server.route("/v3/operations/async", .ok([]))
        let (harness, removeKey) = try Self.outboxHarness("nc", server: server, key: "secret-key-1")
        defer { removeKey() }
        try harness.start()
        for index in 0..<3 {
            try harness.drop(Array(#"""
                {"pushspool":1,"user":"alice","device":"dev-a","payload":{"aps":{"alert":{"title":"T\#(index)","body":"B\#(index)"},"mutable-content":1},"clickUrl":"https://shop.example/p","uniqueKey":"nc-\#(index)","payload":"{\"pushName\":\"sale\",\"pushDate\":\"2026-11-30T10:00:00Z\"}"}}
                """#.utf8), name: "alice-\(index).json")
        }
        try harness.drop(Array(#"{"pushspool":1,"user":"alicia","payload":{"aps":{"alert":{"title":"X","body":"Y"},"mutable-content":1},"clickUrl":"https://shop.example/p","uniqueKey":"nc-other"}}"#.utf8),
                         name: "alicia.json")

        // The follower indexes what the journal holds; the ctl reads the index.
        var items: [JSONValue] = []
        try waitUntil(timeout: 30, "alice's three items in the index") {
            let (status, out, _) = try harness.ctl(["nc", "list", "--user", "alice", "--json"])
            items = status == 0 ? ((try? Self.jsonLines(out)) ?? []).filter { $0["seq"] != nil || $0["id"] != nil } : []
            return items.count >= 3
        }
        let (_, countOut, _) = try harness.ctl(["nc", "count", "--user", "alice", "--json"])
        let counts = try #require(try Self.jsonLines(countOut).first)
        #expect(counts["unread"]?.numberLexeme == "3", "\(countOut)")
        let (_, otherOut, _) = try harness.ctl(["nc", "list", "--user", "alicia", "--json"])
        // Quoted: a bare T0 is in every timestamp written between 00:00 and 09:59 UTC.
        #expect(!otherOut.contains("nc-0") && !otherOut.contains(#""T0""#), "alicia never sees alice's items")

        // Open the newest item: read in the index, NCPushOpen delivered to the receiver.
        let (_, listOut, _) = try harness.ctl(["nc", "list", "--user", "alice"])
        var newest: UInt64 = 0
        try waitUntil(timeout: 30, "the newest push in the journal") {
            newest = try harness.records().first { $0.key.contains("nc-2") }?.seq ?? 0
            return newest > 0
        }
        #expect(listOut.contains("title: T2\n"))
        let (openStatus, openOut, openErr) = try harness.ctl(["nc", "open", "--user", "alice", "--device", "dev-a", String(newest)])
        #expect(openStatus == 0, "\(openOut) \(openErr)")
        let eventId = openOut.trimmingSpaces
        try waitUntil(timeout: 30, "the read to reach the index") {
            let (_, out, _) = try harness.ctl(["nc", "count", "--user", "alice", "--json"])
            return (try? Self.jsonLines(out).first?["unread"]?.numberLexeme) == "2"
        }
        try waitUntil(timeout: 30, "NCPushOpen at the receiver") { server.hits("/v3/operations/async") >= 1 }
        let request = try #require(server.requests("/v3/operations/async").first)
        #expect(request.method == "POST")
        #expect(request.target.contains("operation=mobileapp.NCPushOpen"))
        #expect(request.target.contains("endpointId=app-ios"))
        #expect(request.target.contains("transactionId=\(eventId)"))
        #expect(request.header("Authorization") == "SecretKey secret-key-1")
        let body = try JSONParser().parse(request.body)
        #expect(body["customerAction"]?["customFields"]?["mobPushTranslateName"]?.stringValue == "sale")
        #expect(body["customerAction"]?["customFields"]?["mobPushSendDateTime"]?.stringValue == "2026-11-30T10:00:00.000Z")
        #expect(harness.stop() == 0)
        #expect(!harness.daemonStderr.contains("secret-key-1"), "the key never reaches the logs")

        // [Inbox] RetentionSec: older items are no longer listed or counted (the journal keeps them).
        let text = try String(contentsOfFile: harness.config, encoding: .utf8)
        try (text + "\n[Inbox]\nRetentionSec=1s\n").write(toFile: harness.config, atomically: true, encoding: .utf8)
        // Returns as soon as the items have aged past the 1 s retention; they never would without it.
        try waitUntil(timeout: 30, "the items to age out of the count") {
            let (_, retainedOut, _) = try harness.ctl(["nc", "count", "--user", "alice", "--json"])
            return (try? Self.jsonLines(retainedOut).first?["unread"]?.numberLexeme) == "0"
        }
        #expect(try harness.records().count >= 5)
    }

    /// An event still pending in the outbox when pushspoold is killed (SIGKILL) is delivered
    /// after the restart, with the same transaction id.
    @Test func aPendingDeliverySurvivesKillNine() throws {
        let server = try LoopbackHTTPServer()
        server.route("/v3/operations/async", .status(503))
        let (harness, removeKey) = try Self.outboxHarness("nckill", server: server, key: "secret-key-2", extra: "RetryBaseSec=100ms")
        defer { removeKey() }
        try harness.start()
        let (status, out, err) = try harness.ctl(["nc", "opened", "--user", "bob", "--device", "dev-b"])
        #expect(status == 0, "\(out) \(err)")
        let eventId = out.trimmingSpaces
        try waitUntil(timeout: 30, "a failed attempt") { server.hits("/v3/operations/async") >= 1 }
        harness.stop(signal: SIGKILL)
        let failedAttempts = server.hits("/v3/operations/async")

        server.route("/v3/operations/async", .ok([]))
        try harness.start()
        try waitUntil(timeout: 30, "the delivery after the restart") { server.hits("/v3/operations/async") > failedAttempts }
        // The outbox empty again: past the point where a second send would already have gone out.
        try waitUntil(timeout: 30, "the outbox empty") { try harness.ctl(["outbox", "list"]).2.contains("0 pending, 0 parked") }
        let requests = server.requests("/v3/operations/async")
        #expect(requests.count == failedAttempts + 1, "delivered once after the restart: \(requests.count) requests")
        #expect(requests.allSatisfy { $0.target.contains("operation=mobileapp.NCOpen") && $0.target.contains("transactionId=\(eventId)") })
        #expect(harness.stop() == 0)
    }

    /// SIGTERM with vendors that take every POST and never answer: the daemon exited only after
    /// each due POST had timed out in turn (7 users, `RequestTimeoutSec=3s`: 21.3 s), past the
    /// unit's TimeoutStopSec= with the default 20 s. A stop now aborts the POST in flight.
    @Test func sigtermWithAHangingVendorExitsWithinOneRequestTimeout() throws {
        let server = try LoopbackHTTPServer()
        server.route("/v3/operations/async", .silent)
        let (harness, removeKey) = try Self.outboxHarness("nchang", server: server, key: "secret-key-3",
                                                          extra: "ConnectTimeoutSec=1s\nRequestTimeoutSec=3s")
        defer { removeKey() }
        try harness.start()
        for user in 1...7 {
            let (status, out, err) = try harness.ctl(["nc", "opened", "--user", "user\(user)", "--device", "dev-\(user)"])
            #expect(status == 0, "\(out) \(err)")
        }
        try waitUntil(timeout: 30, "a POST in flight") { server.hits("/v3/operations/async") >= 1 }
        let started = Posix.monotonicNanos()
        #expect(harness.stop() == 0)
        let seconds = Double(Posix.monotonicNanos() - started) / 1e9
        // One request timeout plus a second, as the issue asks (curl checks its abort flag
        // about once a second while nothing moves).
        #expect(seconds < 4.0, "SIGTERM took \(seconds) s")
    }

    /// An idle daemon with every follower on (index, outbox, export is left out: it needs
    /// NATS, see the idle bench) sleeps: no follower polls, the ingest loop waits for what is
    /// due. Before the follower runtime: about 250 wake-ups a second.
    @Test func anIdleDaemonBarelyWakes() throws {
        let server = try LoopbackHTTPServer()
        server.route("/v3/operations/async", .ok([]))
        let (harness, removeKey) = try Self.outboxHarness("ncidle", server: server, key: "secret-key-4")
        defer { removeKey() }
        let notify = try NotifySocket()
        try harness.start(extraEnvironment: ["NOTIFY_SOCKET": notify.path])
        try harness.drop(Array(#"{"pushspool":1,"user":"idle","payload":{"aps":{"alert":{"title":"T","body":"B"}},"uniqueKey":"idle-1"}}"#.utf8),
                         name: "idle.json")
        try waitUntil(timeout: 30, "the item in the index") {
            let (status, out, _) = try harness.ctl(["nc", "list", "--user", "idle", "--json"])
            return status == 0 && ((try? Self.jsonLines(out)) ?? []).contains { $0["seq"] != nil || $0["id"] != nil }
        }
        // STATUS= says the drop is ingested and every follower caught up: nothing the drop set
        // in motion is left for the window to count. (The notifier sends a line only when it
        // changed; the loop's one pass that finds it unchanged and stops waking for it may
        // still fall in the window: one wake-up of the 8 allowed.)
        let settled = eventually(within: 30) {
            let last = notify.messages.compactMap { message in
                message.split(separator: "\n").first { $0.hasPrefix("STATUS=") }.map(String.init)
            }.last ?? ""
            return last.contains("ingested 1,") && last.contains("inbox lag 0;") && last.contains("outbox 0 pending, 0 parked")
        }
        try #require(settled, "the status line did not settle: \(notify.messages.suffix(3))")
        let pid = try #require(harness.pid)
        func switches() -> Int {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
            return tasks.reduce(0) { total, task in
                let text = (try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8)) ?? ""
                return total + text.split(separator: "\n").filter { $0.hasPrefix("voluntary_ctxt_switches") || $0.hasPrefix("nonvoluntary_ctxt_switches") }
                    .compactMap { Int($0.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") }.reduce(0, +)
            }
        }
        let before = switches()
        usleep(4_000_000) // why: the measurement window: wake-ups are counted over 4 s of idling
        let woke = switches() - before
        // The issue's bound is 2 a second; 8 in 4 s leaves room for a stray timer.
        #expect(woke <= 8, "pushspoold woke \(woke) times in 4 s while idle")
        print("pushspoold idle wake-ups in 4 s: \(woke)")
        #expect(harness.stop() == 0)
    }
}
