import Foundation
import Testing
import TestSupport
@testable import PushPayload
import PushSystem

typealias CtlRun = ProcessResult

let ctlPath = ProcessRunner.executable("pushspoolctl")

func runCtl(_ arguments: [String], stdin: [UInt8]? = nil) throws -> CtlRun {
    try #require(FileManager.default.isExecutableFile(atPath: ctlPath), "build pushspoolctl first: \(ctlPath)")
    return try ProcessRunner.run(ctlPath, arguments, stdin: stdin, currentDirectory: repositoryRoot)
}

func jsonLines(_ text: String) throws -> [JSONValue] {
    try text.split(separator: "\n").map { try JSONParser().parse(String($0)) }
}

@Suite struct CLITests {
    @Test func validateJsonReproducesTheExamplesTable() throws {
        let files = exampleRows.map { "spool-examples/\($0.file)" }
        let run = try runCtl(["validate", "--json"] + files)
        #expect(run.status == 65)
        let lines = try jsonLines(run.stdout)
        try #require(lines.count == exampleRows.count)
        for (line, row) in zip(lines, exampleRows) {
            #expect(line["file"] == .string("spool-examples/\(row.file)"))
            let summary: String
            if line["kind"] == .string("event") {
                summary = "event \(line["type"]?.stringValue ?? "?")"
                #expect(line["event"]?["eventId"] == line["id"] && line["event"]?["type"] == line["type"])
                #expect(line["accepted"] == .bool(true) && line["reason"] == .null && line["notification"] == .null)
            } else if line["accepted"] == .bool(true) {
                summary = "accepted \(line["vendor"]?.stringValue ?? "?")/\(line["format"]?.stringValue ?? "?")"
                #expect(line["notification"]?["id"] == line["id"])
                #expect(line["kind"] == .string("notification") && line["event"] == .null)
                #expect(line["reason"] == .null)
            } else {
                summary = "refused \(line["reason"]?.stringValue ?? "?")"
                #expect(line["notification"] == .null)
            }
            #expect(summary == row.expected, "\(row.file)")
            #expect(line["warnings"] == .array(row.warnings.map(JSONValue.string)), "\(row.file)")
            for key in ["file", "accepted", "kind", "vendor", "platform", "format", "id", "type", "reason", "warnings", "notification", "event"] {
                #expect(line[key] != nil, "\(row.file) lacks \(key)")
            }
        }
    }

    @Test func allAcceptedExitsZeroWithHumanOutput() throws {
        let run = try runCtl(["validate", "spool-examples/mindbox-ios-current.json", "spool-examples/sfmc-ios-http-media.json"])
        #expect(run.status == 0)
        #expect(run.stdout.contains("spool-examples/mindbox-ios-current.json: accepted mindbox-ios id=5b0f7c1e-mb-ios-0001"))
        #expect(run.stdout.contains("warning: media_insecure_scheme:_mediaUrl"))
    }

    @Test func stdinDash() throws {
        let accepted = try runCtl(["validate", "--json", "-"], stdin: Array(#"{"messageId":"x1","aps":{"alert":{"body":"b"}}}"#.utf8))
        #expect(accepted.status == 0)
        let line = try #require(try jsonLines(accepted.stdout).first)
        #expect(line["file"] == .string("-") && line["vendor"] == .string("infobip") && line["id"] == .string("x1"))

        let refused = try runCtl(["validate", "-"], stdin: Array("{\"a\":1,\"a\":2}".utf8))
        #expect(refused.status == 65)
        #expect(refused.stdout.contains("-: refused duplicate_keys"))
    }

    @Test func oversizedStdinIsRefusedNotFailed() throws {
        let run = try runCtl(["validate", "--json", "-"], stdin: [UInt8](repeating: 0x20, count: 70_000))
        #expect(run.status == 65)
        #expect(try jsonLines(run.stdout).first?["reason"] == .string("payload_too_large"))
    }

    @Test func validateOptionsChangeTheBounds() throws {
        let run = try runCtl(["validate", "--json", "--max-payload-bytes", "100", "spool-examples/mindbox-ios-current.json"])
        #expect(run.status == 65)
        #expect(try jsonLines(run.stdout).first?["reason"] == .string("payload_too_large"))
    }

    @Test(arguments: [
        ["validate"], ["validate", "--bogus", "x.json"], ["frobnicate"], [], ["--spool"], ["--nope", "validate", "x"],
        ["validate", "-", "-"], ["validate", "--max-depth", "zero", "x"], ["help", "frobnicate"],
    ])
    func usageErrorsExit64(_ arguments: [String]) throws {
        let run = try runCtl(arguments)
        #expect(run.status == 64)
        #expect(run.stderr.contains("usage:"))
        #expect(run.stdout.isEmpty)
    }

    @Test func unreadableFileIsARuntimeFailure() throws {
        let run = try runCtl(["validate", "/nonexistent/file.json", "spool-examples/apns-silent.json"])
        #expect(run.status == 1)
        #expect(run.stderr.contains("/nonexistent/file.json"))
        #expect(run.stdout.contains("apns-silent.json: accepted"))
    }

    @Test(arguments: [["--help"], ["-h"], ["help"], ["help", "validate"], ["validate", "--help"], ["--spool", "/tmp/s", "validate", "-h"]])
    func helpGoesToStdoutAndExitsZero(_ arguments: [String]) throws {
        let run = try runCtl(arguments)
        #expect(run.status == 0)
        #expect(run.stdout.contains("usage: pushspoolctl"))
        #expect(run.stderr.isEmpty)
    }

    @Test func version() throws {
        let run = try runCtl(["--version"])
        #expect(run.status == 0 && run.stdout == "pushspoolctl \(pushspoolVersion)\n")
    }

    @Test func globalOptionsAreAcceptedBeforeTheSubcommand() throws {
        let run = try runCtl(["--spool", "/tmp/spool", "--state-dir=/tmp/state", "--config", "/tmp/c.conf", "validate", "spool-examples/apns-silent.json"])
        #expect(run.status == 0)
    }
}
