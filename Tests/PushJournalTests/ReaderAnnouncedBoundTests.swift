import Testing
@testable import PushJournal
import PushSystem
import SimulatedFS

/// A follower's reader stops at the seq the writer announced without touching a file, and
/// still reads every announced record, across segment rolls.
@Suite struct ReaderAnnouncedBoundTests {
    @Test func pastTheAnnouncedSeqNothingIsRead() throws {
        let fs = SimulatedFileSystem()
        let (writer, _) = try JournalWriter.open(directory: simJournal, options: simOptions(fs))
        defer { try? writer.close() }
        #expect(writer.commits.speaksForTheJournal)
        for i in 1...40 { append(writer, "k\(i)", String(repeating: "x", count: 200)) }
        #expect(try listSegments(simJournal, fs: fs).count > 1, "the records span segments")

        let reader = try JournalReader(directory: simJournal, fromSeq: 1, fileSystem: fs)
        reader.announcedLastSeq = writer.commits.lastSeq
        var seqs: [UInt64] = []
        while let record = try reader.next() { seqs.append(record.seq) }
        #expect(seqs == Array(1...40))

        // Reading announced records does not open the COMMITTED mark file.
        let fresh = try JournalReader(directory: simJournal, fromSeq: 1, fileSystem: fs)
        fresh.announcedLastSeq = writer.commits.lastSeq
        let opensBefore = fs.opened(JournalFiles.committed)
        while try fresh.next() != nil {}
        #expect(fs.opened(JournalFiles.committed) == opensBefore)

        // Caught up: another look costs no call at all.
        let before = fs.calls
        for _ in 0..<10 { #expect(try reader.next() == nil) }
        #expect(fs.calls == before)

        // Without the bound, the same look probes the segment and lists the directory.
        reader.announcedLastSeq = nil
        #expect(try reader.next() == nil)
        #expect(fs.calls > before)

        // New records past a stale bound wait for the next announcement, then all come.
        reader.announcedLastSeq = 40
        for i in 41...60 { append(writer, "k\(i)", String(repeating: "y", count: 200)) }
        #expect(try reader.next() == nil)
        reader.announcedLastSeq = writer.commits.lastSeq
        seqs = []
        while let record = try reader.next() { seqs.append(record.seq) }
        #expect(seqs == Array(41...60))
    }

    @Test func aFeedMadeOnlyToWakeDoesNotSpeakForTheJournal() {
        #expect(!CommitFeed().speaksForTheJournal)
        #expect(!CommitFeed(lastSeq: 9).speaksForTheJournal)
    }
}
