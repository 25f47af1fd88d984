@preconcurrency import Glibc
import PushCLI
import PushJournal
import PushPayload
import PushSystem

/// `pushspoolctl journal cat|tail|verify|stats`: read-only views of the journal, safe while
/// the daemon writes (readers see committed records only).
package struct JournalCommand: CtlSubcommand {
    package static var command: CtlCommandSpec {
        let json = Option.flag("--json", help: "one JSON object per line: the stored record plus \"seq\"")
        return Command("journal", summary: "print, follow, verify or summarise the journal", subcommands: [
            Command("cat", summary: "every committed record from a sequence number on",
                    options: [json, .value("--from-seq", placeholder: "N", help: "the first record's seq (default 1)"),
                              .flag("--archive", help: "first the records of segments retention compressed into "
                                    + "archive/ ([Journal] Archive=zstd), then the live journal")],
                    discussion: Self.recordFormat, exitStatus: Self.exitStatus) { invocation throws(CLIError) in
                JournalCommand(action: .cat(fromSeq: try invocation.integer("--from-seq", in: 1...UInt64.max) ?? 1,
                                            archive: invocation.flag("--archive")),
                               json: invocation.flag("--json"))
            },
            Command("tail", summary: "the last records; with -f keep printing new ones as they are committed",
                    options: [.value("-n", "--lines", placeholder: "N", help: "how many records (default 10)"),
                              .flag("-f", "--follow", help: "keep printing new records until interrupted"), json],
                    discussion: Self.recordFormat, exitStatus: Self.exitStatus) { invocation throws(CLIError) in
                JournalCommand(action: .tail(count: try invocation.integer("-n", in: 0...1_000_000_000) ?? 10,
                                             follow: invocation.flag("-f")),
                               json: invocation.flag("--json"))
            },
            Command("verify", summary: "check every record of every segment (frame, checksums, sequence, duplicate ids)",
                    discussion: "Prints a summary; shows progress on stderr for large journals.",
                    exitStatus: Self.exitStatus) { _ throws(CLIError) in JournalCommand(action: .verify) },
            Command("stats", summary: "segments, records, bytes, sequence and time range (frame headers only)",
                    options: [.flag("--json", help: "one JSON object")],
                    discussion: "Reads frame headers only; 'verify' is the integrity check.",
                    exitStatus: Self.exitStatus) { invocation throws(CLIError) in
                JournalCommand(action: .stats, json: invocation.flag("--json"))
            },
        ])
    }

    static let recordFormat = """
        Records print as one line each: seq, ingest time, vendor:id and title/body. With --json
        each is one JSON object per line: the stored record plus "seq".
        """

    static let exitStatus = """
        Exit status: 0 success; verify: 0 clean, 1 corruption or no journal at the configured
        path ("no journal at PATH"), 2 only a torn tail (the daemon cuts it at its next start);
        1 runtime failure, 64 usage error.
        """

    enum Action: Equatable {
        case cat(fromSeq: UInt64, archive: Bool)
        case tail(count: Int, follow: Bool)
        case verify
        case stats
    }

    var action: Action
    var json = false

    package func run(_ context: CtlContext) -> Int32 {
        guard let configuration = context.configurationOrReport() else { return ExitStatus.failure }
        let directory = context.journalDirectory(configuration)
        do throws(JournalError) {
            switch action {
            case .cat(let fromSeq, let archive):
                var output = OutputBuffer()
                var progress = CatProgress()
                defer {
                    output.flush()
                    progress.finish(context)
                }
                func emit(_ record: JournalRecord) {
                    if json {
                        output.appendJSONLine(record)
                    } else {
                        output.append(line(for: record))
                    }
                    progress.tick(context)
                }
                var next = fromSeq
                if archive {
                    // Archived segments hold the oldest seqs; the live journal continues after them.
                    for archived in JournalArchive.list(directory: directory) {
                        for record in try JournalArchive.records(directory: directory, archiveName: archived.name)
                        where record.seq >= next {
                            emit(record)
                            next = record.seq + 1
                        }
                    }
                }
                let reader = try JournalReader(directory: directory, fromSeq: next)
                while let record = try reader.next() { emit(record) }
                return ExitStatus.ok
            case .tail(let count, let follow):
                return try tail(directory: directory, count: count, follow: follow, context: context)
            case .verify:
                return verify(directory: directory, context: context)
            case .stats:
                return try stats(directory: directory, context: context)
            }
        } catch {
            context.err("pushspoolctl: \(error)\n")
            return ExitStatus.failure
        }
    }

    private func tail(directory: String, count: Int, follow: Bool, context: CtlContext) throws(JournalError) -> Int32 {
        // Start `count` records before the end without reading the records before them.
        let last = try JournalReader.lastSeq(directory: directory) ?? 0
        let first = last >= UInt64(count) ? last - UInt64(count) + 1 : 1
        let reader = try JournalReader(directory: directory, fromSeq: count == 0 ? last + 1 : first)
        while let record = try reader.next() { context.out(line(for: record)) }
        guard follow else { return ExitStatus.ok }
        // The writer rewrites COMMITTED in place after each sync and creates each new segment
        // in the directory: sleep until one of those, not on a timer.
        let committed = directory + "/" + JournalFiles.committed
        guard let changes = try? DirectoryChangeWaiter(directory: directory) else {
            // No inotify (fs.inotify.max_user_instances reached): the reader looks again now and then.
            while true {
                if let record = try reader.next(waitingUpTo: .seconds(3600)) { context.out(line(for: record)) }
            }
        }
        while true {
            // Armed before looking, so a commit between the look and the wait still wakes it.
            changes.watchWrites(of: committed)
            while let record = try reader.next() { context.out(line(for: record)) }
            changes.wait(timeout: nil)
        }
    }

    private func verify(directory: String, context: CtlContext) -> Int32 {
        let showProgress = isatty(2) != 0
        var lastShown: Int64 = -1
        let report = JournalVerifier.verify(directory: directory) { progress in
            guard showProgress, progress.bytesTotal > 16 << 20 else { return }
            let percent = progress.bytesTotal == 0 ? 100 : progress.bytesDone * 100 / progress.bytesTotal
            if percent != lastShown {
                lastShown = percent
                context.err("\rverifying: \(percent)%")
            }
        }
        if lastShown >= 0 { context.err("\r\u{1B}[K") }
        if report.noJournal {
            // Not a verdict on data: there is nothing to verify (a wrong path, or a daemon that never ran).
            context.err("pushspoolctl: " + report.lines.joined(separator: "\n") + "\n")
            return report.exitCode
        }
        context.out(report.lines.joined(separator: "\n") + "\n")
        return report.exitCode
    }

    private func stats(directory: String, context: CtlContext) throws(JournalError) -> Int32 {
        let stats = try journalStats(directory: directory)
        var fields: [(String, JSONValue)] = [
            ("segments", .number(String(stats.segments))),
            ("records", .number(String(stats.records))),
            ("bytes", .number(String(stats.bytes))),
            ("trailingBytes", .number(String(stats.trailingBytes))),
        ]
        if let first = stats.firstSeq, let last = stats.lastSeq {
            fields += [("firstSeq", .number(String(first))), ("lastSeq", .number(String(last)))]
        }
        if let committed = stats.committedSeq { fields.append(("committedSeq", .number(String(committed)))) }
        if let first = stats.firstIngestMillis, let last = stats.lastIngestMillis {
            fields += [("firstIngestedAt", .string(Timestamp.iso8601(millis: first))),
                       ("lastIngestedAt", .string(Timestamp.iso8601(millis: last)))]
        }
        if json {
            context.out(String(decoding: JSONValue.object(JSONObject(uniqueKeysWithValues: fields)).serialized(), as: UTF8.self) + "\n")
        } else {
            for (key, value) in fields {
                let text: String = switch value {
                case .string(let s), .number(let s): s
                default: ""
                }
                context.out("\(key): \(text)\n")
            }
        }
        return ExitStatus.ok
    }

    private func line(for record: JournalRecord) -> String {
        if json {
            // The stored body is a compact JSON object; splice the sequence number in front.
            let body = record.body
            if body.count >= 2, body.first == UInt8(ascii: "{") {
                let rest = body.count == 2 ? "}" : "," + String(decoding: body.dropFirst(), as: UTF8.self)
                return "{\"seq\":\(record.seq)\(rest)\n"
            }
            return "{\"seq\":\(record.seq),\"body\":\(String(decoding: body, as: UTF8.self))}\n"
        }
        if Tombstone.isTombstone(key: record.key) {
            // An erased record keeps its seq and time; its content and recipient are gone.
            let erasure = Tombstone.erasureID(json: record.body).map { " (\($0))" } ?? ""
            return "\(record.seq)\t\(Timestamp.iso8601(millis: record.ingestMillis))\terased\(erasure)\n"
        }
        var summary = ""
        if case .object(let object)? = try? JSONParser().parse(record.body) {
            let title = object["title"].flatMap { if case .string(let s) = $0 { s } else { nil } }
            let body = object["body"].flatMap { if case .string(let s) = $0 { s } else { nil } }
            summary = [title, body].compactMap { $0 }.joined(separator: " — ")
        }
        return "\(record.seq)\t\(Timestamp.iso8601(millis: record.ingestMillis))\t\(record.key)\t\(summary)\n"
    }
}

/// Lines for stdout gathered into one `write` per 256 KiB instead of one per record, which
/// bounded `journal cat` at the syscall rate. Also `user export`'s.
struct OutputBuffer {
    private var bytes: [UInt8] = []
    private static let flushAt = 256 << 10

    init() { bytes.reserveCapacity(Self.flushAt + 4096) }

    mutating func append(_ line: String) {
        bytes.append(contentsOf: line.utf8)
        if bytes.count >= Self.flushAt { flush() }
    }

    /// `bytes` and a newline.
    mutating func appendLine(_ line: [UInt8]) {
        bytes.append(contentsOf: line)
        bytes.append(0x0A)
        if bytes.count >= Self.flushAt { flush() }
    }

    /// `{"seq":N,` followed by the stored body without its `{`: the bytes as stored, no
    /// `String` in between (a body that is not an object gets `"body":` around it).
    mutating func appendJSONLine(_ record: JournalRecord) {
        let body = record.body
        bytes.append(contentsOf: #"{"seq":"#.utf8)
        bytes.append(contentsOf: String(record.seq).utf8)
        if body.count >= 2, body.first == UInt8(ascii: "{") {
            if body.count == 2 {
                bytes.append(UInt8(ascii: "}"))
            } else {
                bytes.append(UInt8(ascii: ","))
                bytes.append(contentsOf: body[1...])
            }
        } else {
            bytes.append(contentsOf: #","body":"#.utf8)
            bytes.append(contentsOf: body)
            bytes.append(UInt8(ascii: "}"))
        }
        bytes.append(0x0A)
        if bytes.count >= Self.flushAt { flush() }
    }

    mutating func flush() {
        guard !bytes.isEmpty else { return }
        try? Posix.writeAll(1, bytes, subject: "stdout")
        bytes.removeAll(keepingCapacity: true)
    }
}

/// "cat: N records" on stderr, every half second once `journal cat` has run for a second, when
/// stderr is a terminal and stdout is not (the records go to a pipe or a file).
private struct CatProgress {
    private let enabled = isatty(2) != 0 && isatty(1) == 0
    private let started = Posix.monotonicNanos()
    private var records = 0
    private var lastShown: UInt64 = 0
    private var shown = false

    mutating func tick(_ context: CtlContext) {
        records += 1
        guard enabled, records & 4095 == 0 else { return }
        let now = Posix.monotonicNanos()
        guard now - started >= 1_000_000_000, now - lastShown >= 500_000_000 else { return }
        lastShown = now
        shown = true
        context.err("\rcat: \(records) records")
    }

    func finish(_ context: CtlContext) {
        if shown { context.err("\r\u{1B}[K") }
    }
}
