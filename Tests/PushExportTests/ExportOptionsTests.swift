import Testing
import PushConfig
import PushExport
import PushSystem
import TestSupport

/// The daemon and `pushspoolctl export replay` both build their options with
/// `ExportOptions(settings:…)`; these tests keep that one initializer complete.
@Suite struct ExportOptionsTests {
    /// Every `[Export]` setting but `Enabled=` reaches the options under its own name, so a
    /// setting added later cannot be honoured by the daemon and ignored by a replay.
    @Test func everySettingIsCarried() throws {
        var settings = ExportSettings()
        settings.urls = ["nats://10.0.0.1:4222", "tls://10.0.0.2:4222"]
        settings.subject = "fleet.{vendor}"
        settings.stream = "FLEET"
        settings.replicas = 3
        settings.duplicateWindow = .seconds(120)
        settings.maxPending = 7
        settings.ackTimeout = .milliseconds(1500)
        settings.lagWarnRecords = 42
        settings.hostId = "web-1"
        settings.credentialsFile = "/etc/pushspool/nats.creds"
        settings.tlsCAFile = "/etc/pushspool/ca.pem"
        settings.tlsCertFile = "/etc/pushspool/cert.pem"
        settings.tlsKeyFile = "/etc/pushspool/key.pem"
        let options = ExportOptions(settings: settings, stateDirectory: "/var/lib/pushspool", instance: "a")
        let carried = Dictionary(uniqueKeysWithValues: Mirror(reflecting: options).children.compactMap { child in
            child.label.map { ($0, String(describing: child.value)) }
        })
        for child in Mirror(reflecting: settings).children {
            // `ErasureKeyFile=` is no connection setting: the programs install it as their
            // erase.key at start (ErasureSecret.provision), and a replay needs no key.
            guard let label = child.label, label != "enabled", label != "erasureKeyFile" else { continue }
            #expect(carried[label] == String(describing: child.value), "[Export] \(label) is not carried")
        }
        #expect(options.instance == "a")
    }

    @Test func noServerMeansTheLocalOne() {
        let options = ExportOptions(stateDirectory: "/tmp", instance: nil)
        #expect(options.urls == [ExportSettings.defaultURL])
    }

    /// `LoadCredential=` files stand in for unset paths only, and only when readable.
    @Test func credentialsDirectoryFillsOnlyUnsetPaths() throws {
        let temp = TempDir()
        for name in ["nats.creds", "nats-ca.pem"] {
            try Posix.writeFileAtomically(directory: temp.path, name: name, bytes: Array("x\n".utf8))
        }
        var settings = ExportSettings()
        settings.tlsCAFile = "/configured/ca.pem"
        let options = ExportOptions(settings: settings, stateDirectory: "/tmp", instance: nil, credentialsDirectory: temp.path)
        #expect(options.credentialsFile == temp.appending("nats.creds"))
        #expect(options.tlsCAFile == "/configured/ca.pem")
        #expect(options.tlsCertFile == "")
        let without = ExportOptions(settings: settings, stateDirectory: "/tmp", instance: nil)
        #expect(without.credentialsFile == "")
    }
}
