@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem
@testable import PushSpool

/// The spool end to end, driven the way the daemon's ingest thread drives it.
@Suite struct PipelineTests {
    @Test func everyInputEndsProcessedOrQuarantinedAndBadFilesDoNotStopTheRest() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1024)
        // Left in processing/ by a "crash": recovered first.
        try t.write(t.layout.processing, "crashed.json", "{\"ok\":true}")
        // A backlog from before start-up, mixed with bad entries.
        for i in 0..<20 { try SpoolDropper.drop(bytes: Array("{\"n\":\(i)}".utf8), layout: t.layout, name: "early\(i).json") }
        #expect(symlink("/etc/passwd", t.layout.incoming + "/evil.json") == 0)
        #expect(mkfifo(t.layout.incoming + "/pipe.json", 0o600) == 0)
        try t.write(t.layout.incoming, "huge.json", [UInt8](repeating: 0x20, count: 2048))
        try t.write(t.layout.incoming, "bad.json", "{not json")
        try t.write(t.layout.incoming, ".editor-swap", "ignored")
        try t.write(t.layout.incoming, "writing.tmp", "ignored")

        var completed: [String] = []
        var quarantined: [String: String] = [:]
        func handle(_ name: String) throws {
            switch try spool.read(processing: name) {
            case .refused(let code, let message):
                try spool.quarantine(processing: name, reason: QuarantineReason(code: code, message: message, stage: .read, daemonVersion: "test", file: name))
                quarantined[name] = code
            case .contents(let file):
                // A stand-in for the parser: the bytes must be JSON.
                if (try? JSONSerialization.jsonObject(with: Data(file.bytes))) == nil {
                    try spool.quarantine(processing: name, reason: QuarantineReason(code: "invalid_json", message: "not JSON", stage: .parse,
                                                                                    daemonVersion: "test", file: name, contents: file.bytes))
                    quarantined[name] = "invalid_json"
                } else {
                    try spool.complete(processing: name)
                    completed.append(name)
                }
            }
        }

        for name in try spool.processingNames() { try handle(name) }
        let watcher = try IncomingWatcher(layout: t.layout)
        let feed = IncomingFeed(spool: spool, watcher: watcher, stableAgeNanos: 0, batchSize: 8)
        let layout = t.layout
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.2) {
            for i in 0..<20 { _ = try? SpoolDropper.drop(bytes: Array("{\"late\":\(i)}".utf8), layout: layout, name: "late\(i).json") }
        }
        let deadline = Date().addingTimeInterval(15)
        while completed.count < 41 && Date() < deadline {
            for name in try feed.next(timeoutMillis: 50).names where try spool.claim(name) { try handle(name) }
        }

        #expect(completed.count == 41, "crashed + 20 early + 20 late")
        #expect(quarantined == ["evil.json": "symlink", "pipe.json": "not_regular_file", "huge.json": "file_too_large", "bad.json": "invalid_json"])
        #expect(try t.names(t.layout.processing).isEmpty)
        #expect(try t.names(t.layout.incoming) == [".editor-swap", "writing.tmp"])
        let failed = try FailedQueue.list(layout: t.layout)
        #expect(Set(failed.map(\.name)) == Set(quarantined.keys))
        #expect(failed.allSatisfy { !$0.reasonMissing && !$0.payloadMissing })
    }
}
