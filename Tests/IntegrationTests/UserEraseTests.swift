@preconcurrency import Glibc
import Foundation
import Testing
import PushJournal
import PushSystem
import TestSupport

/// Issue 26's test, without NATS: the real daemon stores pushes (one with an image), opened
/// events still pending in the outbox, a text typed into an action, quarantined payloads, and
/// archives part of the journal, for alice and bob; `pushspoolctl user erase alice` (daemon
/// stopped); then a raw-byte search of every file under the state directory and the spool finds
/// nothing of alice — not her id, not her image's bytes — and all of bob's.
@Suite struct UserEraseTests {

    static func holding(_ needle: [UInt8], _ files: [(path: String, bytes: [UInt8])]) -> [String] {
        let pattern = Data(needle)
        return files.filter { Data($0.bytes).range(of: pattern) != nil }.map(\.path)
    }

    /// Items `nc list` shows for `user`.
    static func listed(_ harness: DaemonHarness, _ user: String) throws -> Int {
        let (status, out, _) = try harness.ctl(["nc", "list", "--user", user, "--json"])
        guard status == 0 else { return -1 }
        return out.split(separator: "\n").filter { $0.contains(#""item":"#) }.count
    }

    @Test func anErasedUserLeavesNoByteInTheStateDirectoryOrTheSpool() throws {
        let alicePNG = ImageFixtures.png
        let bobPNG: [UInt8] = Array(Data(base64Encoded:
            "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==")!)
        try #require(alicePNG != bobPNG)
        let server = try LoopbackHTTPServer()
        server.route("/alice.png", .ok(alicePNG, contentType: "image/png"))
        server.route("/bob.png", .ok(bobPNG, contentType: "image/png"))
        server.route("/v3/operations/async", .status(503))
        let keyFile = NSTemporaryDirectory() + "pushspool-erase-key-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try "erase-key\n".write(toFile: keyFile, atomically: true, encoding: .utf8)
        chmod(keyFile, 0o600)
        defer { unlink(keyFile) }
        let harness = try DaemonHarness(name: "user-erase", config: UserExportTests.config(server: server, keyFile: keyFile, feeds: true))
        try harness.start()

        for (user, device) in [("alice", "dev-a"), ("bob", "dev-b")] {
            for index in 0..<3 {
                try harness.drop(UserExportTests.push(user: user, device: device, tag: "\(user)-secret-\(index)", button: "reply"), name: "\(user)-\(index).json")
            }
            try harness.drop(UserExportTests.push(user: user, device: device, tag: "\(user)-image", imageURL: server.url("/\(user).png"),
                                                 button: "reply"),
                             name: "\(user)-image.json")
            try harness.drop(Array(#"{"pushspool":1,"user":"\#(user)","payload":{"note":"\#(user)-quarantined"}}"#.utf8),
                             name: "\(user)-bad.json")
            let (status, _, err) = try harness.ctl(["nc", "opened", "--user", user, "--device", device])
            #expect(status == 0, "\(err)")
            // A muted category and a feed (the config's): index rows keyed by the owner.
            let (muted, _, muteErr) = try harness.ctl(["nc", "mute", "--user", user, "promo"])
            #expect(muted == 0, "\(muteErr)")
        }
        for index in 0..<500 { try harness.drop(generatedPayload(index: index, tag: "fill"), name: "fill-\(index).json") }
        try waitUntil(timeout: 60, "512 records journaled") { (try? harness.records().count) == 512 }
        try waitUntil(timeout: 30, "both quarantined payloads") { harness.files(in: "failed").filter { !$0.hasSuffix(".reason.json") }.count == 2 }
        try waitUntil(timeout: 30, "both events tried at the vendor") { server.hits("/v3/operations/async") >= 2 }
        try waitUntil(timeout: 30, "alice's items in the index") {
            let (status, out, _) = try harness.ctl(["nc", "count", "--user", "alice", "--json"])
            return status == 0 && out.contains(#""unread":4"#)
        }
        try waitUntil(timeout: 30, "alice's muted category in the index") {
            let (status, out, _) = try harness.ctl(["nc", "preferences", "--user", "alice", "--json"])
            return status == 0 && out.contains("promo")
        }
        // Text typed into an action of each user's first item.
        for user in ["alice", "bob"] {
            let (_, list, _) = try harness.ctl(["nc", "list", "--user", user, "--json"])
            let items = list.split(separator: "\n").compactMap { try? JSONParser().parse(String($0)) }.compactMap { $0["item"]?.stringValue }
            let item = try #require(items.first, "\(list.prefix(300))")
            let (status, _, err) = try harness.ctl(["nc", "action", item, "reply", "--text", "\(user)-typed-words", "--user", user])
            #expect(status == 0, "\(err)")
        }
        try waitUntil(timeout: 30, "514 records journaled") { (try? harness.records().count) == 514 }
        #expect(harness.stop() == 0)

        try UserExportTests.config(server: server, keyFile: keyFile, retention: "RetainBytes=1\nArchive=zstd\nDedupWindowSec=1d\n",
                                   feeds: true)
            .write(toFile: harness.config, atomically: true, encoding: .utf8)
        try harness.start()
        let journal = harness.state + "/journal"
        try waitUntil(timeout: 60, "retention to archive the sealed segments") { !JournalArchive.list(directory: journal).isEmpty }
        for user in ["alice", "bob"] {
            try harness.drop(UserExportTests.push(user: user, device: "dev-\(user.prefix(1))", tag: "\(user)-live"), name: "\(user)-live.json")
        }
        try waitUntil(timeout: 60, "516 records journaled") { (try? JournalReader.lastSeq(directory: journal)) == 516 }
        try waitUntil(timeout: 30, "the live pushes indexed") { try Self.listed(harness, "bob") == 5 }

        // The offline path: with pushspoold stopped, the command erases directly (an erasure
        // while it runs goes through the daemon: LiveEraseTests).
        #expect(harness.stop() == 0)

        let before = try RawFiles.everyRegularFile(under: harness.state) + RawFiles.everyRegularFile(under: harness.spool)
        for needle in [Array("alice".utf8), alicePNG, bobPNG, Array("bob-typed-words".utf8)] {
            try #require(!Self.holding(needle, before).isEmpty)
        }
        let (status, out, err) = try harness.ctl(["user", "erase", "alice", "--json"])
        #expect(status == 0, "\(err)")
        let summary = try JSONParser().parse(out)
        #expect(summary["complete"]?.boolValue == true)
        // Five pushes, the opened event, the mute and the action with her text.
        #expect(summary["counts"]?["journalRecords"]?.intValue == 8, "\(out)")
        #expect(summary["counts"]?["inboxItems"]?.intValue == 5, "\(out)")
        #expect(summary["counts"]?["quarantined"]?.intValue == 1, "\(out)")
        #expect((summary["counts"]?["mediaFiles"]?.intValue ?? 0) >= 1, "\(out)")

        let after = try RawFiles.everyRegularFile(under: harness.state) + RawFiles.everyRegularFile(under: harness.spool)
        #expect(Self.holding(Array("alice".utf8), after).isEmpty, "alice in \(Self.holding(Array("alice".utf8), after))")
        #expect(Self.holding(alicePNG, after).isEmpty, "alice's image in \(Self.holding(alicePNG, after))")
        for needle in ["bob-secret-0", "bob-secret-1", "bob-secret-2", "bob-image", "bob-live", "bob-quarantined", "bob-typed-words",
                       "u:bob"] {
            #expect(!Self.holding(Array(needle.utf8), after).isEmpty, "\(needle) is gone")
        }
        #expect(!Self.holding(bobPNG, after).isEmpty, "bob's image is gone")
        let (verify, verifyOut, _) = try harness.ctl(["journal", "verify"])
        #expect(verify == 0, "\(verifyOut)")
        let (_, cat, _) = try harness.ctl(["journal", "cat", "--archive"])
        #expect(cat.components(separatedBy: "\terased (").count - 1 == 8, "\(cat.prefix(2000))")

        // Back up: a redelivery of an erased push is still a duplicate; bob's inbox is whole.
        try harness.start()
        try harness.drop(UserExportTests.push(user: "alice", device: "dev-a", tag: "alice-secret-1"), name: "alice-again.json")
        try harness.drop(UserExportTests.push(user: "bob", device: "dev-b", tag: "bob-after"), name: "bob-after.json")
        try waitUntil(timeout: 60, "the spool drained") { harness.files(in: "incoming").isEmpty && harness.files(in: "processing").isEmpty }
        let lastKeys = try harness.records().suffix(3).map(\.key)
        #expect((try? JournalReader.lastSeq(directory: journal)) == 517, "the erased push was journaled again? \(lastKeys)")
        try waitUntil(timeout: 30, "bob's new push indexed") { try Self.listed(harness, "bob") == 6 }
        #expect(try Self.listed(harness, "alice") == 0)
        #expect(harness.stop() == 0)
    }

    @Test func usageAndMissingJournalErrors() throws {
        let harness = try DaemonHarness(name: "user-erase-usage", config: "[Media]\nEnabled=no\n")
        for arguments in [["user", "erase"], ["user", "erase", "alice", "--include-media"], ["user", "erase", "alice", "--device", "d"],
                          ["user", "erase", ""]] {
            let (status, _, err) = try harness.ctl(arguments)
            #expect(status == 64, "\(arguments): \(err)")
        }
        let (status, _, err) = try harness.ctl(["user", "erase", "alice"])
        #expect(status == 1)
        #expect(err.contains("no journal at"), "\(err)")
    }
}
