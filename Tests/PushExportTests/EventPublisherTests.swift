import Testing
import PushConfig
import PushExport
import PushJournal
import PushPayload
import PushSystem
import TestSupport

/// What an inbox node publishes for an event it accepted (`[Inbox] Source=nats`): the message
/// must land where the stream's filter takes it, be read back and applied like the record
/// pushspoold would journal, and deduplicate by event id whichever node sent it.
@Suite struct EventPublisherTests {
    static let event = PushEvent(type: .open, eventId: "http.0123abcd", user: "alice", device: "D1", item: 42,
                                 at: "2026-12-01T10:00:00.000Z")

    static func publisher(subject: String = ExportSettings().subject, hostId: String = "node-1") throws -> EventPublisher {
        var settings = ExportSettings()
        settings.subject = subject
        settings.hostId = hostId
        return try EventPublisher(options: ExportOptions(settings: settings, stateDirectory: "/tmp", instance: nil))
    }

    @Test(arguments: [ExportSettings().subject, "fleet.{platform}.x.{vendor}", "one.subject"])
    func theSubjectIsTheExportersForTheEvent(subject: String) throws {
        let publisher = try Self.publisher(subject: subject)
        let message = publisher.message(for: Self.event, ingestMillis: 1_796_119_200_000)
        // The exporter's message for the same event, had pushspoold journaled it.
        let record = JournalRecord(seq: 9, ingestMillis: 1_796_119_200_000, key: Self.event.dedupKey, body: message.body,
                                   segment: "", offset: 0)
        let template = try #require(SubjectTemplate(subject))
        let exported = ExportMessage(record: record, hostId: "ingest-1", template: template)
        #expect(message.subject == exported.subject)
        if subject == ExportSettings().subject { #expect(message.subject == "pushspool.event.event") }
        // The stream's filter takes it (`*` matches one token).
        let filter = template.streamSubject.split(separator: ".")
        let tokens = message.subject.split(separator: ".")
        #expect(filter.count == tokens.count && zip(filter, tokens).allSatisfy { $0 == "*" || $0 == $1 })
    }

    /// The id names the event only, not the node: a retried request (same event id) sent by a
    /// load balancer to another node is the same message. Never the exporter's form.
    @Test func theMessageIdIsTheEventsOnAnyNode() throws {
        let one = try Self.publisher(hostId: "node-1").message(for: Self.event, ingestMillis: 1)
        let two = try Self.publisher(hostId: "node-2").message(for: Self.event, ingestMillis: 2)
        #expect(one.msgId == "event:http.0123abcd")
        #expect(one.msgId == two.msgId)
        #expect(one.msgId != ExportMessage.messageId(hostId: "node-1", key: Self.event.dedupKey))
        #expect(!one.headers.contains { $0.0 == ExportMessage.seqHeader }, "no journal seq: no journal holds it")
        #expect(one.headers.contains { $0 == (ExportMessage.ingestHeader, "1") })
    }

    /// The body is the journal's record of the event, so the stream follower applies it as
    /// the journal follower would; only `sourceFile` is missing (no spool file).
    @Test func theBodyIsTheJournalsRecordWithoutASourceFile() throws {
        let message = try Self.publisher().message(for: Self.event, ingestMillis: 1_796_119_200_000)
        let envelope = Self.event.envelope().serialized() + [0x0a]
        let journaled = try JSONParser().parse(Self.event.recordBody(ingestMillis: 1_796_119_200_000, sourceFile: "f.json",
                                                                     envelopeSHA256: SHA256.hex(of: envelope), envelopeSize: envelope.count))
        guard case .object(var expected) = journaled else { Issue.record("not an object"); return }
        expected["sourceFile"] = nil
        #expect(try JSONParser().parse(message.body) == .object(expected))
        #expect(expected["kind"] == .string("event") && expected["item"] == .integer(42))
        #expect(expected["ingestedAt"] == .string("2026-12-01T10:00:00.000Z"))
    }

    /// An exporter host called `event` would give its records ids of the publisher's form.
    @Test func theHostIdEventIsReserved() throws {
        var settings = ExportSettings()
        settings.hostId = "event"
        #expect(throws: ExportError.self) { try ExportOptions(settings: settings, stateDirectory: "/tmp", instance: nil).resolvedHostId() }
        settings.hostId = "events"
        #expect(try ExportOptions(settings: settings, stateDirectory: "/tmp", instance: nil).resolvedHostId() == "events")
        #expect(throws: ConfigError.self) { try ConfigurationLoader.load(text: "[Export]\nHostId=event\n", path: "pushspool.conf") }
        #expect(try ConfigurationLoader.load(text: "[Export]\nHostId=events\n", path: "pushspool.conf").0.export.hostId == "events")
    }

    /// No server: `.connect`, at once (connection refused), and nothing held for later.
    @Test func noServerIsAConnectFailure() throws {
        var settings = ExportSettings()
        settings.urls = ["nats://127.0.0.1:\(try NatsServer.freePort())"]
        let publisher = try EventPublisher(options: ExportOptions(settings: settings, stateDirectory: "/tmp", instance: nil))
        do {
            try publisher.publish(Self.event)
            Issue.record("published without a server")
        } catch {
            #expect(error.code == .connect)
        }
    }
}
