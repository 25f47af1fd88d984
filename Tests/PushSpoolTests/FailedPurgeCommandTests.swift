import Foundation
import Testing
import PushSystem
@testable import PushSpool
import TestSupport

/// `pushspoolctl failed purge ALL` with a non-empty quarantined directory among the entries
/// (issue 8, defect 8): it once stopped there with exit 1; now it warns and purges the rest.
@Suite struct FailedPurgeCommandTests {
    @Test func purgeAllWarnsAboutADirectoryAndPurgesTheRest() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        try Posix.mkdirs(t.layout.processing + "/d.json")
        try t.write(t.layout.processing + "/d.json", "inner", "x")
        for name in ["a.json", "d.json", "z.json"] {
            if name != "d.json" { try t.write(t.layout.processing, name, "{bad") }
            try spool.quarantine(processing: name, reason: QuarantineReason(code: "c", message: "m", stage: .parse, daemonVersion: "v", file: name))
        }
        let config = t.root + "/pushspool.conf"
        _ = FileManager.default.createFile(atPath: config, contents: Data())
        let result = try ProcessRunner.run(ProcessRunner.executable("pushspoolctl"),
                                           ["--spool", t.layout.root, "--state-dir", t.root + "/state", "--config", config,
                                            "failed", "purge", "ALL"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("warning: skipped failed/d.json"), "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").sorted() == ["purged a.json", "purged z.json"], "\(result.stdout)")
        #expect(try t.names(t.layout.failed) == ["d.json", "d.json.reason.json"])
    }
}
