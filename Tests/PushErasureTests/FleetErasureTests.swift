@preconcurrency import Glibc
import Foundation
import Testing
import PushConfig
import PushExport
import PushJournal
import PushPayload
import PushSpool
import PushSystem
import PushErasure
import TestSupport

/// The fleet erasure listener's decisions, without NATS: which stream messages are erasure
/// notices, how a keyed hash is resolved to one of this host's users or devices (from keys, and
/// from event bodies), and what a notice comes to here (dropped, already here, nothing here).
@Suite struct FleetErasureTests {
    static let secret = ErasureSecret(bytes: Array(repeating: 7, count: ErasureSecret.size))
    static let erasureID = String(repeating: "ab", count: 16)

    static func notice(_ subject: ErasureSubject, id: String = erasureID) -> [UInt8] {
        ErasureRecord.body(erasureID: id, scope: subject.scope, subjectHash: secret.subjectHash(subject), requestedAt: "2027-01-01T00:00:00Z")
    }

    /// A journal with pushes of ulla (user in the key), an event of eve (user only in the
    /// body), a push to device dev-d without a user, and a tombstone; a spool whose `failed/`
    /// holds an envelope of quinn.
    static func journal(_ temp: TempDir) async throws -> String {
        let state = temp.appending("state")
        try Posix.mkdirs(state + "/journal")
        let (writer, _) = try JournalWriter.open(directory: state + "/journal", options: JournalOptions(settings: Configuration().journal))
        let records: [(String, JSONValue)] = [
            ("mindbox@4:ulla:n1", .object(["vendor": .string("mindbox"), "user": .string("ulla"), "title": .string("t")])),
            ("event:e1", .object(["kind": .string("event"), "type": .string("opened"), "user": .string("eve")])),
            ("mindbox:n2", .object(["vendor": .string("mindbox"), "device": .string("dev-d"), "title": .string("t")])),
            // Journaled before intake refused control characters.
            ("mindbox@5:ctl\u{1}x:n4", .object(["vendor": .string("mindbox"), "user": .string("ctl\u{1}x"), "title": .string("t")])),
            (secret.tombstoneKey(for: "mindbox@4:gone:n3"), .object(["kind": .string("erased"), "erasure": .string(erasureID)])),
        ]
        for (key, body) in records {
            guard case .committed = await writer.append(key: key, body: body.serialized(), ingestMillis: 1_800_000_000_000) else {
                throw UserDataErasureTests.Failure("append \(key)")
            }
        }
        try writer.close()
        // quinn is named only by a quarantined envelope.
        let spool = SpoolLayout(root: temp.appending("spool"))
        try spool.create()
        try Posix.writeFileAtomically(directory: spool.failed, name: "bad.json",
                                      bytes: Array(#"{"pushspool":1,"user":"quinn","payload":"not a push"}"#.utf8))
        return state
    }

    @Test func onlyWellFormedErasureRecordsAreNotices() {
        #expect(FleetErasureNotice.parse(Self.notice(.user("ulla")))?.erasureID == Self.erasureID)
        #expect(FleetErasureNotice.parse(Self.notice(.device("dev-d")))?.scope == .device)
        #expect(FleetErasureNotice.parse(Array(#"{"vendor":"mindbox","user":"ulla","kind":"push"}"#.utf8)) == nil)
        #expect(FleetErasureNotice.parse(Array(#"{"kind":"erasure","erasureId":"xyz","scope":"user","subject":"00"}"#.utf8)) == nil)
        #expect(FleetErasureNotice.parse(Array(#"{"kind":"erasure","erasureId":"\#(Self.erasureID)","scope":"group","subject":"\#(String(repeating: "0", count: 64))"}"#.utf8)) == nil)
        #expect(FleetErasureNotice.parse(Array("not json \"kind\":\"erasure\"".utf8)) == nil)
    }

    @Test(arguments: [(ErasureSubject.user("ulla"), "ulla"), (.user("eve"), "eve"), (.device("dev-d"), "dev-d"),
                      (.user("quinn"), "quinn"), (.user("gone"), nil), (.user("nobody"), nil), (.device("ulla"), nil)] as [(ErasureSubject, String?)])
    func aHashResolvesToTheIdThisHostsRecordsName(_ subject: ErasureSubject, _ expected: String?) async throws {
        let temp = TempDir("fleet-resolve")
        let state = try await Self.journal(temp)
        let notice = try #require(FleetErasureNotice.parse(Self.notice(subject)))
        let resolver = FleetSubjectResolver(journalDirectory: state + "/journal", secret: Self.secret,
                                            spool: SpoolLayout(root: temp.appending("spool")))
        #expect(try resolver.resolve(notice) == expected)
    }

    @Test func aResolvedNoticeDropsTheRequestAndAJournaledOneDoesNot() async throws {
        let temp = TempDir("fleet-handle")
        let state = try await Self.journal(temp)
        let spool = SpoolLayout(root: temp.appending("spool"))
        let journaledKeys = Locked<Set<String>>([])
        let options = FleetErasureOptions(export: ExportOptions(stateDirectory: state, instance: nil), hostId: "host-b")
        #expect(options.consumerName == "pushspool-erase-host-b")
        #expect(options.filterSubject == "pushspool.erasure.none")
        let listener = FleetErasureListener(options: options, secret: Self.secret, stateDirectory: state, spool: spool,
                                            journaled: { key in journaledKeys.withLock { $0.contains(key) } })
        #expect(try listener.handle(Array(#"{"vendor":"mindbox","user":"ulla"}"#.utf8)) == .other)
        #expect(try listener.handle(Self.notice(.user("nobody"), id: String(repeating: "cd", count: 16))) == .nothingHere)
        // An id no request can carry would be quarantined, plain id and all: nothing is dropped.
        #expect(try listener.handle(Self.notice(.user("ctl\u{1}x"), id: String(repeating: "ef", count: 16))) == .unusableId)
        #expect(try FileManager.default.contentsOfDirectory(atPath: spool.incoming).isEmpty)

        #expect(try listener.handle(Self.notice(.user("ulla"))) == .dropped)
        let dropped = try FileManager.default.contentsOfDirectory(atPath: spool.incoming)
        #expect(dropped == ["fleet-erase-\(Self.erasureID).json"])
        let bytes = try Posix.readFile(spool.incoming + "/" + dropped[0], limit: 4096)
        #expect(bytes == ErasureRequest(scope: .user, id: "ulla", erasureId: Self.erasureID).envelopeBytes())
        // Delivered again while the first drop waits in incoming/: the same request, no error.
        #expect(try listener.handle(Self.notice(.user("ulla"))) == .dropped)

        // Once journaled here (or performed: its status file), a notice is done.
        journaledKeys.withLock { _ = $0.insert("erasure:" + Self.erasureID) }
        #expect(try listener.handle(Self.notice(.user("ulla"))) == .alreadyHere)
        journaledKeys.withLock { $0 = [] }
        let requests = ErasureRequests(stateDirectory: state)
        try requests.write(ErasureRequests.Status(erasureID: Self.erasureID, scope: "user", subject: "x", seq: 9))
        #expect(try listener.handle(Self.notice(.user("ulla"))) == .alreadyHere)
    }

    @Test func aTemplateWithoutTheVendorTakesEverySubject() {
        var export = ExportOptions(stateDirectory: "/nonexistent", instance: nil)
        export.subject = "pushspool.all.{platform}"
        #expect(FleetErasureOptions(export: export, hostId: "h.1").filterSubject == "")
        #expect(FleetErasureOptions(export: export, hostId: "h.1").consumerName == "pushspool-erase-h_1")
    }
}
