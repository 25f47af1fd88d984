@preconcurrency import Glibc
import Testing
@testable import PushInboxServer

@Suite struct TokenAuthTests {
    /// RFC 4231 test case 2: HMAC-SHA256 with key "Jefe".
    @Test func tokenIsHexHMACSHA256OfTheUserId() {
        let auth = TokenAuth(secret: Array("Jefe".utf8))
        #expect(auth.token(user: "what do ya want for nothing?") == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test func verifyAcceptsOnlyTheUsersOwnToken() {
        let auth = TokenAuth(secret: Array("a-secret-of-some-length".utf8))
        let alice = auth.token(user: "alice")
        #expect(auth.verify(user: "alice", token: alice))
        #expect(!auth.verify(user: "bob", token: alice))
        #expect(!auth.verify(user: "alice", token: alice.uppercased()))
        #expect(!auth.verify(user: "alice", token: String(alice.dropLast())))
        #expect(!auth.verify(user: "alice", token: ""))
        #expect(!auth.verify(user: "alice", token: alice + "0"))
    }
}

@Suite struct ListenerTests {
    @Test(arguments: [("127.0.0.1:8080", "127.0.0.1", 8080), ("[::1]:0", "::1", 0), ("0.0.0.0:65535", "0.0.0.0", 65535)])
    func parsesAddressAndPort(text: String, host: String, port: Int) throws {
        let parsed = try #require(Listener.parse(text))
        #expect(parsed.host == host && Int(parsed.port) == port)
    }

    @Test(arguments: ["8080", "host:", ":80", "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:http"])
    func refusesMalformed(text: String) {
        #expect(Listener.parse(text) == nil)
    }

    @Test func bindsPortZeroAndReportsThePort() throws {
        let bound = try Listener.bind(host: "127.0.0.1", port: 0)
        defer { _ = close(bound.fd) }
        #expect(bound.port > 0)
    }
}

@Suite struct RoutingHelperTests {
    @Test func mediaPathNamesItsContentAddress() {
        let sha = String(repeating: "ab", count: 32)
        #expect(InboxAPI.sha256(inPath: "/var/lib/pushspool/media/ab/" + sha.dropFirst(2) + ".png") == sha)
        #expect(InboxAPI.sha256(inPath: "media/zz/nothex.png") == nil)
        #expect(!InboxAPI.isSHA256(sha.uppercased()))
    }

    @Test func commandLine() {
        guard case .success(.run(let options)) = InboxServerMain.parse(["--listen", "127.0.0.1:1", "--spool=/s", "--state-dir", "/d", "--config", "/c"]) else {
            Issue.record("did not parse")
            return
        }
        #expect(options.listen == "127.0.0.1:1" && options.spool == "/s" && options.stateDir == "/d" && options.config == "/c")
        guard case .failure = InboxServerMain.parse(["--bogus"]) else { Issue.record("accepted --bogus"); return }
        guard case .failure = InboxServerMain.parse(["--listen"]) else { Issue.record("accepted --listen without a value"); return }
        guard case .success(.help) = InboxServerMain.parse(["-h"]) else { Issue.record("no help"); return }
        guard case .success(.run(let threaded)) = InboxServerMain.parse(["--threads", "4"]), threaded.threads == 4 else {
            Issue.record("--threads 4 not parsed"); return
        }
        for bad in ["0", "65", "-1", "many", "99999999999999999999"] {
            guard case .failure = InboxServerMain.parse(["--threads", bad]) else { Issue.record("accepted --threads \(bad)"); return }
        }
        #expect((1...16).contains(InboxServerMain.defaultThreads()))
    }

    @Test func ifNoneMatchComparesEntityTagsWeakly() {
        let tag = "\"abc\""
        #expect(InboxAPI.noneMatchHits("\"abc\"", etag: tag))
        #expect(InboxAPI.noneMatchHits("W/\"abc\"", etag: tag))
        #expect(InboxAPI.noneMatchHits("\"x\" , \"abc\"", etag: tag))
        #expect(InboxAPI.noneMatchHits("*", etag: tag))
        #expect(!InboxAPI.noneMatchHits(nil, etag: tag))
        #expect(!InboxAPI.noneMatchHits("\"abc-thumb\"", etag: tag))
        #expect(!InboxAPI.noneMatchHits("abc", etag: tag))
        #expect(!InboxAPI.noneMatchHits("", etag: tag))
    }

    @Test func routeTemplatesCarryNoClientData() {
        #expect(InboxAPI.routeTemplate(["inbox"]) == "/v1/inbox")
        #expect(InboxAPI.routeTemplate(["inbox", "42", "read"]) == "/v1/inbox/{id}/read")
        #expect(InboxAPI.routeTemplate(["inbox", "42", "actions", "accept"]) == "/v1/inbox/{id}/actions/{action}")
        #expect(InboxAPI.routeTemplate(["media", "ab", "thumb"]) == "/v1/media/{sha256}/thumb")
        #expect(InboxAPI.routeTemplate(["secret-token-in-path"]) == "other")
        #expect(InboxAPI.routeTemplate(["inbox", "1", "2", "3", "4"]) == "other")
    }
}
