@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport
import PushInboxServer
import PushSystem

/// docs/openapi.yaml, the document app teams generate clients from: valid OpenAPI 3.1 by a real
/// validator (`openapi-spec-validator` in the venv scripts/install-deps.sh makes), listing
/// exactly the routes of the server's routing table, each of which a live pushspool-inbox
/// answers.
@Suite struct OpenAPIDocTests {
    static let testenv = "/opt/pushspool-testenv/bin"
    static var document: String { DaemonHarness.packageRoot + "/docs/openapi.yaml" }

    struct MissingValidator: Error, CustomStringConvertible {
        var description: String { "\(OpenAPIDocTests.testenv)/openapi-spec-validator is missing: run scripts/install-deps.sh" }
    }

    /// Fails (never skips) without the validator: CI installs it.
    static func requireTestenv() throws {
        guard FileManager.default.isExecutableFile(atPath: testenv + "/openapi-spec-validator") else { throw MissingValidator() }
    }

    /// The document's operations as "METHOD /path", read by the venv's Python (PyYAML comes
    /// with the validator).
    static func operations() throws -> Set<String> {
        try requireTestenv()
        let script = """
            import json, sys, yaml
            document = yaml.safe_load(open(sys.argv[1]))
            for path, item in document["paths"].items():
                for method in item:
                    if method in ("get", "put", "post", "delete", "options", "head", "patch", "trace"):
                        print(method.upper(), path)
            """
        let result = try ProcessRunner.run(testenv + "/python", ["-c", script, document])
        #expect(result.status == 0, "\(result.stderr)")
        return Set(result.stdout.split(separator: "\n").map(String.init))
    }

    @Test func theDocumentIsValidOpenAPI31() throws {
        try Self.requireTestenv()
        let result = try ProcessRunner.run(Self.testenv + "/openapi-spec-validator", ["--schema", "3.1", Self.document])
        #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("OK"), "\(result.stdout)")
    }

    @Test func theDocumentListsExactlyTheServersRoutes() throws {
        let documented = try Self.operations()
        let served = Set(InboxAPI.routeList.map { "\($0.method) \($0.path)" })
        #expect(served.count == InboxAPI.routeList.count, "a route is in the table twice")
        #expect(served.subtracting(documented).isEmpty, "answered but not in docs/openapi.yaml: \(served.subtracting(documented).sorted())")
        #expect(documented.subtracting(served).isEmpty, "in docs/openapi.yaml but not answered: \(documented.subtracting(served).sorted())")
        #expect(documented.contains("POST /v1/inbox/{item}/open"))
        #expect(documented.contains("POST /v1/inapp/{item}/shown"))
        #expect(documented.contains("PUT /v1/inapp/optout"))
    }

    /// Each documented operation sent to a live server with its placeholders filled in answers
    /// something other than the 404 of an unknown route.
    @Test func everyDocumentedOperationIsAnswered() throws {
        let operations = try Self.operations()
        // The push offers the action `{action}` is filled with (only an offered one is taken).
        let server = try InboxServerHarness(name: "inbox-openapi", extraConfig: "[Category chat]\nAction=reply:Reply:\n")
        try server.push(user: "alice", title: "Sale", category: "chat")
        try waitUntil(timeout: 30, "the push") { try server.counts().unread == 1 }
        let item = try #require(try server.items().first?["item"]?.stringValue)
        let png: [UInt8] = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 7]
        let sha = SHA256.hex(of: png)
        let directory = server.daemon.state + "/media/" + sha.prefix(2)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data(png).write(to: URL(fileURLWithPath: directory + "/" + sha.dropFirst(2) + ".png"))
        try Data([0xff, 0xd8, 0xff]).write(to: URL(fileURLWithPath: directory + "/" + sha.dropFirst(2) + ".thumb320.jpg"))

        // DELETE last: the item is gone once it is applied.
        for operation in operations.sorted(by: { ($0.hasPrefix("DELETE ") ? 1 : 0, $0) < ($1.hasPrefix("DELETE ") ? 1 : 0, $1) }) {
            let words = operation.split(separator: " ").map(String.init)
            let path = words[1].replacingOccurrences(of: "{item}", with: item).replacingOccurrences(of: "{action}", with: "reply")
                .replacingOccurrences(of: "{sha256}", with: sha).replacingOccurrences(of: "{user}", with: "alice")
                .replacingOccurrences(of: "{device}", with: "dev-a").replacingOccurrences(of: "{erasureId}", with: String(repeating: "0", count: 32))
            let body: String? = words[1] == "/v1/preferences" && words[0] == "PUT" ? #"{"muted":{"promo":false}}"#
                : words[1].hasSuffix("/snooze") ? #"{"until":"\#(Timestamp.iso8601(millis: Posix.wallClockMillis() + 3_600_000))"}"#
                : words[0] == "PUT" ? #"{"enabled":false}"# : words[0] == "POST" ? "{}" : nil
            var arguments = ["-s", "-i", "--max-time", "2", "-X", words[0],
                             "-H", "X-Pushspool-User: alice", "-H", "Authorization: Bearer \(InboxServerHarness.token("alice"))"]
            if let body { arguments += ["-H", "Content-Type: application/json", "--data-binary", body] }
            // The stream stays open: curl's --max-time ends it with what arrived.
            let result = try ProcessRunner.run("/usr/bin/curl", arguments + [server.base + path])
            let reply = try InboxServerHarness.parse(result.stdout, curlError: result.stderr)
            if words[1].hasPrefix("/v1/admin/") {
                // Answered, and refused to a user's token (no SelfErase=): not the 404 of no route.
                #expect(reply.status == 403, "\(operation): \(reply.status) \(reply.body.prefix(200))")
            } else {
                #expect((200..<300).contains(reply.status), "\(operation): \(reply.status) \(reply.body.prefix(200))")
            }
        }
    }
}
