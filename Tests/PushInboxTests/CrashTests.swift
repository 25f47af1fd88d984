@preconcurrency import Glibc
import Foundation
import PushInbox
import PushJournal
import PushSystem
import Testing
import TestSupport
import TestTraits

@Suite(.tags(.slow)) struct InboxCrashTests {
    /// `pushspoolctl nc update` applies the journal into the live index in batches; SIGKILL
    /// it mid-way, run it again, and the index equals a rebuild from the journal.
    @Test func killDuringIndexingLosesNothing() async throws {
        let f = try InboxFixture()
        let bodies = (0..<30_000).map { i -> [UInt8] in
            JSONValue.object(["vendor": .string("fcm"), "id": .string("m\(i)"), "user": .string("u\(i % 50)"),
                              "title": .string("title \(i)"), "buttons": .array([]),
                              "ingestedAt": .string("2027-01-01T00:00:00.000Z")]).serialized()
        }
        let writer = f.writer
        await withTaskGroup(of: Void.self) { group in
            for (i, body) in bodies.enumerated() {
                group.addTask { _ = await writer.append(key: "m\(i)", body: body, ingestMillis: 1) }
                if i % 512 == 511 { await group.waitForAll() }
            }
        }
        for i in 0..<200 { try await f.event(i % 2 == 0 ? "nc.read" : "nc.archive", user: "u\(i % 50)", item: .integer(i + 1)) }
        let ctl = ProcessRunner.executable("pushspoolctl")
        let args = ["--state-dir", f.stateDirectory, "--spool", f.temp.appending("spool"), "nc", "update"]
        var killedMidway = false
        for delay in [150, 300, 600] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: ctl)
            process.arguments = args
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            usleep(UInt32(delay * 1000))  // why: the fault: the kill comes at a chosen moment of the run
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            if process.terminationReason == .uncaughtSignal {
                // Killed before the schema was committed (a loaded machine), the index is missing.
                let applied: UInt64
                do { applied = try InboxIndex(path: f.indexPath, readOnly: true).appliedSeq() } catch {
                    guard case .missing = error.kind else { throw error }
                    applied = 0
                }
                if applied < 30_200 { killedMidway = true }
            }
        }
        #expect(killedMidway, "the child finished before any kill; raise the record count")
        let finish = try ProcessRunner.run(ctl, args)
        #expect(finish.status == 0, "\(finish.stderr)")
        let rebuilt = f.temp.appending("rebuilt.sqlite")
        _ = try InboxIndex.rebuild(path: rebuilt, journalDirectory: f.journalDirectory)
        let live = try InboxIndex(path: f.indexPath, readOnly: true)
        #expect(try live.appliedSeq() == 30_200)
        #expect(try live.canonicalDump() == InboxIndex(path: rebuilt, readOnly: true).canonicalDump())
    }

    /// A writer killed after SQLite created the file but before the schema transaction
    /// committed leaves a database without tables; readers see "missing" (rebuild with
    /// `nc reindex`), not an SQL error, and the next writer creates the schema.
    @Test func anIndexKilledBeforeItsSchemaReadsAsMissing() throws {
        let f = try InboxFixture()
        try Posix.mkdirs(f.temp.appending("state/inbox"))
        _ = try SQLiteDatabase(path: f.indexPath, mode: .readWriteCreate).pragmaText("PRAGMA journal_mode=WAL")
        do {
            _ = try InboxIndex(path: f.indexPath, readOnly: true)
            Issue.record("opened an index without a schema")
        } catch {
            guard case .missing = error.kind else { Issue.record("expected .missing, got \(error)"); return }
        }
        let writer = try InboxIndex(path: f.indexPath)
        #expect(try writer.appliedSeq() == 0)
    }

    @Test func ctlListCountInappAndReindex() async throws {
        let f = try InboxFixture()
        let ctl = ProcessRunner.executable("pushspoolctl")
        let base = ["--state-dir", f.stateDirectory, "--spool", f.temp.appending("spool")]
        try Posix.mkdirs(f.temp.appending("spool/tmp"))
        try Posix.mkdirs(f.temp.appending("spool/incoming"))
        let missing = try ProcessRunner.run(ctl, base + ["nc", "list", "--user", "alice"])
        #expect(missing.status == 1 && missing.stderr.contains("nc reindex"))
        try await f.notification(title: "hello")
        let newest = try await f.notification(title: "hello again")
        // A MODAL is presented by `nc inapp`, not listed (ListModals=no).
        let modal = try await f.notification(title: "modal", presentation: "modal")
        let reindex = try ProcessRunner.run(ctl, base + ["nc", "reindex"])
        #expect(reindex.status == 0 && reindex.stdout.contains("3 items"), "\(reindex.stderr)")
        let list = try ProcessRunner.run(ctl, base + ["nc", "list", "--user", "alice", "--limit", "1", "--json"])
        #expect(list.status == 0)
        let lines = list.stdout.split(separator: "\n").map { try? JSONParser().parse(String($0)) }
        #expect(lines.count == 2 && lines[0]?["item"]?.stringValue == "\(newest)" && lines[1]?["nextCursor"] != nil)
        let count = try ProcessRunner.run(ctl, base + ["nc", "count", "--user", "alice", "--json"])
        #expect(count.stdout == "{\"unread\":2,\"unseen\":2}\n")
        let inapp = try ProcessRunner.run(ctl, base + ["nc", "inapp", "--user", "alice"])
        #expect(inapp.status == 0 && inapp.stdout.contains("modal"))
        let incoming = try FileManager.default.contentsOfDirectory(atPath: f.temp.appending("spool/incoming"))
        #expect(incoming.count == 1)
        let envelope = try JSONParser().parse(try Posix.readFile(f.temp.appending("spool/incoming/" + incoming[0])))
        #expect(envelope["user"]?.stringValue == "alice" && envelope["event"]?["type"]?.stringValue == "nc.inapp-shown")
        #expect(envelope["event"]?["item"]?.intValue == Int(modal))
        let bad = try ProcessRunner.run(ctl, base + ["nc", "list", "--user", "alice", "--cursor", "junk"])
        #expect(bad.status == 1 && bad.stderr.contains("invalid cursor"))
    }
}
