import Foundation
import Testing
@testable import PushspoolCtl
@testable import PushspoolDaemon
import PushConfig

/// Issue 14, part 3: `pushspoolctl --instance NAME` finds pushspoold@NAME's paths; and the
/// retention configuration maps onto the journal's policy.
@Suite struct RetentionCtlTests {
    @Test func instanceNamesTheTemplateUnitsPaths() throws {
        guard case .run(_, let globals) = try PushspoolCtl.parse(["--instance", "eu-1", "journal", "stats"]) else {
            Issue.record("not a run command")
            return
        }
        #expect(globals.config == "/etc/pushspool/eu-1.conf")
        #expect(globals.spool == "/var/spool/pushspool/eu-1")
        #expect(globals.stateDir == "/var/lib/pushspool/eu-1")
        // The unit file passes exactly these paths.
        let unit = try String(contentsOfFile: #filePath.components(separatedBy: "/Tests/")[0] + "/systemd/pushspoold@.service", encoding: .utf8)
        #expect(unit.contains("ExecStart=/usr/sbin/pushspoold --config /etc/pushspool/%i.conf --spool /var/spool/pushspool/%i --state-dir /var/lib/pushspool/%i"))
    }

    @Test(arguments: ["", "../etc", ".hidden", "a/b", "with space"])
    func badInstanceNamesAreUsageErrors(name: String) {
        #expect(throws: (any Error).self) { try PushspoolCtl.parse(["--instance", name, "journal", "stats"]) }
    }

    @Test func instanceWithAnExplicitPathIsAmbiguous() {
        #expect(throws: (any Error).self) { try PushspoolCtl.parse(["--instance", "a", "--config", "/x.conf", "journal", "stats"]) }
    }

    @Test func catArchiveParses() throws {
        guard case .run(let command, _) = try PushspoolCtl.parse(["journal", "cat", "--archive"]),
              let journal = command as? JournalCommand else {
            Issue.record("not a journal command")
            return
        }
        #expect(journal.action == .cat(fromSeq: 1, archive: true))
    }

    @Test func policyFollowsTheConfiguration() {
        var configuration = Configuration()
        #expect(!RetentionPass.policy(for: configuration).isActive)
        configuration.journal.retain = .seconds(3600)
        configuration.journal.archive = .zstd
        let policy = RetentionPass.policy(for: configuration)
        #expect(policy.maxAge == .seconds(3600) && policy.maxBytes == nil && policy.archive)
        // Default dedup window: longer than retention.
        #expect(policy.dedupWindow == .seconds(3600 + 86_400))
        configuration.journal.dedupWindow = .seconds(60)
        #expect(RetentionPass.policy(for: configuration).dedupWindow == .seconds(60))
    }
}
