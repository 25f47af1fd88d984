@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushSystem
import PushJournal

/// `pushspoolctl journal cat --archive` on segments pushspoold's retention really archived
/// (`[Journal] RetainBytes=` with `Archive=zstd`), compared with what `journal cat` printed
/// before retention ran.
@Suite struct JournalArchiveCLITests {
    static func config(retention: String) -> String {
        """
        [Media]
        Enabled=no
        [Inbox]
        Enabled=no
        [Journal]
        MaxBatchDelaySec=0
        SegmentSize=64K
        \(retention)
        """
    }

    static func segments(_ harness: DaemonHarness) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: harness.state + "/journal")) ?? []).filter { $0.hasSuffix(".seg") }.sorted()
    }

    /// `journal cat --json [--archive]` as lines, and each line's (seq, id).
    static func cat(_ harness: DaemonHarness, archive: Bool) throws -> (lines: [String], keys: [(UInt64, String)]) {
        let (status, out, err) = try harness.ctl(["journal", "cat", "--json"] + (archive ? ["--archive"] : []))
        #expect(status == 0, "\(err)")
        let lines = out.split(separator: "\n").map(String.init)
        let keys = try lines.map { line -> (UInt64, String) in
            let object = try #require(try JSONParser().parse(line).objectValue, "not a JSON object: \(line)")
            let seq = try #require(object["seq"]?.intValue.flatMap { UInt64(exactly: $0) }, "no seq: \(line)")
            return (seq, object["id"]?.stringValue ?? "")
        }
        return (lines, keys)
    }

    @Test func catArchivePrintsTheArchivedRecordsThenTheLiveOnesAsBefore() throws {
        let harness = try DaemonHarness(name: "archive-cat", config: Self.config(retention: ""))
        try harness.start()
        for index in 0..<500 { try harness.drop(generatedPayload(index: index, tag: "arch"), name: "arch-\(index).json") }
        try waitUntil(timeout: 60, "500 records journaled") { (try? harness.records().count) == 500 }
        #expect(harness.stop() == 0)
        let before = try Self.cat(harness, archive: false)
        #expect(before.keys.map(\.0) == Array(1...500))
        try #require(Self.segments(harness).count >= 3, "64 KiB segments: \(Self.segments(harness))")

        // Any size limit is exceeded: the start-up retention pass archives every sealed segment.
        try Self.config(retention: "RetainBytes=1\nArchive=zstd\n").write(toFile: harness.config, atomically: true, encoding: .utf8)
        try harness.start()
        try waitUntil(timeout: 60, "retention to archive the sealed segments") {
            Self.segments(harness).count == 1 && !JournalArchive.list(directory: harness.state + "/journal").isEmpty
        }
        for index in 500..<540 { try harness.drop(generatedPayload(index: index, tag: "arch"), name: "arch-\(index).json") }
        try waitUntil(timeout: 60, "540 records journaled") { (try? JournalReader.lastSeq(directory: harness.state + "/journal")) == 540 }
        #expect(harness.stop() == 0)

        let live = try Self.cat(harness, archive: false)
        let all = try Self.cat(harness, archive: true)
        let archivedSeqs = try JournalArchive.list(directory: harness.state + "/journal").flatMap {
            try JournalArchive.records(directory: harness.state + "/journal", archiveName: $0.name).map(\.seq)
        }
        // Something was archived, and the plain cat no longer sees it.
        try #require(!archivedSeqs.isEmpty)
        #expect(live.keys.first?.0 == archivedSeqs.last.map { $0 + 1 })
        // The archived records first, exactly those the archive holds, then the live ones.
        #expect(all.keys.map(\.0) == archivedSeqs + live.keys.map(\.0))
        #expect(all.keys.map(\.0) == Array(1...540))
        #expect(Array(all.lines.suffix(live.lines.count)) == live.lines)
        // Byte for byte what `journal cat` printed before retention, then the records after it.
        #expect(Array(all.lines.prefix(500)) == before.lines)
        #expect(Set(all.keys.map(\.1)).count == 540, "ids repeated or missing")
    }
}
