@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
@testable import PushJournal
import PushSystem

/// Issue 26, the journal's part: erasing a user rewrites every segment, archive and retired
/// key file that names them with same-length tombstones; everything else stays byte for byte.
@Suite struct ErasureTests {
    static let secret = ErasureSecret(bytes: Array(0..<32))
    static let perUser = 30

    /// Pushes and events for alice and bob, interleaved over many small segments; the older
    /// half archived (zstd) with its keys kept in `keys/`.
    func fixture(_ temp: TempDir, archive: Bool = true) throws {
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: testOptions { $0.segmentBytes = 2048 })
        for i in 1...Self.perUser {
            for user in ["alice", "bob"] {
                // As big as real records (a normalised push is several hundred bytes).
                let pad = String(repeating: "x", count: 120)
                let push = "{\"vendor\":\"apns\",\"user\":\"\(user)\",\"title\":\"\(user)-title-\(i)\",\"body\":\"\(user)-body-\(i)\",\"pad\":\"\(pad)\"}"
                #expect(seq(append(writer, "apns@\(user.utf8.count):\(user):id\(i)", push)) != nil)
                let event = "{\"kind\":\"event\",\"type\":\"reply\",\"user\":\"\(user)\",\"text\":\"\(user)-typed-\(i)\",\"pad\":\"\(pad)\"}"
                #expect(seq(append(writer, "event:\(user)\(i)", event)) != nil)
            }
        }
        // As in pushspoold: retention runs beside the writer, whose dedup index (and so its
        // checkpoint at close) keeps the retired segments' keys.
        if archive {
            var policy = RetentionPolicy(maxBytes: Int64(segmentNames(temp.journal).count / 2 * 2048))
            policy.archive = true
            policy.dedupWindow = .seconds(86_400)
            let result = try JournalRetention.runPass(directory: temp.journal, policy: policy, retentionFloor: { nil })
            try #require(result.archived.count >= 2)
            try #require(!RetiredKeys.list(directory: temp.journal).isEmpty)
        }
        try writer.close()
    }

    func alice(_ id: String = "0123456789abcdef0123456789abcdef") -> ErasureTarget {
        ErasureTarget(erasureID: id, subject: .user("alice"), secret: Self.secret)
    }

    /// Every file under `root`, archives also decompressed: what a raw-byte search must cover.
    func contents(_ root: String) throws -> [(path: String, bytes: [UInt8])] {
        var out: [(String, [UInt8])] = []
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let relative = enumerator?.nextObject() as? String {
            let path = root + "/" + relative
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            out.append((path, readBytes(path)))
            if path.hasSuffix(JournalFiles.archiveSuffix) {
                out.append((path + " (decompressed)",
                            try JournalArchive.segmentBytes(directory: root, archiveName: (path as NSString).lastPathComponent)))
            }
        }
        return out
    }

    func occurs(_ needle: String, in files: [(path: String, bytes: [UInt8])]) -> [String] {
        let pattern = Data(needle.utf8)
        return files.filter { Data($0.bytes).range(of: pattern) != nil }.map(\.path)
    }

    func everything(_ directory: String) throws -> [JournalRecord] {
        let archived = try JournalArchive.list(directory: directory).flatMap {
            try JournalArchive.records(directory: directory, archiveName: $0.name)
        }
        return archived + (try readAll(directory))
    }

    func expectErased(_ temp: TempDir, before: [JournalRecord]) throws {
        let files = try contents(temp.journal)
        for i in 1...Self.perUser {
            for text in ["alice-title-\(i)", "alice-body-\(i)", "alice-typed-\(i)", "alice:id\(i)"] {
                #expect(occurs(text, in: files).isEmpty, "\(text) still in \(occurs(text, in: files))")
            }
            for text in ["bob-title-\(i)", "bob-body-\(i)", "bob-typed-\(i)"] {
                #expect(!occurs(text, in: files).isEmpty, "\(text) is gone")
            }
        }
        #expect(occurs("\"alice\"", in: files).isEmpty)
        let after = try everything(temp.journal)
        // Same seqs, same places, same ingest times; bob's records untouched, alice's tombstones.
        #expect(after.map(\.seq) == before.map(\.seq))
        #expect(after.map(\.offset) == before.map(\.offset))
        #expect(after.map(\.ingestMillis) == before.map(\.ingestMillis))
        for (old, new) in zip(before, after) {
            if String(decoding: old.body, as: UTF8.self).contains("\"alice\"") {
                #expect(new.key == Self.secret.tombstoneKey(for: old.key))
                #expect(new.body.count + new.key.utf8.count == old.body.count + old.key.utf8.count)
                #expect(Tombstone.erasureID(json: new.body) == "0123456789abcdef0123456789abcdef")
            } else {
                #expect(new == old)
            }
        }
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 0)
    }

    /// RFC 4231, test cases 1 and 6 (a key longer than the block).
    @Test func hmacMatchesTheRFCVectors() {
        #expect(HMACSHA256.hex(key: [UInt8](repeating: 0x0b, count: 20), message: "Hi There".utf8)
                == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        #expect(HMACSHA256.hex(key: [UInt8](repeating: 0xaa, count: 131),
                               message: "Test Using Larger Than Block-Size Key - Hash Key First".utf8)
                == "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
    }

    @Test(arguments: [60, 120, 300, 4000])
    func aTombstoneIsValidJSONOfTheRecordsExactLength(bodyLength: Int) throws {
        let made = try Tombstone.body(bodyLength: bodyLength, originalKey: "apns@5:alice:id1", erasureID: "ab", secret: Self.secret)
        #expect(made.key.count + made.json.count == bodyLength)
        let parsed = try JSONParser().parse(made.json)
        #expect(parsed["kind"]?.stringValue == "erased")
        #expect(String(decoding: made.key, as: UTF8.self).hasPrefix("erased:"))
    }

    @Test func aBodyTooShortForAnyTombstoneIsRefused() {
        #expect(throws: ErasureError.self) {
            _ = try Tombstone.body(bodyLength: 30, originalKey: "k", erasureID: "ab", secret: Self.secret)
        }
    }

    @Test func theUserIsReadFromALengthPrefixedKey() {
        #expect(ErasureTarget.user(inKey: "apns@5:alice:id1") == "alice")
        #expect(ErasureTarget.user(inKey: "fcm@7:a:b:c:d:x") == "a:b:c:d")
        #expect(ErasureTarget.user(inKey: "apns:alice") == nil)
        #expect(ErasureTarget.user(inKey: "apns@9:alice:id") == nil)
        #expect(ErasureTarget.user(inKey: "event:x@5:alice:y") == nil)
    }

    /// A user is matched by the record's `user` or its key; a device by `device` only; the
    /// same id as user and as device are different subjects.
    @Test func targetsMatchTheirScopeOnly() {
        let user = ErasureTarget(erasureID: "i", subject: .user("x1"), secret: Self.secret)
        let device = ErasureTarget(erasureID: "i", subject: .device("x1"), secret: Self.secret)
        let byUser = Array(#"{"user":"x1","device":"d"}"#.utf8)
        let byDevice = Array(#"{"user":"u","device":"x1"}"#.utf8)
        #expect(user.matches(key: "event:1", json: byUser, secret: Self.secret))
        #expect(!user.matches(key: "event:1", json: byDevice, secret: Self.secret))
        #expect(user.matches(key: "fcm@2:x1:abc", json: Array("{}".utf8), secret: Self.secret))
        #expect(device.matches(key: "event:1", json: byDevice, secret: Self.secret))
        #expect(!device.matches(key: "fcm@2:x1:abc", json: byUser, secret: Self.secret))
        #expect(user.subjectHash != device.subjectHash)
    }

    @Test func erasingAUserLeavesNoByteOfThemAndEveryByteOfTheOthers() throws {
        let temp = TempDir()
        try fixture(temp)
        let before = try everything(temp.journal)
        let report = try JournalErasure.run(directory: temp.journal, targets: [alice()], secret: Self.secret)
        #expect(report.records == Self.perUser * 2)
        #expect(!report.archivesRewritten.isEmpty && !report.segmentsRewritten.isEmpty && !report.keyFilesRewritten.isEmpty)
        try expectErased(temp, before: before)
    }

    @Test func aSecondRunChangesNothing() throws {
        let temp = TempDir()
        try fixture(temp)
        _ = try JournalErasure.run(directory: temp.journal, targets: [alice()], secret: Self.secret)
        let first = try contents(temp.journal)
        let again = try JournalErasure.run(directory: temp.journal, targets: [alice()], secret: Self.secret)
        #expect(again.records == 0 && again.segmentsRewritten.isEmpty && again.archivesRewritten.isEmpty && again.keyFilesRewritten.isEmpty)
        let second = try contents(temp.journal)
        #expect(first.map(\.path) == second.map(\.path))
        #expect(first.map(\.bytes) == second.map(\.bytes))
    }

    @Test func aRunningWriterKeepsTheJournalAndTheErasureSaysWhatToDo() throws {
        let temp = TempDir()
        try fixture(temp, archive: false)
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: testOptions())
        defer { try? writer.close() }
        let error = #expect(throws: ErasureError.self) {
            _ = try JournalErasure.run(directory: temp.journal, targets: [alice()], secret: Self.secret)
        }
        #expect(error?.code == .busy)
        #expect(error?.description.contains("stop it") == true)
    }

    /// The live path (pushspoold running): the writer seals its active segment, only sealed
    /// segments are rewritten, records from the erasure's seq on are new data, and the writer's
    /// dedup index and checkpoint are pointed at the tombstone keys, so a redelivery is still a
    /// duplicate while it runs and after a restart.
    @Test func aLiveErasureRewritesSealedSegmentsBesideTheWriter() throws {
        let temp = TempDir()
        try fixture(temp, archive: true)
        let (writer, _) = try JournalWriter.open(directory: temp.journal, options: testOptions {
            $0.segmentBytes = 1 << 20
            $0.erasureSecret = Self.secret
        })
        // Records in the active segment, below the erasure, and one after it.
        let pad = String(repeating: "y", count: 120)
        let below = try #require(seq(append(writer, "apns@5:alice:active", "{\"user\":\"alice\",\"title\":\"alice-active\",\"pad\":\"\(pad)\"}")))
        var target = alice()
        target.before = below + 1
        #expect(seq(append(writer, "apns@5:alice:later", "{\"user\":\"alice\",\"title\":\"alice-later\",\"pad\":\"\(pad)\"}")) != nil)
        let sealedBelow = try writer.sealActiveSegment()
        #expect(sealedBelow == below + 2)
        let rewritten = try JournalErasure.runLive(directory: temp.journal, targets: [target], secret: Self.secret, sealedBelow: sealedBelow)
        #expect(rewritten.report.records == 2 * Self.perUser + 1)
        try writer.replaceErasedFingerprints(rewritten.tombstones)
        // The new active segment takes records; the erased push is still a duplicate.
        if case .duplicate = append(writer, "apns@5:alice:id\(Self.perUser)", "{}") {} else { Issue.record("erased push journaled again") }
        if case .duplicate = append(writer, "apns@5:alice:active", "{}") {} else { Issue.record("erased active push journaled again") }
        #expect(seq(append(writer, "apns@3:bob:new", "{}")) != nil)
        try writer.close()

        let files = try contents(temp.journal)
        #expect(occurs("alice-active", in: files).isEmpty)
        #expect(occurs("alice-title-1", in: files).isEmpty)
        #expect(occurs("\"apns@5:alice:id", in: files).isEmpty)
        // After the erasure's record: new data, kept.
        #expect(!occurs("alice-later", in: files).isEmpty)
        #expect(!occurs("bob-title-1", in: files).isEmpty)
        #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 0)
        // No slot of the checkpoint keeps the fingerprint of one of alice's erased keys.
        let checkpoint = try #require(DedupCheckpoint.decode(readBytes(temp.journal + "/" + JournalFiles.checkpoint)))
        let erased = Set((1...Self.perUser).map { KeyFingerprints.fingerprint("apns@5:alice:id\($0)") } + [KeyFingerprints.fingerprint("apns@5:alice:active")])
        #expect(checkpoint.keys.filter { erased.contains($0) }.isEmpty)
        // The checkpoint the writer wrote names no original key of alice's: a restart trusts it.
        let (again, report) = try JournalWriter.open(directory: temp.journal, options: testOptions { $0.erasureSecret = Self.secret })
        #expect(report.checkpointUsed)
        if case .duplicate = append(again, "apns@5:alice:id1", "{}") {} else { Issue.record("erased retired push journaled again") }
        try again.close()
    }

    enum CheckpointState: CaseIterable {
        /// Stopped before the checkpoint step: its slots still carry the original keys'
        /// fingerprints and point at tombstones.
        case old
        /// Rewritten: the slots carry the tombstone keys' fingerprints.
        case rewritten
        /// Gone: the table is rebuilt from the live frames (tombstone keys only).
        case rebuilt
    }

    /// The redelivery of an erased push is still a duplicate, whatever the checkpoint holds,
    /// also for a record whose segment is retired (its key in `keys/`). Without the secret it
    /// would be journaled again.
    @Test(arguments: CheckpointState.allCases)
    func aRedeliveredErasedPushIsStillADuplicate(checkpoint: CheckpointState) throws {
        let temp = TempDir()
        try fixture(temp, archive: true)
        do {
            _ = try JournalErasure.run(directory: temp.journal, targets: [alice()], secret: Self.secret) { step throws(ErasureError) in
                if checkpoint == .old, step == .beforeCheckpoint { throw ErasureError(.stopped, "test") }
            }
        } catch {
            #expect(checkpoint == .old && error.code == .stopped)
        }
        if checkpoint == .rebuilt { try FileManager.default.removeItem(atPath: temp.journal + "/" + JournalFiles.checkpoint) }
        let (writer, report) = try JournalWriter.open(directory: temp.journal, options: testOptions { $0.erasureSecret = Self.secret })
        #expect(report.checkpointUsed == (checkpoint != .rebuilt))
        if case .duplicate = append(writer, "apns@5:alice:id\(Self.perUser)", "{}") {} else { Issue.record("erased live push journaled again") }
        if case .duplicate = append(writer, "event:alice\(Self.perUser - 1)", "{}") {} else { Issue.record("erased event journaled again") }
        if checkpoint != .rebuilt {
            // Retired: only the checkpoint and keys/ remember it.
            if case .duplicate = append(writer, "apns@5:alice:id1", "{}") {} else { Issue.record("erased retired push journaled again") }
        }
        if case .duplicate = append(writer, "apns@3:bob:id\(Self.perUser)", "{}") {} else { Issue.record("bob's push journaled again") }
        #expect(seq(append(writer, "apns@5:alice:new", "{}")) != nil)
        try writer.close()

        // The same without the secret: the tombstone no longer confirms the key.
        let (plain, _) = try JournalWriter.open(directory: temp.journal, options: testOptions())
        #expect(seq(append(plain, "apns@5:alice:id\(Self.perUser - 1)", "{}")) != nil)
        try plain.close()
    }

    /// The checkpoint is rewritten, never dropped: it is the only memory of retired keys.
    @Test func theCheckpointKeepsBobsRetiredKeys() throws {
        let temp = TempDir()
        try fixture(temp, archive: true)
        let report = try JournalErasure.run(directory: temp.journal, targets: [alice()], secret: Self.secret)
        #expect(report.checkpointRewritten)
        let (writer, recovery) = try JournalWriter.open(directory: temp.journal, options: testOptions { $0.erasureSecret = Self.secret })
        #expect(recovery.checkpointUsed)
        if case .duplicate = append(writer, "apns@3:bob:id1", "{}") {} else { Issue.record("bob's retired push journaled again") }
        try writer.close()
    }

    /// Kill at every named step, restart (journal recovery), rerun: the erasure completes and
    /// nothing of anyone else is lost.
    @Test func aCrashAtAnyStepEndsWithTheErasureCompleteAfterARerun() throws {
        let reference = TempDir()
        try fixture(reference)
        var steps: [ErasureStep] = []
        _ = try JournalErasure.run(directory: reference.journal, targets: [alice()], secret: Self.secret) { step throws(ErasureError) in
            steps.append(step)
        }
        #expect(steps.contains(.beforeCheckpoint))
        #expect(steps.contains { if case .archiveTemp = $0 { true } else { false } })
        #expect(steps.contains { if case .segmentRenamed = $0 { true } else { false } })
        #expect(steps.contains { if case .keysRewritten = $0 { true } else { false } })
        // The first of each kind of step (every segment's steps are the same code).
        var kinds: [String] = []
        let crashes = steps.filter { step in
            let kind = String(step.description.prefix { $0 != " " })
            if kinds.contains(kind) { return false }
            kinds.append(kind)
            return true
        }
        #expect(crashes.count == 6)
        for crash in crashes {
            let temp = TempDir("crash-\(crash)")
            try fixture(temp)
            let before = try everything(temp.journal)
            #expect(throws: ErasureError.self) {
                _ = try JournalErasure.run(directory: temp.journal, targets: [alice()], secret: Self.secret) { step throws(ErasureError) in
                    if step == crash { throw ErasureError(.stopped, "killed at \(step)") }
                }
            }
            // The restart: the journal opens (recovery removes a leftover segment .tmp) ...
            let (writer, _) = try JournalWriter.open(directory: temp.journal, options: testOptions { $0.segmentBytes = 2048 })
            try writer.close()
            #expect(JournalVerifier.verify(directory: temp.journal).exitCode == 0, "after a crash at \(crash)")
            // ... and the erasure, run again, finishes.
            _ = try JournalErasure.run(directory: temp.journal, targets: [alice()], secret: Self.secret)
            try expectErased(temp, before: before)
        }
    }
}
