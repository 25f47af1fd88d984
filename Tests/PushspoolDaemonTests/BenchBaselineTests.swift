import Foundation
import Glibc
import Synchronization
import CBenchBaseline
import PushJournal
import PushSystem
import Testing

/// The C loop the benchmarks compare pushspoold with must do all of the work it claims to —
/// a baseline that skips a file or a sync would make every ratio a flattering lie.
@Suite struct BenchBaselineTests {
    private struct Spool {
        let root: String
        var incoming: String { root + "/incoming" }
        var processing: String { root + "/processing" }
        var log: String { root + "/loop.log" }

        init() throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("pushspool-baseline-\(UUID().uuidString.prefix(8))").path
            for dir in [incoming, processing, root + "/tmp"] {
                try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            }
        }

        func payload(_ i: Int) -> [UInt8] { Array("{\"id\":\"\(i)\",\"pad\":\"\(String(repeating: "x", count: i % 700))\"}".utf8) }

        func publish(_ i: Int) throws {
            let temp = root + "/tmp/s\(i).json"
            try Data(payload(i)).write(to: URL(fileURLWithPath: temp))
            #expect(rename(temp, incoming + "/s\(i).json") == 0)
        }

        func names(_ dir: String) throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: dir) }

        /// Walks the loop's log: 40-byte headers with ISA-L's raw CRC32C register over the header's first 24 bytes and
        /// over the body, bodies padded to 8 bytes. Returns the bodies in order.
        func frames() throws -> [[UInt8]] {
            let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: log)))
            var bodies: [[UInt8]] = []
            var offset = 0
            func word32(_ at: Int) -> UInt32 { bytes[at..<at + 4].reversed().reduce(0) { $0 << 8 | UInt32($1) } }
            while offset < bytes.count {
                try #require(offset + 40 <= bytes.count)
                #expect(word32(offset) == 0x5053_4A52)
                let length = Int(word32(offset + 4))
                try #require(offset + 40 + length <= bytes.count)
                #expect(word32(offset + 24) == CRC32C.update(CRC32C.initial, Array(bytes[offset..<offset + 24])))
                let body = Array(bytes[offset + 40..<offset + 40 + length])
                #expect(word32(offset + 28) == CRC32C.update(CRC32C.initial, body))
                bodies.append(body)
                offset += 40 + (length + 7) & ~7
            }
            return bodies
        }

        func remove() { try? FileManager.default.removeItem(atPath: root) }
    }

    /// More files than one batch of 256, so the loop's mid-run fdatasync and its last partial
    /// batch are both taken.
    @Test func drainLoopMovesFramesAndRemovesEveryFile() throws {
        let spool = try Spool()
        defer { spool.remove() }
        let count = 600
        for i in 0..<count { try spool.publish(i) }
        #expect(baseline_ingest(spool.incoming, spool.processing, spool.log) == count)
        #expect(try spool.names(spool.incoming).isEmpty)
        #expect(try spool.names(spool.processing).isEmpty)
        let bodies = try spool.frames()
        #expect(bodies.count == count)
        #expect(Set((0..<count).map(spool.payload)).subtracting(bodies).isEmpty, "every payload framed")
    }

    /// The steady-latency baseline follows a live spool: each file is framed once and stamped
    /// no earlier than it was published.
    @Test func followLoopStampsEveryFileAfterItWasPublished() throws {
        let spool = try Spool()
        defer { spool.remove() }
        let count = 300
        let watch = baseline_watch(spool.incoming)
        try #require(watch >= 0)
        defer { close(watch) }
        let durable = UnsafeMutablePointer<UInt64>.allocate(capacity: count)
        durable.initialize(repeating: 0, count: count)
        defer { durable.deallocate() }
        let address = UInt(bitPattern: durable)
        let result = Locked<Int?>(nil)
        let finished = DispatchSemaphore(value: 0)
        let (incoming, processing, log) = (spool.incoming, spool.processing, spool.log)
        let follower = Thread {
            let moved = baseline_follow(watch, incoming, processing, log, count, UnsafeMutablePointer(bitPattern: address))
            result.withLock { $0 = moved }
            finished.signal()
        }
        follower.start()
        var published: [UInt64] = []
        for i in 0..<count {
            published.append(Posix.monotonicNanos())
            try spool.publish(i)
            if i % 50 == 0 { usleep(2_000) }  // why: the producer's pacing: files arrive while the loop follows
        }
        _ = finished.wait(timeout: .now() + 30)
        #expect(result.withLock { $0 } == count)
        for i in 0..<count { #expect(durable[i] >= published[i]) }
        #expect(try spool.names(spool.processing).isEmpty)
        #expect(try spool.frames().count == count)
    }

    /// Loop (b), the no-claim protocol, does the same work without processing/: every file
    /// framed, none left in either directory, processing/ never used.
    @Test func noClaimDrainLoopFramesEveryFileWhereItLies() throws {
        let spool = try Spool()
        defer { spool.remove() }
        let count = 600
        for i in 0..<count { try spool.publish(i) }
        #expect(baseline_ingest_protocol(spool.incoming, spool.processing, spool.log, BASELINE_NO_CLAIM) == count)
        #expect(try spool.names(spool.incoming).isEmpty)
        #expect(try spool.names(spool.processing).isEmpty)
        let bodies = try spool.frames()
        #expect(bodies.count == count)
        #expect(Set((0..<count).map(spool.payload)).subtracting(bodies).isEmpty, "every payload framed")
    }

    /// The burst loops the external benchmark times: files already there when the loop starts
    /// and files published while it runs are each framed exactly once, by both protocols.
    @Test(arguments: [BASELINE_RENAME_CLAIM, BASELINE_NO_CLAIM])
    func burstLoopFramesEveryFileOnce(claim: Int32) throws {
        let spool = try Spool()
        defer { spool.remove() }
        let before = 100, count = 2_100
        for i in 0..<before { try spool.publish(i) }
        let watch = baseline_watch(spool.incoming)
        try #require(watch >= 0)
        defer { close(watch) }
        let result = Locked<Int?>(nil)
        let finished = DispatchSemaphore(value: 0)
        let (incoming, processing, log) = (spool.incoming, spool.processing, spool.log)
        let follower = Thread {
            let moved = baseline_burst(watch, incoming, processing, log, claim, count)
            result.withLock { $0 = moved }
            finished.signal()
        }
        follower.start()
        for i in before..<count { try spool.publish(i) }
        _ = finished.wait(timeout: .now() + 60)
        #expect(result.withLock { $0 } == count)
        #expect(try spool.names(spool.incoming).isEmpty)
        #expect(try spool.names(spool.processing).isEmpty)
        let bodies = try spool.frames()
        #expect(bodies.count == count, "no file framed twice")
        #expect(Set((0..<count).map(spool.payload)).subtracting(bodies).isEmpty, "every payload framed")
    }
}
