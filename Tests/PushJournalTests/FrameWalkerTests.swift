import Testing
@testable import PushJournal
import PushSystem

/// The one segment frame walker (FrameWalker.swift), over segments built in memory.
@Suite struct FrameWalkerTests {
    /// A segment: header, then one frame per seq. Returns the bytes and each frame's offset.
    static func segment(seqs: [UInt64], firstSeq: UInt64? = nil) -> (bytes: [UInt8], offsets: [Int]) {
        var out = SegmentHeader(firstSeq: firstSeq ?? seqs.first ?? 1, createdMillis: 1_700_000_000_000,
                                journalID: [UInt8](repeating: 7, count: 16)).encoded()
        var offsets: [Int] = []
        for seq in seqs {
            offsets.append(out.count)
            RecordFrame.encode(seq: seq, ingestMillis: 1_700_000_000_123, key: Array("key-\(seq)".utf8),
                               body: Array(#"{"n":\#(seq)}"#.utf8), into: &out)
        }
        return (out, offsets)
    }

    /// Rewrites the body length of the frame at `offset` and re-seals its header CRC, so only
    /// the length is wrong.
    static func forgeLength(_ bytes: inout [UInt8], at offset: Int, _ length: UInt32) {
        bytes.storeLE(length, at: offset + 8)
        let crc = bytes.withUnsafeBytes { CRC32C.mask(CRC32C.checksum(UnsafeRawBufferPointer(rebasing: $0[(offset + 8)..<(offset + 40)]))) }
        bytes.storeLE(crc, at: offset + 4)
    }

    enum Seen: Equatable {
        case record(UInt64, String, Int64)
        case end
        case fault(FrameFault, Int64, torn: Bool)
    }

    /// Every step of a walk up to its first `.end` or `.fault`, which is repeated once to check it sticks.
    static func walk(_ bytes: [UInt8], expectedSeq: UInt64 = 1, policy: WalkPolicy = .live) -> [Seen] {
        bytes.withUnsafeBytes { raw in
            var walker = SegmentFrameWalker(SegmentBuffer(raw), from: Int64(SegmentHeader.size), expectedSeq: expectedSeq,
                                            mode: .full, policy: policy)
            var seen: [Seen] = []
            while true {
                let step = walker.next()
                switch step {
                case .record(let header, let key, _, let offset): seen.append(.record(header.seq, key ?? "?", offset))
                case .end: seen.append(.end)
                case .fault(let fault, let offset, let torn): seen.append(.fault(fault, offset, torn: torn))
                }
                if case .record = step { continue }
                let again: Seen
                switch walker.next() {
                case .record(let header, _, _, _): again = .record(header.seq, "after the stop", 0)
                case .end: again = .end
                case .fault(let fault, let offset, let torn): again = .fault(fault, offset, torn: torn)
                }
                #expect(again == seen.last, "a stopped walker must stay stopped")
                return seen
            }
        }
    }

    @Test func walksEveryFrameThenEnds() {
        let (bytes, offsets) = Self.segment(seqs: [1, 2, 3])
        for policy in [WalkPolicy.live, .closed] {
            #expect(Self.walk(bytes, policy: policy) == [
                .record(1, "key-1", Int64(offsets[0])), .record(2, "key-2", Int64(offsets[1])),
                .record(3, "key-3", Int64(offsets[2])), .end,
            ])
        }
    }

    @Test func aCutLastFrameIsATornTailInALiveSegment() {
        let (whole, offsets) = Self.segment(seqs: [1, 2, 3])
        let bytes = Array(whole[..<(offsets[2] + 45)])
        #expect(Self.walk(bytes) == [
            .record(1, "key-1", Int64(offsets[0])), .record(2, "key-2", Int64(offsets[1])),
            .fault(.incomplete("record body incomplete"), Int64(offsets[2]), torn: true),
        ])
        // Header itself cut.
        #expect(Self.walk(Array(whole[..<(offsets[2] + 39)])).last == .fault(.incomplete("record header incomplete"), Int64(offsets[2]), torn: true))
        // A closed segment has no torn tail: the frame is refused by seq before its body is read.
        #expect(Self.walk(bytes, policy: .closed).last == .fault(.outOfOrderOrCut(seq: 3), Int64(offsets[2]), torn: false))
    }

    @Test func aBadBodyCRCWithValidFramesAfterItIsDamage() {
        let built = Self.segment(seqs: [1, 2, 3])
        var bytes = built.bytes
        let offsets = built.offsets
        bytes[offsets[1] + 44] ^= 0x01
        for policy in [WalkPolicy.live, .closed] {
            #expect(Self.walk(bytes, policy: policy) == [
                .record(1, "key-1", Int64(offsets[0])),
                .fault(.invalid("record body checksum mismatch"), Int64(offsets[1]), torn: false),
            ])
        }
        // The same damage in the last frame leaves nothing valid after it: a torn tail.
        let two = Self.segment(seqs: [1, 2])
        var last = two.bytes
        last[two.offsets[1] + 44] ^= 0x01
        #expect(Self.walk(last).last == .fault(.invalid("record body checksum mismatch"), Int64(two.offsets[1]), torn: true))
    }

    @Test func aLengthPastTheEndIsIncompleteNotATrap() {
        let built = Self.segment(seqs: [1, 2])
        var bytes = built.bytes
        let offsets = built.offsets
        Self.forgeLength(&bytes, at: offsets[1], 100_000)
        #expect(Self.walk(bytes).last == .fault(.incomplete("record body incomplete"), Int64(offsets[1]), torn: true))
        #expect(Self.walk(bytes, policy: .closed).last == .fault(.outOfOrderOrCut(seq: 2), Int64(offsets[1]), torn: false))
    }

    @Test(arguments: [UInt32(0), 4, UInt32(RecordHeader.maxBodyBytes) + 1, UInt32.max])
    func anOutOfRangeLengthIsInvalid(length: UInt32) {
        let built = Self.segment(seqs: [1, 2])
        var bytes = built.bytes
        let offsets = built.offsets
        Self.forgeLength(&bytes, at: offsets[0], length)
        for policy in [WalkPolicy.live, .closed] {
            #expect(Self.walk(bytes, policy: policy) == [
                .fault(.invalid("bad body length \(length)"), Int64(offsets[0]), torn: false),
            ])
        }
    }

    @Test func aSeqOutOfOrderStops() {
        let (bytes, offsets) = Self.segment(seqs: [1, 3], firstSeq: 1)
        #expect(Self.walk(bytes).last == .fault(.outOfOrder(seq: 3, expected: 2), Int64(offsets[1]), torn: false))
        #expect(Self.walk(bytes, policy: .closed).last == .fault(.outOfOrderOrCut(seq: 3), Int64(offsets[1]), torn: false))
        #expect(FrameFault.outOfOrder(seq: 3, expected: 2).detail == "record sequence 3, expected 2")
    }

    @Test func theLastPossibleSeqDoesNotOverflow() {
        let (bytes, offsets) = Self.segment(seqs: [.max, .max])
        for policy in [WalkPolicy.live, .closed] {
            let seen = Self.walk(bytes, expectedSeq: .max, policy: policy)
            #expect(seen.first == .record(.max, "key-\(UInt64.max)", Int64(offsets[0])))
            #expect(seen.count == 2)
            if case .fault(_, let at, _) = seen.last { #expect(at == Int64(offsets[1])) } else { Issue.record("no fault: \(seen)") }
        }
        // The archive reader walks the same way: damage, not a crash.
        #expect(throws: JournalError.self) {
            _ = try JournalArchive.records(segmentBytes: bytes, archiveName: JournalFiles.segmentName(firstSeq: .max) + ".zst", directory: "/x")
        }
    }

    @Test func resyncFindsTheNextValidRecord() {
        let built = Self.segment(seqs: [1, 2, 3])
        var bytes = built.bytes
        let offsets = built.offsets
        bytes[offsets[1] + 1] ^= 0xFF  // magic of frame 2
        bytes.withUnsafeBytes { raw in
            let source = SegmentBuffer(raw)
            #expect(SegmentFrames.hasValidRecord(source, from: Int64(offsets[1] + 8), afterSeq: 1))
            #expect(!SegmentFrames.hasValidRecord(source, from: Int64(offsets[1] + 8), afterSeq: 3))
            #expect(SegmentFrames.maxValidSeq(source, from: 64) == 3)
            #expect(SegmentFrames.maxValidSeq(source, from: Int64(raw.count)) == nil)
        }
    }
}
