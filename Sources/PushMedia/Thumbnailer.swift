@preconcurrency import Glibc
internal import CVipsShim
import PushMediaCore
import PushSystem
import Synchronization

/// Makes the thumbnail of a stored image with libvips, the way the SFMC rich-notification
/// extension shows a scaled-down attachment. Hostile input is contained: the pixel count is
/// checked from the header before any pixel is decoded (decompression bombs), truncated files
/// fail instead of decoding garbage, the operation cache is off and each pipeline uses one
/// worker thread, so memory stays bounded by `maxPixels`.
///
/// `Sendable`: immutable; libvips calls are thread-safe once initialised.
final class Thumbnailer: Sendable {
    struct Result: Sendable {
        var decodable: Bool?
        var thumbnail: MediaThumbnail?
        var error: String?
    }

    let maxEdge: Int
    let maxPixels: Int

    /// Initialises libvips once (cache off, one worker thread, untrusted loaders blocked).
    static let available: Bool = cvips_init() == 0

    init(maxEdge: Int, maxPixels: Int) {
        self.maxEdge = maxEdge
        self.maxPixels = maxPixels
    }

    /// Header facts of an image file, read without decoding pixels.
    struct Header {
        var width: Int
        var height: Int
        var pages: Int
        var hasAlpha: Bool
    }

    static func header(_ path: String) -> Swift.Result<Header, ThumbnailError> {
        guard available else { return .failure(ThumbnailError(message: "libvips could not be initialised")) }
        var width: Int32 = 0, height: Int32 = 0, pages: Int32 = 0, alpha: Int32 = 0
        var error = [CChar](repeating: 0, count: 512)
        guard cvips_header(path, &width, &height, &pages, &alpha, &error, error.count) == 0 else {
            return .failure(ThumbnailError(message: ThumbnailError.text(error)))
        }
        return .success(Header(width: Int(width), height: Int(height), pages: Int(pages), hasAlpha: alpha != 0))
    }

    /// Writes `<store>/ab/<rest>.thumb<edge>.jpg` (or `.png` for images with alpha) next to
    /// the stored image, through a temp file and rename; an existing thumbnail is reused.
    func makeThumbnail(source: String, sha256: String, storeDirectory: String) -> Result {
        let header: Header
        switch Thumbnailer.header(source) {
        case .failure(let error): return Result(decodable: false, error: "cannot read the image header: \(error.message)")
        case .success(let value): header = value
        }
        let pixels = header.width.multipliedReportingOverflow(by: header.height)
        guard !pixels.overflow, pixels.partialValue <= maxPixels, header.width > 0, header.height > 0 else {
            return Result(decodable: false, error: "image declares \(header.width)x\(header.height) pixels, over the \(maxPixels)-pixel limit (ThumbnailMaxPixels=); stored without a thumbnail")
        }
        let relative = MediaStore.thumbnailRelativePath(sha256: sha256, maxEdge: maxEdge, fileExtension: header.hasAlpha ? "png" : "jpg")
        let finalPath = storeDirectory + "/" + relative
        if let existing = try? Posix.lstatat(AT_FDCWD, finalPath), case .success(let made) = Thumbnailer.header(finalPath) {
            return Result(decodable: true, thumbnail: MediaThumbnail(path: finalPath, width: made.width, height: made.height, bytes: Int64(existing.st_size)))
        }
        // Keep the real extension last: libvips picks the saver from it.
        let tempPath = "\(storeDirectory)/\(MediaStore.tempDirectoryName)/thumb-\(sha256.prefix(16))-\(getpid())-\(Thumbnailer.counter.add(1, ordering: .relaxed).newValue).\(header.hasAlpha ? "png" : "jpg")"
        var width: Int32 = 0, height: Int32 = 0
        var error = [CChar](repeating: 0, count: 512)
        guard cvips_thumbnail(source, Int32(clamping: maxEdge), tempPath, &width, &height, &error, error.count) == 0 else {
            try? Posix.unlinkat(AT_FDCWD, tempPath)
            return Result(decodable: false, error: "image cannot be decoded: \(ThumbnailError.text(error))")
        }
        do throws(SystemError) {
            let fd = try Posix.open(tempPath, O_RDONLY)
            defer { Posix.close(fd) }
            try Posix.fsync(fd, subject: tempPath)
            let size = try Posix.fstat(fd, subject: tempPath).st_size
            try Posix.renameat(AT_FDCWD, tempPath, AT_FDCWD, finalPath)
            try Posix.syncDirectory(String(finalPath[..<finalPath.lastIndex(of: "/")!]))
            return Result(decodable: true, thumbnail: MediaThumbnail(path: finalPath, width: Int(width), height: Int(height), bytes: Int64(size)))
        } catch {
            try? Posix.unlinkat(AT_FDCWD, tempPath)
            return Result(decodable: true, error: "storing the thumbnail failed: \(error)")
        }
    }

    private static let counter = Atomic<Int>(0)
}

/// A libvips failure, with its message.
struct ThumbnailError: Error {
    var message: String

    static func text(_ buffer: [CChar]) -> String {
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return text.trimmingSpaces
    }
}
