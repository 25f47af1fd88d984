@preconcurrency import Glibc
import Dispatch
import Foundation
import Testing
@testable import PushJournal
import PushSystem
import TestSupport
import PushConfig
import PushModuleOptions

extension TempDir {
    var journal: String { path + "/journal" }
}

/// Options with a fault scope of the test's own, so injected faults hit nothing else.
func testOptions(_ adjust: (inout JournalOptions) -> Void = { _ in }) -> JournalOptions {
    var options = JournalOptions(settings: Configuration().journal)
    options.faultScope = "test-\(UUID().uuidString)"
    options.maxBatchDelay = .zero
    adjust(&options)
    return options
}

/// Submits and waits for the completion.
@discardableResult
func append(_ writer: JournalWriter, _ key: String, _ body: String = "", ingest: Int64 = 1_700_000_000_000) -> AppendResult {
    let box = Locked<AppendResult?>(nil)
    let done = DispatchSemaphore(value: 0)
    writer.submit(key: key, body: Array(body.utf8), ingestMillis: ingest) { result in
        box.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    return box.withLock { $0! }
}

func seq(_ result: AppendResult) -> UInt64? {
    if case .committed(let seq) = result { return seq }
    return nil
}

func body(for index: Int, size: Int = 60) -> String {
    let base = "{\"id\":\"k\(index)\",\"title\":\"hello \(index)\"}"
    return base + String(repeating: " ", count: max(0, size - base.count))
}

/// Writes `count` records `k1...kN` and closes the writer.
func makeJournal(_ dir: String, count: Int, options: JournalOptions = testOptions(), bodySize: Int = 60) throws {
    let (writer, _) = try JournalWriter.open(directory: dir, options: options)
    for i in 1...count { #expect(seq(append(writer, "k\(i)", body(for: i, size: bodySize))) == UInt64(i)) }
    try writer.close()
}

func segmentNames(_ dir: String) -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).filter { $0.hasSuffix(".seg") }.sorted()
}

func readBytes(_ path: String) -> [UInt8] { (try? Posix.readFile(path, limit: 1 << 30)) ?? [] }

func writeBytes(_ path: String, _ bytes: [UInt8]) {
    _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
}

/// Offsets of every record frame in a segment file, by walking the frames.
func frameOffsets(_ path: String) -> [Int] {
    let bytes = readBytes(path)
    var offsets: [Int] = []
    var at = SegmentHeader.size
    while at + RecordHeader.size <= bytes.count {
        let header = bytes.withUnsafeBytes { RecordHeader.decode(UnsafeRawBufferPointer(rebasing: $0[at..<(at + 40)])) }
        guard case .success(let h) = header else { break }
        offsets.append(at)
        at += h.frameLength
    }
    return offsets
}

func readAll(_ dir: String, committedOnly: Bool = true) throws -> [JournalRecord] {
    let reader = try JournalReader(directory: dir, committedOnly: committedOnly)
    var out: [JournalRecord] = []
    while let record = try reader.next() { out.append(record) }
    return out
}

extension JournalError {
    var corruptAt: (segment: String, offset: Int64)? {
        if case .corrupt(let segment, let offset, _) = kind { return (segment, offset) }
        return nil
    }
}
