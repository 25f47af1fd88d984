import Foundation
import Testing
@testable import PushSystemd

/// Against a real journald: run by scripts/systemd-integration/journald-events.sh, which
/// starts one and sets PUSHSPOOL_LIVE_JOURNALD=1. Skipped otherwise (a unit-test run must
/// not depend on a daemon being up).
@Suite(.enabled(if: ProcessInfo.processInfo.environment["PUSHSPOOL_LIVE_JOURNALD"] == "1",
                "needs journald; run scripts/systemd-integration/journald-events.sh"))
struct JournaldLiveTests {
    /// `journalctl -o json` entries matching `matches`, after asking journald to flush.
    static func entries(_ matches: [String]) throws -> [[String: Any]] {
        _ = try run(["journalctl", "--sync"])
        let output = try run(["journalctl", "--no-pager", "-o", "json", "--all"] + matches)
        return output.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    static func run(_ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    @Test func eventsArriveWithStructuredFields() throws {
        let id = "live-\(UUID().uuidString)"
        let log = EventLog(identifier: "pushspoold-livetest", destination: .journal)
        log.log(.ingested, "Payload ingested", fields: [
            (EventField.pushID, id), (EventField.spoolFile, "a b.json"), (EventField.journalSequence, "7"),
            (EventField.vendor, "infobip"), ("NOTE", "two\nlines"),
        ])
        let line = #line - 4
        let found = try Self.entries(["PUSH_ID=\(id)"])
        try #require(found.count == 1)
        let entry = found[0]
        #expect(entry["MESSAGE"] as? String == "Payload ingested")
        #expect(entry["MESSAGE_ID"] as? String == EventKind.ingested.messageID)
        #expect(entry["PRIORITY"] as? String == "6")
        #expect(entry["SYSLOG_IDENTIFIER"] as? String == "pushspoold-livetest")
        #expect(entry["PUSHSPOOL_EVENT"] as? String == "ingested")
        #expect(entry["SPOOL_FILE"] as? String == "a b.json")
        #expect(entry["JOURNAL_SEQ"] as? String == "7")
        #expect(entry["PUSH_VENDOR"] as? String == "infobip")
        #expect(entry["NOTE"] as? String == "two\nlines")
        #expect(entry["CODE_FILE"] as? String == "PushSystemdTests/JournaldLiveTests.swift")
        #expect(entry["CODE_LINE"] as? String == String(line))
        #expect(entry["CODE_FUNC"] as? String == "eventsArriveWithStructuredFields()")
        #expect(entry["_PID"] as? String == String(ProcessInfo.processInfo.processIdentifier))
    }

    @Test func burstsAreSummarisedNotDropped() throws {
        let identifier = "pushspoold-burst-\(UInt32.random(in: 0...UInt32.max))"
        let log = EventLog(identifier: identifier, maxEventsPerSecond: 50, destination: .journal)
        for index in 0..<400 { log.log(.duplicate, "Duplicate payload skipped", fields: [(EventField.pushID, "d\(index)")]) }
        log.flush(all: true)
        let found = try Self.entries(["SYSLOG_IDENTIFIER=\(identifier)"])
        let duplicates = found.filter { $0["PUSHSPOOL_EVENT"] as? String == "duplicate" }
        let summaries = found.filter { $0["MESSAGE_ID"] as? String == EventKind.aggregated.messageID }
        // Each event is either sent or counted in exactly one summary.
        let summarised = summaries.compactMap { ($0["AGGREGATED_COUNT"] as? String).flatMap(Int.init) }.reduce(0, +)
        #expect(duplicates.count + summarised == 400)
        #expect(duplicates.count >= 50 && duplicates.count < 400)
        #expect(summaries.allSatisfy { $0["AGGREGATED_EVENT"] as? String == "duplicate" })
    }
}
