import Testing
@preconcurrency import Glibc
@testable import PushMedia
import PushMediaCore
import PushSystem
import TestSupport

/// Thumbnails with libvips, including hostile images.
@Suite struct ThumbnailTests {
    static let images: [(String, [UInt8])] = [
        ("png", ImageFixtures.png), ("jpeg", ImageFixtures.jpeg), ("gif", ImageFixtures.gif), ("webp", ImageFixtures.webp), ("heic", ImageFixtures.heic),
    ]

    private func fetcher(_ dir: TempDir, maxEdge: Int = 32, maxPixels: Int = 40_000_000) throws -> MediaFetcher {
        var options = testOptions(dir)
        options.thumbnailMaxEdge = maxEdge
        options.thumbnailMaxPixels = maxPixels
        return try MediaFetcher(options: options)
    }

    @Test(arguments: images.indices)
    func thumbnailFitsTheLongestEdge(index: Int) async throws {
        let (name, bytes) = Self.images[index]
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/img", .ok(bytes))
        let fetcher = try fetcher(dir)
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: server.url("/img"))
        #expect(outcome.status == .stored)
        #expect(outcome.decodable == true, "\(name): \(outcome.encodeJSON())")
        let thumbnail = try #require(outcome.thumbnail, "\(name)")
        // The fixtures are 64x48; the longest edge becomes 32.
        #expect(thumbnail.width == 32 && thumbnail.height == 24)
        let written = try #require(readBytes(thumbnail.path))
        #expect(Int64(written.count) == thumbnail.bytes)
        #expect(MediaType.sniff(written) == .jpeg)
        #expect(thumbnail.path.hasPrefix(dir.store + "/" + outcome.sha256!.prefix(2) + "/"))
        #expect(outcome.encodeJSON().contains(#""height":24,"path":"\#(thumbnail.path)","width":32}"#))
        #expect(fetcher.stats.thumbnails == 1)
    }

    @Test func smallImagesAreNotEnlarged() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/img", .ok(ImageFixtures.png))
        let fetcher = try fetcher(dir, maxEdge: 320)
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: server.url("/img"))
        #expect(outcome.thumbnail?.width == 64 && outcome.thumbnail?.height == 48)
    }

    @Test func decompressionBombIsStoredButNotDecoded() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/bomb.png", .ok(ImageFixtures.bomb, contentType: "image/png"))
        // 9 MP in 9 KB: over a 4 MP limit. With the limit raised the same file decodes, so the
        // refusal comes from the header check.
        let strict = try fetcher(dir, maxPixels: 4_000_000)
        let refused = await strict.fetched(url: server.url("/bomb.png"))
        strict.shutdown()
        #expect(refused.status == .stored)
        #expect(refused.decodable == false)
        #expect(refused.thumbnail == nil)
        #expect(refused.thumbnailError?.contains("3000x3000") == true)
        #expect(strict.stats.undecodable == 1)
        #expect(refused.path.map { readBytes($0) == ImageFixtures.bomb } == true)

        let otherDir = TempDir()
        let lenient = try fetcher(otherDir, maxPixels: 10_000_000)
        defer { lenient.shutdown() }
        let decoded = await lenient.fetched(url: server.url("/bomb.png"))
        #expect(decoded.decodable == true)
        #expect(decoded.thumbnail?.width == 32 && decoded.thumbnail?.height == 32)
    }

    @Test func truncatedImageIsStoredAndMarked() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/cut.jpg", .ok(Array(ImageFixtures.jpeg.prefix(ImageFixtures.jpeg.count * 2 / 3))))
        server.route("/cut.png", .ok(Array(ImageFixtures.png.prefix(ImageFixtures.png.count / 2))))
        let fetcher = try fetcher(dir)
        defer { fetcher.shutdown() }

        for path in ["/cut.jpg", "/cut.png"] {
            let outcome = await fetcher.fetched(url: server.url(path))
            #expect(outcome.status == .stored)
            #expect(outcome.decodable == false, "\(path): \(outcome.encodeJSON())")
            #expect(outcome.thumbnail == nil)
            // SFMC's sample puts the alt text in the body when no attachment can be made of it.
            let fallback = MediaFallback.apply(outcome: outcome, body: "See it", mediaAlt: "A red bicycle")
            #expect(fallback.map { $0 == ("A red bicycle", "See it") } == true, "\(path)")
        }
        #expect(filesUnder(dir.store + "/.tmp").isEmpty)
    }

    @Test func garbageAfterValidMagicIsNotDecodable() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/junk.gif", .ok(Array("GIF89a".utf8) + [UInt8](repeating: 0xEE, count: 200)))
        let fetcher = try fetcher(dir)
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: server.url("/junk.gif"))
        #expect(outcome.status == .stored)
        #expect(outcome.decodable == false)
    }

    @Test func audioAndVideoGetNoThumbnail() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/a.mp3", .ok(Array("ID3".utf8) + [4, 0, 0, 0, 0, 0, 0, 0] + [UInt8](repeating: 0, count: 100)))
        let fetcher = try fetcher(dir)
        defer { fetcher.shutdown() }

        let outcome = await fetcher.fetched(url: server.url("/a.mp3"))
        #expect(outcome.status == .stored)
        #expect(outcome.contentType == "audio/mpeg")
        #expect(outcome.path?.hasSuffix(".mp3") == true)
        #expect(outcome.decodable == nil && outcome.thumbnail == nil)
    }

    @Test func storeStatsCountThumbnailsApart() async throws {
        let dir = TempDir()
        let server = try LoopbackHTTPServer()
        server.route("/a", .ok(ImageFixtures.png))
        server.route("/b", .ok(ImageFixtures.jpeg))
        let fetcher = try fetcher(dir)
        defer { fetcher.shutdown() }
        _ = await fetcher.fetched(url: server.url("/a"))
        _ = await fetcher.fetched(url: server.url("/b"))
        let stats = try MediaStore.stats(directory: dir.store)
        #expect(stats.files == 2)
        #expect(stats.bytes == Int64(ImageFixtures.png.count + ImageFixtures.jpeg.count))
        #expect(stats.thumbnails == 2)
        #expect(stats.thumbnailBytes > 0)
    }
}
