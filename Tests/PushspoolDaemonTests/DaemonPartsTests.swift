import Testing
import PushPayload
import PushMediaCore
import PushMediaURL
@testable import PushspoolDaemon
import PushSystem

@Suite struct DaemonArgumentsTests {
    @Test func flagsAndInlineValues() throws {
        let parsed = try DaemonArguments.parse(["--spool", "/s", "--state-dir=/st", "--config", "/c.conf", "--quarantine-corrupt-segment"])
        #expect(parsed.spoolDirectory == "/s")
        #expect(parsed.stateDirectory == "/st")
        #expect(parsed.configFile == "/c.conf")
        #expect(parsed.quarantineCorruptSegments)
        #expect(parsed.configOverrides.map(\.key) == ["Directory", "StateDirectory"])
    }

    @Test(arguments: [["--spool"], ["--bogus"], ["--spool", "--state-dir", "/x"], ["extra"]])
    func badCommandLinesAreUsageErrors(_ arguments: [String]) {
        #expect(throws: UsageError.self) { try DaemonArguments.parse(arguments) }
    }

    /// `--instance NAME` is the three paths the template unit passes, resolved the way
    /// pushspoolctl and pushspool-inbox resolve them, and names the export's host id.
    @Test func instanceNamesTheTemplateUnitsPaths() throws {
        let parsed = try DaemonArguments.parse(["--instance", "eu-1"])
        #expect(parsed.configFile == "/etc/pushspool/eu-1.conf" && parsed.configFileGiven)
        #expect(parsed.spoolDirectory == "/var/spool/pushspool/eu-1")
        #expect(parsed.stateDirectory == "/var/lib/pushspool/eu-1")
        #expect(parsed.instance == "eu-1")
        let rooted = try DaemonArguments.parse(["--root=/tmp/img", "--instance=b"])
        #expect(rooted.stateDirectory == "/tmp/img/var/lib/pushspool/b")
        for bad in [["--instance", "a", "--spool", "/s"], ["--instance", "../x"], ["--root", "/r"]] {
            #expect(throws: UsageError.self, "\(bad)") { try DaemonArguments.parse(bad) }
        }
    }

    @Test func defaultsPointAtTheSystemPaths() throws {
        let parsed = try DaemonArguments.parse([])
        #expect(parsed.configFile == "/etc/pushspool/pushspool.conf")
        #expect(parsed.configOverrides.isEmpty)
    }
}

@Suite struct MediaDecisionTests {
    func notification(media: String?) -> PushNotification {
        var n = PushNotification(vendor: .sfmc, platform: .ios, format: "sfmc-ios", id: "m1")
        n.mediaUrl = media
        n.body = "original"
        n.mediaAlt = "alt text"
        return n
    }

    @Test func decidesBeforeAnyIO() {
        #expect(MediaDecision(notification: notification(media: nil), allowHTTP: false, enabled: true) == .none)
        #expect(MediaDecision(notification: notification(media: "https://a.example/i.png"), allowHTTP: false, enabled: true) == .fetch("https://a.example/i.png"))
        #expect(MediaDecision(notification: notification(media: "http://a.example/i.png"), allowHTTP: false, enabled: true) == .skip("insecure_scheme"))
        #expect(MediaDecision(notification: notification(media: "http://a.example/i.png"), allowHTTP: true, enabled: true) == .fetch("http://a.example/i.png"))
        #expect(MediaDecision(notification: notification(media: "https://a.example/i.png"), allowHTTP: false, enabled: false) == .skip("media_disabled"))
        #expect(MediaDecision(notification: notification(media: "ftp://a.example/i.png"), allowHTTP: true, enabled: true) == .skip("invalid_url"))
    }

    @Test func skippedMediaAppliesTheAltTextAndKeepsTheOriginalBody() throws {
        let source = SourceFile(name: "f.json", size: 10, sha256: String(repeating: "0", count: 64))
        let body = RecordBuilder.body(notification: notification(media: "http://a.example/i.png"), source: source,
                                      media: .skipped(url: "http://a.example/i.png", reason: "insecure_scheme"), ingestMillis: 0)
        guard case .object(let record) = try JSONParser().parse(body) else { Issue.record("not an object"); return }
        #expect(record["body"] == .string("alt text"))
        #expect(record["originalBody"] == .string("original"))
        #expect(record["sourceFile"] == .string("f.json"))
        #expect(record["ingestedAt"] == .string("1970-01-01T00:00:00.000Z"))
        guard case .object(let media)? = record["media"] else { Issue.record("no media object"); return }
        #expect(media["status"] == .string("skipped"))
    }

    /// Issue 22, SFMC's sample extension: a payload that names no usable media URL (missing,
    /// empty, or dropped as invalid by the normaliser) gets its `_mediaAlt` as the body too;
    /// without alt text the body stays.
    @Test func withoutMediaTheAltTextIsTheBody() throws {
        let source = SourceFile(name: "f.json", size: 10, sha256: "ab")
        let body = RecordBuilder.body(notification: notification(media: nil), source: source, media: nil, ingestMillis: 0)
        guard case .object(let record) = try JSONParser().parse(body) else { Issue.record("not an object"); return }
        #expect(record["body"] == .string("alt text"))
        #expect(record["originalBody"] == .string("original"))
        #expect(record["media"] == nil)

        var plain = notification(media: nil)
        plain.mediaAlt = nil
        let untouched = try JSONParser().parse(RecordBuilder.body(notification: plain, source: source, media: nil, ingestMillis: 0))
        #expect(untouched["body"] == .string("original") && untouched["originalBody"] == nil)
        plain.mediaAlt = ""
        #expect(try JSONParser().parse(RecordBuilder.body(notification: plain, source: source, media: nil, ingestMillis: 0))["body"]
            == .string("original"))
    }

    /// A file that downloaded but cannot be decoded is no attachment on a device either: the
    /// alt text is the body. A decodable one, or one whose type has no decoder, is attached.
    @Test(arguments: [(Optional(false), true), (Optional(true), false), (nil, false)])
    func anUndecodableStoredImageTakesTheAltText(decodable: Bool?, altApplied: Bool) throws {
        let url = "https://a.example/i.png"
        var outcome = MediaOutcome(url: url, status: .stored, attempts: 1)
        outcome.decodable = decodable
        outcome.path = "/var/lib/pushspool/media/ab/cd"
        let body = RecordBuilder.body(notification: notification(media: url), source: SourceFile(name: "f.json", size: 10, sha256: "ab"),
                                      media: .fetched(outcome), ingestMillis: 0)
        let record = try JSONParser().parse(body)
        #expect(record["body"] == .string(altApplied ? "alt text" : "original"), "decodable \(String(describing: decodable))")
        #expect(record["originalBody"] == (altApplied ? .string("original") : nil))
        #expect(record["media"]?["status"] == .string("stored"))
    }

    @Test(arguments: [
        ("https://cdn.example.com/a/b.png?token=secret", "cdn.example.com"),
        ("https://user:pw@host.example:8443/x", "host.example"),
        ("http://[::1]:8080/x", "[::1]"),
        ("not a url", ""),
    ])
    func hostOnlyNeverPathOrQuery(url: String, host: String) {
        #expect(MediaURL.host(of: url) == host)
    }
}
