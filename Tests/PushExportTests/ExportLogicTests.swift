import Testing
import PushExport
import PushJournal
import PushSystem
import TestSupport

@Suite struct AckWindowTests {
    @Test func cursorMovesOnlyOverAContiguousRunOfAcks() {
        var window = AckWindow(acknowledged: 10)
        for seq: UInt64 in 11...15 { window.published(seq) }
        #expect(window.pending == 5)
        do { let moved = window.acked(13); #expect(!moved) }  // a gap at 11 and 12
        #expect(window.acknowledged == 10)
        do { let moved = window.acked(11); #expect(moved) }
        #expect(window.acknowledged == 11)
        do { let moved = window.acked(12); #expect(moved) }
        #expect(window.acknowledged == 13)  // 13 was waiting
        #expect(window.pending == 2)
        #expect(window.pendingSeqs == [14, 15])
    }

    @Test func aDuplicateOrStaleAckChangesNothing() {
        var window = AckWindow(acknowledged: 5)
        window.published(6)
        do { let moved = window.acked(6); #expect(moved) }
        do { let moved = window.acked(6); #expect(!moved) }
        do { let moved = window.acked(3); #expect(!moved) }
        do { let moved = window.acked(99); #expect(!moved) }  // never published
        #expect(window.acknowledged == 6)
    }

    @Test func aFailureIsRememberedUntilResetAndNothingAcknowledgedIsLost() {
        var window = AckWindow(acknowledged: 0)
        for seq: UInt64 in 1...4 { window.published(seq) }
        _ = window.acked(1)
        window.failed(3)
        #expect(window.failed)
        window.reset()
        #expect(!window.failed)
        #expect(window.acknowledged == 1)
        #expect(window.pending == 0)
        #expect(window.lastPublished == 1)
        // A late ack of an earlier publish after the reset is ignored: not in flight any more.
        do { let moved = window.acked(2); #expect(!moved) }
        window.published(2)
        do { let moved = window.acked(2); #expect(moved) }
        #expect(window.acknowledged == 2)
    }

    @Test func aFailureOfAnAcknowledgedSeqIsIgnored() {
        var window = AckWindow(acknowledged: 7)
        window.failed(7)
        #expect(!window.failed)
    }

    @Test func manyAcksCompactTheWindow() {
        var window = AckWindow(acknowledged: 0)
        for seq in 1...20_000 as ClosedRange<UInt64> { window.published(seq) }
        for seq in stride(from: 20_000 as UInt64, through: 1, by: -1) { _ = window.acked(seq) }
        #expect(window.acknowledged == 20_000)
        #expect(window.pending == 0)
    }
}

@Suite struct SubjectTemplateTests {
    @Test(arguments: ["pushspool.{vendor}.{platform}", "a", "push.{vendor}", "x-{vendor}_{platform}.y"])
    func accepts(_ text: String) {
        #expect(SubjectTemplate.validate(text) == nil)
    }

    @Test(arguments: ["", "a..b", ".a", "a.", "a.*", "a.>", "a b", "a.{user}", "a.{vendor", String(repeating: "a", count: 201)])
    func refuses(_ text: String) {
        #expect(SubjectTemplate.validate(text) != nil)
        #expect(SubjectTemplate(text) == nil)
    }

    @Test func rendersAndCannotBeWidenedByData() throws {
        let template = try #require(SubjectTemplate("pushspool.{vendor}.{platform}"))
        #expect(template.subject(vendor: "mindbox", platform: "ios") == "pushspool.mindbox.ios")
        #expect(template.subject(vendor: "a.b", platform: "*") == "pushspool.a_b._")
        #expect(template.subject(vendor: "x", platform: "") == "pushspool.x.none")
        #expect(template.streamSubject == "pushspool.*.*")
        #expect(SubjectTemplate("fixed.subject")!.streamSubject == "fixed.subject")
    }

    @Test func messageIdIsHostAndJournalKey() throws {
        let template = try #require(SubjectTemplate("p.{vendor}.{platform}"))
        let record = JournalRecord(seq: 7, ingestMillis: 1, key: "mindbox@3:bob:abc", body: Array(#"{"platform":"android"}"#.utf8),
                                   segment: "s", offset: 0)
        let message = ExportMessage(record: record, hostId: "h1", template: template)
        #expect(message.msgId == "h1:mindbox@3:bob:abc")
        #expect(message.subject == "p.mindbox.android")
        #expect(message.seq == 7)
        let event = JournalRecord(seq: 8, ingestMillis: 1, key: "event:e1", body: Array(#"{"kind":"event"}"#.utf8), segment: "s", offset: 0)
        #expect(ExportMessage(record: event, hostId: "h1", template: template).subject == "p.event.event")
    }
}

@Suite struct ExportCursorTests {
    @Test func missingIsZeroAndWritesRoundTrip() throws {
        let temp = TempDir()
        #expect(try ExportCursor.read(stateDirectory: temp.path) == 0)
        try ExportCursor.write(42, stateDirectory: temp.path)
        #expect(try ExportCursor.read(stateDirectory: temp.path) == 42)
        try ExportCursor.write(43, stateDirectory: temp.path)
        #expect(try ExportCursor.read(stateDirectory: temp.path) == 43)
    }

    @Test func garbageIsAnErrorNotZero() throws {
        let temp = TempDir()
        try Posix.mkdirs(temp.appending("export"))
        try Posix.writeFileAtomically(directory: temp.appending("export"), name: "cursor", bytes: Array("nope\n".utf8))
        #expect(throws: ExportError.self) { try ExportCursor.read(stateDirectory: temp.path) }
    }

    @Test func hostIdComesFromMachineIdAndIsChecked() throws {
        let temp = TempDir()
        try Posix.writeFileAtomically(directory: temp.path, name: "machine-id", bytes: Array("0123abcd\n".utf8))
        var options = ExportOptions(stateDirectory: temp.path, instance: nil)
        #expect(try options.resolvedHostId(machineIdPath: temp.appending("machine-id")) == "0123abcd")
        options.hostId = "web-1"
        #expect(try options.resolvedHostId(machineIdPath: temp.appending("missing")) == "web-1")
        options.hostId = "a:b"
        #expect(throws: ExportError.self) { try options.resolvedHostId() }
    }

    /// Instances on one host share /etc/machine-id: without the instance in the default host
    /// id, one payload id journaled by two instances would get one `Nats-Msg-Id`, and the stream
    /// would drop all but the first.
    @Test func instancesGetDistinctDefaultHostIds() throws {
        let temp = TempDir()
        try Posix.writeFileAtomically(directory: temp.path, name: "machine-id", bytes: Array("0123abcd\n".utf8))
        var a = ExportOptions(stateDirectory: temp.path, instance: nil)
        a.instance = "a"
        var b = a
        b.instance = "b@x"
        let idA = try a.resolvedHostId(machineIdPath: temp.appending("machine-id"))
        let idB = try b.resolvedHostId(machineIdPath: temp.appending("machine-id"))
        #expect(idA == "0123abcd.a" && idB == "0123abcd.b_x")
        a.hostId = "web-1"
        #expect(try a.resolvedHostId(machineIdPath: temp.appending("machine-id")) == "web-1")
    }
}
