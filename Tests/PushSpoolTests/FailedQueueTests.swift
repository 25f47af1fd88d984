@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem
@testable import PushSpool

@Suite struct FailedQueueTests {
    /// Puts `names` through claim → quarantine, as the daemon would.
    func quarantine(_ t: TempSpool, _ names: [String], code: String = "invalid_json") throws {
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        for name in names {
            try t.write(t.layout.incoming, name, "{bad \(name)")
            #expect(try spool.claim(name))
            try spool.quarantine(processing: name, reason: QuarantineReason(code: code, message: "broken", stage: .parse, daemonVersion: "v", file: name))
        }
    }

    @Test func listShowsEveryQuarantinedFileWithItsReason() throws {
        let t = try TempSpool()
        try quarantine(t, ["b.json", "a.json"])
        let entries = try FailedQueue.list(layout: t.layout)
        #expect(entries.map(\.name) == ["a.json", "b.json"])
        let a = try #require(entries.first)
        #expect(a.code == "invalid_json")
        #expect(a.stage == "parse")
        #expect(a.message == "broken")
        #expect(a.size == Int64("{bad a.json".utf8.count))
        #expect(!a.at.isEmpty && !a.payloadMissing && !a.reasonMissing)
    }

    @Test func listReportsPayloadsWithoutReasonAndOrphanReasons() throws {
        let t = try TempSpool()
        try quarantine(t, ["orphan.json"])
        #expect(unlink(t.layout.failed + "/orphan.json") == 0)
        try t.write(t.layout.failed, "bare.json", "x")
        try t.write(t.layout.failed, ".staging", "x")
        let entries = try FailedQueue.list(layout: t.layout)
        #expect(entries.map(\.name) == ["bare.json", "orphan.json"])
        #expect(entries[0].reasonMissing && entries[0].code == "unknown")
        #expect(entries[1].payloadMissing && entries[1].size == nil && entries[1].code == "invalid_json")
        #expect(try FailedQueue.purge(layout: t.layout, .name("orphan.json")) == ["orphan.json"])
        #expect(try t.names(t.layout.failed) == [".staging", "bare.json"])
    }

    @Test func showGivesTheReasonTextAndSize() throws {
        let t = try TempSpool()
        try quarantine(t, ["a.json"])
        let detail = try FailedQueue.show(layout: t.layout, name: "a.json")
        #expect(detail.size == Int64("{bad a.json".utf8.count))
        #expect(detail.fileType == "regular file")
        let json = try #require(detail.reasonJSON)
        #expect(try QuarantineReason.decode(Array(json.utf8)).code == "invalid_json")
        #expect(throws: SpoolError.self) { try FailedQueue.show(layout: t.layout, name: "nope.json") }
        #expect(throws: SpoolError.self) { try FailedQueue.show(layout: t.layout, name: "../incoming/a.json") }
        #expect(throws: SpoolError.self) { try FailedQueue.show(layout: t.layout, name: "a.json.reason.json") }
    }

    @Test func retryMovesTheFileBackUnderItsOriginalNameAndDropsTheReason() throws {
        let t = try TempSpool()
        try quarantine(t, ["a.json", "a.json"])  // the second lands as a.json~1
        #expect(try t.names(t.layout.failed) == ["a.json", "a.json.reason.json", "a.json~1", "a.json~1.reason.json"])
        let moved = try FailedQueue.retry(layout: t.layout, .name("a.json~1"))
        #expect(moved == [FailedRetry(name: "a.json~1", incomingName: "a.json")])
        #expect(try t.names(t.layout.incoming) == ["a.json"])
        #expect(try t.names(t.layout.failed) == ["a.json", "a.json.reason.json"])
        // The original name is taken in incoming/ now: the next retry must not replace it.
        let again = try FailedQueue.retry(layout: t.layout, .name("a.json"))
        #expect(again == [FailedRetry(name: "a.json", incomingName: "a.json~1")])
        #expect(try t.names(t.layout.incoming) == ["a.json", "a.json~1"])
        #expect(try t.names(t.layout.failed).isEmpty)
        #expect(throws: SpoolError.self) { try FailedQueue.retry(layout: t.layout, .name("a.json")) }
    }

    @Test func retryNeverPutsBackANameTheDaemonWouldIgnore() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        for name in [".hidden", "w.tmp"] {
            try t.write(t.layout.processing, name, "x")
            try spool.quarantine(processing: name, reason: QuarantineReason(code: "c", message: "m", stage: .parse, daemonVersion: "v", file: name))
        }
        #expect(try FailedQueue.list(layout: t.layout).map(\.name) == ["_.hidden", "w.tmp"])
        let moved = try FailedQueue.retry(layout: t.layout, .all).map(\.incomingName).sorted()
        #expect(moved == ["_.hidden", "w.tmp.json"])
        #expect(moved.allSatisfy { !SpoolName.isIgnored($0) })
    }

    @Test func retryAllAndPurgeAll() throws {
        let t = try TempSpool()
        try quarantine(t, (0..<50).map { "r\($0).json" })
        let moved = try FailedQueue.retry(layout: t.layout, .all)
        #expect(moved.count == 50)
        #expect(try t.names(t.layout.failed).isEmpty)
        #expect(try t.names(t.layout.incoming).count == 50)

        let t2 = try TempSpool()
        try quarantine(t2, (0..<50).map { "p\($0).json" })
        #expect(unlink(t2.layout.failed + "/p0.json") == 0)  // an orphan reason goes too
        let removed = try FailedQueue.purge(layout: t2.layout, .all)
        #expect(removed.count == 50)
        #expect(try t2.names(t2.layout.failed).isEmpty)
    }

    @Test func allLeavesEntriesQuarantinedAfterTheCommandStarted() throws {
        let t = try TempSpool()
        try quarantine(t, ["old.json"])
        try quarantine(t, ["new.json"])
        // Back-date the old reason so the test does not depend on timestamp granularity.
        #expect(utimes(t.layout.failed + "/old.json.reason.json", [timeval(tv_sec: 1, tv_usec: 0), timeval(tv_sec: 1, tv_usec: 0)]) == 0)
        let future = timeval(tv_sec: time(nil) + 3600, tv_usec: 0)
        #expect(utimes(t.layout.failed + "/new.json.reason.json", [future, future]) == 0)
        #expect(try FailedQueue.purge(layout: t.layout, .all) == ["old.json"])
        #expect(try FailedQueue.retry(layout: t.layout, .all).isEmpty)
        #expect(try t.names(t.layout.failed) == ["new.json", "new.json.reason.json"])
    }

    @Test func purgeNeverRecursesIntoAQuarantinedDirectory() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 10)
        try Posix.mkdirs(t.layout.processing + "/d.json")
        try t.write(t.layout.processing + "/d.json", "inner", "x")
        try spool.quarantine(processing: "d.json", reason: QuarantineReason(code: "not_regular_file", message: "m", stage: .read, daemonVersion: "v", file: "d.json"))
        #expect(throws: SpoolError.self) { try FailedQueue.purge(layout: t.layout, .name("d.json")) }
        #expect(exists(t.layout.failed + "/d.json/inner"))
    }
}

@Suite struct DropperTests {
    @Test func dropWritesAUniqueCompleteFileAndLeavesTmpEmpty() throws {
        let t = try TempSpool()
        let bytes = Array("{\"pushspool\":1}".utf8)
        let name = try SpoolDropper.drop(bytes: bytes, layout: t.layout)
        #expect(name.hasSuffix(".json"))
        #expect(!SpoolName.isIgnored(name))
        #expect(try t.read(t.layout.incoming + "/" + name) == bytes)
        #expect(try t.names(t.layout.tmp).isEmpty)
        let other = try SpoolDropper.drop(bytes: bytes, layout: t.layout)
        #expect(other != name)
    }

    @Test func aTakenNameIsNeverReplaced() throws {
        let t = try TempSpool()
        try SpoolDropper.drop(bytes: Array("one".utf8), layout: t.layout, name: "fixed.json")
        do {
            try SpoolDropper.drop(bytes: Array("two".utf8), layout: t.layout, name: "fixed.json")
            Issue.record("replaced a dropped file")
        } catch {
            #expect(error.code == .nameTaken)
        }
        #expect(try t.read(t.layout.incoming + "/fixed.json") == Array("one".utf8))
        #expect(try t.names(t.layout.tmp).isEmpty)
    }

    @Test(arguments: [".hidden.json", "x.tmp", "a/b.json", "..", ""])
    func namesTheDaemonWouldNotTakeAreRefused(_ name: String) throws {
        let t = try TempSpool()
        #expect(throws: SpoolError.self) { try SpoolDropper.drop(bytes: [], layout: t.layout, name: name) }
        #expect(try t.names(t.layout.incoming).isEmpty)
    }

    @Test func dropIntoAMissingSpoolSaysWhatToDo() throws {
        let t = try TempSpool(create: false)
        do {
            try SpoolDropper.drop(bytes: [], layout: t.layout)
            Issue.record("dropped into nothing")
        } catch {
            #expect(error.errno == ENOENT)
            #expect(error.description.contains(t.layout.tmp))
        }
    }
}
