import Foundation
import Testing
import TestSupport
@testable import PushPayload
import PushSystem

/// A spool (tmp/ and incoming/) and a configuration naming it, owned by one test.
final class CtlSpool {
    let dir = TempDir()
    var spool: String { dir.appending("spool") }
    var config: String { dir.appending("pushspool.conf") }

    init(createSpool: Bool = true) throws {
        if createSpool {
            for sub in ["tmp", "incoming"] {
                try FileManager.default.createDirectory(atPath: spool + "/" + sub, withIntermediateDirectories: true)
            }
        }
        try "[Spool]\nDirectory=\(spool)\n[Journal]\nStateDirectory=\(dir.appending("state"))\n".write(toFile: config, atomically: false, encoding: .utf8)
    }

    func ctl(_ arguments: [String]) throws -> CtlRun {
        try runCtl(["--config", config] + arguments)
    }

    func files(_ sub: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: spool + "/" + sub).sorted()
    }

    func incomingBytes() throws -> [[UInt8]] {
        try files("incoming").map { try Posix.readFile(spool + "/incoming/" + $0, limit: 1 << 20) }
    }
}

struct NcCLICase: Sendable, CustomTestStringConvertible {
    var arguments: [String]
    var expected: PushEvent
    var testDescription: String { arguments.joined(separator: " ") }
}

let ncCLICases: [NcCLICase] = [
    NcCLICase(arguments: ["nc", "opened", "--user", "alice"], expected: PushEvent(type: .opened, eventId: "", user: "alice")),
    NcCLICase(arguments: ["nc", "opened", "--user", "alice", "--device", "ios-1"], expected: PushEvent(type: .opened, eventId: "", user: "alice", device: "ios-1")),
    // Issue 37: the app's platform picks the Mindbox endpoint of NCOpen.
    NcCLICase(arguments: ["nc", "opened", "--user", "alice", "--platform", "android"], expected: {
        var event = PushEvent(type: .opened, eventId: "", user: "alice")
        event.platform = .android
        return event
    }()),
    NcCLICase(arguments: ["nc", "open", "--user", "alice", "42"], expected: PushEvent(type: .open, eventId: "", user: "alice", item: 42)),
    NcCLICase(arguments: ["nc", "seen", "--user=alice", "7"], expected: PushEvent(type: .seen, eventId: "", user: "alice", item: 7)),
    NcCLICase(arguments: ["nc", "read", "--user", "alice", "18446744073709551615"], expected: PushEvent(type: .read, eventId: "", user: "alice", item: UInt64.max)),
    NcCLICase(arguments: ["nc", "read", "--user", "alice", "--all"], expected: PushEvent(type: .readAll, eventId: "", user: "alice")),
    NcCLICase(arguments: ["nc", "archive", "--user", "alice", "9"], expected: PushEvent(type: .archive, eventId: "", user: "alice", item: 9)),
    NcCLICase(arguments: ["nc", "archive", "--device", "shared-1", "--all-read"], expected: PushEvent(type: .archiveRead, eventId: "", device: "shared-1")),
    NcCLICase(arguments: ["nc", "unread", "--user", "alice", "9"], expected: PushEvent(type: .unread, eventId: "", user: "alice", item: 9)),
    NcCLICase(arguments: ["nc", "unarchive", "--user", "alice", "9"], expected: PushEvent(type: .unarchive, eventId: "", user: "alice", item: 9)),
    NcCLICase(arguments: ["nc", "delete", "--device", "shared-1", "10"], expected: PushEvent(type: .delete, eventId: "", device: "shared-1", item: 10)),
    NcCLICase(arguments: ["nc", "pin", "--user", "alice", "11"], expected: PushEvent(type: .pin, eventId: "", user: "alice", item: 11)),
    NcCLICase(arguments: ["nc", "unpin", "--user", "alice", "11"], expected: PushEvent(type: .unpin, eventId: "", user: "alice", item: 11)),
    NcCLICase(arguments: ["nc", "action", "--user", "alice", "42", "mm_accept"], expected: PushEvent(type: .action, eventId: "", user: "alice", item: 42, action: "mm_accept")),
    NcCLICase(arguments: ["nc", "action", "--user", "alice", "42", "reply", "--text", "On my way: \"10\" min ✓"],
              expected: PushEvent(type: .action, eventId: "", user: "alice", item: 42, action: "reply", text: "On my way: \"10\" min ✓")),
    NcCLICase(arguments: ["nc", "action", "--user", "alice", "42", "reply", "--revert"],
              expected: PushEvent(type: .actionRevert, eventId: "", user: "alice", item: 42, action: "reply")),
    NcCLICase(arguments: ["nc", "inapp-shown", "--user", "alice", "44"], expected: PushEvent(type: .inAppShown, eventId: "", user: "alice", item: 44)),
    NcCLICase(arguments: ["nc", "inapp-optout", "--user", "alice", "on"], expected: PushEvent(type: .inAppOptOut, eventId: "", user: "alice", enabled: false)),
    NcCLICase(arguments: ["nc", "inapp-optout", "--user", "alice", "off"], expected: PushEvent(type: .inAppOptOut, eventId: "", user: "alice", enabled: true)),
]

@Suite struct NcEventCLITests {
    @Test(arguments: ncCLICases)
    func writesOneWellFormedEnvelopeThatClassifyAccepts(_ c: NcCLICase) throws {
        let spool = try CtlSpool()
        let run = try spool.ctl(c.arguments)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.stderr.isEmpty)
        let eventId = run.stdout.trimmingCharacters(in: .newlines)
        #expect(eventId.utf8.count == 32 && eventId.allSatisfy { $0.isHexDigit && !$0.isUppercase }, "a 128-bit hex id: \(eventId)")
        #expect(try spool.files("tmp").isEmpty, "staged in tmp/, then renamed away")
        let written = try spool.incomingBytes()
        try #require(written.count == 1)
        #expect(written[0].last == 0x0a)
        guard case .event(let event) = Normalizer.classify(written[0]) else {
            Issue.record("the daemon would not take it as an event: \(Normalizer.classify(written[0]))")
            return
        }
        var expected = c.expected
        expected.eventId = eventId
        expected.at = event.at
        #expect(event == expected)
        #expect(ISO8601Check.isValid(try #require(event.at)))
    }

    @Test func jsonPrintsTheEnvelopeWrittenAndEventIdCanBeFixed() throws {
        let spool = try CtlSpool()
        let run = try spool.ctl(["nc", "open", "--user", "alice", "--event-id", "app:ios.1_2-3", "--json", "42"])
        #expect(run.status == 0, "\(run.stderr)")
        let written = try spool.incomingBytes()
        try #require(written.count == 1)
        #expect(run.stdout == String(decoding: written[0], as: UTF8.self))
        let envelope = try JSONParser().parse(run.stdout.trimmingCharacters(in: .newlines))
        #expect(envelope["pushspool"] == .number("1") && envelope["user"] == .string("alice"))
        #expect(envelope["event"]?["eventId"] == .string("app:ios.1_2-3"))
        #expect(envelope["event"]?["type"] == .string("nc.open") && envelope["event"]?["item"] == .number("42"))
        #expect(envelope["event"]?["kind"] == nil, "kind belongs to the record, not the envelope")
        // Replaying with the same id writes the same journal key (the daemon keeps one).
        let again = try spool.ctl(["nc", "open", "--user", "alice", "--event-id", "app:ios.1_2-3", "42"])
        #expect(again.stdout == "app:ios.1_2-3\n")
        let keys = try spool.incomingBytes().compactMap { bytes -> String? in
            if case .event(let e) = Normalizer.classify(bytes) { return e.dedupKey } else { return nil }
        }
        #expect(keys == ["event:app:ios.1_2-3", "event:app:ios.1_2-3"])
    }

    @Test func freshIdsDiffer() throws {
        let spool = try CtlSpool()
        let a = try spool.ctl(["nc", "opened", "--user", "u"]).stdout
        let b = try spool.ctl(["nc", "opened", "--user", "u"]).stdout
        #expect(a != b)
        #expect(try spool.files("incoming").count == 2)
    }

    @Test(arguments: [
        ["nc"], ["nc", "frobnicate"], ["nc", "opened"], ["nc", "open", "--user", "u"], ["nc", "open", "42"],
        ["nc", "open", "--user", "u", "0"], ["nc", "open", "--user", "u", "-1"], ["nc", "open", "--user", "u", "1e30"],
        ["nc", "open", "--user", "u", "18446744073709551616"], ["nc", "open", "--user", "u", "+5"], ["nc", "open", "--user", "u", "42.0"],
        ["nc", "open", "--user", "u", "abc"], ["nc", "open", "--user", "u", "1", "2"], ["nc", "open", "--user", "", "1"],
        ["nc", "read", "--user", "u"], ["nc", "read", "--user", "u", "--all", "3"], ["nc", "read", "--user", "u", "--all-read"],
        ["nc", "archive", "--user", "u", "--all"], ["nc", "action", "--user", "u", "42"], ["nc", "open", "--user", "u", "--text", "t", "1"],
        ["nc", "action", "--user", "u", "42", "a", "--text", String(repeating: "x", count: 4097)],
        ["nc", "opened", "--user", "u", "--platform", "windows"], ["nc", "opened", "--user", "u", "--platform", "IOS"],
        ["nc", "action", "--user", "u", "42", "a", "--revert", "--text", "t"], ["nc", "action", "--user", "u", "42", "--revert"],
        ["nc", "inapp-optout", "--user", "u"], ["nc", "inapp-optout", "--user", "u", "yes"],
        ["nc", "opened", "--user", "u", "--event-id", "bad id"], ["nc", "opened", "--user", "u", "--event-id", String(repeating: "a", count: 129)],
        ["nc", "opened", "--user", String(repeating: "u", count: 256)], ["nc", "opened", "--user", "u", "--bogus"],
        ["nc", "opened", "--user", "a\r\nb"], ["nc", "opened", "--device", "d\u{1B}[31m"], ["drop", "--user", "z\u{7F}", "-"],
    ])
    func usageErrorsExit64AndWriteNothing(_ arguments: [String]) throws {
        let spool = try CtlSpool()
        let run = try spool.ctl(arguments)
        #expect(run.status == 64)
        #expect(run.stderr.contains("usage:"))
        #expect(run.stdout.isEmpty)
        #expect(try spool.files("incoming").isEmpty && spool.files("tmp").isEmpty)
    }

    @Test(arguments: [["nc", "--help"], ["help", "nc"]])
    func helpListsEverySubcommand(_ arguments: [String]) throws {
        let run = try runCtl(arguments)
        #expect(run.status == 0)
        for word in ["opened", "open", "seen", "read", "archive", "action", "inapp-shown", "inapp-optout", "--all-read", "--text"] {
            #expect(run.stdout.contains(word), "\(word)")
        }
        #expect(try runCtl(["--help"]).stdout.contains("  nc "))
    }

    /// A subcommand's help is its own: its usage line and its options.
    @Test(arguments: [["nc", "open", "--help"], ["help", "nc", "open"], ["nc", "open", "--user", "u", "-h"]])
    func subcommandHelpShowsItsOwnOptions(_ arguments: [String]) throws {
        let run = try runCtl(arguments)
        #expect(run.status == 0)
        #expect(run.stdout.hasPrefix("usage: pushspoolctl nc open (--user U | --device D) ITEM"), "\(run.stdout)")
        for word in ["--event-id", "--json", "--device"] { #expect(run.stdout.contains(word), "\(word)") }
        #expect(!run.stdout.contains("--all-read"))
    }

    @Test func aMissingSpoolIsARuntimeFailure() throws {
        let spool = try CtlSpool(createSpool: false)
        let run = try spool.ctl(["nc", "opened", "--user", "u"])
        #expect(run.status == 1)
        #expect(run.stderr.contains("cannot write the nc.opened event"))
        #expect(run.stdout.isEmpty)
    }

    @Test func validateReportsEventsHumanAndJSON() throws {
        let human = try runCtl(["validate", "spool-examples/event-nc-open.json", "spool-examples/event-unknown-type.json"])
        #expect(human.status == 65)
        #expect(human.stdout.contains("spool-examples/event-nc-open.json: event nc.open eventId=3f1c9a7e0b2d4c6e8a1f3b5d7c9e0a27"))
        #expect(human.stdout.contains("spool-examples/event-unknown-type.json: refused invalid_event:"))
        let json = try runCtl(["validate", "--json", "spool-examples/event-nc-action-text.json"])
        #expect(json.status == 0)
        let line = try #require(try jsonLines(json.stdout).first)
        #expect(line["kind"] == .string("event") && line["type"] == .string("nc.action") && line["accepted"] == .bool(true))
        #expect(line["event"]?["text"] == .string("On my way: 10 min") && line["event"]?["item"] == .number("43"))
    }
}
