@preconcurrency import Glibc
import Foundation
import Synchronization
import Testing
@testable import PushSystemd

/// A clock the test moves by hand.
final class ManualClock: Sendable {
    private let second = Atomic<UInt64>(1000)
    func now() -> UInt64 { second.load(ordering: .relaxed) }
    func advance() { second.add(1, ordering: .relaxed) }
}



@Suite struct EventLogTests {
    @Test func burstsBeyondTheLimitAreSummarisedOncePerSecond() {
        let pipe = Pipe2()
        let clock = ManualClock()
        let metrics = Metrics()
        let log = EventLog(identifier: "agg", maxEventsPerSecond: 5, destination: .lines(fd: pipe.writeEnd), metrics: metrics, clock: { clock.now() })

        for index in 0..<40 { log.log(.ingested, "Payload ingested", fields: [(EventField.pushID, "p\(index)")]) }
        for index in 0..<3 { log.log(.refused, "Spool file refused", fields: [(EventField.pushID, "r\(index)")]) }
        var lines = pipe.available().split(separator: "\n")
        #expect(lines.count == 8)
        #expect(lines.filter { $0.contains("EVENT=ingested") }.count == 5)
        #expect(lines.filter { $0.contains("EVENT=refused") }.count == 3)

        // The next second: the first event of any kind brings the summary of the last.
        clock.advance()
        log.log(.duplicate, "Duplicate payload skipped")
        lines = pipe.available().split(separator: "\n")
        #expect(lines.count == 2)
        #expect(lines.first?.contains("EVENT=aggregated AGGREGATED_EVENT=ingested AGGREGATED_COUNT=35 AGGREGATED_MESSAGE_ID=\(EventKind.ingested.messageID)") == true)
        #expect(lines.first?.contains(": <4> 35 ingested events were not logged one by one") == true)
        #expect(lines.last?.contains("EVENT=duplicate") == true)
        #expect(metrics.value(MetricFamily.eventsAggregated, labels: ["event": "ingested"]) == 35)

        // A new second starts a new allowance; flush(all:) reports the current one at shutdown.
        for _ in 0..<7 { log.log(.ingested, "Payload ingested") }
        log.flush()
        #expect(pipe.available().split(separator: "\n").count == 5)
        log.flush(all: true)
        #expect(pipe.available().split(separator: "\n").map { $0.contains("AGGREGATED_COUNT=2") } == [true])
        log.flush(all: true)
        #expect(pipe.available().isEmpty)
    }

    /// Under a burst most events are only counted; their fields (a user's is an HMAC) must not
    /// be built for nothing.
    @Test func fieldsAreBuiltOnlyForEventsThatAreLogged() {
        let pipe = Pipe2()
        let clock = ManualClock()
        let log = EventLog(identifier: "lazy", maxEventsPerSecond: 3, destination: .lines(fd: pipe.writeEnd), clock: { clock.now() })
        let built = Atomic<Int>(0)
        @Sendable func fields() -> [(String, String)] {
            built.add(1, ordering: .relaxed)
            return [(EventField.pushID, "p")]
        }
        for _ in 0..<50 { log.log(.ingested, "Payload ingested", fields: fields()) }
        #expect(built.load(ordering: .relaxed) == 3)
        #expect(pipe.available().split(separator: "\n").count == 3)
    }

    /// A flush within the second of the held-back events cannot summarise them yet: the log
    /// says so, so that its caller comes back after the second instead of forgetting them.
    @Test func eventsHeldInTheCurrentSecondAreReportedPending() {
        let pipe = Pipe2()
        let clock = ManualClock()
        let log = EventLog(identifier: "pending", maxEventsPerSecond: 2, destination: .lines(fd: pipe.writeEnd), clock: { clock.now() })
        for _ in 0..<2 { log.log(.refused, "Spool file refused") }
        #expect(!log.summaryPending, "nothing held back yet")
        log.log(.refused, "Spool file refused")
        log.flush()
        #expect(log.summaryPending)
        clock.advance()
        log.flush()
        #expect(!log.summaryPending)
        #expect(pipe.available().split(separator: "\n").last?.contains("AGGREGATED_COUNT=1") == true)
    }

    @Test func fieldNamesAreMadeValidAndValuesCapped() {
        #expect(EventLog.fieldName("push_id") == "PUSH_ID")
        #expect(EventLog.fieldName("_SYSTEMD_UNIT") == "SYSTEMD_UNIT")
        #expect(EventLog.fieldName("media.host") == "MEDIA_HOST")
        let payload = String(repeating: "{\"aps\":{}}", count: 1000)
        let capped = EventLog.capped(payload)
        #expect(capped.utf8.count <= EventLog.maxValueBytes)
        #expect(capped.hasSuffix("…"))
        #expect(EventLog.capped("short") == "short")

        let pipe = Pipe2()
        EventLog(identifier: "cap", destination: .lines(fd: pipe.writeEnd)).log(.refused, "x", fields: [("CUSTOM_PAYLOAD", payload)])
        #expect(pipe.available().utf8.count < 1300)
    }

    @Test func priorityCanBeOverridden() {
        let pipe = Pipe2()
        EventLog(identifier: "prio", destination: .lines(fd: pipe.writeEnd)).log(.mediaFailed, "Media download failed", priority: 3)
        #expect(pipe.available().contains(": <3> Media download failed EVENT=mediaFailed"))
    }
}

@Suite struct EventKindTests {
    @Test func messageIDsAreDistinct128BitHex() {
        let ids = EventKind.allCases.map(\.messageID)
        #expect(Set(ids).count == ids.count)
        for id in ids {
            #expect(id.count == 32)
            #expect(id.allSatisfy { ("0"..."9").contains($0) || ("a"..."f").contains($0) }, "\(id)")
        }
        for kind in EventKind.allCases { #expect((2...7).contains(kind.defaultPriority)) }
    }

    /// journalctl -x finds the explanation only when the catalog has an entry for the id.
    @Test func everyKindHasACatalogEntry() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../systemd/pushspool.catalog").standardized.path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        var entries: [String: [String]] = [:]
        var current: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("-- ") {
                let id = String(line.dropFirst(3)).trimmingCharacters(in: .whitespaces)
                #expect(entries[id] == nil, "duplicate catalog entry \(id)")
                entries[id] = []
                current = id
            } else if let current {
                entries[current]?.append(String(line))
            }
        }
        let kinds = Dictionary(uniqueKeysWithValues: EventKind.allCases.map { ($0.messageID, $0) })
        #expect(Set(entries.keys) == Set(kinds.keys), "catalog ids and EventKind ids differ")
        for (id, lines) in entries {
            #expect(lines.contains { $0.hasPrefix("Subject: ") }, "\(id) has no Subject")
            #expect(lines.contains { $0.hasPrefix("Defined-By: pushspool") }, "\(id) has no Defined-By")
            // Headers, then one empty line, then a body.
            let blank = try #require(lines.firstIndex(of: ""), "\(id) has no body")
            #expect(lines[(blank + 1)...].contains { !$0.isEmpty }, "\(id) has an empty body")
        }
    }
}
