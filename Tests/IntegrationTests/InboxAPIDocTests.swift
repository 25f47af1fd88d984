@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushSystem

/// docs/inbox-api.md's examples, replayed against a live pushspool-inbox: every `http` request
/// block is sent as written, and the answer must match the response block after it (status,
/// the headers it shows, the top-level JSON members).
@Suite struct InboxAPIDocTests {
    struct Example {
        var request: [String]
        var response: [String]
    }

    static func examples() throws -> [Example] {
        let text = try String(contentsOfFile: DaemonHarness.packageRoot + "/docs/inbox-api.md", encoding: .utf8)
        var blocks: [[String]] = []
        var current: [String]?
        for line in text.components(separatedBy: "\n") {
            if current == nil, line == "```http" { current = []; continue }
            if current != nil, line == "```" { blocks.append(current!); current = nil; continue }
            current?.append(line)
        }
        var examples: [Example] = []
        var index = 0
        while index + 1 < blocks.count {
            if blocks[index].first?.hasSuffix("HTTP/1.1") == true, blocks[index + 1].first?.hasPrefix("HTTP/1.1 ") == true {
                examples.append(Example(request: blocks[index], response: blocks[index + 1]))
                index += 2
            } else {
                index += 1
            }
        }
        return examples
    }

    /// Head lines and body of a block (split at the first empty line).
    static func split(_ lines: [String]) -> (head: [String], body: String) {
        guard let blank = lines.firstIndex(of: "") else { return (lines, "") }
        return (Array(lines[..<blank]), lines[(blank + 1)...].joined(separator: "\n"))
    }

    @Test func everyExampleReplays() throws {
        let examples = try Self.examples()
        #expect(examples.count >= 12, "the doc's examples were not found")
        // Two feeds, as the Feeds examples show: the pushes' category is in neither, so all are
        // "other". Its action `reply` is the one the Actions examples choose (only an action
        // the push offered is taken).
        let server = try InboxServerHarness(name: "inbox-doc", extraConfig: "[Feed promo]\nCategories=promo\n[Feed other]\nOther=yes\n"
                                            + "[Category chat]\nAction=reply:Reply:\n")
        try server.push(user: "alice", title: "Sale 0", category: "chat")
        try waitUntil(timeout: 30, "the first push") { try server.counts().unread == 1 }
        try server.push(user: "alice", title: "Sale", category: "chat")
        try server.push(user: "alice", title: "Sale 2", category: "chat")
        try waitUntil(timeout: 30, "the pushes") { try server.counts().unread == 3 }
        let item = try #require(try server.items().first?["item"]?.stringValue)
        // The oldest, for the DELETE example: the others keep using the newest.
        let deletable = try #require(try server.items().last?["item"]?.stringValue)
        let png: [UInt8] = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 9]
        let sha = SHA256.hex(of: png)
        try FileManager.default.createDirectory(atPath: server.daemon.state + "/media/" + sha.prefix(2), withIntermediateDirectories: true)
        try Data(png).write(to: URL(fileURLWithPath: server.daemon.state + "/media/" + sha.prefix(2) + "/" + sha.dropFirst(2) + ".png"))
        func fill(_ text: String) -> String {
            text.replacingOccurrences(of: "{token}", with: InboxServerHarness.token("alice"))
                .replacingOccurrences(of: "{item}", with: item).replacingOccurrences(of: "{deletable}", with: deletable)
                .replacingOccurrences(of: "{sha256}", with: sha)
                // From the start: the newest item is archived by the examples before the stream.
                .replacingOccurrences(of: "{lastEventId}", with: "0")
                // The snooze example's `until`: ahead, as the server requires.
                .replacingOccurrences(of: "{until}", with: Timestamp.iso8601(millis: Posix.wallClockMillis() + 3_600_000))
        }

        var modalSent = false
        for example in examples {
            let (head, body) = Self.split(example.request.map(fill))
            let words = head[0].split(separator: " ")
            if !modalSent, words.count > 1, words[0] == "GET", words[1] == "/v1/inapp" {
                // The in-app examples show a modal: an Infobip mirror push arrives just before.
                modalSent = true
                try server.daemon.drop(Array(#"""
                    {"pushspool":1,"user":"alice","payload":{"messageId":"ib-doc-1","aps":{"alert":{"title":"Mirror push","body":"Shown as a modal in the app"}},"internalData":{"inAppStyle":0}}}
                    """#.utf8), name: "modal.json")
                try waitUntil(timeout: 30, "the modal served") { try server.request("GET", "/v1/inapp").json?["item"]?.isNull == false }
            }
            var arguments = ["-s", "-i", "--max-time", "2", "-X", String(words[0])]
            for header in head.dropFirst() { arguments += ["-H", header] }
            if !body.isEmpty { arguments += ["--data-binary", body] }
            arguments.append(server.base + words[1])
            let result = try ProcessRunner.run("/usr/bin/curl", arguments)
            let live = try InboxServerHarness.parse(result.stdout, curlError: result.stderr)

            let (expectedHead, expectedBody) = Self.split(example.response.map(fill))
            let status = Int(expectedHead[0].split(separator: " ")[1]) ?? 0
            #expect(live.status == status, "\(head[0]): \(live.body)")
            for line in expectedHead.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                let name = line[..<colon].lowercased()
                let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                #expect(live.headers[name] == value, "\(head[0]): header \(name)")
            }
            if expectedHead.contains(where: { $0.hasSuffix("application/json") }) {
                let expected = try JSONParser().parse(expectedBody)
                let got = try JSONParser().parse(live.body)
                #expect(Set(got.objectValue?.keys.map { $0 } ?? []) == Set(expected.objectValue?.keys.map { $0 } ?? []),
                        "\(head[0]): members of \(live.body)")
            } else if expectedHead.contains(where: { $0.hasSuffix("text/event-stream") }) {
                #expect(live.body.contains("retry: 1000"))
                #expect(live.body.contains("event: item") && live.body.contains("event: counts"), "\(live.body)")
            }
        }
    }
}
