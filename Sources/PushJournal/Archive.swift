@preconcurrency import Glibc
internal import CZstd
import PushSystem

/// zstd through libzstd's one-shot API (`ZSTD_compress`, `ZSTD_decompress`): an archived
/// segment is one zstd frame of the segment file's exact bytes, so decompressing gives back
/// the file byte for byte and every frame CRC still checks.
enum Zstd {
    /// Level 3 is zstd's default: most of the ratio for a fraction of the CPU of higher levels.
    static let level: Int32 = 3
    /// An archive names its content size in the frame header; a file is outside data, so a
    /// size past the largest segment the configuration allows is refused before allocating.
    static let maxContentBytes: UInt64 = 16 << 30

    static func compress(_ input: [UInt8]) throws(FrameDefect) -> [UInt8] {
        let bound = ZSTD_compressBound(input.count)
        var out = [UInt8](repeating: 0, count: bound)
        let written = out.withUnsafeMutableBytes { dst in
            input.withUnsafeBytes { src in ZSTD_compress(dst.baseAddress, dst.count, src.baseAddress, src.count, level) }
        }
        if ZSTD_isError(written) != 0 { throw FrameDefect("zstd: \(String(cString: ZSTD_getErrorName(written)))") }
        out.removeSubrange(written...)
        return out
    }

    static func decompress(_ input: [UInt8]) throws(FrameDefect) -> [UInt8] {
        let size = input.withUnsafeBytes { ZSTD_getFrameContentSize($0.baseAddress, $0.count) }
        // ZSTD_CONTENTSIZE_UNKNOWN / _ERROR are the two largest UInt64 values.
        guard size <= maxContentBytes, let count = Int(exactly: size) else {
            throw FrameDefect("zstd: not an archived segment (frame content size missing or over \(maxContentBytes) bytes)")
        }
        var out = [UInt8](repeating: 0, count: count)
        let got = out.withUnsafeMutableBytes { dst in
            input.withUnsafeBytes { src in ZSTD_decompress(dst.baseAddress, dst.count, src.baseAddress, src.count) }
        }
        if ZSTD_isError(got) != 0 { throw FrameDefect("zstd: \(String(cString: ZSTD_getErrorName(got)))") }
        guard got == count else { throw FrameDefect("zstd: archive holds \(got) bytes, its header says \(count)") }
        return out
    }
}

extension JournalFiles {
    /// Retired segments compressed by retention (`[Journal] Archive=zstd`).
    package static let archive = "archive"
    package static let archiveSuffix = ".zst"

    package static func archiveName(segment: String) -> String { segment + archiveSuffix }
}

/// Reads archived segments (`archive/*.seg.zst`): `pushspoolctl journal cat --archive`.
package enum JournalArchive {
    /// First seqs and names of the archived segments, oldest first.
    package static func list(directory: String) -> [(name: String, firstSeq: UInt64)] {
        let names = (try? RealFileSystem().listDirectory(directory + "/" + JournalFiles.archive)) ?? []
        return names.compactMap { name -> (name: String, firstSeq: UInt64)? in
            guard name.hasSuffix(JournalFiles.archiveSuffix) else { return nil }
            let segment = String(name.dropLast(JournalFiles.archiveSuffix.count))
            return JournalFiles.firstSeq(ofSegment: segment).map { (name, $0) }
        }.sorted { $0.firstSeq < $1.firstSeq }
    }

    /// The segment file's original bytes.
    package static func segmentBytes(directory: String, archiveName: String) throws(JournalError) -> [UInt8] {
        let path = directory + "/" + JournalFiles.archive + "/" + archiveName
        let compressed: [UInt8]
        do { compressed = try Posix.readFile(path, limit: 1 << 40) } catch { throw JournalError(.io(error), directory: directory) }
        do { return try Zstd.decompress(compressed) } catch {
            throw JournalError(.corrupt(segment: JournalFiles.archive + "/" + archiveName, offset: 0, detail: error.detail), directory: directory)
        }
    }

    /// Every record of one archived segment, each checked (header and body CRCs, seq order).
    package static func records(directory: String, archiveName: String) throws(JournalError) -> [JournalRecord] {
        let bytes = try segmentBytes(directory: directory, archiveName: archiveName)
        return try records(segmentBytes: bytes, archiveName: archiveName, directory: directory)
    }

    /// The records of an archived segment's decompressed bytes (the fuzz target's entry: an
    /// archive is a file on disk, so outside input like any other).
    package static func records(segmentBytes bytes: [UInt8], archiveName: String, directory: String) throws(JournalError) -> [JournalRecord] {
        let segment = String(archiveName.dropLast(JournalFiles.archiveSuffix.count))
        let label = JournalFiles.archive + "/" + archiveName
        let parsed: Result<[JournalRecord], JournalError> = bytes.withUnsafeBytes { raw in
            Result { () throws(JournalError) in try parse(raw, label: label, segment: segment, directory: directory) }
        }
        return try parsed.get()
    }

    /// The same bytes as an archive file holds them (one zstd frame), and back.
    package static func compressed(_ segmentBytes: [UInt8]) throws(JournalError) -> [UInt8] {
        do { return try Zstd.compress(segmentBytes) } catch {
            throw JournalError(.corrupt(segment: JournalFiles.archive, offset: 0, detail: error.detail), directory: "")
        }
    }

    package static func decompressed(_ archiveBytes: [UInt8]) throws(JournalError) -> [UInt8] {
        do { return try Zstd.decompress(archiveBytes) } catch {
            throw JournalError(.corrupt(segment: JournalFiles.archive, offset: 0, detail: error.detail), directory: "")
        }
    }

    /// The whole history of the journal in seq order: the archived segments, then the live
    /// ones from where the archives end, each seq once (a segment archived and not yet
    /// unlinked, which a crash between the two steps leaves, is read once). `body` gets each
    /// record with the archive it came from (`nil` for a live segment) and returns false to
    /// stop early. Records at or past `below` are not read.
    package static func forEachRecord(directory: String, below: UInt64 = .max,
                                      _ body: (JournalRecord, _ archive: String?) -> Bool) throws(JournalError) {
        var next: UInt64 = 1
        for archived in list(directory: directory) {
            for record in try records(directory: directory, archiveName: archived.name) where record.seq >= next {
                guard record.seq < below, body(record, archived.name) else { return }
                next = record.seq + 1
            }
        }
        let reader = try JournalReader(directory: directory, fromSeq: next)
        while let record = try reader.next(), record.seq < below {
            guard body(record, nil) else { return }
        }
    }

    private static func parse(_ raw: UnsafeRawBufferPointer, label: String, segment: String,
                              directory: String) throws(JournalError) -> [JournalRecord] {
        let source = SegmentBuffer(raw)
        let header: SegmentHeader
        switch SegmentFrames.header(source) {
        case .success(let h): header = h
        case .failure(let defect): throw JournalError(.corrupt(segment: label, offset: 0, detail: defect.detail), directory: directory)
        }
        var out: [JournalRecord] = []
        var walker = SegmentFrameWalker(source, from: Int64(SegmentHeader.size), expectedSeq: header.firstSeq, mode: .full, policy: .closed)
        while true {
            switch walker.next() {
            case .end:
                return out
            case .record(let frame, let key, let json, let offset):
                out.append(JournalRecord(seq: frame.seq, ingestMillis: frame.ingestMillis, key: key ?? "", body: json ?? [],
                                         segment: segment, offset: offset))
            case .fault(let fault, let offset, _):
                throw JournalError(.corrupt(segment: label, offset: offset, detail: fault.detail), directory: directory)
            }
        }
    }
}
