import TestSupport
import Testing
@testable import PushMedia
import PushMediaCore

@Suite struct SnifferTests {
    static let cases: [([UInt8], MediaType?)] = [
        (ImageFixtures.png, .png), (ImageFixtures.jpeg, .jpeg), (ImageFixtures.gif, .gif), (ImageFixtures.webp, .webp), (ImageFixtures.heic, .heic),
        ([0, 0, 0, 0x20] + Array("ftypisom".utf8) + [0, 0, 2, 0], .mp4),
        ([0, 0, 0, 0x18] + Array("ftypmp42".utf8) + [0, 0, 0, 0], .mp4),
        ([0, 0, 0, 0x20] + Array("ftypM4A ".utf8) + [0, 0, 0, 0], .m4a),
        ([0, 0, 0, 0x18] + Array("ftypmif1".utf8) + [0, 0, 0, 0], .heif),
        (Array("ID3".utf8) + [4, 0, 0, 0, 0, 0, 0, 0], .mp3),
        ([0xFF, 0xFB, 0x90, 0x64, 0, 0], .mp3),
        ([0xFF, 0xFF, 0x90, 0x64, 0, 0], nil), // layer I bits: not MP3
        ([0xFF, 0xFB, 0xF0, 0x64, 0, 0], nil), // bad bitrate index
        (Array("<!DOCTYPE html><html>".utf8), nil),
        (Array("RIFF\u{0}\u{0}\u{0}\u{0}WAVEfmt ".utf8), nil),
        ([0, 0, 0, 0x18] + Array("ftypavif".utf8) + [0, 0, 0, 0], nil),
        (Array("GIF88a......".utf8), nil),
        ([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A], nil), // truncated signature
        ([], nil),
    ]

    @Test(arguments: cases.indices)
    func sniffsByMagicBytes(index: Int) {
        let (bytes, expected) = Self.cases[index]
        #expect(MediaType.sniff(bytes) == expected)
    }
}

@Suite struct AddressPolicyTests {
    @Test(arguments: [
        ("127.0.0.1", false), ("10.1.2.3", false), ("172.16.0.1", false), ("172.32.0.1", true), ("192.168.1.1", false),
        ("169.254.169.254", false), ("0.0.0.0", false), ("224.0.0.1", false), ("255.255.255.255", false), ("100.64.0.1", false),
        ("8.8.8.8", true), ("93.184.216.34", true),
        ("::1", false), ("::", false), ("fe80::1", false), ("fd00::1", false), ("ff02::1", false),
        ("::ffff:127.0.0.1", false), ("::ffff:8.8.8.8", true), ("64:ff9b::a9fe:a9fe", false), ("2001:4860:4860::8888", true),
    ])
    func defaultPolicy(address: String, allowed: Bool) throws {
        let bytes = try #require(IPNetwork.parseAddress(address))
        #expect((AddressPolicy(allowed: []).refusal(for: bytes) == nil) == allowed)
    }

    @Test func allowListExemptsOnlyItsNetwork() throws {
        let policy = AddressPolicy(allowed: [try #require(IPNetwork("127.0.0.1/32")), try #require(IPNetwork("fd00:1::/32"))])
        #expect(policy.refusal(for: IPNetwork.parseAddress("127.0.0.1")!) == nil)
        #expect(policy.refusal(for: IPNetwork.parseAddress("127.0.0.2")!) != nil)
        #expect(policy.refusal(for: IPNetwork.parseAddress("fd00:1::5")!) == nil)
        #expect(policy.refusal(for: IPNetwork.parseAddress("fd00:2::5")!) != nil)
    }

    @Test func parsesCIDRs() {
        #expect(IPNetwork("10.0.0.0/8")?.prefixLength == 8)
        #expect(IPNetwork("10.0.0.1")?.prefixLength == 32)
        #expect(IPNetwork("::1")?.prefixLength == 128)
        #expect(IPNetwork("10.0.0.0/33") == nil)
        #expect(IPNetwork("example.com/8") == nil)
        #expect(IPNetwork("10.0.0.0/x") == nil)
    }
}

@Suite struct RecordTests {
    @Test func retryAfterForms() {
        #expect(Transfer.parseRetryAfter("7", nowEpochSeconds: 0) == 7)
        #expect(Transfer.parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", nowEpochSeconds: 784_111_770) == 7)
        #expect(Transfer.parseRetryAfter("soon", nowEpochSeconds: 0) == nil)
    }

    @Test func jsonOmitsNullsAndEscapes() {
        var outcome = MediaOutcome(url: "https://x.test/a\"b.png", status: .failed, attempts: 2, durationMillis: 15,
                                   error: MediaFailure(.httpStatus, "server answered HTTP 404", httpStatus: 404))
        #expect(outcome.encodeJSON() == #"{"attempts":2,"durationMs":15,"error":{"code":"http_status","httpStatus":404,"message":"server answered HTTP 404"},"status":"failed","url":"https://x.test/a\"b.png"}"#)
        outcome = MediaOutcome(url: "u", status: .stored, attempts: 1, durationMillis: 3)
        outcome.path = "/m/ab/cd.png"
        outcome.sha256 = "abcd"
        outcome.contentType = "image/png"
        outcome.bytes = 10
        outcome.thumbnail = MediaThumbnail(path: "/m/ab/cd.thumb320.jpg", width: 32, height: 24, bytes: 99)
        outcome.decodable = true
        #expect(outcome.encodeJSON() == #"{"attempts":1,"bytes":10,"contentType":"image/png","decodable":true,"durationMs":3,"path":"/m/ab/cd.png","sha256":"abcd","status":"stored","thumbnail":{"bytes":99,"height":24,"path":"/m/ab/cd.thumb320.jpg","width":32},"url":"u"}"#)
    }

    @Test func statsJSON() {
        var stats = MediaStats()
        stats.stored = 2
        stats.failedByCode = ["timeout": 1, "http_status": 3]
        stats.bytesStored = 99
        #expect(stats.failed == 4)
        #expect(stats.encodeJSON() == #"{"bytesStored":99,"failed":4,"failedByCode":{"http_status":3,"timeout":1},"inFlight":0,"queued":0,"retries":0,"reused":0,"skipped":0,"stored":2,"thumbnails":0,"undecodable":0}"#)
        let store = MediaStore.Stats(files: 1, bytes: 10, thumbnails: 1, thumbnailBytes: 5, tempFiles: 0)
        #expect(store.encodeJSON() == #"{"bytes":10,"files":1,"tempFiles":0,"thumbnailBytes":5,"thumbnails":1}"#)
        #expect(store.renderText().hasPrefix("files:           1\nbytes:           10\n"))
        #expect(stats.renderText().contains("failed:       4\n  http_status: 3\n  timeout: 1\n"))
        #expect(MediaOutcome.skipped(url: "u", reason: "media disabled").encodeJSON() == #"{"attempts":0,"durationMs":0,"reason":"media disabled","status":"skipped","url":"u"}"#)
    }

    @Test func fallbackRules() {
        let failed = MediaOutcome(url: "u", status: .failed, error: MediaFailure(.timeout, "t"))
        let cancelled = MediaOutcome(url: "u", status: .failed, error: MediaFailure(.cancelled, "c", transient: true))
        let stored = MediaOutcome(url: "u", status: .stored)
        #expect(MediaFallback.apply(outcome: failed, body: "orig", mediaAlt: "alt")! == ("alt", "orig"))
        #expect(MediaFallback.apply(outcome: failed, body: nil, mediaAlt: "alt")! == ("alt", nil))
        #expect(MediaFallback.apply(outcome: failed, body: "orig", mediaAlt: "") == nil)
        #expect(MediaFallback.apply(outcome: failed, body: "orig", mediaAlt: nil) == nil)
        #expect(MediaFallback.apply(outcome: stored, body: "orig", mediaAlt: "alt") == nil)
        #expect(MediaFallback.apply(outcome: cancelled, body: "orig", mediaAlt: "alt") == nil)
        // Issue 22: stored but undecodable is no attachment; nothing fetched at all (the
        // payload named no usable URL) takes the alt text too.
        var undecodable = stored
        undecodable.decodable = false
        #expect(MediaFallback.apply(outcome: undecodable, body: "orig", mediaAlt: "alt").map { $0 == ("alt", "orig") } == true)
        #expect(!undecodable.attachable && stored.attachable)
        #expect(MediaFallback.apply(attached: false, cancelled: false, body: "orig", mediaAlt: "alt").map { $0 == ("alt", "orig") } == true)
    }
}
