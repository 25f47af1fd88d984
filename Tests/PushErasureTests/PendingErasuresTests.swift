import Testing
import PushPayload
import PushSpool
import PushSystem
import PushErasure
import TestSupport

/// The eraser's `durableSeq()` runs after every journal commit, and the stats at every
/// metrics pass: they count the subject files in memory, listing `<state>/erase/` only at the
/// eraser's start, and the count follows what the intake writes and the eraser removes.
@Suite struct PendingErasuresTests {
    static func erasureID(_ index: Int) -> String { String(repeating: "0", count: 31) + String(index, radix: 16) }

    static func request(_ index: Int) -> ErasureRequest {
        ErasureRequest(scope: index.isMultiple(of: 2) ? .user : .device, id: "subject-\(index)", erasureId: erasureID(index))
    }

    @Test func pendingErasuresAreCountedWithoutListingTheDirectoryAgain() throws {
        let temp = TempDir()
        let state = temp.appending("state")
        try Posix.mkdirs(state + "/journal")
        // Three requests a previous run left pending, written by another value as it would have.
        let previous = ErasureRequests(stateDirectory: state)
        for index in 0..<3 { try previous.storeSubject(Self.request(index)) }

        let listings = Locked(0)
        let requests = ErasureRequests(stateDirectory: state, listDirectory: { path in
            listings.withLock { $0 += 1 }
            return (try? RealFileSystem().listDirectory(path)) ?? []
        })
        let factory = EraserFollower.LiveErasureJournalFactory(seal: { 0 }, replaceFingerprints: { _ in }, retentionGate: Locked(()))
        let eraser = try EraserFollower(sources: UserDataSources(stateDirectory: state, spool: SpoolLayout(root: temp.appending("spool"))),
                                        stream: nil, journal: factory, journalLastSeq: 50, requests: requests)
        let atStart = listings.withLock { $0 }
        #expect(atStart >= 1)

        // Pending at start: retention is held where the eraser starts (the journal's start).
        for _ in 0..<1_000 {
            #expect(eraser.durableSeq() == 0)
            #expect(requests.pendingCount == 3)
        }
        #expect(eraser.stats.pending == 3)
        #expect(eraser.statusDetail == "erasing 3")

        // The intake writes one (and again, as a request left for the next start is), the
        // eraser removes them (and one twice).
        try requests.storeSubject(Self.request(3))
        try requests.storeSubject(Self.request(3))
        #expect(requests.pendingCount == 4)
        #expect(eraser.stats.pending == 4)
        for index in [0, 1, 2, 2] { try requests.removeSubject(Self.erasureID(index)) }
        #expect(requests.pendingCount == 1)
        #expect(eraser.durableSeq() == 0)
        try requests.removeSubject(Self.erasureID(3))
        #expect(requests.pendingCount == 0)
        #expect(eraser.durableSeq() == nil)
        #expect(eraser.statusDetail == nil)
        #expect(listings.withLock { $0 } == atStart)

        // The figures are the directory's.
        try previous.storeSubject(Self.request(7))
        requests.refreshPending()
        #expect(requests.pendingCount == 1)
        #expect(ErasureRequests(stateDirectory: state).pendingCount == 1)
    }
}
