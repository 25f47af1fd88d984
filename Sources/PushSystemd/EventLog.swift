@preconcurrency import Glibc
internal import CSystemd
import PushSystem

/// Structured events to journald through `sd_journal_sendv(3)`, or plain lines on stderr
/// when stderr is not connected to the journal.
///
/// Every event carries `MESSAGE`, `MESSAGE_ID`, `PRIORITY`, `SYSLOG_IDENTIFIER`,
/// `PUSHSPOOL_EVENT`, `CODE_FILE`/`CODE_LINE`/`CODE_FUNC`, and the caller's fields.
/// Field values are capped (`maxValueBytes`) so a payload can never land in the journal
/// whole; callers pass ids and reason codes, not payloads.
///
/// journald drops messages beyond its rate limit (10000 per 30 s per service by default),
/// which a large backlog reaches. So each kind is limited to `maxEventsPerSecond`; beyond
/// that, events are counted and one `aggregated` event per kind and second reports the
/// count. The summary goes out with the next event of any kind after the second ends, or
/// from `flush()`.
///
/// `Sendable`: the rate state is behind a lock; `sd_journal_sendv` and `write(2)` are
/// thread-safe.
package final class EventLog: Sendable {
    /// Where events go.
    package enum Destination: Sendable, Equatable {
        /// journald's native socket, via `sd_journal_sendv`.
        case journal
        /// One line per event on this file descriptor (2 = stderr).
        case lines(fd: Int32)
    }

    package let identifier: String
    package let destination: Destination
    package let maxEventsPerSecond: Int
    /// Longer field values are cut, with "…" appended.
    package static let maxValueBytes = 1024
    private let windows = Locked([EventKind: Window]())
    /// The current second on the monotonic clock; replaceable in tests.
    private let clock: @Sendable () -> UInt64
    private let metrics: Metrics?

    private struct Window {
        var second: UInt64
        var count: Int
        var suppressed: Int
    }

    /// - Parameters:
    ///   - destination: `nil` chooses like systemd's own tools: journald when `$JOURNAL_STREAM`
    ///     names stderr's device and inode (stderr is a journal stream), stderr lines otherwise.
    ///   - metrics: if given, summarised events are counted in `pushspool_events_aggregated_total`.
    package convenience init(identifier: String = "pushspoold", maxEventsPerSecond: Int = 100, destination: Destination? = nil, metrics: Metrics? = nil) {
        self.init(identifier: identifier, maxEventsPerSecond: maxEventsPerSecond, destination: destination, metrics: metrics) {
            Posix.monotonicNanos() / 1_000_000_000
        }
    }

    init(identifier: String, maxEventsPerSecond: Int, destination: Destination?, metrics: Metrics? = nil, clock: @escaping @Sendable () -> UInt64) {
        self.metrics = metrics
        self.identifier = identifier
        self.maxEventsPerSecond = max(1, maxEventsPerSecond)
        self.destination = destination ?? (Self.stderrIsJournalStream() ? .journal : .lines(fd: 2))
        self.clock = clock
    }

    /// The documented check (systemd.exec(5), `$JOURNAL_STREAM`): `DEVICE:INODE` of the
    /// stream journald connected, compared with what fd 2 is now — an inherited variable
    /// with stderr redirected elsewhere must not count.
    package static func stderrIsJournalStream() -> Bool {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
        var st = stat()
        guard fstat(2, &st) == 0 else { return false }
        return value == "\(st.st_dev):\(st.st_ino)"
    }

    /// Logs one event. `fields` are journald names (`[A-Z0-9_]`, see `EventField`); invalid
    /// characters are replaced with `_`.
    package func log(
        _ kind: EventKind, _ message: String, priority: Int32? = nil, fields: @autoclosure () -> [(String, String)] = [],
        file: String = #fileID, line: Int = #line, function: String = #function
    ) {
        let second = clock()
        let (admit, summaries) = windows.withLock { windows -> (Bool, [(EventKind, Int)]) in
            let summaries = Self.closeWindows(&windows, before: second)
            guard kind != .aggregated else { return (true, summaries) }
            var window = windows[kind] ?? Window(second: second, count: 0, suppressed: 0)
            window.count += 1
            let admit = window.count <= maxEventsPerSecond
            if !admit { window.suppressed += 1 }
            windows[kind] = window
            return (admit, summaries)
        }
        for (suppressedKind, count) in summaries { emitSummary(suppressedKind, count) }
        // Fields are built only for an event that is logged: under a burst most are counted
        // into a summary, and a user's field is an HMAC.
        guard admit else { return }
        emit(kind, message, priority: priority ?? kind.defaultPriority, fields: fields(), file: file, line: line, function: function)
    }

    /// Emits the summaries of suppressed events. With `all`, also those of the current second
    /// (at shutdown); otherwise only of seconds that are over. Call from a periodic tick.
    package func flush(all: Bool = false) {
        let second = clock()
        let summaries = windows.withLock { Self.closeWindows(&$0, before: all ? UInt64.max : second) }
        for (kind, count) in summaries { emitSummary(kind, count) }
    }

    /// Whether events are held back in a second that has not ended yet: their summary is due
    /// once it has, so whoever calls `flush()` must call it again then.
    package var summaryPending: Bool {
        windows.withLock { $0.values.contains { $0.suppressed > 0 } }
    }

    private static func closeWindows(_ windows: inout [EventKind: Window], before second: UInt64) -> [(EventKind, Int)] {
        var summaries: [(EventKind, Int)] = []
        for (kind, window) in windows where window.second < second {
            if window.suppressed > 0 { summaries.append((kind, window.suppressed)) }
            windows[kind] = nil
        }
        return summaries.sorted { $0.0.rawValue < $1.0.rawValue }
    }

    private func emitSummary(_ kind: EventKind, _ count: Int) {
        metrics?.increment(MetricFamily.eventsAggregated, labels: ["event": kind.rawValue], by: Double(count))
        emit(.aggregated, "\(count) \(kind.rawValue) events were not logged one by one (over \(maxEventsPerSecond) a second)",
             priority: EventKind.aggregated.defaultPriority,
             fields: [(EventField.aggregatedKind, kind.rawValue), (EventField.aggregatedCount, String(count)), ("AGGREGATED_MESSAGE_ID", kind.messageID)],
             file: #fileID, line: #line, function: #function)
    }

    private func emit(_ kind: EventKind, _ message: String, priority: Int32, fields: [(String, String)], file: String, line: Int, function: String) {
        let userFields = fields.map { (Self.fieldName($0.0), Self.capped($0.1)) }
        switch destination {
        case .journal:
            var entries = [
                ("MESSAGE", Self.capped(message)),
                ("MESSAGE_ID", kind.messageID),
                ("PRIORITY", String(priority)),
                ("SYSLOG_IDENTIFIER", identifier),
                ("PUSHSPOOL_EVENT", kind.rawValue),
                ("CODE_FILE", file),
                ("CODE_LINE", String(line)),
                ("CODE_FUNC", function),
            ]
            entries += userFields
            if sendToJournal(entries) { return }
            // journald went away: keep the event on stderr rather than lose it.
            writeLine(fd: 2, kind: kind, message: message, priority: priority, fields: userFields)
        case .lines(let fd):
            writeLine(fd: fd, kind: kind, message: message, priority: priority, fields: userFields)
        }
    }

    private func sendToJournal(_ entries: [(String, String)]) -> Bool {
        let strings = entries.map { Array("\($0.0)=\($0.1)".utf8) }
        let buffers = strings.map { bytes -> UnsafeMutableRawBufferPointer in
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 1)
            buffer.copyBytes(from: bytes)
            return buffer
        }
        defer { for buffer in buffers { buffer.deallocate() } }
        var vectors = zip(buffers, strings).map { iovec(iov_base: $0.0.baseAddress, iov_len: $0.1.count) }
        return sd_journal_sendv(&vectors, Int32(vectors.count)) >= 0
    }

    /// `pushspoold[PID]: <PRIORITY> message EVENT=kind KEY=value ...`; values with spaces or
    /// quotes are double-quoted, newlines escaped, so each event stays one line.
    private func writeLine(fd: Int32, kind: EventKind, message: String, priority: Int32, fields: [(String, String)]) {
        var line = "\(identifier)[\(getpid())]: <\(priority)> \(Self.escaped(Self.capped(message)))"
        line += " EVENT=\(kind.rawValue)"
        for (name, value) in fields {
            line += " \(name)=\(Self.quotedIfNeeded(value))"
        }
        line += "\n"
        try? Posix.writeAll(fd, Array(line.utf8), subject: "event log")
    }

    static func fieldName(_ name: String) -> String {
        var result = String(name.uppercased().map { ($0.isASCII && ($0.isLetter || $0.isNumber)) || $0 == "_" ? $0 : "_" })
        while result.hasPrefix("_") { result.removeFirst() }  // leading _ is reserved for trusted fields
        return result.isEmpty ? "FIELD" : result
    }

    static func capped(_ value: String) -> String {
        guard value.utf8.count > maxValueBytes else { return value }
        var cut = Substring(value)
        while cut.utf8.count > maxValueBytes - 3 { cut.removeLast() }
        return cut + "…"
    }

    static func escaped(_ text: String) -> String {
        text.replacingNewlines()
    }

    static func quotedIfNeeded(_ value: String) -> String {
        guard value.isEmpty || value.contains(where: { $0.isNewline || " \t\"=\\".contains($0) }) else { return value }
        return "\"" + value.escaping(["\\": "\\\\", "\"": "\\\"", "\n": "\\n", "\r": "\\r", "\r\n": "\\r\\n"]) + "\""
    }
}

extension String {
    fileprivate func replacingNewlines() -> String {
        escaping(["\n": "\\n", "\r": "\\r", "\r\n": "\\r\\n"])
    }

    /// The string with each character found in `replacements` replaced by its value.
    func escaping(_ replacements: [Character: String]) -> String {
        var out = ""
        out.reserveCapacity(utf8.count)
        for character in self {
            if let replacement = replacements[character] { out += replacement } else { out.append(character) }
        }
        return out
    }
}
