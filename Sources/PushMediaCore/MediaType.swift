/// A media type pushspool accepts, decided from the first bytes of the body; the declared
/// `Content-Type` is never trusted (servers send `image/png` for HTML error pages).
///
/// `Sendable`: a plain value.
package enum MediaType: String, Sendable, CaseIterable, Hashable {
    case png, jpeg, gif, webp, heic, heif, mp4, quicktime, m4a, mp3

    /// The MIME type recorded in `media.contentType`.
    package var mimeType: String {
        switch self {
        case .png: "image/png"
        case .jpeg: "image/jpeg"
        case .gif: "image/gif"
        case .webp: "image/webp"
        case .heic: "image/heic"
        case .heif: "image/heif"
        case .mp4: "video/mp4"
        case .quicktime: "video/quicktime"
        case .m4a: "audio/mp4"
        case .mp3: "audio/mpeg"
        }
    }

    /// File extension of the stored file; iOS attachments are typed by their extension.
    package var fileExtension: String {
        switch self {
        case .png: "png"
        case .jpeg: "jpg"
        case .gif: "gif"
        case .webp: "webp"
        case .heic: "heic"
        case .heif: "heif"
        case .mp4: "mp4"
        case .quicktime: "mov"
        case .m4a: "m4a"
        case .mp3: "mp3"
        }
    }

    /// Still images that get a thumbnail.
    package var isImage: Bool {
        switch self {
        case .png, .jpeg, .gif, .webp, .heic, .heif: true
        case .mp4, .quicktime, .m4a, .mp3: false
        }
    }

    /// Bytes `sniff` needs before its answer is final (shorter bodies are judged at the end).
    package static let sniffLength = 16

    /// Identifies the type from magic bytes; `nil` for anything else (HTML, JSON, text, SVG,
    /// TIFF, ...). Exact signatures only: a loose match would let an attacker-chosen body
    /// through to the image decoder under the wrong loader.
    package static func sniff<C: Collection<UInt8>>(_ prefix: C) -> MediaType? where C.Index == Int {
        let b = Array(prefix.prefix(sniffLength))
        func has(_ signature: [UInt8], at offset: Int = 0) -> Bool {
            guard b.count >= offset + signature.count else { return false }
            return Array(b[offset..<offset + signature.count]) == signature
        }
        if has([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) { return .png }
        if has([0xFF, 0xD8, 0xFF]) { return .jpeg }
        if has(Array("GIF87a".utf8)) || has(Array("GIF89a".utf8)) { return .gif }
        if has(Array("RIFF".utf8)) && has(Array("WEBP".utf8), at: 8) { return .webp }
        if has(Array("ftyp".utf8), at: 4), b.count >= 12 {
            let size = Int(b[0]) << 24 | Int(b[1]) << 16 | Int(b[2]) << 8 | Int(b[3])
            guard size >= 16 || size == 1 else { return nil }
            switch String(decoding: b[8..<12], as: UTF8.self) {
            case "heic", "heix", "hevc", "hevx", "heim", "heis": return .heic
            case "mif1", "msf1": return .heif
            case "isom", "iso2", "iso4", "iso5", "iso6", "mp41", "mp42", "avc1", "dash", "M4V ", "M4VP", "MSNV", "3gp4", "3gp5": return .mp4
            case "qt  ": return .quicktime
            case "M4A ", "M4B ": return .m4a
            default: return nil
            }
        }
        if has(Array("ID3".utf8)), b.count >= 4, b[3] >= 2, b[3] <= 4 { return .mp3 }
        if b.count >= 4, isMPEGAudioLayer3FrameHeader(b[0], b[1], b[2]) { return .mp3 }
        return nil
    }

    /// An MPEG-1/2/2.5 Layer III frame header: 11 sync bits, a valid version, layer III, a bitrate
    /// index that is neither free (0) nor bad (15), and a valid sample-rate index.
    private static func isMPEGAudioLayer3FrameHeader(_ b0: UInt8, _ b1: UInt8, _ b2: UInt8) -> Bool {
        guard b0 == 0xFF, b1 & 0xE0 == 0xE0 else { return false }
        let version = (b1 >> 3) & 0x3
        let layer = (b1 >> 1) & 0x3
        let bitrate = b2 >> 4
        let sampleRate = (b2 >> 2) & 0x3
        return version != 0b01 && layer == 0b01 && bitrate != 0 && bitrate != 0xF && sampleRate != 0b11
    }
}
