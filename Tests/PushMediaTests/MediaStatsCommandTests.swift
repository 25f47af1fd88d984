import Foundation
import Testing
import PushSystem
import TestSupport

/// `pushspoolctl media stats` before the daemon has published status.json (issue 8, defect 8):
/// it once said the daemon "has not run", which is false during a running daemon's first
/// status interval. It now reads the store and says the counters are not published yet.
@Suite struct MediaStatsCommandTests {
    @Test func statsBeforeTheFirstStatusFileReadTheStoreAndSayNothingFalse() throws {
        let dir = TempDir()
        let state = dir.path + "/state"
        try Posix.mkdirs(state + "/media/ab")
        let fd = try Posix.open(state + "/media/ab/cdef.png", O_WRONLY | O_CREAT, mode: 0o640)
        try Posix.writeAll(fd, Array("12345".utf8))
        Posix.close(fd)
        let config = dir.path + "/pushspool.conf"
        _ = FileManager.default.createFile(atPath: config, contents: Data())
        let globals = ["--spool", dir.path + "/spool", "--state-dir", state, "--config", config]
        let ctl = ProcessRunner.executable("pushspoolctl")

        let text = try ProcessRunner.run(ctl, globals + ["media", "stats"])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("  files: 1\n"), "\(text.stdout)")
        #expect(text.stdout.contains("  bytes: 5\n"), "\(text.stdout)")
        #expect(text.stdout.contains("no counters published yet"), "\(text.stdout)")
        #expect(!text.stdout.contains("has not run"), "\(text.stdout)")

        let json = try ProcessRunner.run(ctl, globals + ["media", "stats", "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect((object["store"] as? [String: Any])?["files"] as? Int == 1)
        #expect(object["daemon"] == nil)
    }

    /// pushspoolctl prints media stats without linking libcurl or libvips.
    @Test func ctlDoesNotLinkCurlOrVips() throws {
        let result = try ProcessRunner.run("/usr/bin/ldd", [ProcessRunner.executable("pushspoolctl")])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(!result.stdout.contains("libcurl"), "\(result.stdout)")
        #expect(!result.stdout.contains("libvips"), "\(result.stdout)")
    }
}
