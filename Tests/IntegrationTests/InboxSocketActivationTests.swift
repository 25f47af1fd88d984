@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport

/// Without `--listen`, pushspool-inbox serves only the socket systemd passes (`sd_listen_fds`);
/// without one it refuses to start (exit 64) instead of listening somewhere by itself.
@Suite struct InboxSocketActivationTests {
    @Test func withoutASocketItRefusesToStart() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("inbox-nosock-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try "0123456789abcdef0123".write(toFile: dir + "/secret", atomically: true, encoding: .utf8)
        try "[Inbox]\nTokenSecretFile=\(dir)/secret\n".write(toFile: dir + "/conf", atomically: true, encoding: .utf8)
        let result = try ProcessRunner.run(DaemonHarness.binDirectory + "/pushspool-inbox",
                                           ["--spool", dir + "/spool", "--state-dir", dir + "/state", "--config", dir + "/conf"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("no socket"))
        // A secret shorter than 16 bytes is refused (EX_CONFIG).
        try "short".write(toFile: dir + "/secret", atomically: true, encoding: .utf8)
        let weak = try ProcessRunner.run(DaemonHarness.binDirectory + "/pushspool-inbox",
                                         ["--listen", "127.0.0.1:0", "--config", dir + "/conf"])
        #expect(weak.status == 78)
    }
}
