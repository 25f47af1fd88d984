@preconcurrency import Glibc
import Testing
import PushPayload
import PushSystem
@testable import PushInboxMain
import TestSupport
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

    @Test func commandLine() throws {
        let program = InboxServerMain.program
        guard case .run(let options, _) = try program.parse(["--listen", "127.0.0.1:1", "--spool=/s", "--state-dir", "/d", "--config", "/c"]) else {
            Issue.record("did not parse")
            return
        }
        #expect(options.listen == "127.0.0.1:1" && options.spool == "/s" && options.stateDir == "/d" && options.config == "/c")
        #expect(throws: (any Error).self) { try program.parse(["--bogus"]) }
        #expect(throws: (any Error).self) { try program.parse(["--listen"]) }
        guard case .help = try program.parse(["-h"]) else { Issue.record("no help"); return }
        guard case .run(let threaded, _) = try program.parse(["--threads", "4"]), threaded.threads == 4 else {
            Issue.record("--threads 4 not parsed"); return
        }
        for bad in ["0", "65", "-1", "many", "99999999999999999999"] {
            #expect(throws: (any Error).self, "--threads \(bad)") { try program.parse(["--threads", bad]) }
        }
        // The instance's paths, as pushspoold@NAME has them.
        guard case .run(let instance, _) = try program.parse(["--instance", "eu-1"]) else { Issue.record("--instance"); return }
        #expect(instance.config == "/etc/pushspool/eu-1.conf" && instance.stateDir == "/var/lib/pushspool/eu-1")
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
        #expect(InboxAPI.routeTemplate(["v1", "inbox"]) == "/v1/inbox")
        #expect(InboxAPI.routeTemplate(["v1", "inbox", "42", "read"]) == "/v1/inbox/{item}/read")
        #expect(InboxAPI.routeTemplate(["v1", "inbox", "42", "open"]) == "/v1/inbox/{item}/open")
        #expect(InboxAPI.routeTemplate(["v1", "inbox", "42", "actions", "accept"]) == "/v1/inbox/{item}/actions/{action}")
        #expect(InboxAPI.routeTemplate(["v1", "inbox", "42", "actions", "accept", "revert"]) == "/v1/inbox/{item}/actions/{action}/revert")
        #expect(InboxAPI.routeTemplate(["v1", "inapp", "42", "shown"]) == "/v1/inapp/{item}/shown")
        #expect(InboxAPI.routeTemplate(["v1", "inapp", "optout"]) == "/v1/inapp/optout")
        #expect(InboxAPI.routeTemplate(["v1", "media", "ab", "thumb"]) == "/v1/media/{sha256}/thumb")
        #expect(InboxAPI.routeTemplate(["v1", "secret-token-in-path"]) == "other")
        #expect(InboxAPI.routeTemplate(["v1", "inbox", "1", "2", "3", "4"]) == "other")
    }
}

/// The slowloris defence's state, without sockets (issue 21, defect 5).
@Suite struct ConnectionTableTests {
    static let second: UInt64 = 1_000_000_000

    @Test func aRequestNotInByTheDeadlineIsClosedAndAnAnsweredOneIsNot() {
        var table = ConnectionTable(limits: .init(deadlineNanos: 5 * Self.second, graceNanos: Self.second, perWorker: 10, perAddress: 10))
        table.opened(1, fd: 11, address: "a", worker: 1, now: 0)
        table.opened(2, fd: 12, address: "a", worker: 1, now: Self.second)
        table.received(2)
        #expect(table.expire(now: 5 * Self.second - 1) == ([], 5 * Self.second))
        #expect(table.expire(now: 5 * Self.second) == ([11], nil))
        #expect(table.entries[1]?.phase == .closing)
        // Its response out, a kept-alive connection waits for the next request under the same deadline.
        table.completed(2, now: 6 * Self.second)
        #expect(table.expire(now: 10 * Self.second) == ([], 11 * Self.second))
        #expect(table.expire(now: 11 * Self.second) == ([12], nil))
        #expect(table.closed(1)?.fd == 11)
        #expect(table.entries.count == 1)
    }

    @Test func aWorkerOverItsCapPastTheGraceLosesItsOldestReceivingConnections() {
        var table = ConnectionTable(limits: .init(deadlineNanos: 60 * Self.second, graceNanos: Self.second, perWorker: 3, perAddress: 100))
        for id in 1...3 { table.opened(id, fd: Int32(10 + id), address: "x\(id)", worker: 7, now: UInt64(id)) }
        // Another worker's connections count against its own share.
        table.opened(9, fd: 19, address: "y", worker: 8, now: 0)
        // An answered connection is not receiving: neither counted nor chosen.
        table.received(1)
        table.opened(4, fd: 14, address: "x4", worker: 7, now: 4)
        #expect(table.expire(now: 4) == ([], 60 * Self.second))
        table.opened(5, fd: 15, address: "x5", worker: 7, now: 5)
        table.opened(6, fd: 16, address: "x6", worker: 7, now: 6)
        // A burst over the cap is left alone for the grace...
        #expect(table.expire(now: 6) == ([], Self.second + 2))
        // ...then the oldest go until the worker is within its cap.
        #expect(table.expire(now: Self.second + 2) == ([12], Self.second + 3))
        #expect(table.expire(now: Self.second + 3) == ([13], 60 * Self.second))
        #expect(table.receiving == 4)
        // A burst whose requests arrive within the grace loses nothing.
        for id in 20...25 { table.opened(id, fd: Int32(id), address: "z", worker: 9, now: 2 * Self.second) }
        for id in 20...25 { table.received(id) }
        #expect(table.expire(now: 4 * Self.second).shut.isEmpty)
    }

    @Test func overTheAddressCapTheOldestFromThatAddressGoes() {
        var table = ConnectionTable(limits: .init(deadlineNanos: 60 * Self.second, graceNanos: 10, perWorker: 100, perAddress: 2))
        table.opened(1, fd: 11, address: "proxy", worker: 1, now: 1)
        table.opened(2, fd: 12, address: "other", worker: 1, now: 2)
        table.opened(3, fd: 13, address: "proxy", worker: 2, now: 3)
        table.opened(4, fd: 14, address: "proxy", worker: 1, now: 4)
        #expect(table.expire(now: 20) == ([11], 60 * Self.second + 2))
    }

    @Test func capsLeaveAQuarterOfEachLimit() {
        let limits = ConnectionTable.Limits(deadline: .milliseconds(1500), maxConnections: 40, maxConnectionsPerIP: 16, threads: 2)
        #expect(limits.deadlineNanos == 1_500_000_000 && limits.graceNanos == 750_000_000)
        #expect(ConnectionTable.Limits(deadline: .seconds(30), maxConnections: 40, maxConnectionsPerIP: 16, threads: 2).graceNanos == 1_000_000_000)
        #expect(limits.perWorker == 15 && limits.perAddress == 12)
        #expect(ConnectionTable.Limits.cap(1) == 1 && ConnectionTable.Limits.cap(2) == 1 && ConnectionTable.Limits.cap(4) == 3)
        #expect(ConnectionTable.Limits(deadline: .seconds(1), maxConnections: 4, maxConnectionsPerIP: 1, threads: 16).perWorker == 1)
    }

    /// libmicrohttpd's whole-second idle timeout never undercuts the configured one (issue 21, defect 12).
    @Test func theIdleTimeoutRoundsUp() {
        #expect(HTTPServer.idleTimeoutSeconds(.milliseconds(1500)) == 2)
        #expect(HTTPServer.idleTimeoutSeconds(.seconds(30)) == 30)
        #expect(HTTPServer.idleTimeoutSeconds(.milliseconds(1)) == 1)
        #expect(HTTPServer.idleTimeoutSeconds(.seconds(Int64.max)) == UInt32.max)
    }
}

@Suite struct BearerSchemeTests {
    /// RFC 9110 11.1: the scheme is case-insensitive (issue 21, defect 12).
    @Test(arguments: ["Bearer abc", "bearer abc", "BEARER abc", "bEaReR   abc ", " Bearer\tabc"])
    func anyCaseOfTheSchemeCarriesTheToken(header: String) {
        #expect(InboxAPI.bearerToken(header) == "abc")
    }

    @Test(arguments: ["Basic abc", "Bearerabc", "abc", "", "Bearer"])
    func otherSchemesCarryNone(header: String) {
        #expect(InboxAPI.bearerToken(header) == nil)
    }
}

/// Idempotency keys bound to their first request (issue 21, defect 8).
@Suite struct IdempotencyBindingTests {
    static let event = PushEvent(type: .seen, eventId: "", user: "alice", item: 2)

    @Test func aKeyAnswersRetriesAndRefusesAnotherRequest() {
        let bindings = IdempotencyBindings()
        let scope = IdempotencyBindings.scope(user: "alice", key: "k")
        let seen = IdempotencyBindings.fingerprint(Self.event)
        let archive = IdempotencyBindings.fingerprint(PushEvent(type: .archive, eventId: "", user: "alice", item: 4))
        #expect(bindings.bind(scope, seen, now: 0) == .bound)
        #expect(bindings.bind(scope, seen, now: 1) == .retry)
        #expect(bindings.bind(scope, archive, now: 2) == .conflict)
        // Another user's same key is another scope.
        #expect(bindings.bind(IdempotencyBindings.scope(user: "bob", key: "k"), archive, now: 3) == .bound)
        // A failed drop frees the key.
        bindings.unbind(scope, seen)
        #expect(bindings.bind(scope, archive, now: 4) == .bound)
    }

    @Test func theFingerprintIsTheRequestNotItsIdOrTime() {
        var other = Self.event
        other.eventId = "x"
        other.at = "2026-01-01T00:00:00Z"
        #expect(IdempotencyBindings.fingerprint(other) == IdempotencyBindings.fingerprint(Self.event))
        var item = Self.event
        item.item = 3
        var action = PushEvent(type: .action, eventId: "", user: "alice", item: 2, action: "reply", text: "a")
        let replyA = IdempotencyBindings.fingerprint(action)
        action.text = "b"
        let fingerprints = Set([IdempotencyBindings.fingerprint(Self.event), IdempotencyBindings.fingerprint(item), replyA,
                                IdempotencyBindings.fingerprint(action)])
        #expect(fingerprints.count == 4)
        // So the event ids differ too: the journal can never drop one request as the other's duplicate.
        #expect(IdempotencyBindings.eventId(user: "alice", key: "k", fingerprint: replyA)
            != IdempotencyBindings.eventId(user: "alice", key: "k", fingerprint: IdempotencyBindings.fingerprint(action)))
        #expect(IdempotencyBindings.eventId(user: "alice", key: "k", fingerprint: replyA).hasPrefix("http."))
        #expect(PushEvent.isValidEventId(IdempotencyBindings.eventId(user: "alice", key: "k", fingerprint: replyA)))
    }

    @Test func keysAreForgottenAfterTheRetentionAndBeyondTheCapacity() {
        let bindings = IdempotencyBindings(retention: .seconds(10), capacity: 3)
        let a = IdempotencyBindings.scope(user: "u", key: "a")
        #expect(bindings.bind(a, "1", now: 0) == .bound)
        #expect(bindings.bind(a, "2", now: 9_999_999_999) == .conflict)
        #expect(bindings.bind(a, "2", now: 10_000_000_000) == .bound)
        for key in ["b", "c", "d"] { _ = bindings.bind(IdempotencyBindings.scope(user: "u", key: key), "1", now: 10_000_000_001) }
        #expect(bindings.count == 3)
        // "a", the oldest, made room.
        #expect(bindings.bind(a, "3", now: 10_000_000_002) == .bound)
    }

    /// A new table on the same file (a restarted server) knows the bindings for the retention.
    @Test func theStoreCarriesBindingsAcrossInstances() throws {
        var template = Array("/tmp/pushspool-idem-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer -> String? in
            guard let base = buffer.baseAddress, let result = mkdtemp(base) else { return nil }
            return String(cString: result)
        }
        let directory = try #require(made)
        defer {
            for name in ["idempotency.sqlite", "idempotency.sqlite-wal", "idempotency.sqlite-shm"] { unlink(directory + "/" + name) }
            rmdir(directory)
        }
        let path = directory + "/idempotency.sqlite"
        let scope = IdempotencyBindings.scope(user: "alice", key: "k")
        let day: Int64 = 86_400_000
        do {
            let first = IdempotencyBindings(store: try IdempotencyStore(path: path))
            #expect(first.bind(scope, "seen-2", now: 5, wallMillis: 1_000) == .bound)
            #expect(first.bind(IdempotencyBindings.scope(user: "alice", key: "gone"), "x", now: 6, wallMillis: 1_000) == .bound)
            first.unbind(IdempotencyBindings.scope(user: "alice", key: "gone"), "x")
        }
        let second = IdempotencyBindings(store: try IdempotencyStore(path: path))
        #expect(second.bind(scope, "archive-4", now: 1, wallMillis: 2_000) == .conflict)
        #expect(second.bind(scope, "seen-2", now: 2, wallMillis: 2_000) == .retry)
        #expect(second.bind(IdempotencyBindings.scope(user: "alice", key: "gone"), "y", now: 3, wallMillis: 2_000) == .bound)
        // Past the retention on the wall clock the key is free again.
        let third = IdempotencyBindings(store: try IdempotencyStore(path: path))
        #expect(third.bind(scope, "archive-4", now: 1, wallMillis: 1_000 + day) == .bound)
    }
}

/// The status reporter sleeps until a change; an update that leaves work for the next second
/// (auth failures held back in the current one) gets that second pass without another change,
/// or their summary would wait for the next refused request, perhaps forever.
@Suite struct StatusReporterTests {
    @Test func leftoverWorkRunsASecondLaterWithoutAnotherChange() throws {
        let passes = Locked(0)
        let reporter = StatusReporter {
            passes.withLock { $0 += 1 }
            return passes.withLock { $0 } == 1
        }
        try reporter.start()
        defer { _ = reporter.stop(deadline: Posix.monotonicNanos() + 2_000_000_000) }
        reporter.changed()
        _ = eventually(within: 5) { passes.withLock { $0 } >= 2 }
        #expect(passes.withLock { $0 } == 2, "the leftover pass ran")
        // Nothing left and no change: it sleeps.
        usleep(1_300_000)  // why: the window under test: past the one-second second pass that must not recur
        #expect(passes.withLock { $0 } == 2)
    }
}
