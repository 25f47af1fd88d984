import PushMediaCore

/// The messages between pushspoold and `pushspool-fetch`, one per SOCK_SEQPACKET datagram.
///
/// Every message is `"PSFP"`, a version byte, a kind byte, then the kind's fields in a fixed
/// order: integers little-endian, strings as a u32 length then UTF-8. The decoder trusts no
/// length: each is checked against the bytes left and against `maxMessageBytes`, trailing
/// bytes are refused, and values with a meaning (a SHA-256, a MIME type, a failure code) are
/// checked against what they may be. Both sides may be the hostile one: the fetcher decodes
/// untrusted media and the daemon must not believe whatever a compromised fetcher sends.
///
/// The reply names a stored file by content address (SHA-256 + type), never by path: the
/// daemon derives the paths itself from its own store directory, so a fetcher cannot make a
/// record point outside the store.
package enum FetchMessage: Sendable, Equatable {
    /// Daemon → fetcher, first on every connection: the limits every download obeys.
    case configure(FetchConfiguration)
    /// Fetcher → daemon: configured; `pid` is the fetcher's process id (for logs).
    case ready(pid: Int32)
    /// Fetcher → daemon: the configuration was refused; the fetcher exits after sending this.
    case refused(message: String)
    /// Daemon → fetcher: download `url`; the answer carries the same `id`.
    case fetch(id: UInt64, url: String)
    /// Fetcher → daemon: how request `id` ended.
    case result(id: UInt64, FetchResult)

    /// Protocol version; a peer speaking another one is refused.
    package static let version: UInt8 = 1
    /// No message is larger (a URL, a message and an error text fit many times over).
    package static let maxMessageBytes = 64 * 1024
    static let magic: [UInt8] = Array("PSFP".utf8)

    enum Kind: UInt8 {
        case configure = 1, ready = 2, refused = 3, fetch = 4, result = 5
    }
}

/// The download limits, as `MediaOptions` minus anything that names a place outside the store.
///
/// `Sendable`: a plain value.
package struct FetchConfiguration: Sendable, Equatable {
    package var storeDirectory: String
    package var connectTimeoutMillis: Int64
    package var transferDeadlineMillis: Int64
    package var lowSpeedLimitBytesPerSecond: Int64
    package var lowSpeedTimeMillis: Int64
    package var maxBytes: Int64
    package var allowHTTP: Bool
    package var maxRedirects: Int64
    package var allowNetworks: [String]
    package var maxConcurrent: Int64
    package var attempts: Int64
    package var payloadDeadlineMillis: Int64
    package var dedupWindowMillis: Int64
    package var thumbnailMaxEdge: Int64
    package var thumbnailMaxPixels: Int64
    /// Empty: the system's CA store.
    package var caFile: String

    /// The wire form of `options`.
    package init(_ options: MediaOptions) {
        storeDirectory = options.storeDirectory
        connectTimeoutMillis = Self.millis(options.connectTimeout)
        transferDeadlineMillis = Self.millis(options.transferDeadline)
        lowSpeedLimitBytesPerSecond = Int64(options.lowSpeedLimitBytesPerSecond)
        lowSpeedTimeMillis = Self.millis(options.lowSpeedTime)
        maxBytes = options.maxBytes
        allowHTTP = options.allowHTTP
        maxRedirects = Int64(options.maxRedirects)
        allowNetworks = options.allowNetworks
        maxConcurrent = Int64(options.maxConcurrent)
        attempts = Int64(options.attempts)
        payloadDeadlineMillis = Self.millis(options.payloadDeadline)
        dedupWindowMillis = Self.millis(options.dedupWindow)
        thumbnailMaxEdge = Int64(options.thumbnailMaxEdge)
        thumbnailMaxPixels = Int64(options.thumbnailMaxPixels)
        caFile = options.caFile ?? ""
    }

    /// Empty but for the directory; the decoder reads every other field from the wire next.
    fileprivate init(storeDirectory: String) {
        self.storeDirectory = storeDirectory
        (connectTimeoutMillis, transferDeadlineMillis, lowSpeedLimitBytesPerSecond, lowSpeedTimeMillis) = (0, 0, 0, 0)
        (maxBytes, allowHTTP, maxRedirects, allowNetworks, maxConcurrent) = (0, false, 0, [], 0)
        (attempts, payloadDeadlineMillis, dedupWindowMillis) = (0, 0, 0)
        (thumbnailMaxEdge, thumbnailMaxPixels, caFile) = (0, 0, "")
    }

    /// Back to `MediaOptions`; numbers from the wire are clamped into `Int`, and
    /// `MediaOptions.problem` then refuses what is out of range.
    package var mediaOptions: MediaOptions {
        MediaOptions(storeDirectory: storeDirectory, connectTimeout: .milliseconds(connectTimeoutMillis),
                     transferDeadline: .milliseconds(transferDeadlineMillis),
                     lowSpeedLimitBytesPerSecond: Int(clamping: lowSpeedLimitBytesPerSecond),
                     lowSpeedTime: .milliseconds(lowSpeedTimeMillis), maxBytes: maxBytes, allowHTTP: allowHTTP,
                     maxRedirects: Int(clamping: maxRedirects), allowNetworks: allowNetworks,
                     maxConcurrent: Int(clamping: maxConcurrent), attempts: Int(clamping: attempts),
                     payloadDeadline: .milliseconds(payloadDeadlineMillis), dedupWindow: .milliseconds(dedupWindowMillis),
                     thumbnailMaxEdge: Int(clamping: thumbnailMaxEdge), thumbnailMaxPixels: Int(clamping: thumbnailMaxPixels),
                     caFile: caFile.isEmpty ? nil : caFile)
    }

    static func millis(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return seconds < 0 ? Int64.min : Int64.max }
        let (sum, overflow2) = product.addingReportingOverflow(attoseconds / 1_000_000_000_000_000)
        return overflow2 ? Int64.max : sum
    }
}

/// How one fetch ended, as the fetcher reports it.
///
/// `Sendable`: a plain value.
package enum FetchResult: Sendable, Equatable {
    case stored(StoredMedia)
    case failed(FetchFailure)
    case skipped(reason: String)
}

/// A stored file, named by content address.
package struct StoredMedia: Sendable, Equatable {
    /// Lowercase hex SHA-256 of the bytes: the file's name in the store.
    package var sha256: String
    package var type: MediaType
    package var bytes: Int64
    package var attempts: Int64
    package var durationMillis: Int64
    /// `nil`: not an image or not attempted.
    package var decodable: Bool?
    package var thumbnail: StoredThumbnail?
    package var thumbnailError: String?
    package var reused: Bool

    package init(sha256: String, type: MediaType, bytes: Int64, attempts: Int64, durationMillis: Int64, decodable: Bool?,
                 thumbnail: StoredThumbnail?, thumbnailError: String?, reused: Bool) {
        self.sha256 = sha256
        self.type = type
        self.bytes = bytes
        self.attempts = attempts
        self.durationMillis = durationMillis
        self.decodable = decodable
        self.thumbnail = thumbnail
        self.thumbnailError = thumbnailError
        self.reused = reused
    }
}

/// A thumbnail next to a stored image: `<sha>.thumb<edge>.<jpg|png>`.
package struct StoredThumbnail: Sendable, Equatable {
    /// Only `jpg` and `png` are made.
    package var isPNG: Bool
    package var width: Int64
    package var height: Int64
    package var bytes: Int64

    package init(isPNG: Bool, width: Int64, height: Int64, bytes: Int64) {
        self.isPNG = isPNG
        self.width = width
        self.height = height
        self.bytes = bytes
    }
}

/// A failed download as the fetcher saw it (code, libcurl code, HTTP status).
package struct FetchFailure: Sendable, Equatable {
    package var code: MediaFailure.Code
    package var message: String
    package var transient: Bool
    package var curlCode: Int32?
    package var httpStatus: Int64?
    package var attempts: Int64
    package var durationMillis: Int64

    package init(code: MediaFailure.Code, message: String, transient: Bool, curlCode: Int32?, httpStatus: Int64?,
                 attempts: Int64, durationMillis: Int64) {
        self.code = code
        self.message = message
        self.transient = transient
        self.curlCode = curlCode
        self.httpStatus = httpStatus
        self.attempts = attempts
        self.durationMillis = durationMillis
    }
}

/// A message that could not be decoded; the connection is dropped (the peer is broken or hostile).
///
/// `Sendable`: a plain value.
package struct FetchProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    package enum Code: String, Sendable {
        case truncated, tooLarge = "too_large", badMagic = "bad_magic", unsupportedVersion = "unsupported_version"
        case unknownKind = "unknown_kind", invalidField = "invalid_field", trailingBytes = "trailing_bytes"
    }

    package var code: Code
    package var message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var shortDescription: String { code.rawValue }
    package var description: String { "fetch protocol: \(code.rawValue): \(message)" }
}

// MARK: - Encoding

extension FetchMessage {
    /// The message's bytes. Strings longer than the message limit are cut (a URL that long was
    /// refused by the payload limits long before).
    package func encoded() -> [UInt8] {
        var writer = WireWriter()
        writer.bytes(FetchMessage.magic)
        writer.u8(FetchMessage.version)
        switch self {
        case .configure(let c):
            writer.u8(Kind.configure.rawValue)
            writer.string(c.storeDirectory)
            for value in [c.connectTimeoutMillis, c.transferDeadlineMillis, c.lowSpeedLimitBytesPerSecond, c.lowSpeedTimeMillis,
                          c.maxBytes] { writer.i64(value) }
            writer.bool(c.allowHTTP)
            writer.i64(c.maxRedirects)
            writer.u32(UInt32(truncatingIfNeeded: c.allowNetworks.count))
            for network in c.allowNetworks { writer.string(network) }
            for value in [c.maxConcurrent, c.attempts, c.payloadDeadlineMillis, c.dedupWindowMillis, c.thumbnailMaxEdge,
                          c.thumbnailMaxPixels] { writer.i64(value) }
            writer.string(c.caFile)
        case .ready(let pid):
            writer.u8(Kind.ready.rawValue)
            writer.i64(Int64(pid))
        case .refused(let message):
            writer.u8(Kind.refused.rawValue)
            writer.string(message)
        case .fetch(let id, let url):
            writer.u8(Kind.fetch.rawValue)
            writer.u64(id)
            writer.string(url)
        case .result(let id, let result):
            writer.u8(Kind.result.rawValue)
            writer.u64(id)
            switch result {
            case .stored(let s):
                writer.u8(1)
                writer.string(s.sha256)
                writer.string(s.type.mimeType)
                writer.i64(s.bytes)
                writer.i64(s.attempts)
                writer.i64(s.durationMillis)
                writer.u8(s.decodable.map { $0 ? 1 : 0 } ?? 2)
                if let t = s.thumbnail {
                    writer.u8(1)
                    writer.bool(t.isPNG)
                    writer.i64(t.width)
                    writer.i64(t.height)
                    writer.i64(t.bytes)
                } else {
                    writer.u8(0)
                }
                writer.string(s.thumbnailError ?? "")
                writer.bool(s.reused)
            case .failed(let f):
                writer.u8(2)
                writer.string(f.code.rawValue)
                writer.string(f.message)
                writer.bool(f.transient)
                writer.u8(f.curlCode == nil ? 0 : 1)
                writer.i64(Int64(f.curlCode ?? 0))
                writer.u8(f.httpStatus == nil ? 0 : 1)
                writer.i64(f.httpStatus ?? 0)
                writer.i64(f.attempts)
                writer.i64(f.durationMillis)
            case .skipped(let reason):
                writer.u8(3)
                writer.string(reason)
            }
        }
        return writer.buffer
    }

    /// Decodes one whole message; anything malformed is a `FetchProtocolError`.
    package static func decode(_ bytes: some Collection<UInt8>) throws(FetchProtocolError) -> FetchMessage {
        guard bytes.count <= maxMessageBytes else {
            throw FetchProtocolError(.tooLarge, "\(bytes.count) bytes, limit \(maxMessageBytes)")
        }
        var reader = WireReader(Array(bytes))
        guard try reader.bytes(magic.count).elementsEqual(magic) else { throw FetchProtocolError(.badMagic, "not a pushspool-fetch message") }
        let version = try reader.u8()
        guard version == FetchMessage.version else {
            throw FetchProtocolError(.unsupportedVersion, "version \(version), this side speaks \(FetchMessage.version)")
        }
        let rawKind = try reader.u8()
        guard let kind = Kind(rawValue: rawKind) else { throw FetchProtocolError(.unknownKind, "kind \(rawKind)") }
        let message: FetchMessage
        switch kind {
        case .configure:
            var c = FetchConfiguration(storeDirectory: try reader.string())
            c.connectTimeoutMillis = try reader.i64()
            c.transferDeadlineMillis = try reader.i64()
            c.lowSpeedLimitBytesPerSecond = try reader.i64()
            c.lowSpeedTimeMillis = try reader.i64()
            c.maxBytes = try reader.i64()
            c.allowHTTP = try reader.bool()
            c.maxRedirects = try reader.i64()
            let count = try reader.u32()
            // Each entry takes at least its 4-byte length: a count past that is a lie.
            guard Int(count) <= reader.remaining / 4 else {
                throw FetchProtocolError(.truncated, "\(count) allowed networks in \(reader.remaining) bytes")
            }
            c.allowNetworks = []
            for _ in 0..<count { c.allowNetworks.append(try reader.string()) }
            c.maxConcurrent = try reader.i64()
            c.attempts = try reader.i64()
            c.payloadDeadlineMillis = try reader.i64()
            c.dedupWindowMillis = try reader.i64()
            c.thumbnailMaxEdge = try reader.i64()
            c.thumbnailMaxPixels = try reader.i64()
            c.caFile = try reader.string()
            message = .configure(c)
        case .ready:
            let pid = try reader.i64()
            guard let value = Int32(exactly: pid), value > 0 else { throw FetchProtocolError(.invalidField, "pid \(pid)") }
            message = .ready(pid: value)
        case .refused:
            message = .refused(message: try reader.string())
        case .fetch:
            let id = try reader.u64()
            let url = try reader.string()
            guard !url.isEmpty else { throw FetchProtocolError(.invalidField, "empty URL") }
            message = .fetch(id: id, url: url)
        case .result:
            let id = try reader.u64()
            message = .result(id: id, try decodeResult(&reader))
        }
        guard reader.remaining == 0 else { throw FetchProtocolError(.trailingBytes, "\(reader.remaining) bytes after the message") }
        return message
    }

    private static func decodeResult(_ reader: inout WireReader) throws(FetchProtocolError) -> FetchResult {
        let status = try reader.u8()
        switch status {
        case 1:
            let sha256 = try reader.string()
            guard sha256.utf8.count == 64, sha256.utf8.allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) }) else {
                throw FetchProtocolError(.invalidField, "content address is not a lowercase hex SHA-256")
            }
            let mime = try reader.string()
            guard let type = MediaType.allCases.first(where: { $0.mimeType == mime }) else {
                throw FetchProtocolError(.invalidField, "media type \"\(mime.prefix(64))\" is not one the store keeps")
            }
            let bytes = try reader.nonNegative("size")
            let attempts = try reader.nonNegative("attempts")
            let duration = try reader.nonNegative("duration")
            let decodable: Bool?
            switch try reader.u8() {
            case 0: decodable = false
            case 1: decodable = true
            case 2: decodable = nil
            case let other: throw FetchProtocolError(.invalidField, "decodable flag \(other)")
            }
            var thumbnail: StoredThumbnail?
            switch try reader.u8() {
            case 0: thumbnail = nil
            case 1:
                let isPNG = try reader.bool()
                let width = try reader.nonNegative("thumbnail width")
                let height = try reader.nonNegative("thumbnail height")
                let size = try reader.nonNegative("thumbnail size")
                guard width <= 1 << 20, height <= 1 << 20 else { throw FetchProtocolError(.invalidField, "thumbnail \(width)x\(height)") }
                thumbnail = StoredThumbnail(isPNG: isPNG, width: width, height: height, bytes: size)
            case let other: throw FetchProtocolError(.invalidField, "thumbnail flag \(other)")
            }
            let thumbnailError = try reader.string()
            let reused = try reader.bool()
            return .stored(StoredMedia(sha256: sha256, type: type, bytes: bytes, attempts: attempts, durationMillis: duration,
                                       decodable: decodable, thumbnail: thumbnail,
                                       thumbnailError: thumbnailError.isEmpty ? nil : thumbnailError, reused: reused))
        case 2:
            let codeText = try reader.string()
            guard let code = MediaFailure.Code(rawValue: codeText) else {
                throw FetchProtocolError(.invalidField, "failure code \"\(codeText.prefix(64))\"")
            }
            let message = try reader.string()
            let transient = try reader.bool()
            let hasCurl = try reader.bool()
            let curl = try reader.i64()
            let hasHTTP = try reader.bool()
            let http = try reader.i64()
            guard let curlCode = Int32(exactly: curl), curlCode >= 0, (0...999).contains(http) else {
                throw FetchProtocolError(.invalidField, "curl code \(curl) or HTTP status \(http) out of range")
            }
            let attempts = try reader.nonNegative("attempts")
            let duration = try reader.nonNegative("duration")
            return .failed(FetchFailure(code: code, message: message, transient: transient, curlCode: hasCurl ? curlCode : nil,
                                        httpStatus: hasHTTP ? http : nil, attempts: attempts, durationMillis: duration))
        case 3:
            return .skipped(reason: try reader.string())
        default:
            throw FetchProtocolError(.invalidField, "result status \(status)")
        }
    }
}

struct WireWriter {
    var buffer: [UInt8] = []

    mutating func bytes(_ bytes: [UInt8]) { buffer += bytes }
    mutating func u8(_ value: UInt8) { buffer.append(value) }
    mutating func bool(_ value: Bool) { buffer.append(value ? 1 : 0) }
    mutating func u32(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { buffer += $0 } }
    mutating func u64(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { buffer += $0 } }
    mutating func i64(_ value: Int64) { u64(UInt64(bitPattern: value)) }
    mutating func string(_ value: String) {
        let utf8 = Array(value.utf8.prefix(FetchMessage.maxMessageBytes / 2))
        u32(UInt32(truncatingIfNeeded: utf8.count))
        buffer += utf8
    }
}

struct WireReader {
    let buffer: [UInt8]
    var offset = 0

    init(_ buffer: [UInt8]) { self.buffer = buffer }

    var remaining: Int { buffer.count - offset }

    mutating func bytes(_ count: Int) throws(FetchProtocolError) -> ArraySlice<UInt8> {
        guard count >= 0, count <= remaining else {
            throw FetchProtocolError(.truncated, "field of \(count) bytes at offset \(offset), \(remaining) left")
        }
        defer { offset += count }
        return buffer[offset..<(offset + count)]
    }

    mutating func u8() throws(FetchProtocolError) -> UInt8 { try bytes(1).first! }

    mutating func bool() throws(FetchProtocolError) -> Bool {
        switch try u8() {
        case 0: return false
        case 1: return true
        case let other: throw FetchProtocolError(.invalidField, "boolean \(other) at offset \(offset - 1)")
        }
    }

    mutating func u32() throws(FetchProtocolError) -> UInt32 {
        try bytes(4).reversed().reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func u64() throws(FetchProtocolError) -> UInt64 {
        try bytes(8).reversed().reduce(0) { $0 << 8 | UInt64($1) }
    }

    mutating func i64() throws(FetchProtocolError) -> Int64 { Int64(bitPattern: try u64()) }

    mutating func nonNegative(_ what: String) throws(FetchProtocolError) -> Int64 {
        let value = try i64()
        guard value >= 0 else { throw FetchProtocolError(.invalidField, "\(what) \(value) is negative") }
        return value
    }

    mutating func string() throws(FetchProtocolError) -> String {
        let length = try u32()
        // Compare in UInt32 space: a length near 2^32 must not wrap into a small Int.
        guard length <= UInt32(clamping: remaining) else {
            throw FetchProtocolError(.truncated, "string of \(length) bytes at offset \(offset), \(remaining) left")
        }
        let slice = try bytes(Int(length))
        guard let text = String(validating: slice, as: UTF8.self) else {
            throw FetchProtocolError(.invalidField, "string at offset \(offset - Int(length)) is not UTF-8")
        }
        return text
    }
}
