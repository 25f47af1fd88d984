@preconcurrency import Glibc
import Foundation
import Testing
import PushInbox
import PushJournal
import PushOutboxStore
import PushSpool
import PushSystem
import PushErasure
import TestSupport
import PushConfig
import PushModuleOptions

/// Issue 26: `user erase` over every store of a state directory and a spool built as
/// pushspoold leaves them (journal with archives and retired keys, inbox index, media with
/// thumbnails, outbox, quarantine). Afterwards no file holds a byte of the erased user; the
/// other user's data is all there.
@Suite struct UserDataErasureTests {
    static let count = 20

    struct Fixture {
        let temp: TempDir
        var state: String { temp.appending("state") }
        var spool: SpoolLayout { SpoolLayout(root: temp.appending("spool")) }
        var sources: UserDataSources { UserDataSources(stateDirectory: state, spool: spool) }
        var media: String { state + "/media" }
        /// Outside both trees: what a symlink in failed/ points at.
        var outside: String { temp.appending("outside.json") }

        func image(_ user: String, _ i: Int) -> String { media + "/\(user.prefix(2))/\(user)-\(i).png" }
        func thumbnail(_ user: String, _ i: Int) -> String { media + "/\(user.prefix(2))/\(user)-\(i).thumb256.jpg" }
        var shared: String { media + "/sh/shared.png" }
    }

    func makeFixture(_ label: String = #function) async throws -> Fixture {
        let fixture = Fixture(temp: TempDir(label))
        try Posix.mkdirs(fixture.state + "/journal")
        for dir in ["al", "bo", "sh"] { try Posix.mkdirs(fixture.media + "/" + dir) }
        var options = JournalOptions(settings: Configuration().journal)
        options.segmentBytes = 4096
        let (writer, _) = try JournalWriter.open(directory: fixture.state + "/journal", options: options)
        var n = 0
        for i in 1...Self.count {
            for user in ["alice", "bob"] {
                n += 1
                var push: JSONObject = [
                    "vendor": .string("mindbox"), "platform": .string("ios"), "format": .string("test"), "id": .string("n\(i)"),
                    "title": .string("\(user)-title-\(i)"), "body": .string("\(user)-body-\(i)"), "silent": .bool(false),
                    "buttons": .array([]), "warnings": .array([]), "user": .string(user),
                    "ingestedAt": .string(Timestamp.iso8601(millis: 1_800_000_000_000)),
                ]
                if i % 4 == 0 {
                    // Every fourth push has its own image and thumbnail; every fifth the shared one.
                    push["media"] = .object(["path": .string(fixture.image(user, i)), "status": .string("stored"),
                                             "thumbnail": .object(["path": .string(fixture.thumbnail(user, i))])])
                    try Posix.writeFileAtomically(directory: fixture.media + "/\(user.prefix(2))", name: "\(user)-\(i).png",
                                                  bytes: Array("\(user)-image-bytes-\(i)".utf8))
                    try Posix.writeFileAtomically(directory: fixture.media + "/\(user.prefix(2))", name: "\(user)-\(i).thumb256.jpg",
                                                  bytes: Array("\(user)-thumb-bytes-\(i)".utf8))
                } else if i % 5 == 0 {
                    push["media"] = .object(["path": .string(fixture.shared), "status": .string("stored")])
                }
                let key = "mindbox@\(user.utf8.count):\(user):n\(i)"
                guard case .committed = await writer.append(key: key, body: JSONValue.object(push).serialized(), ingestMillis: 1_800_000_000_000)
                else { throw Failure("append") }
                let reply: JSONObject = ["kind": .string("event"), "type": .string("reply"), "eventId": .string("e\(n)"),
                                                  "user": .string(user), "text": .string("\(user)-typed-\(i)"),
                                                  "at": .string(Timestamp.iso8601(millis: 1_800_000_000_000))]
                guard case .committed = await writer.append(key: "event:e\(n)", body: JSONValue.object(reply).serialized(),
                                                            ingestMillis: 1_800_000_000_000)
                else { throw Failure("append") }
            }
        }
        try writer.close()
        try Posix.writeFileAtomically(directory: fixture.media + "/sh", name: "shared.png", bytes: Array("shared-image-bytes".utf8))

        // The older half archived, with its keys kept for the dedup window.
        var policy = RetentionPolicy(maxBytes: 4096 * 2)
        policy.archive = true
        policy.dedupWindow = .seconds(86_400)
        let retired = try JournalRetention.runPass(directory: fixture.state + "/journal", policy: policy, retentionFloor: { nil })
        try #require(retired.archived.count >= 2)

        // The inbox index, built from the journal (archives are below its floor; it was built
        // before retention in real life, so build it from the records read back).
        let index = try InboxIndex(path: InboxIndex.path(stateDirectory: fixture.state))
        var records = try JournalArchive.list(directory: fixture.state + "/journal").flatMap {
            try JournalArchive.records(directory: fixture.state + "/journal", archiveName: $0.name)
        }
        let reader = try JournalReader(directory: fixture.state + "/journal", fromSeq: (records.last?.seq ?? 0) + 1)
        while let record = try reader.next() { records.append(record) }
        _ = try index.apply(records)

        // Outbox deliveries of both users.
        let store = OutboxStore(stateDirectory: fixture.state)
        try store.create()
        for (user, dir) in [("alice", store.pendingDirectory), ("alice", store.parkedDirectory), ("bob", store.pendingDirectory)] {
            let delivery = OutboxDelivery(seq: UInt64(dir.count + user.count), index: 0, target: .mindbox, eventId: "e-\(user)",
                                          eventType: "open", orderKey: "u:" + user, createdMillis: 1, atMillis: 1, operation: "op",
                                          device: nil, payload: .object(["note": .string("\(user)-outbox")]))
            try store.write(delivery, in: dir)
        }

        // Quarantine: an envelope, a broken file, a reason, bob's, and a symlink out of the spool.
        try fixture.spool.create()
        let failed = fixture.spool.failed
        try Posix.writeFileAtomically(directory: failed, name: "a1.json",
                                      bytes: Array(#"{"pushspool":1,"user":"alice","payload":{"t":"alice-quarantined"}}"#.utf8))
        try Posix.writeFileAtomically(directory: failed, name: "a1.json" + SpoolName.reasonSuffix,
                                      bytes: Array(#"{"code":"x","message":"alice-reason"}"#.utf8))
        try Posix.writeFileAtomically(directory: failed, name: "a2.json", bytes: Array(#"{"user": "alice", "x": alice-broken"#.utf8))
        try Posix.writeFileAtomically(directory: failed, name: "b1.json",
                                      bytes: Array(#"{"pushspool":1,"user":"bob","payload":{"t":"bob-quarantined"}}"#.utf8))
        try Posix.writeFileAtomically(directory: fixture.temp.path, name: "outside.json",
                                      bytes: Array(#"{"pushspool":1,"user":"alice","payload":{}}"#.utf8))
        #expect(symlink(fixture.outside, failed + "/link.json") == 0)

        // Status snapshots whose last error quotes a key.
        try Posix.writeFileAtomically(directory: fixture.state, name: "status.json",
                                      bytes: Array(#"{"files":40,"lastError":"journal: key mindbox@5:alice:n3 refused"}"#.utf8))
        try Posix.mkdirs(fixture.state + "/export")
        try Posix.writeFileAtomically(directory: fixture.state + "/export", name: "status.json",
                                      bytes: Array(#"{"published":3,"lastError":"nats: mindbox@5:alice:n4"}"#.utf8))
        return fixture
    }

    struct Failure: Error { var message: String; init(_ message: String) { self.message = message } }


    func holding(_ needle: String, _ files: [(path: String, bytes: [UInt8])]) -> [String] {
        let pattern = Data(needle.utf8)
        return files.filter { Data($0.bytes).range(of: pattern) != nil }.map(\.path)
    }

    func expectComplete(_ fixture: Fixture) throws {
        let everything = try RawFiles.everyRegularFile(under: fixture.state) + RawFiles.everyRegularFile(under: fixture.spool.root)
        // Not a single occurrence of the id, in any file, in any form the stores write it.
        #expect(holding("alice", everything).isEmpty, "alice is still in \(holding("alice", everything))")
        for i in 1...Self.count {
            for text in ["bob-title-\(i)", "bob-body-\(i)"] {
                #expect(holding(text, everything).count >= 2, "\(text) is not in the journal and the index")
            }
            #expect(!holding("bob-typed-\(i)", everything).isEmpty, "bob's reply \(i) is gone")
            if i % 4 == 0 {
                #expect(!holding("bob-image-bytes-\(i)", everything).isEmpty)
                #expect(!holding("bob-thumb-bytes-\(i)", everything).isEmpty)
            }
        }
        for text in ["bob-outbox", "bob-quarantined", "shared-image-bytes"] { #expect(!holding(text, everything).isEmpty, "\(text) is gone") }
        // The symlink was neither followed nor its target removed.
        #expect(FileManager.default.fileExists(atPath: fixture.outside))
        #expect(JournalVerifier.verify(directory: fixture.state + "/journal").exitCode == 0)
        let index = try InboxIndex(path: InboxIndex.path(stateDirectory: fixture.state), readOnly: true)
        var bobs = 0
        try index.forEachItem(naming: .user("bob")) { _ in bobs += 1 }
        #expect(bobs == Self.count)
        #expect(try index.ownerRow(.user("alice")) == nil)
        // Nothing left of the erasure's own bookkeeping but the secret.
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: fixture.state + "/erase")) ?? []).isEmpty)
    }

    @Test func erasingAUserLeavesNoByteOfThemInAnyStoreAndEverythingOfTheOthers() async throws {
        let fixture = try await makeFixture()
        let before = try RawFiles.everyRegularFile(under: fixture.state) + RawFiles.everyRegularFile(under: fixture.spool.root)
        try #require(!holding("alice-title-1", before).isEmpty && !holding("alice-image-bytes-4", before).isEmpty)
        let (_, counts) = try UserDataErasure(subject: .user("alice"), sources: fixture.sources).run()
        #expect(counts.journalRecords == Self.count * 2)
        #expect(counts.inboxItems == Self.count)
        #expect(counts.outboxDeliveries == 2)
        #expect(counts.quarantined == 2)
        #expect(counts.mediaFiles == Self.count / 4 * 2)
        #expect(counts.mediaShared == 1)
        #expect(counts.statusFiles == 2)
        // The symlink: neither followed nor matched, but reported for a look by hand.
        #expect(counts.quarantineUnchecked == 1)
        try expectComplete(fixture)
        // A second run finds nothing more to do.
        let (_, again) = try UserDataErasure(subject: .user("alice"), sources: fixture.sources).run()
        var nothing = UserDataErasureCounts()
        nothing.quarantineUnchecked = 1
        #expect(again == nothing)
        try expectComplete(fixture)
    }

    /// While pushspoold holds the journal nothing happens, not even a plan (records ingested
    /// after a plan would escape its media list).
    @Test func aRunningDaemonsJournalIsRefusedBeforeAnyStep() async throws {
        let fixture = try await makeFixture()
        let (writer, _) = try JournalWriter.open(directory: fixture.state + "/journal", options: JournalOptions(settings: Configuration().journal))
        defer { try? writer.close() }
        let error = #expect(throws: UserDataError.self) {
            _ = try UserDataErasure(subject: .user("alice"), sources: fixture.sources).run()
        }
        #expect(error?.code == .busy)
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: fixture.state + "/erase")) ?? []).isEmpty)
    }

    /// Stopped after each named step (the first of each kind inside the journal), then run
    /// again: the erasure completes and nothing of bob's is lost.
    @Test func aStopAtAnyStepIsFinishedByTheNextRun() async throws {
        let reference = try await makeFixture("reference")
        var steps: [UserDataErasureStep] = []
        _ = try UserDataErasure(subject: .user("alice"), sources: reference.sources).run { step throws(UserDataError) in steps.append(step) }
        // A step's kind, without the file it is at (file names depend on record sizes, which
        // depend on the fixture's path).
        func kind(_ step: UserDataErasureStep) -> String { step.description.split(separator: " ").prefix(2).joined(separator: " ") }
        var stops: [String] = []
        for step in steps where !stops.contains(kind(step)) { stops.append(kind(step)) }
        #expect(stops.count == 14)
        for (number, stop) in stops.enumerated() {
            let fixture = try await makeFixture("stop-\(number)")
            #expect(throws: UserDataError.self, "stop at \(stop)") {
                _ = try UserDataErasure(subject: .user("alice"), sources: fixture.sources).run { step throws(UserDataError) in
                    if kind(step) == stop { throw UserDataError(.journal, "stopped at \(step)") }
                }
            }
            _ = try UserDataErasure(subject: .user("alice"), sources: fixture.sources).run()
            try expectComplete(fixture)
        }
    }
}
