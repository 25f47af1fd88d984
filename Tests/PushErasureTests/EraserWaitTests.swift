@preconcurrency import Glibc
import Testing
import PushFollow
import PushJournal
import PushSpool
import PushSystem
import PushErasure
import TestSupport
import PushConfig

/// The eraser waits for the other followers to pass an erasure record on their progress, not
/// on a timer: held back, it takes no step; once the others pass the record it performs the
/// erasure at once; a stop while it waits is prompt.
@Suite struct EraserWaitTests {
    /// A follower whose durable seq moves only when the test says so (a lagging exporter).
    final class Held: Follower, Sendable {
        let name = "held"
        let seq = Locked<UInt64>(0)
        func durableSeq() -> UInt64? { seq.withLock { $0 } }
        func step(_ context: FollowerContext) throws(FollowerError) -> FollowerNext { .wake(atMost: nil) }
    }

    static let erasureID = "0123456789abcdef0123456789abcdef"

    /// A journal of `before` plain records followed by one erasure record; returns its seq.
    func makeJournal(_ temp: TempDir, before: Int) async throws -> UInt64 {
        let journal = temp.appending("state") + "/journal"
        try Posix.mkdirs(journal)
        let (writer, _) = try JournalWriter.open(directory: journal, options: JournalOptions(settings: Configuration().journal))
        for index in 0..<before {
            guard case .committed = await writer.append(key: "mindbox@3:bob:n\(index)", body: Array(#"{"user":"bob"}"#.utf8),
                                                        ingestMillis: 1_800_000_000_000)
            else { throw Failure() }
        }
        let body = ErasureRecord.body(erasureID: Self.erasureID, scope: .user, subjectHash: String(repeating: "ab", count: 32),
                                      requestedAt: "2027-01-15T08:00:00Z")
        guard case .committed(let seq) = await writer.append(key: "erasure:" + Self.erasureID, body: body, ingestMillis: 1_800_000_000_000)
        else { throw Failure() }
        try writer.close()
        return seq
    }

    struct Failure: Error {}

    func makeGroup(_ temp: TempDir, held: Held, lastSeq: UInt64,
                   hook: @escaping @Sendable (String) -> Void = { _ in }) throws -> FollowerGroup {
        let sources = UserDataSources(stateDirectory: temp.appending("state"), spool: SpoolLayout(root: temp.appending("spool")))
        let factory = EraserFollower.LiveErasureJournalFactory(seal: { 0 }, replaceFingerprints: { _ in }, retentionGate: Locked(()))
        // journalLastSeq 0: a fresh eraser reads from the start.
        let eraser = try EraserFollower(sources: sources, stream: nil, journal: factory, journalLastSeq: 0, hook: hook)
        return FollowerGroup([held, eraser], commits: CommitFeed(lastSeq: lastSeq))
    }

    @Test func anErasureWaitsForTheOthersProgressWithoutATimer() async throws {
        let temp = TempDir("eraser-wait")
        let seq = try await makeJournal(temp, before: 20)
        let held = Held()
        held.seq.withLock { $0 = 5 }
        let group = try makeGroup(temp, held: held, lastSeq: seq)
        let eraser = try #require(group.runner(named: "erase"))
        let requests = ErasureRequests(stateDirectory: temp.appending("state"))
        try group.start()
        defer { _ = group.stop(deadline: Posix.monotonicNanos() + 5_000_000_000) }
        #expect(waitFor { eraser.steps >= 1 })
        // Held back well past a few timer periods: one step read up to the record, and no
        // other until the others move (a 500 ms re-check would have stepped 3 more times).
        usleep(1_600_000)  // why: the window under test: longer than three periods of the timer that must not exist
        #expect(eraser.steps == 1)
        #expect(requests.status(Self.erasureID) == nil)
        let checks = eraser.othersShortChecks
        #expect(checks >= 1, "the eraser waits for the others' progress")

        // Progress short of the record wakes the check, not a step of the eraser: the check
        // finds the others still short and waits again.
        held.seq.withLock { $0 = seq - 2 }
        try #require(group.runner(named: "held")).wake()
        #expect(waitFor { eraser.othersShortChecks > checks }, "the held runner's progress was not checked")
        #expect(eraser.steps == 1)
        #expect(requests.status(Self.erasureID) == nil)

        // Past it: the erasure is performed at once.
        let released = Posix.monotonicNanos()
        held.seq.withLock { $0 = seq - 1 }
        try #require(group.runner(named: "held")).wake()
        #expect(waitFor { requests.status(Self.erasureID)?.complete == true })
        #expect(Posix.monotonicNanos() - released < 400_000_000)
    }

    @Test func aStopWhileTheEraserWaitsIsPrompt() async throws {
        let temp = TempDir("eraser-wait-stop")
        let seq = try await makeJournal(temp, before: 3)
        let group = try makeGroup(temp, held: Held(), lastSeq: seq)
        try group.start()
        #expect(waitFor { (group.runner(named: "erase")?.steps ?? 0) >= 1 })
        let started = Posix.monotonicNanos()
        #expect(group.stop(deadline: started + 5_000_000_000).isEmpty)
        #expect(Posix.monotonicNanos() - started < 1_000_000_000)
    }
}

func waitFor(_ seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    eventually(within: seconds, condition)
}
