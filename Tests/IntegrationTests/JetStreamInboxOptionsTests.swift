import Testing
import PushConfig
import PushExport
import PushInboxJetStream
import PushModuleOptions

/// pushspool-inbox (`[Inbox] Source=nats`) and `pushspoolctl nc reindex --from-stream` build
/// the stream follower's options with one initializer from the configuration.
@Suite struct JetStreamInboxOptionsTests {
    @Test func builtFromExportAndInboxSettings() throws {
        var configuration = Configuration()
        configuration.journal.stateDirectory = "/srv/pushspool"
        configuration.export.hostId = "web.1"
        configuration.export.stream = "FLEET"
        configuration.export.urls = ["nats://10.0.0.1:4222"]
        configuration.inbox.listModals = true
        let options = try JetStreamInboxOptions(configuration: configuration, indexPath: "/srv/pushspool/inbox/index.sqlite",
                                             instance: nil, credentialsDirectory: nil)
        #expect(options.export == ExportOptions(settings: configuration.export, stateDirectory: "/srv/pushspool", instance: nil))
        #expect(options.indexPath == "/srv/pushspool/inbox/index.sqlite")
        #expect(options.listModals)
        // Consumer names cannot hold a dot.
        #expect(options.consumerName == "pushspool-inbox-web_1")
    }

    /// Without `HostId=` the consumer is named after /etc/machine-id, with the instance for
    /// an instance, as the exporter's message ids are.
    @Test func withoutAHostIdTheMachineIdAndInstanceNameTheConsumer() throws {
        let machine = try ExportOptions(stateDirectory: "/tmp", instance: nil).resolvedHostId()
        let main = try JetStreamInboxOptions(configuration: Configuration(), indexPath: "/x", instance: nil, credentialsDirectory: nil)
        #expect(main.consumerName == "pushspool-inbox-" + machine)
        let instance = try JetStreamInboxOptions(configuration: Configuration(), indexPath: "/x", instance: "b", credentialsDirectory: nil)
        #expect(instance.consumerName == "pushspool-inbox-" + machine + "_b")
    }
}
