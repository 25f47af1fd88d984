import Foundation
import Testing
import TestSupport

/// `pushspoolctl journal verify` run as an operator would, on paths where there is no journal
/// (issue 8, defect 8): it must say so, not report corruption.
@Suite struct JournalVerifyCLITests {
    let ctl = ProcessRunner.executable("pushspoolctl")

    @Test func verifyOnAMissingJournalSaysThereIsNone() throws {
        try #require(FileManager.default.isExecutableFile(atPath: ctl), "build pushspoolctl first: \(ctl)")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("verify-missing-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        // An empty configuration file, so nothing on this machine decides the state directory.
        _ = FileManager.default.createFile(atPath: root + "/empty.conf", contents: Data())

        let run = try ProcessRunner.run(ctl, ["--config", root + "/empty.conf", "--state-dir", root + "/missing", "journal", "verify"])
        #expect(run.status == 1, "stdout: \(run.stdout) stderr: \(run.stderr)")
        #expect(run.stderr.contains("no journal at \(root)/missing/journal"), "stderr: \(run.stderr)")
        #expect(!run.stdout.contains("CORRUPTION") && !run.stderr.contains("CORRUPTION"), "stdout: \(run.stdout)")
    }
}
