/// Makes thumbnails of stored images (placeholder until libvips is wired).
final class Thumbnailer: Sendable {
    struct Result: Sendable {
        var decodable: Bool?
        var thumbnail: MediaThumbnail?
        var error: String?
    }
    let maxEdge: Int
    let maxPixels: Int
    init(maxEdge: Int, maxPixels: Int) {
        self.maxEdge = maxEdge
        self.maxPixels = maxPixels
    }
    func makeThumbnail(source: String, sha256: String, storeDirectory: String) -> Result {
        Result()
    }
}
