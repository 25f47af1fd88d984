import Foundation
import PushPayload
import PushSystem
import Testing
import TestSupport
import PushInbox

/// Issue 37, rule 2, the CLI path: `pushspoolctl nc action` refuses (exit 65, nothing
/// written) an action id the item's push did not offer, when the index holds the item.
@Suite struct UnofferedActionCLITests {
    @Test func ncActionRefusesAnActionThePushNeverOffered() async throws {
        let f = try InboxFixture()
        let ctl = ProcessRunner.executable("pushspoolctl")
        let base = ["--state-dir", f.stateDirectory, "--spool", f.temp.appending("spool")]
        try Posix.mkdirs(f.temp.appending("spool/tmp"))
        try Posix.mkdirs(f.temp.appending("spool/incoming"))
        let actions: JSONValue = .array([.object(["id": .string("share"), "title": .string("Share")]),
                                         .object(["id": .string("cancel"), "title": .string("Cancel")])])
        let item = try await f.notification(vendor: "infobip", category: "category_share_cancel", extra: ["actions": actions])
        _ = try InboxIndex.rebuild(path: f.indexPath, journalDirectory: f.journalDirectory)
        func incoming() throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: f.temp.appending("spool/incoming")) }

        let refused = try ProcessRunner.run(ctl, base + ["nc", "action", "--user", "alice", "\(item)", "mm_accept"])
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(refused.stderr.contains("offers no action 'mm_accept'") && refused.stderr.contains("share, cancel"), "\(refused.stderr)")
        #expect(try incoming().isEmpty)

        let offered = try ProcessRunner.run(ctl, base + ["nc", "action", "--user", "alice", "\(item)", "share"])
        #expect(offered.status == 0, "\(offered.stderr)")
        let revert = try ProcessRunner.run(ctl, base + ["nc", "action", "--user", "alice", "\(item)", "mm_accept", "--revert"])
        #expect(revert.status == 0, "\(revert.stderr)")
        #expect(try incoming().count == 2)
    }
}
