@preconcurrency import Glibc
import Foundation
import Testing
import PushJournal
import PushSystem
import TestSupport

/// `pushspoolctl user export` against what the real daemon stored for two users: pushes (one
/// with an image), Notification Center events still pending in the outbox, quarantined
/// payloads, part of the journal archived by retention. One user's export holds all of
/// theirs and nothing of the other's.
@Suite struct UserExportTests {
    /// `feeds`: a feed every push is in (the index then keeps per-owner feed rows);
    /// `textfile`: where pushspoold writes its metrics.
    static func config(server: LoopbackHTTPServer, keyFile: String, retention: String = "", feeds: Bool = false,
                       textfile: String? = nil) -> String {
        """
        [Spool]
        StableAgeSec=0
        [Metrics]
        IntervalSec=3600
        \(textfile.map { "TextfilePath=" + $0 } ?? "")
        [Media]
        Enabled=yes
        AllowHTTP=yes
        AllowNetworks=127.0.0.0/8
        ConnectTimeoutSec=1
        TransferTimeoutSec=3
        PayloadDeadlineSec=5
        Attempts=1
        [Outbox]
        Enabled=yes
        AllowHTTP=yes
        AllowNetworks=127.0.0.1/32
        MindboxURL=\(server.url(""))
        MindboxEndpointId=app-ios
        MindboxSecretKeyFile=\(keyFile)
        RetryBaseSec=1h
        [Journal]
        MaxBatchDelaySec=0
        SegmentSize=64K
        \(retention)
        \(feeds ? "[Feed all]\nVendors=mindbox" : "")
        """
    }

    /// A Mindbox iOS push for `user` on `device`; `tag` is a string found nowhere else.
    static func push(user: String, device: String, tag: String, imageURL: String? = nil, button: String? = nil) -> [UInt8] {
        var image = imageURL.map { #","imageUrl":"\#($0)""# } ?? ""
        if let button { image += #","buttons":[{"uniqueKey":"\#(button)","text":"\#(button)","url":"https://shop.example/\#(button)"}]"# }
        return Array("""
            {"pushspool":1,"user":"\(user)","device":"\(device)","payload":{"aps":{"alert":{"title":"Title \(tag)","body":"Body \(tag)"},\
            "mutable-content":1},"clickUrl":"https://shop.example/\(tag)"\(image),"uniqueKey":"\(tag)"}}
            """.utf8)
    }

    /// `user export` as parsed lines; checks the document's frame (header first, summary last).
    static func export(_ harness: DaemonHarness, _ arguments: [String]) throws -> (lines: [JSONValue], text: String) {
        let (status, out, err) = try harness.ctl(["user", "export"] + arguments + ["--json"])
        #expect(status == 0, "user export \(arguments): \(err)")
        let lines = try out.split(separator: "\n").map { try JSONParser().parse(String($0)) }
        #expect(lines.first?["kind"]?.stringValue == "header", "\(out.prefix(300))")
        #expect(lines.last?["kind"]?.stringValue == "summary", "\(out.suffix(300))")
        #expect(lines.last?["complete"]?.boolValue == true)
        return (lines, out)
    }

    static func kind(_ lines: [JSONValue], _ kind: String) -> [JSONValue] {
        lines.filter { $0["kind"]?.stringValue == kind }
    }

    @Test func aUsersExportHoldsAllOfTheirsAndNoneOfTheOthers() throws {
        let alicePNG = ImageFixtures.png
        // A different 1×1 PNG: the media store is content-addressed, so the two users' images
        // must differ to tell them apart.
        let bobPNG: [UInt8] = Array(Data(base64Encoded:
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")!)
        try #require(alicePNG != bobPNG)
        let server = try LoopbackHTTPServer()
        server.route("/alice.png", .ok(alicePNG, contentType: "image/png"))
        server.route("/bob.png", .ok(bobPNG, contentType: "image/png"))
        // The vendor is down: the users' events stay pending in the outbox.
        server.route("/v3/operations/async", .status(503))
        let keyFile = NSTemporaryDirectory() + "pushspool-export-key-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try "export-key\n".write(toFile: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile, 0o600)
        defer { unlink(keyFile) }
        let harness = try DaemonHarness(name: "user-export", config: Self.config(server: server, keyFile: keyFile))
        try harness.start()

        for (user, device) in [("alice", "dev-a"), ("bob", "dev-b")] {
            for index in 0..<3 {
                try harness.drop(Self.push(user: user, device: device, tag: "\(user)-secret-\(index)"), name: "\(user)-\(index).json")
            }
            try harness.drop(Self.push(user: user, device: device, tag: "\(user)-image", imageURL: server.url("/\(user).png")),
                             name: "\(user)-image.json")
            // Refused (no vendor's payload) and quarantined; the envelope names the user.
            try harness.drop(Array(#"{"pushspool":1,"user":"\#(user)","payload":{"note":"\#(user)-quarantined"}}"#.utf8),
                             name: "\(user)-bad.json")
            let (status, _, err) = try harness.ctl(["nc", "opened", "--user", user, "--device", device])
            #expect(status == 0, "\(err)")
        }
        // Records of nobody in particular, enough for several 64 KiB segments.
        for index in 0..<500 { try harness.drop(generatedPayload(index: index, tag: "fill"), name: "fill-\(index).json") }
        try waitUntil(timeout: 60, "510 records journaled") { (try? harness.records().count) == 510 }
        try waitUntil(timeout: 30, "both quarantined payloads") { harness.files(in: "failed").filter { !$0.hasSuffix(".reason.json") }.count == 2 }
        try waitUntil(timeout: 30, "both events tried at the vendor") { server.hits("/v3/operations/async") >= 2 }
        try waitUntil(timeout: 30, "alice's items in the index") {
            let (status, out, _) = try harness.ctl(["nc", "count", "--user", "alice", "--json"])
            return status == 0 && out.contains(#""unread":4"#)
        }
        #expect(harness.stop() == 0)

        // Retention archives every sealed segment: the users' first records leave the live journal.
        try Self.config(server: server, keyFile: keyFile, retention: "RetainBytes=1\nArchive=zstd\n")
            .write(toFile: harness.config, atomically: true, encoding: .utf8)
        try harness.start()
        let journal = harness.state + "/journal"
        try waitUntil(timeout: 60, "retention to archive the sealed segments") { !JournalArchive.list(directory: journal).isEmpty }
        for user in ["alice", "bob"] {
            try harness.drop(Self.push(user: user, device: "dev-\(user.prefix(1))", tag: "\(user)-live"), name: "\(user)-live.json")
        }
        try waitUntil(timeout: 60, "512 records journaled") { (try? JournalReader.lastSeq(directory: journal)) == 512 }
        try waitUntil(timeout: 30, "the live pushes indexed") {
            let (status, out, _) = try harness.ctl(["nc", "count", "--user", "bob", "--json"])
            return status == 0 && out.contains(#""unread":5"#)
        }
        #expect(harness.stop() == 0)
        let archived = try JournalArchive.list(directory: journal).flatMap {
            try JournalArchive.records(directory: journal, archiveName: $0.name)
        }
        try #require(archived.contains { $0.key.contains("alice-secret-0") }, "alice's first push is archived")

        for (user, other) in [("alice", "bob"), ("bob", "alice")] {
            let (lines, text) = try Self.export(harness, [user, "--include-media"])
            #expect(!text.contains(other), "\(user)'s export names \(other)")
            #expect(lines.first?["subject"]?["user"]?.stringValue == user)

            // The journal: every push, from the archive and the live segments, and the event.
            let records = Self.kind(lines, "journal")
            let keys = records.compactMap { $0["key"]?.stringValue }
            for tag in (0..<3).map({ "\(user)-secret-\($0)" }) + ["\(user)-image", "\(user)-live"] {
                #expect(keys.contains { $0.hasSuffix(":" + tag) }, "\(user): no record \(tag) in \(keys)")
            }
            #expect(records.contains { $0["record"]?["kind"]?.stringValue == "event" && $0["record"]?["type"]?.stringValue == "nc.opened" },
                    "\(user): no nc.opened event")
            #expect(records.contains { $0["source"]?.stringValue?.hasPrefix("archive/") == true })
            #expect(records.contains { $0["source"]?.stringValue == "live" })
            #expect(records.allSatisfy { $0["record"]?["user"]?.stringValue == user })

            // The inbox index: the five pushes, with their states.
            let items = Self.kind(lines, "inbox-item")
            #expect(items.count == 5, "\(user): \(items.count) items")
            #expect(items.allSatisfy { $0["item"]?["user"]?.stringValue == user && $0["item"]?["state"]?["read"]?.boolValue == false })

            // The outbox: the event's delivery, still pending.
            let outbox = Self.kind(lines, "outbox")
            #expect(outbox.count == 1, "\(user): \(outbox)")
            #expect(outbox.first?["state"]?.stringValue == "pending")
            #expect(outbox.first?["delivery"]?["orderKey"]?.stringValue == "u:\(user)")

            // The quarantined payload, as it arrived, with its reason.
            let quarantined = Self.kind(lines, "quarantine")
            #expect(quarantined.count == 1, "\(user): \(quarantined)")
            #expect(quarantined.first?["payload"]?.stringValue?.contains("\(user)-quarantined") == true)
            #expect(quarantined.first?["reason"]?["code"]?.stringValue != nil, "\(quarantined)")

            // The image: its own bytes, never the other user's.
            let mine = user == "alice" ? alicePNG : bobPNG
            let theirs = user == "alice" ? bobPNG : alicePNG
            let media = Self.kind(lines, "media").filter { $0["role"]?.stringValue == "image" }
            #expect(media.count == 1, "\(user): \(media)")
            #expect(media.first?["sha256"]?.stringValue == PushSystem.SHA256.hex(of: mine))
            #expect(media.first?["size"]?.intValue == mine.count)
            #expect(media.first?["base64"]?.stringValue == Data(mine).base64EncodedString())
            #expect(!text.contains(PushSystem.SHA256.hex(of: theirs)) && !text.contains(Data(theirs).base64EncodedString()))

            let counts = lines.last?["counts"]
            #expect(counts?["journalRecords"]?.intValue == records.count)
            #expect(counts?["inboxItems"]?.intValue == 5)
            #expect((counts?["archivedRecords"]?.intValue ?? 0) > 0)
        }

        // A device: the pushes and the event sent with it.
        let (deviceLines, deviceText) = try Self.export(harness, ["--device", "dev-a"])
        #expect(!deviceText.contains("bob"))
        #expect(Self.kind(deviceLines, "journal").count == 6, "\(Self.kind(deviceLines, "journal").count)")

        // Nobody: an empty but complete document.
        let (empty, _) = try Self.export(harness, ["carol"])
        #expect(empty.count == 2)
        #expect(empty.last?["counts"]?["journalRecords"]?.intValue == 0)
    }

    @Test func usageAndMissingJournalErrors() throws {
        let harness = try DaemonHarness(name: "user-export-usage", config: "[Media]\nEnabled=no\n")
        let (noUser, _, noUserErr) = try harness.ctl(["user", "export"])
        #expect(noUser == 64, "\(noUserErr)")
        let (both, _, _) = try harness.ctl(["user", "export", "alice", "--device", "d"])
        #expect(both == 64)
        // No daemon has run: no journal, a runtime failure that says where it looked.
        let (status, out, err) = try harness.ctl(["user", "export", "alice", "--json"])
        #expect(status == 1)
        #expect(err.contains("no journal at"), "\(err)")
        #expect(!out.contains(#""kind":"summary""#), "an incomplete document has no summary")
    }
}
