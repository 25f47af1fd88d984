@preconcurrency import Glibc
import Testing
import PushSystem
@testable import PushSpool

/// The pickup protocol's spool operations (issue 36): read, quarantine and remove a file
/// where it lies in `incoming/`, with no claim rename into `processing/`.
@Suite struct PickupTests {
    @Test func readsAndRemovesAFileInIncomingWithoutTouchingProcessing() throws {
        let temp = try TempSpool()
        try temp.write(temp.layout.incoming, "a.json", "{\"x\":1}")
        let spool = try Spool(layout: temp.layout, maxFileBytes: 1 << 20)
        guard case .contents(let file) = try spool.read("a.json", in: .incoming) else {
            Issue.record("a.json was refused")
            return
        }
        #expect(file.bytes == Array("{\"x\":1}".utf8))
        #expect(try temp.names(temp.layout.processing).isEmpty)
        #expect(try spool.complete("a.json", in: .incoming))
        #expect(try temp.names(temp.layout.incoming).isEmpty)
        // A removal repeated (an acknowledgement after a crash) finds nothing and says so.
        #expect(try !spool.complete("a.json", in: .incoming))
    }

    @Test func aFileGoneFromIncomingIsNotFound() throws {
        let temp = try TempSpool()
        let spool = try Spool(layout: temp.layout, maxFileBytes: 1 << 20)
        #expect { try spool.read("gone.json", in: .incoming) } throws: { ($0 as? SpoolError)?.code == .notFound }
    }

    @Test func quarantinesFromIncomingWithItsReason() throws {
        let temp = try TempSpool()
        try temp.write(temp.layout.incoming, "bad.json", "not json")
        let spool = try Spool(layout: temp.layout, maxFileBytes: 1 << 20)
        let target = try spool.quarantine("bad.json", in: .incoming,
                                          reason: QuarantineReason(code: "invalid_json", message: "m", stage: .parse, daemonVersion: "v", file: "bad.json"))
        #expect(target == "bad.json")
        #expect(try temp.names(temp.layout.incoming).isEmpty)
        #expect(try temp.names(temp.layout.failed) == ["bad.json", "bad.json" + SpoolName.reasonSuffix])
        let reason = try reasonObject(temp.layout.failed + "/bad.json" + SpoolName.reasonSuffix)
        #expect(reason["code"] as? String == "invalid_json")
        #expect(reason["size"] as? Int == 8)
    }

    @Test func aFifoInIncomingIsRefusedWithoutBeingOpened() throws {
        let temp = try TempSpool()
        #expect(mkfifo(temp.layout.incoming + "/pipe.json", 0o600) == 0)
        let spool = try Spool(layout: temp.layout, maxFileBytes: 1 << 20)
        guard case .refused(let code, _) = try spool.read("pipe.json", in: .incoming) else {
            Issue.record("a FIFO was read")
            return
        }
        #expect(code == ReasonCode.notRegularFile.rawValue)
    }
}
