// The fuzz targets' logic, as a plain library so that two callers share it: the libFuzzer
// binary in Fuzz/ (a separate package, because a fuzz entry point inside this package breaks
// `swift build`) and `swift test`, which replays every saved crash and seed through the same
// code. `package` access does not cross packages, so the entry points here are `public`.
import Foundation
import PushConfig
import PushInbox
import PushInboxServer
import PushJournal
import PushMedia
import PushMediaCore
import PushNcEvents
import PushPayload
import PushSpool
import PushSystem
import PushModuleOptions

/// A broken invariant found while running one input (the fuzz binary traps on it).
public struct FuzzFailure: Error, Sendable, CustomStringConvertible {
    public var target: String
    public var message: String
    public var description: String { "\(target): \(message)" }
}

/// The fuzz targets by name. Each runs one input and throws ``FuzzFailure`` when an invariant
/// that must hold for every input does not; a crash inside the code under test is a crash.
public enum FuzzTargets {
    /// Every target's name, the key for ``run(_:_:)`` and the directory name of its corpus.
    public static let names = ["json", "envelope", "journal-frame", "journal-recovery", "journal-archive", "config", "media-sniff",
                               "inbox-request"]

    /// Runs `bytes` through the target `name`; throws for an unknown name or a broken invariant.
    public static func run(_ name: String, _ bytes: [UInt8]) throws(FuzzFailure) {
        switch name {
        case "json": try json(bytes)
        case "envelope": try envelope(bytes)
        case "journal-frame": try journalFrame(bytes)
        case "journal-recovery": try journalRecovery(bytes)
        case "journal-archive": try journalArchive(bytes)
        case "config": try config(bytes)
        case "media-sniff": try mediaSniff(bytes)
        case "inbox-request": try inboxRequest(bytes)
        default: throw FuzzFailure(target: name, message: "no such fuzz target; known: \(names.joined(separator: " "))")
        }
    }

    /// The JSON parser and the normaliser: what the parser accepts serialises to JSON that
    /// parses back to the same value, and an accepted payload's record parses as JSON.
    static func json(_ bytes: [UInt8]) throws(FuzzFailure) {
        if let value = try? JSONParser(maxDepth: JSONParser.depthCeiling).parse(bytes) {
            let again = value.serialized()
            guard let reparsed = try? JSONParser(maxDepth: JSONParser.depthCeiling).parse(again) else {
                throw FuzzFailure(target: "json", message: "serialised value does not parse: \(String(decoding: again.prefix(200), as: UTF8.self))")
            }
            guard reparsed.serialized() == again else {
                throw FuzzFailure(target: "json", message: "serialisation is not stable")
            }
        }
        if case .accepted(let push) = Normalizer.normalize(bytes) {
            let record = push.jsonValue().serialized()
            guard (try? JSONParser(maxDepth: JSONParser.depthCeiling).parse(record)) != nil else {
                throw FuzzFailure(target: "json", message: "the journal record of an accepted payload is not JSON")
            }
        }
    }

    /// The Notification Center event envelope: an accepted event, written back as the envelope
    /// pushspoolctl and pushspool-inbox write, classifies as the same event.
    static func envelope(_ bytes: [UInt8]) throws(FuzzFailure) {
        guard case .event(let event) = Normalizer.classify(bytes) else { return }
        let written = NcEventWriter.envelopeBytes(event)
        guard case .event(let again) = Normalizer.classify(written) else {
            throw FuzzFailure(target: "envelope", message: "an accepted event's envelope is refused: \(String(decoding: written, as: UTF8.self))")
        }
        guard again == event else {
            throw FuzzFailure(target: "envelope", message: "an accepted event's envelope reads back differently")
        }
    }

    /// The frame decoders on arbitrary bytes: segment header, record header and body, and the
    /// COMMITTED mark; what decodes re-encodes to the same bytes.
    static func journalFrame(_ bytes: [UInt8]) throws(FuzzFailure) {
        // withUnsafeBytes rethrows untyped errors, so the closure returns the problem instead.
        let problem: String? = bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> String? in
            if raw.count >= SegmentHeader.size, case .success(let header) = SegmentHeader.decode(UnsafeRawBufferPointer(rebasing: raw[..<SegmentHeader.size])) {
                guard header.encoded() == Array(raw[..<SegmentHeader.size]) else {
                    return "segment header does not re-encode to its bytes"
                }
            }
            guard raw.count >= RecordHeader.size,
                  case .success(let header) = RecordHeader.decode(UnsafeRawBufferPointer(rebasing: raw[..<RecordHeader.size])) else { return nil }
            let bodyEnd = RecordHeader.size + Int(header.bodyLength)
            guard bodyEnd <= raw.count else { return nil }
            let body = UnsafeRawBufferPointer(rebasing: raw[RecordHeader.size..<bodyEnd])
            if case .success(let record) = RecordFrame.checkBody(header, body) {
                var frame: [UInt8] = []
                RecordFrame.encode(seq: header.seq, ingestMillis: header.ingestMillis, key: Array(record.key.utf8), body: record.json, into: &frame)
                guard frame.count == header.frameLength, Array(frame[..<bodyEnd]) == Array(raw[..<bodyEnd]) else {
                    return "a record that checks does not re-encode to its bytes"
                }
            }
            return nil
        }
        if let problem { throw FuzzFailure(target: "journal-frame", message: problem) }
        if bytes.count >= CommittedMark.size, let mark = CommittedMark.decode(Array(bytes.prefix(CommittedMark.size))) {
            guard mark.encoded() == Array(bytes.prefix(CommittedMark.size)) else {
                throw FuzzFailure(target: "journal-frame", message: "COMMITTED mark does not re-encode to its bytes")
            }
        }
    }

    /// The input as a segment's bytes: after a valid segment header when its first byte is odd
    /// (so the fuzzer reaches the records), else as it is.
    static func segment(fromInput bytes: [UInt8]) -> [UInt8] {
        guard let first = bytes.first, first & 1 == 1 else { return bytes }
        return SegmentHeader(firstSeq: 1, createdMillis: 0, journalID: Array(repeating: 7, count: 16)).encoded() + bytes.dropFirst()
    }

    /// Recovery on arbitrary bytes: the input becomes the journal's only segment (after a
    /// valid segment header when its first byte is odd, so the fuzzer reaches the records);
    /// recovery either refuses or leaves a journal that verifies clean, and a second recovery
    /// changes nothing.
    static func journalRecovery(_ bytes: [UInt8]) throws(FuzzFailure) {
        let fail = { (message: String) in FuzzFailure(target: "journal-recovery", message: message) }
        var template = Array((FileManager.default.temporaryDirectory.path + "/pushspool-fuzz-journal-XXXXXX").utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw fail("cannot make a temporary directory")
        }
        let root = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let segment = segment(fromInput: bytes)
        let path = root + "/" + JournalFiles.segmentName(firstSeq: 1)
        guard FileManager.default.createFile(atPath: path, contents: Data(segment)) else { throw fail("cannot write the segment") }
        _ = JournalVerifier.verify(directory: root)
        var options = JournalOptions(settings: Configuration().journal)
        options.corruptionPolicy = .quarantineSegment
        options.checkpointEvery = 1 << 30
        let first: RecoveryReport
        do {
            let (writer, report) = try JournalWriter.open(directory: root, options: options)
            try writer.close()
            first = report
        } catch {
            return  // refused: nothing to check
        }
        let verified = JournalVerifier.verify(directory: root)
        guard verified.exitCode == 0 else {
            throw fail("verify after recovery: \(verified.lines.joined(separator: "; "))")
        }
        do {
            let (writer, report) = try JournalWriter.open(directory: root, options: options)
            try writer.close()
            // Records are counted by verify: a report counts the records it scanned, including
            // those of a segment it then quarantined. Seqs are compared with >=: after a
            // quarantine the writer starts the next segment past the quarantined seqs, which
            // the second report shows and the first did not.
            let again = JournalVerifier.verify(directory: root)
            guard again.records == verified.records, report.lastSeq >= first.lastSeq, report.tornBytesTruncated == 0,
                  report.quarantined.isEmpty, again.exitCode == 0 else {
                throw fail("a second recovery changed the journal: \(first) then \(report); verify: \(again.lines.joined(separator: "; "))")
            }
        } catch let failure as FuzzFailure {
            throw failure
        } catch {
            throw fail("a recovered journal does not reopen: \(error)")
        }
    }

    /// Archived segments (`archive/*.seg.zst`) are files, so input like any other: retention,
    /// `journal cat --archive`, `user export` and the eraser read them. The input becomes a
    /// segment (after a valid segment header when its first byte is odd), compressed as
    /// retention does; it must decompress to itself, and the archive reader either refuses it
    /// or returns consecutive records, each of which re-encodes to the bytes it was read from.
    /// The raw input is also read as an archive file's bytes (a damaged zstd frame).
    static func journalArchive(_ bytes: [UInt8]) throws(FuzzFailure) {
        let fail = { (message: String) in FuzzFailure(target: "journal-archive", message: message) }
        let segment = segment(fromInput: bytes)
        let name = JournalFiles.archiveName(segment: JournalFiles.segmentName(firstSeq: 1))
        if let inner = try? JournalArchive.decompressed(bytes) {
            _ = try? JournalArchive.records(segmentBytes: inner, archiveName: name, directory: "/fuzz")
        }
        let archive: [UInt8]
        do { archive = try JournalArchive.compressed(segment) } catch { throw fail("zstd refused to compress \(segment.count) bytes: \(error)") }
        let restored: [UInt8]
        do { restored = try JournalArchive.decompressed(archive) } catch { throw fail("an archive retention wrote does not decompress: \(error)") }
        guard restored == segment else { throw fail("an archive does not decompress to the segment it was made from") }
        guard let records = try? JournalArchive.records(segmentBytes: restored, archiveName: name, directory: "/fuzz") else { return }
        var expected = records.first?.seq ?? 0
        for record in records {
            guard record.seq == expected, record.offset >= Int64(SegmentHeader.size), record.offset < Int64(segment.count) else {
                throw fail("record \(record.seq) at offset \(record.offset) is out of order or outside the segment")
            }
            var frame: [UInt8] = []
            RecordFrame.encode(seq: record.seq, ingestMillis: record.ingestMillis, key: Array(record.key.utf8), body: record.body, into: &frame)
            // Header and body; the padding to 8 bytes is not checked by any reader (as in
            // journal-frame), so a frame with non-zero padding still reads as its record.
            let start = Int(record.offset)
            let end = RecordHeader.size + record.key.utf8.count + record.body.count
            guard frame.count >= end, start + end <= segment.count, Array(segment[start..<start + end]) == Array(frame[..<end]) else {
                throw fail("record \(record.seq) does not re-encode to the bytes it was read from")
            }
            expected += 1
        }
    }

    /// The INI configuration: what loads renders to text that loads to the same configuration.
    static func config(_ bytes: [UInt8]) throws(FuzzFailure) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let (configuration, provenance) = try? ConfigurationLoader.load(text: text, path: "fuzz.conf") else { return }
        let rendered = renderEffectiveConfiguration(configuration, provenance: provenance)
        do {
            let (again, _) = try ConfigurationLoader.load(text: rendered, path: "rendered.conf")
            guard again == configuration else {
                throw FuzzFailure(target: "config", message: "the rendered configuration reads back differently:\n\(rendered)")
            }
        } catch let failure as FuzzFailure {
            throw failure
        } catch {
            throw FuzzFailure(target: "config", message: "the rendered configuration does not load: \(error)\n\(rendered)")
        }
    }

    /// The media type sniffer, on every prefix length the downloader may hand it. Its answer
    /// is final once it has `sniffLength` bytes: more bytes must not change it. (A shorter
    /// body is judged only at its end, so there more bytes may: `FF FB 90 64 "ftyphep"` is an
    /// MP3 frame at 11 bytes and an unknown ISO box at 15; the first fuzz run found that.)
    static func mediaSniff(_ bytes: [UInt8]) throws(FuzzFailure) {
        let type = MediaType.sniff(bytes)
        if bytes.count >= MediaType.sniffLength, MediaType.sniff(bytes + [0, 1, 2, 3]) != type {
            throw FuzzFailure(target: "media-sniff", message: "bytes past sniffLength changed the sniffed type \(String(describing: type))")
        }
        _ = MediaType.sniff(bytes.prefix(bytes.count / 2))
    }
}
