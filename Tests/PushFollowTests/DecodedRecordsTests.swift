import Testing
import PushFollow
import PushJournal
import PushPayload
import PushSystem
import TestSupport

/// A follower that reads the journal through a ``FollowedReader`` made with the records its
/// runner hands it, as the inbox and the outbox do, and keeps the bodies it was handed.
private final class ReadingFollower: Follower, Sendable {
    let name: String
    let directory: String
    let target: UInt64
    let done: Wakeup
    private struct State: ~Copyable {
        var reader: FollowedReader?
        var seen: [FollowedRecord] = []
    }
    private let state = Locked(State())

    init(name: String, directory: String, target: UInt64, done: Wakeup) {
        self.name = name
        self.directory = directory
        self.target = target
        self.done = done
    }

    var seen: [FollowedRecord] { state.withLock { $0.seen } }

    func durableSeq() -> UInt64? { state.withLock { $0.seen.last?.seq ?? 0 } }

    func step(_ context: FollowerContext) throws(FollowerError) -> FollowerNext {
        let last: UInt64 = try state.withLock { state throws(FollowerError) -> UInt64 in
            do throws(JournalError) {
                if state.reader == nil { state.reader = try FollowedReader(directory: directory, fromSeq: 1, records: context.records) }
                // A few records a step, so the runners interleave.
                for _ in 0..<3 {
                    guard let record = try state.reader!.next() else { break }
                    state.seen.append(record)
                }
            } catch {
                throw FollowerError("journal_read", "\(error)")
            }
            return state.seen.last?.seq ?? 0
        }
        if last >= target {
            done.signal()
            return .commitAfter(last, atMost: nil)
        }
        return .again
    }
}

@Suite struct DecodedRecordsTests {
    static func options() -> JournalOptions {
        JournalOptions(segmentBytes: 1 << 20, maxBatchDelay: .zero, maxBatchRecords: 64, corruptionPolicy: .refuse, checkpointInterval: nil)
    }

    /// A journal of `count` records: pushes, events and an erasure, as the followers read them.
    static func journal(_ temp: TempDir, count: Int) async throws -> String {
        let directory = temp.appending("journal")
        try Posix.mkdirs(directory)
        let writer = try JournalWriter.open(directory: directory, options: options()).0
        defer { try? writer.close() }
        for index in 1...count {
            let body: JSONValue = index % 3 == 0
                ? .object(["kind": .string("event"), "type": .string("nc.read"), "eventId": .string("e\(index)"), "user": .string("u")])
                : .object(["kind": .string("notification"), "title": .string("push \(index)"), "user": .string("u")])
            let result = await writer.append(key: "k\(index)", body: body.serialized(), ingestMillis: 1_800_000_000_000)
            guard case .committed = result else { throw FollowerError("append", "\(result)") }
        }
        return directory
    }

    @Test func threeFollowersOfOneGroupDecodeEachRecordOnce() async throws {
        let temp = TempDir("decoded-records-group")
        let count = 60
        let directory = try await Self.journal(temp, count: count)
        let done = Wakeup()
        let followers = (0..<3).map { ReadingFollower(name: "reader\($0)", directory: directory, target: UInt64(count), done: done) }
        let group = FollowerGroup(followers, commits: CommitFeed(lastSeq: UInt64(count)), niceness: 0)
        try group.start()
        defer { group.stop() }
        // Each follower signals when it has read everything; the wait ends on those signals.
        let deadline = Posix.monotonicNanos() + 30_000_000_000
        while !followers.allSatisfy({ $0.seen.count == count }), Posix.monotonicNanos() < deadline { done.wait(timeout: .seconds(5)) }
        #expect(followers.allSatisfy { $0.seen.count == count })
        #expect(group.records.decodes == UInt64(count))
        #expect(group.records.hits == UInt64(2 * count))
        let expected = try JournalReader(directory: directory, fromSeq: 1).readAll().map(FollowedRecord.init)
        for follower in followers { #expect(follower.seen == expected) }
    }

    @Test func withoutTheGroupsRecordsEachFollowerDecodesForItself() async throws {
        let temp = TempDir("decoded-records-unshared")
        let count = 12
        let directory = try await Self.journal(temp, count: count)
        let unshared = DecodedRecords.unshared
        let context = FollowerContext(journalLastSeq: UInt64(count), stopRequested: { false }, records: unshared)
        let shared = DecodedRecords()
        let sharedContext = FollowerContext(journalLastSeq: UInt64(count), stopRequested: { false }, records: shared)
        for _ in 0..<3 {
            let alone = ReadingFollower(name: "alone", directory: directory, target: UInt64(count), done: Wakeup())
            let together = ReadingFollower(name: "together", directory: directory, target: UInt64(count), done: Wakeup())
            while alone.seen.count < count { _ = try alone.step(context) }
            while together.seen.count < count { _ = try together.step(sharedContext) }
        }
        #expect(unshared.decodes == UInt64(3 * count))
        #expect(shared.decodes == UInt64(count))
    }

    @Test func aRecordRewrittenInPlaceIsDecodedAgain() {
        let records = DecodedRecords()
        let push = JournalRecord(seq: 4, ingestMillis: 1, key: "k", body: Array(#"{"kind":"notification","title":"secret"}"#.utf8), segment: "s", offset: 0)
        let tombstone = JournalRecord(seq: 4, ingestMillis: 1, key: "erased:0123", body: Array(#"{"kind":"erased","erasure":"e1"}"#.utf8),
                                      segment: "s", offset: 0)
        #expect(records.decoded(push).body == RecordBody(decoding: push.body))
        #expect(records.decoded(push).body == RecordBody(decoding: push.body))
        #expect(records.decoded(tombstone).body == .tombstone(TombstoneBody(erasureID: "e1")))
        #expect(records.decoded(tombstone).body == .tombstone(TombstoneBody(erasureID: "e1")))
        #expect(records.decodes == 2 && records.hits == 2 && records.count == 1)
    }

    @Test func theWindowKeepsTheNewestAndALaggardDoesNotPushThemOut() {
        let records = DecodedRecords(capacity: 4)
        func record(_ seq: UInt64) -> JournalRecord {
            JournalRecord(seq: seq, ingestMillis: 1, key: "k\(seq)", body: Array(#"{"title":"t"}"#.utf8), segment: "s", offset: 0)
        }
        for seq in UInt64(1)...8 { _ = records.decoded(record(seq)) }
        #expect(records.count == 4 && records.decodes == 8)
        // A follower far behind decodes for itself and leaves the leaders' window alone.
        _ = records.decoded(record(2))
        #expect(records.decodes == 9)
        for seq in UInt64(5)...8 { _ = records.decoded(record(seq)) }
        #expect(records.decodes == 9 && records.hits == 4)
    }
}

extension JournalReader {
    fileprivate func readAll() throws -> [JournalRecord] {
        var all: [JournalRecord] = []
        while let record = try next() { all.append(record) }
        return all
    }
}
