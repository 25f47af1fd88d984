import Foundation
import Testing
@testable import PushConfig
import PushPayload

/// A temp directory with a main file and a drop-in directory, removed when the test ends.
final class ConfigDirectory {
    let root: String
    var main: String { root + "/pushspool.conf" }
    var dropIns: String { root + "/pushspool.conf.d" }

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("pushconfig-\(UUID())").path
        try FileManager.default.createDirectory(atPath: root + "/pushspool.conf.d", withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: root) }

    func write(_ name: String, _ text: String) throws {
        try text.write(toFile: root + "/" + name, atomically: false, encoding: .utf8)
    }

    func load(_ overrides: [ConfigOverride] = []) throws -> (Configuration, provenance: [String: ConfigurationSource]) {
        try ConfigurationLoader.load(mainFile: main, overrides: overrides)
    }

    func error(_ overrides: [ConfigOverride] = []) -> ConfigError? {
        do {
            _ = try ConfigurationLoader.load(mainFile: main, overrides: overrides)
            return nil
        } catch {
            return error
        }
    }
}

@Suite struct ConfigurationLoaderTests {
    @Test func missingMainFileMeansDefaults() throws {
        let dir = try ConfigDirectory()
        let (config, provenance) = try dir.load()
        #expect(config == Configuration())
        #expect(provenance.isEmpty)
    }

    @Test func emptyFileAndCommentsMeanDefaults() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "")
        #expect(try dir.load().0 == Configuration())
        try dir.write("pushspool.conf", "# a comment\n; another\n\n[Media]\n# ConnectTimeoutSec=1s\n   \n")
        #expect(try dir.load().0 == Configuration())
    }

    @Test func valuesFromTheMainFileCarryFileAndLine() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", """
            # pushspool
            [Spool]
            Directory=/srv/spool
            StableAgeSec=250ms

            [Media]
            ConnectTimeoutSec=1min 30s
            MaxSize=64MiB
            AllowHTTP=on
            TransferTimeoutSec=2min
            PayloadDeadlineSec=2min
            """)
        let (config, provenance) = try dir.load()
        #expect(config.spool.directory == "/srv/spool")
        #expect(config.spool.stableAge == .milliseconds(250))
        #expect(config.media.connectTimeout == .seconds(90))
        #expect(config.media.maxBytes == 64 << 20)
        #expect(config.media.allowHTTP)
        #expect(provenance["Spool.Directory"] == .file(path: dir.main, line: 3))
        #expect(provenance["Media.AllowHTTP"] == .file(path: dir.main, line: 9))
        #expect(provenance["Media.MaxRedirects"] == nil)
    }

    @Test func inboxSourceDefaultsToTheJournalAndTakesNats() throws {
        let dir = try ConfigDirectory()
        #expect(try dir.load().0.inbox.source == .journal)
        try dir.write("pushspool.conf", "[Inbox]\nSource=nats\n")
        #expect(try dir.load().0.inbox.source == .nats)
    }

    @Test func semicolonInsideAValueIsNotAComment() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Category chat]\nAction=reply:Reply ; later:foreground\n")
        let (config, _) = try dir.load()
        #expect(config.categories.first?.actions.first?.title == "Reply ; later")
    }

    @Test func dropInsApplyInNameOrderAfterTheMainFile() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Media]\nConnectTimeoutSec=1s\nMaxRedirects=1\nAttempts=7\n")
        try dir.write("pushspool.conf.d/20-b.conf", "[Media]\nConnectTimeoutSec=2s\nMaxRedirects=2\n")
        try dir.write("pushspool.conf.d/10-a.conf", "[Media]\nConnectTimeoutSec=3s\nMaxRedirects=3\nMaxConcurrent=3\n")
        // Byte order: "9-..." sorts after "20-...", so it is applied last and wins.
        try dir.write("pushspool.conf.d/9-c.conf", "[Media]\nConnectTimeoutSec=4s\n")
        // Not drop-ins: wrong suffix, hidden, a directory.
        try dir.write("pushspool.conf.d/99-z.conf.disabled", "[Media]\nConnectTimeoutSec=9s\n")
        try dir.write("pushspool.conf.d/.99-hidden.conf", "[Media]\nConnectTimeoutSec=9s\n")
        try FileManager.default.createDirectory(atPath: dir.dropIns + "/99-dir.conf", withIntermediateDirectories: true)

        #expect(try ConfigurationLoader.dropInFiles(in: dir.dropIns).map { ($0 as NSString).lastPathComponent } == ["10-a.conf", "20-b.conf", "9-c.conf"])
        let (config, provenance) = try dir.load()
        #expect(config.media.connectTimeout == .seconds(4))
        #expect(config.media.maxRedirects == 2)
        #expect(config.media.maxConcurrent == 3)
        #expect(config.media.attempts == 7)
        #expect(provenance["Media.ConnectTimeoutSec"] == .file(path: dir.dropIns + "/9-c.conf", line: 2))
        #expect(provenance["Media.MaxRedirects"] == .file(path: dir.dropIns + "/20-b.conf", line: 3))
        #expect(provenance["Media.Attempts"] == .file(path: dir.main, line: 4))
    }

    @Test func dropInsApplyWithoutAMainFile() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf.d/local.conf", "[Limits]\nMaxDepth=8\n")
        #expect(try dir.load().0.limits.maxDepth == 8)
    }

    @Test func unreadableFileIsAnErrorNamingIt() throws {
        let dir = try ConfigDirectory()
        try FileManager.default.createDirectory(atPath: dir.main, withIntermediateDirectories: false)
        let error = try #require(dir.error())
        #expect(error.file == dir.main)
        #expect(error.message.contains("cannot read"))
        #expect(error.message.contains("EISDIR"))
    }

    @Test func laterAssignmentInTheSameFileWins() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Limits]\nMaxDepth=8\n[Media]\nAttempts=2\n[Limits]\nMaxDepth=9\n")
        let (config, provenance) = try dir.load()
        #expect(config.limits.maxDepth == 9)
        #expect(provenance["Limits.MaxDepth"] == .file(path: dir.main, line: 6))
    }

    @Test func commandLineOverridesEveryFile() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Media]\nConnectTimeoutSec=1s\n")
        try dir.write("pushspool.conf.d/50-x.conf", "[Media]\nConnectTimeoutSec=2s\n")
        let (config, provenance) = try dir.load([ConfigOverride(parsing: "Media.ConnectTimeoutSec=500ms"), ConfigOverride(section: "Metrics", key: "TextfilePath", value: "/tmp/p.prom")])
        #expect(config.media.connectTimeout == .milliseconds(500))
        #expect(config.metrics.textfilePath == "/tmp/p.prom")
        #expect(provenance["Media.ConnectTimeoutSec"] == .commandLine)
    }

    @Test func badCommandLineOverrideNamesTheCommandLine() throws {
        let dir = try ConfigDirectory()
        let error = dir.error([ConfigOverride(section: "Media", key: "Attempts", value: "lots")])
        #expect(error?.file == "command line")
        #expect(error?.description == "command line: [Media] Attempts: expected an integer from 1 to 20, got 'lots'")
        #expect(throws: ConfigError.self) { try ConfigOverride(parsing: "NoDotHere=1") }
        let category = try ConfigOverride(parsing: "Category a.b.Action=x:X:")
        #expect(category == ConfigOverride(section: "Category a.b", key: "Action", value: "x:X:"))
    }

    @Test func unknownSectionIsAnErrorWithFileAndLine() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Media]\nAttempts=2\n\n[Medai]\nAttempts=3\n")
        let error = try #require(dir.error())
        #expect(error.file == dir.main)
        #expect(error.line == 5)
        #expect(error.section == "Medai")
        #expect(error.description.hasPrefix("\(dir.main):5: [Medai] Attempts: unknown section"))
    }

    @Test func unknownKeyIsAnErrorWithFileAndLine() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf.d/10-typo.conf", "# typo below\n[Media]\nConnectTimeout=5s\n")
        let error = try #require(dir.error())
        #expect(error.file == dir.dropIns + "/10-typo.conf")
        #expect(error.line == 3)
        #expect(error.key == "ConnectTimeout")
        #expect(error.message.contains("unknown key"))
        #expect(error.message.contains("ConnectTimeoutSec"))
    }

    @Test func keysAreCaseSensitiveLikeSystemd() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Media]\nallowhttp=yes\n")
        #expect(dir.error()?.message.hasPrefix("unknown key") == true)
    }

    @Test func assignmentOutsideASectionIsAnError() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "\nAttempts=2\n")
        let error = try #require(dir.error())
        #expect(error.line == 2)
        #expect(error.message.contains("outside any section"))
    }

    @Test func lineWithoutAssignmentIsASyntaxError() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Media]\nAttempts=2\nthis is not ini\n")
        let error = try #require(dir.error())
        #expect(error.line == 3)
        #expect(error.message.contains("syntax error"))
    }

    @Test func overlongLineIsRefusedNotSplit() throws {
        let dir = try ConfigDirectory()
        let networks = Array(repeating: "10.0.0.0/8", count: 30).joined(separator: " ")
        try dir.write("pushspool.conf", "[Media]\nAllowNetworks=\(networks)\n")
        let error = try #require(dir.error())
        #expect(error.line == 2)
        #expect(error.message.contains("longer than"))
    }

    @Test(arguments: [
        ("Media", "ConnectTimeoutSec", "abc", "expected a duration like 5s"),
        ("Media", "ConnectTimeoutSec", "5 parsecs", "expected a duration"),
        ("Media", "ConnectTimeoutSec", "1min 30", "expected a duration"),
        ("Media", "ConnectTimeoutSec", "0", "must be from 1ms to 1h, got '0'"),
        ("Media", "MaxSize", "10X", "expected a size like"),
        ("Media", "MaxSize", "-1", "expected a size"),
        ("Media", "MaxSize", "0", "must be from"),
        ("Media", "AllowHTTP", "maybe", "expected a boolean"),
        ("Media", "Attempts", "0", "expected an integer from 1 to 20"),
        ("Media", "Attempts", "2.5", "expected an integer"),
        ("Media", "AllowNetworks", "10.0.0.0/33", "expected a network"),
        ("Media", "AllowNetworks", "example.com", "expected a network"),
        ("Spool", "Directory", "relative/dir", "expected an absolute path"),
        ("Spool", "Directory", "/var/../etc", "without '..'"),
        ("Journal", "CorruptionPolicy", "ignore", "expected one of refuse, quarantine-segment"),
        ("Inbox", "Source", "kafka", "expected one of journal, nats"),
        ("Journal", "MaxBatchDelaySec", "5s", "must be from 0 to 1s"),
        ("Metrics", "TextfilePath", "/var/lib/x.txt", "*.prom"),
        ("Log", "Identifier", "push spool", "without spaces"),
        ("Category mm_custom", "Action", "a:A:", "reserves"),
        ("Category chat", "Action", "mm_reply:Reply:", "reserves"),
        ("Category chat", "Action", "reply:Reply:sideways", "unknown action option 'sideways'"),
        ("Category chat", "Action", "reply", "expected ID:TITLE:OPTIONS"),
        ("Category chat", "Action", "reply::foreground", "empty title"),
        ("Category chat", "Title", "x", "unknown key"),
        ("Category", "Action", "a:A:", "unknown section"),
    ])
    func badValueIsAnErrorNamingFileLineSectionAndKey(section: String, key: String, value: String, expected: String) throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "# line 1\n[\(section)]\n\(key)=\(value)\n")
        let error = try #require(dir.error())
        #expect(error.file == dir.main)
        #expect(error.line == 3)
        #expect(error.message.contains(expected), "\(error)")
        if !expected.contains("unknown section") {
            #expect(error.description.hasPrefix("\(dir.main):3: [\(section)] \(key): "))
        }
    }

    @Test func listKeyAppendsAndAnEmptyAssignmentResets() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Media]\nAllowNetworks=192.168.0.0/16\nAllowNetworks=10.1.2.3 fd00::/8\n")
        #expect(try dir.load().0.media.allowNetworks == ["192.168.0.0/16", "10.1.2.3/32", "fd00::/8"])
        try dir.write("pushspool.conf.d/50-reset.conf", "[Media]\nAllowNetworks=\nAllowNetworks=127.0.0.1/8\n")
        #expect(try dir.load().0.media.allowNetworks == ["127.0.0.1/8"])
    }

    /// The local server is what an empty list means, not an entry of it: a configured server
    /// list must not also reach nats://127.0.0.1:4222 (a plaintext local server beside a
    /// `tls://` cluster, or a different one).
    @Test func exportURLsReplaceTheLocalDefault() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Export]\nURL=tls://nats1.example:4222\nURL=tls://nats2.example:4222\n")
        #expect(try dir.load().0.export.urls == ["tls://nats1.example:4222", "tls://nats2.example:4222"])
    }

    @Test func categoriesCollectActionsAndRejectReservedOrTooMany() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", """
            [Category order_ready]
            Action=pickup:Pick up: now:foreground,authenticationRequired
            Action=later:Later:
            [Category survey]
            Action=yes:Yes:foreground
            """)
        let config = try dir.load().0
        #expect(config.categories == [
            CategoryDefinition(id: "order_ready", actions: [
                CategoryAction(id: "pickup", title: "Pick up: now", options: [.foreground, .authenticationRequired]),
                CategoryAction(id: "later", title: "Later", options: []),
            ]),
            CategoryDefinition(id: "survey", actions: [CategoryAction(id: "yes", title: "Yes", options: [.foreground])]),
        ])
        try dir.write("pushspool.conf.d/10-more.conf", (1...4).map { "[Category survey]\nAction=a\($0):A:\n" }.joined())
        let error = try #require(dir.error())
        #expect(error.line == 8)
        #expect(error.message.contains("more than 4 actions"))
    }

    @Test func crossFieldProblemsNameTheKeyThatCausedThem() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", "[Media]\nTransferTimeoutSec=10s\nConnectTimeoutSec=15s\n")
        let error = try #require(dir.error())
        #expect(error.line == 3)
        #expect(error.key == "ConnectTimeoutSec")
        #expect(error.message.contains("TransferTimeoutSec=10s"))
    }

    @Test func effectiveConfigurationRoundTripsWithProvenanceComments() throws {
        let dir = try ConfigDirectory()
        try dir.write("pushspool.conf", """
            [Media]
            AllowNetworks=10.0.0.0/8 ::1
            StableAgeSec=0
            [Spool]
            StableAgeSec=1min 500ms
            [Category chat]
            Action=reply:Reply:foreground
            """.replacingOccurrences(of: "StableAgeSec=0\n", with: ""))
        let (config, provenance) = try dir.load([ConfigOverride(section: "Journal", key: "SegmentSize", value: "1G")])
        let text = renderEffectiveConfiguration(config, provenance: provenance)
        #expect(text.contains("# \(dir.main):2\nAllowNetworks=10.0.0.0/8 ::1/128\n"))
        #expect(text.contains("# \(dir.main):4\nStableAgeSec=1min 500ms\n"))
        #expect(text.contains("# command line\nSegmentSize=1G\n"))
        #expect(text.contains("# default\nConnectTimeoutSec=5s\n"))
        #expect(text.contains("[Category chat]\n# \(dir.main):6\nAction=reply:Reply:foreground\n"))
        let (reread, _) = try ConfigurationLoader.load(text: text, path: "shown.conf")
        #expect(reread == config)
        #expect(try ConfigurationLoader.load(text: renderEffectiveConfiguration(Configuration()), path: "d").0 == Configuration())
    }

    /// The shipped default file documents every key, commented out, with its default value.
    @Test func shippedDefaultConfigDocumentsEveryKeyWithItsDefault() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../packaging/pushspool.conf").standardized.path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        // As shipped it sets nothing.
        #expect(try ConfigurationLoader.load(text: text, path: path).provenance.isEmpty)
        // Uncommenting every `#Key=value` line must reproduce exactly the defaults.
        var uncommented = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("#"), let first = line.dropFirst().first, first.isUppercase, line.contains("=") {
                uncommented += line.dropFirst() + "\n"
            } else {
                uncommented += line + "\n"
            }
        }
        let (config, provenance) = try ConfigurationLoader.load(text: uncommented, path: path)
        #expect(config == Configuration())
        #expect(Set(provenance.keys) == Set(Schema.keys.map(\.path)))
    }
}

@Suite struct ConfigValueTests {
    @Test(arguments: [
        ("5", Duration.seconds(5)), ("5s", .seconds(5)), ("500ms", .milliseconds(500)), ("1min", .seconds(60)),
        ("1min 30s", .seconds(90)), ("2h", .seconds(7200)), ("1.5s", .milliseconds(1500)), ("250us", .microseconds(250)),
        ("1d", .seconds(86400)), (" 3 s ", .seconds(3)), ("1m30s", .seconds(90)), ("0.1s", .milliseconds(100)),
        ("1.5w", .seconds(907_200)), ("7ns", .nanoseconds(7)), (".5s", .milliseconds(500)),
        // Exactly Int64.max nanoseconds is the longest duration the parser can hold.
        ("9223372036854775807ns", .nanoseconds(Int64.max)),
    ])
    func durations(text: String, duration: Duration) throws {
        #expect(try ConfigValue.duration(text).get() == duration)
    }

    @Test(arguments: ["", "s", "5 parsecs", "-1s", "1min 30", "1..5s", "five", ".", "1.2.3s"])
    func badDurations(text: String) {
        #expect(throws: ValueError.self) { try ConfigValue.duration(text).get() }
    }

    @Test(arguments: [("4096", 4096), ("512K", 512 << 10), ("10M", 10 << 20), ("64MiB", 64 << 20), ("1G", 1 << 30), ("1.5K", 1536), ("100B", 100)])
    func sizes(text: String, bytes: Int) throws {
        #expect(try ConfigValue.size(text).get() == bytes)
    }

    @Test(arguments: ["", "M", "10X", "-5", "1.1", "10 MB"])
    func badSizes(text: String) {
        #expect(throws: ValueError.self) { try ConfigValue.size(text).get() }
    }

    @Test func booleansAndNetworks() throws {
        for yes in ["yes", "TRUE", "on", "1"] { #expect(try ConfigValue.boolean(yes).get()) }
        for no in ["no", "False", "OFF", "0"] { #expect(try !ConfigValue.boolean(no).get()) }
        #expect(try ConfigValue.cidr("10.0.0.0/8").get() == "10.0.0.0/8")
        #expect(try ConfigValue.cidr("FD00:0::/8").get() == "fd00::/8")
        #expect(throws: ValueError.self) { try ConfigValue.cidr("10.0.0.0/8/1").get() }
    }

    @Test(arguments: [.milliseconds(500), .seconds(5), .seconds(90), .seconds(3600), .milliseconds(60_500),
                      .milliseconds(2), .seconds(86401), .nanoseconds(604_800_000_000_001), .zero] as [Duration])
    func formattedDurationsReadBack(duration: Duration) throws {
        #expect(try ConfigValue.duration(ConfigValue.formatDuration(duration)).get() == duration)
    }

    /// Values past what `Int64` nanoseconds hold are refused by the parser, never trapped on
    /// (the daemon crashed on `RescanIntervalSec=99999999999` through `Int64(seconds * 1e9)`).
    @Test(arguments: ["9223372036854775808ns", "99999999999w", "1e30s", "99999999999999999999999999999999999999999s",
                      "9223372036854775807ns 1ns", "106752d"])
    func overlongDurationsAreRefused(text: String) {
        #expect(throws: ValueError.self) { try ConfigValue.duration(text).get() }
    }
}
