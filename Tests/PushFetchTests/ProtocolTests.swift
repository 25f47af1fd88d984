import Testing
import PushFetchClient
import PushMedia
import PushMediaCore
import PushSystem
import PushConfig
import PushModuleOptions
import PushDaemonOptions

/// The wire codec: every message survives a round trip, and no byte string from a broken or
/// hostile peer crashes the decoder or gets through half-checked.
@Suite struct ProtocolTests {
    static let sha = String(repeating: "ab", count: 32)

    static var configuration: FetchConfiguration {
        var options = MediaOptions(settings: Configuration().media, storeDirectory: "/var/lib/pushspool/media")
        options.allowNetworks = ["127.0.0.0/8", "fd00::/8"]
        options.caFile = "/etc/ssl/private-ca.pem"
        options.allowHTTP = true
        options.payloadDeadline = .milliseconds(1500)
        return FetchConfiguration(options)
    }

    static let messages: [FetchMessage] = [
        .configure(configuration),
        .ready(pid: 4242),
        .refused(message: "MaxBytes= must be positive"),
        .fetch(id: 7, url: "https://cdn.example/é.png?x=1"),
        .result(id: 7, .stored(StoredMedia(sha256: sha, type: .png, bytes: 1234, attempts: 2, durationMillis: 55, decodable: true,
                                           thumbnail: StoredThumbnail(isPNG: true, width: 320, height: 200, bytes: 999),
                                           thumbnailError: nil, reused: false))),
        .result(id: 8, .stored(StoredMedia(sha256: sha, type: .mp4, bytes: 1, attempts: 1, durationMillis: 0, decodable: nil,
                                           thumbnail: nil, thumbnailError: "not an image", reused: true))),
        .result(id: .max, .failed(FetchFailure(code: .httpStatus, message: "404", transient: false, curlCode: nil, httpStatus: 404,
                                               attempts: 1, durationMillis: 3))),
        .result(id: 9, .failed(FetchFailure(code: .connectFailed, message: "refused", transient: true, curlCode: 7, httpStatus: nil,
                                            attempts: 3, durationMillis: 10))),
        .result(id: 10, .skipped(reason: "media_disabled")),
    ]

    @Test(arguments: messages)
    func roundTrip(_ message: FetchMessage) throws {
        #expect(try FetchMessage.decode(message.encoded()) == message)
    }

    @Test func configurationKeepsEveryLimit() throws {
        guard case .configure(let decoded) = try FetchMessage.decode(FetchMessage.configure(Self.configuration).encoded()) else {
            Issue.record("not a configuration")
            return
        }
        let options = decoded.mediaOptions
        #expect(options.allowNetworks == ["127.0.0.0/8", "fd00::/8"])
        #expect(options.caFile == "/etc/ssl/private-ca.pem")
        #expect(options.payloadDeadline == .milliseconds(1500))
        #expect(options.allowHTTP)
        #expect(options.maxBytes == MediaOptions(settings: Configuration().media, storeDirectory: "x").maxBytes)
    }

    /// Every proper prefix of every message is refused as truncated, never read past its end.
    @Test(arguments: messages)
    func everyPrefixIsRefused(_ message: FetchMessage) {
        let bytes = message.encoded()
        for length in 0..<bytes.count {
            #expect(throws: FetchProtocolError.self) { try FetchMessage.decode(bytes[0..<length]) }
        }
        #expect(throws: FetchProtocolError(.trailingBytes, "1 bytes after the message")) {
            try FetchMessage.decode(bytes + [0])
        }
    }

    /// A string length of 2^32-1, 2^31 or just past the end must not wrap or allocate.
    @Test(arguments: [UInt32.max, UInt32(1) << 31, 30])
    func hostileStringLength(_ length: UInt32) throws {
        var bytes = Array("PSFP".utf8) + [FetchMessage.version, 4]
        bytes += Array(repeating: 0, count: 8) // id
        withUnsafeBytes(of: length.littleEndian) { bytes += $0 }
        bytes += Array("https://x/".utf8)
        let error = try #require(throws: FetchProtocolError.self) { try FetchMessage.decode(bytes) }
        #expect(error.code == .truncated)
    }

    @Test func hostileListCount() throws {
        var bytes = FetchMessage.configure(Self.configuration).encoded()
        // The allowNetworks count sits after the store path, five i64s, a bool and one i64.
        let offset = 6 + 4 + Self.configuration.storeDirectory.utf8.count + 5 * 8 + 1 + 8
        bytes.replaceSubrange(offset..<(offset + 4), with: [0xff, 0xff, 0xff, 0x7f])
        let error = try #require(throws: FetchProtocolError.self) { try FetchMessage.decode(bytes) }
        #expect(error.code == .truncated)
    }

    @Test func headerChecks() throws {
        let good = FetchMessage.ready(pid: 1).encoded()
        var badMagic = good
        badMagic[0] = UInt8(ascii: "X")
        #expect(try #require(throws: FetchProtocolError.self) { try FetchMessage.decode(badMagic) }.code == .badMagic)
        var newer = good
        newer[4] = FetchMessage.version + 1
        #expect(try #require(throws: FetchProtocolError.self) { try FetchMessage.decode(newer) }.code == .unsupportedVersion)
        var unknown = good
        unknown[5] = 99
        #expect(try #require(throws: FetchProtocolError.self) { try FetchMessage.decode(unknown) }.code == .unknownKind)
        let huge = [UInt8](repeating: 0, count: FetchMessage.maxMessageBytes + 1)
        #expect(try #require(throws: FetchProtocolError.self) { try FetchMessage.decode(huge) }.code == .tooLarge)
    }

    /// What a compromised fetcher might claim: a path-like "hash", a type the store does not
    /// keep, a negative size, a code that does not exist, a pid of 0.
    @Test(arguments: [
        FetchMessage.result(id: 1, .stored(StoredMedia(sha256: "../../journal/" + String(repeating: "a", count: 50), type: .png, bytes: 1,
                                                       attempts: 1, durationMillis: 1, decodable: nil, thumbnail: nil,
                                                       thumbnailError: nil, reused: false))),
        FetchMessage.result(id: 1, .stored(StoredMedia(sha256: String(repeating: "A", count: 64), type: .png, bytes: 1,
                                                       attempts: 1, durationMillis: 1, decodable: nil, thumbnail: nil,
                                                       thumbnailError: nil, reused: false))),
        FetchMessage.result(id: 1, .stored(StoredMedia(sha256: sha, type: .png, bytes: -1, attempts: 1, durationMillis: 1,
                                                       decodable: nil, thumbnail: nil, thumbnailError: nil, reused: false))),
        FetchMessage.result(id: 1, .failed(FetchFailure(code: .io, message: "", transient: true, curlCode: -5, httpStatus: nil,
                                                        attempts: 1, durationMillis: 1))),
        FetchMessage.result(id: 1, .failed(FetchFailure(code: .io, message: "", transient: true, curlCode: nil, httpStatus: 100_000,
                                                        attempts: 1, durationMillis: 1))),
        FetchMessage.ready(pid: 0),
        FetchMessage.fetch(id: 1, url: ""),
    ])
    func hostileValuesAreRefused(_ message: FetchMessage) throws {
        let error = try #require(throws: FetchProtocolError.self) { try FetchMessage.decode(message.encoded()) }
        #expect(error.code == .invalidField)
    }

    @Test func unknownTypeAndCodeAreRefused() throws {
        var stored = FetchMessage.result(id: 1, .stored(StoredMedia(sha256: Self.sha, type: .png, bytes: 1, attempts: 1, durationMillis: 1,
                                                                     decodable: nil, thumbnail: nil, thumbnailError: nil,
                                                                     reused: false))).encoded()
        let mime = Array("image/png".utf8)
        let at = try #require(stored.firstRange(of: mime))
        stored.replaceSubrange(at, with: Array("image/svg".utf8))
        #expect(try #require(throws: FetchProtocolError.self) { try FetchMessage.decode(stored) }.code == .invalidField)

        var failed = FetchMessage.result(id: 1, .failed(FetchFailure(code: .timeout, message: "m", transient: true, curlCode: 28,
                                                                     httpStatus: nil, attempts: 1, durationMillis: 1))).encoded()
        let code = try #require(failed.firstRange(of: Array("timeout".utf8)))
        failed.replaceSubrange(code, with: Array("rm -rf!".utf8))
        #expect(try #require(throws: FetchProtocolError.self) { try FetchMessage.decode(failed) }.code == .invalidField)
    }

    /// Seeded random bytes after a valid header: decoding ends in a value or an error, never a trap.
    @Test func randomBodiesNeverTrap() {
        var generator = SplitMix(seed: 0x5eed)
        for round in 0..<20_000 {
            let kind = UInt8(1 + round % 5)
            var bytes = Array("PSFP".utf8) + [FetchMessage.version, kind]
            let count = Int(generator.next() % 200)
            for _ in 0..<count { bytes.append(UInt8(truncatingIfNeeded: generator.next())) }
            _ = try? FetchMessage.decode(bytes)
        }
    }

    /// Paths come from the daemon's own store directory and the content address, never the fetcher.
    @Test func outcomePathsAreBuiltByTheDaemon() {
        let result = FetchResult.stored(StoredMedia(sha256: Self.sha, type: .jpeg, bytes: 10, attempts: 1, durationMillis: 2,
                                                    decodable: true, thumbnail: StoredThumbnail(isPNG: false, width: 3, height: 4, bytes: 5),
                                                    thumbnailError: nil, reused: false))
        let outcome = result.outcome(url: "https://x/y", storeDirectory: "/s/media", thumbnailMaxEdge: 320)
        #expect(outcome.status == .stored)
        #expect(outcome.path == "/s/media/ab/" + String(repeating: "ab", count: 31) + ".jpg")
        #expect(outcome.thumbnail?.path == "/s/media/ab/" + String(repeating: "ab", count: 31) + ".thumb320.jpg")
        #expect(outcome.contentType == "image/jpeg")
        #expect(FetchResult(outcome) == result)
    }
}

/// A small deterministic generator (SplitMix64) so failures replay.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e3779b97f4a7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58476d1ce4e5b9
        z = (z ^ (z >> 27)) &* 0x94d049bb133111eb
        return z ^ (z >> 31)
    }
}
