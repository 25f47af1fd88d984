import Foundation
import Testing
import PushSystem
@testable import PushspoolDaemon

/// The crash guard's record of names in flight under the pickup protocol (issue 36).
@Suite struct InFlightRecordTests {
    final class TempDir {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("inflight-\(UUID().uuidString)").path
        init() throws { try Posix.mkdirs(path) }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    @Test func slotsRoundTripInOrderWithoutRepeats() {
        let file = InFlightRecord.slot(["a.json", "b.json"]) + [UInt8](repeating: 0, count: InFlightRecord.slotSize - 4 - 14)
            + InFlightRecord.slot(["c.json", "a.json", "ü.json"])
        #expect(InFlightRecord.names(in: file) == ["a.json", "b.json", "c.json", "ü.json"])
    }

    @Test func malformedRecordsReadAsNoNamesAndNeverTrap() {
        #expect(InFlightRecord.names(in: []).isEmpty)
        #expect(InFlightRecord.names(in: [1, 2]).isEmpty)
        #expect(InFlightRecord.names(in: [0xff, 0xff, 0xff, 0x7f, 65]).isEmpty)
        #expect(InFlightRecord.names(in: [9, 0, 0, 0, 65]).isEmpty)
        let tooMany = (0..<100).map { "n\($0)" }
        #expect(InFlightRecord.names(in: InFlightRecord.slot(tooMany)).count == InFlightRecord.namesPerSlot)
    }

    @Test func theRingKeepsTheLastChunksAndANewRunStartsEmpty() throws {
        let dir = try TempDir()
        #expect(InFlightRecorder.previous(stateDirectory: dir.path).isEmpty)
        let recorder = try InFlightRecorder(stateDirectory: dir.path, slots: 2)
        try recorder.record(["a.json", "b.json"])
        try recorder.record(["c.json"])
        #expect(InFlightRecorder.previous(stateDirectory: dir.path) == ["a.json", "b.json", "c.json"])
        // The third chunk reuses the first slot.
        try recorder.record(["d.json"])
        #expect(InFlightRecorder.previous(stateDirectory: dir.path) == ["d.json", "c.json"])
        // More names than a slot holds take several slots.
        let many = (0..<(InFlightRecord.namesPerSlot + 1)).map { "m\($0).json" }
        try recorder.record(many)
        #expect(InFlightRecorder.previous(stateDirectory: dir.path).sorted() == many.sorted())
        _ = try InFlightRecorder(stateDirectory: dir.path, slots: 2)
        #expect(InFlightRecorder.previous(stateDirectory: dir.path).isEmpty)
    }

    @Test func theRingOutlastsTheInFlightBound() {
        // In full chunks the ring holds the in-flight bound's files and as many suspects.
        #expect(InFlightRecord.slots(capacityLimit: 4096) * InFlightRecord.namesPerSlot >= 2 * 4096)
        #expect(InFlightRecord.slots(capacityLimit: 1) >= 8)
    }
}
