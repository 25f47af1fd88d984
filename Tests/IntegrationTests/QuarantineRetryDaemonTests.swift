@preconcurrency import Glibc
import Foundation
import Testing

/// A quarantine that fails must not wedge the file until a restart (issue 8, defect 5): the
/// refused file stays in `processing/`, the daemon keeps ingesting, and once `failed/` takes
/// writes again the file is quarantined without a restart.
@Suite struct QuarantineRetryDaemonTests {
    /// `chattr` from e2fsprogs: root ignores modes, not the immutable flag.
    static func chattr(_ flag: String, _ path: String) -> Bool {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/chattr")
        process.arguments = [flag, path]
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    static func immutableWorks() -> Bool {
        let directory = NSTemporaryDirectory() + "pushspool-chattr-probe-\(getpid())"
        mkdir(directory, 0o755)
        defer { _ = chattr("-i", directory); rmdir(directory) }
        return chattr("+i", directory)
    }

    @Test(.enabled(if: immutableWorks())) func aFailedQuarantineIsRetriedWithoutARestart() throws {
        let harness = try DaemonHarness(name: "qretry")
        try harness.start()
        let failed = harness.spool + "/failed"
        #expect(Self.chattr("+i", failed))
        defer { _ = Self.chattr("-i", failed) }

        try harness.drop(Array("{not json".utf8), name: "bad.json")
        try waitUntil(timeout: 30, "the failed quarantine to be logged") {
            harness.daemonStderr.contains("cannot quarantine refused file")
        }
        // Read in place (issue 36): a quarantine that failed leaves the file in incoming/.
        #expect(harness.files(in: "incoming") == ["bad.json"])
        // Intake goes on meanwhile.
        try harness.drop(generatedPayload(index: 1, tag: "qr"), name: "good.json")
        try waitUntil(timeout: 30, "the good file to be ingested") { (try harness.records().count) == 1 }

        #expect(Self.chattr("-i", failed))
        try waitUntil(timeout: 30, "the refused file to be quarantined after failed/ took writes again") {
            harness.files(in: "failed") == ["bad.json", "bad.json.reason.json"]
        }
        #expect(harness.files(in: "processing").isEmpty)
        #expect(harness.stop() == 0)
    }
}
