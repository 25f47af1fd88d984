@preconcurrency import Glibc
import Foundation
import PushFollow
import PushJournal
import PushOutbox
import PushOutboxStore
import PushSystem
import Testing

/// The outbox against a real HTTP receiver on 127.0.0.1: URLs, headers and bodies as sent.
@Suite struct OutboxDeliveryTests {
    static let mindboxPath = "/v3/operations/async"
    static let seenPath = "/mobile/2/messages/seen"
    static let moPath = "/mobile/1/messages/mo"

    @Test func requestsCarryExactURLsHeadersAndBodies() async throws {
        let fixture = try OutboxFixture()
        for path in [Self.mindboxPath, Self.seenPath, Self.moPath] { fixture.server.route(path, .ok(Array("{}".utf8), contentType: "application/json")) }
        try await fixture.journal([
            ("mindbox:mb-1:alice", mindboxItem(), now),                                                    // 1
            ("infobip:ib-msg-1:alice", infobipItem(), now),                                               // 2
            ("event:ev-1", event("nc.opened", "ev-1"), now),                                              // 3
            ("event:ev-2", event("nc.open", "ev-2", item: 1), now),                                       // 4
            ("event:ev-3", event("nc.open", "ev-3", item: 2), now),                                       // 5
            ("event:ev-4", event("nc.action", "ev-4", item: 2, action: "mm_accept", text: "see you"), now), // 6
            ("event:ev-5", event("nc.action", "ev-5", item: 2, action: "later"), now),                     // 7: no moRequired
            ("event:ev-6", event("nc.read", "ev-6", item: 1), now),                                       // 8: nothing to send
            // A revert takes nothing back from a vendor: the MO event of ev-4 stands.
            ("event:ev-7", event("nc.action-revert", "ev-7", item: 2, action: "mm_accept"), now),          // 9: nothing to send
        ])
        let follower = try OutboxFollower(options: fixture.options())
        let status = follower.catchUp()
        // Mindbox 2; Infobip: seen for ev-3, seen and MO for ev-4, seen for ev-5.
        #expect(status.delivered == 6)
        #expect(status.pending == 0 && status.parked == 0)
        #expect(status.cursor == 9)

        let mindbox = fixture.server.requests(Self.mindboxPath)
        try #require(mindbox.count == 2)
        #expect(mindbox[0].method == "POST")
        #expect(mindbox[0].target == "/v3/operations/async?endpointId=app-ios&operation=mobileapp.NCOpen&deviceUUID=dev-1&transactionId=ev-1")
        #expect(mindbox[0].header("Authorization") == "SecretKey \(OutboxFixture.mindboxKey)")
        #expect(mindbox[0].header("Content-Type") == "application/json; charset=utf-8")
        #expect(String(decoding: mindbox[0].body, as: UTF8.self) == "{}")
        #expect(mindbox[1].target == "/v3/operations/async?endpointId=app-ios&operation=mobileapp.NCPushOpen&deviceUUID=dev-1&transactionId=ev-2")
        #expect(String(decoding: mindbox[1].body, as: UTF8.self)
            == #"{"customerAction":{"customFields":{"mobPushSendDateTime":"2026-11-30T10:00:00.000Z","mobPushTranslateName":"sale_november"}}}"#)

        // The open's and the first action's seen share a POST; the MO between them and the
        // second action's seen come after, in the user's order.
        let seen = fixture.server.requests(Self.seenPath)
        try #require(seen.count == 2)
        #expect(seen[0].method == "POST")
        #expect(seen[0].header("Authorization") == "App \(OutboxFixture.infobipKey)")
        let seenBody = try #require(parse(seen[0].body))
        let seenMessages = try #require(seenBody["messages"]?.arrayValue)
        #expect(seenMessages.count == 2)
        #expect(seenMessages[0]["messageId"] == .string("ib-msg-1"))
        #expect((seenMessages[0]["timestampDelta"]?.intValue ?? -1) >= 0)

        let mo = fixture.server.requests(Self.moPath)
        try #require(mo.count == 1)
        #expect(mo[0].target == Self.moPath + "?platformType=APNS")
        #expect(mo[0].header("Authorization") == "App \(OutboxFixture.infobipKey)")
        // The typed text is not in the MO: the SDK does not send it either.
        #expect(String(decoding: mo[0].body, as: UTF8.self)
            == #"{"from":"dev-1","messages":[{"initialMessageId":"ib-msg-1","messageId":"ev-4","text":"mm_accept_decline mm_accept"}]}"#)

        // Nothing is sent again on a later pass.
        follower.catchUp()
        #expect(fixture.server.requests(Self.mindboxPath).count == 2)
    }

    /// An action with `moRequired` on an Infobip push: a seen report at once, then the MO the
    /// SDK sends (iOS `NotificationsInteractionService.handleAnyMessage`, Android
    /// `MobileInteractiveImpl.triggerSdkActionsFor`): `text` "<category> <action>", the push's
    /// own `customPayload`, its `bulkId`, the registration id as `from` and header, and
    /// `platformType` by the push's platform. An action without `moRequired` sends only the seen.
    @Test func anInfobipActionReportsSeenThenTheMOInTheSDKShape() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.seenPath, .ok(Array("{}".utf8), contentType: "application/json"))
        fixture.server.route(Self.moPath, .ok(Array("{}".utf8), contentType: "application/json"))
        let ios = merging(infobipItem(id: "ib-ios"), ["customPayload": .object(["promo": .string("spring"), "tier": .integer(2)]),
                                                      "bulkId": .string("bulk-7")])
        let android = merging(infobipItem(id: "ib-android", user: "bob"), ["platform": .string("android"), "format": .string("infobip-android"),
                                                                           "customPayload": .object(["k": .string("v")])])
        try await fixture.journal([
            ("i1", ios, now), ("i2", android, now),                                                               // 1, 2
            ("e1", event("nc.action", "ev-ios", device: "reg-ios-1", item: 1, action: "mm_accept", text: "typed"), now), // 3
            ("e2", event("nc.action", "ev-android", user: "bob", device: "reg-android-1", item: 2, action: "mm_accept"), now), // 4
            ("e3", event("nc.action", "ev-later", device: "reg-ios-1", item: 1, action: "later"), now),            // 5
        ])
        let follower = try OutboxFollower(options: fixture.options())
        let status = follower.catchUp()
        #expect(status.delivered == 5 && status.pending == 0 && status.parked == 0)

        let seen = fixture.server.requests(Self.seenPath)
        let seenIds = seen.flatMap { request in (parse(request.body)?["messages"]?.arrayValue ?? []).compactMap { $0["messageId"]?.stringValue } }
        #expect(seenIds.sorted() == ["ib-android", "ib-ios", "ib-ios"])
        for request in seen {
            let body = try #require(parse(request.body))
            #expect(Set(body.objectValue?.keys.map { $0 } ?? []) == ["messages"])
            for message in body["messages"]?.arrayValue ?? [] {
                #expect(Set(message.objectValue?.keys.map { $0 } ?? []) == ["messageId", "timestampDelta"])
            }
        }
        #expect(seen.first { $0.header("pushregistrationid") == "reg-android-1" } != nil)

        let mos = fixture.server.requests(Self.moPath)
        #expect(mos.count == 2)
        let iosMO = mos.filter { $0.target == Self.moPath + "?platformType=APNS" }
        try #require(iosMO.count == 1)
        #expect(iosMO[0].header("pushregistrationid") == "reg-ios-1")
        #expect(iosMO[0].header("Authorization") == "App \(OutboxFixture.infobipKey)")
        #expect(String(decoding: iosMO[0].body, as: UTF8.self)
            == #"{"from":"reg-ios-1","messages":[{"bulkId":"bulk-7","customPayload":{"promo":"spring","tier":2},"initialMessageId":"ib-ios","messageId":"ev-ios","text":"mm_accept_decline mm_accept"}]}"#)
        let androidMO = mos.filter { $0.target == Self.moPath + "?platformType=GCM" }
        try #require(androidMO.count == 1)
        #expect(String(decoding: androidMO[0].body, as: UTF8.self)
            == #"{"from":"reg-android-1","messages":[{"customPayload":{"k":"v"},"initialMessageId":"ib-android","messageId":"ev-android","text":"mm_accept_decline mm_accept"}]}"#)
    }

    /// Without a push registration id (no device on the event or the push) Infobip cannot take
    /// the MO: it is parked, saying what to send, and never guessed.
    @Test func anInfobipMOWithoutARegistrationIdIsParked() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.seenPath, .ok([]))
        fixture.server.route(Self.moPath, .ok([]))
        try await fixture.journal([("i1", infobipItem(), now), ("e1", event("nc.action", "ev-1", device: nil, item: 1, action: "mm_accept"), now)])
        let follower = try OutboxFollower(options: fixture.options())
        let status = follower.catchUp()
        #expect(status.delivered == 1 && status.parked == 1)
        #expect(fixture.server.hits(Self.moPath) == 0)
        let parked = try OutboxStore(directory: fixture.state + "/outbox").list(fixture.state + "/outbox/parked")
        #expect(parked.first?.lastError?.contains("push registration id") == true)
    }

    @Test func infobipSeenReportsOfOneUserShareOnePost() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.seenPath, .ok([]))
        try await fixture.journal([
            ("i1", infobipItem(id: "m1"), now), ("i2", infobipItem(id: "m2"), now),
            ("e1", event("nc.open", "e1", item: 1), now), ("e2", event("nc.open", "e2", item: 2), now),
        ])
        let follower = try OutboxFollower(options: fixture.options())
        #expect(follower.catchUp().delivered == 2)
        let seen = fixture.server.requests(Self.seenPath)
        try #require(seen.count == 1)
        let ids = try #require(parse(seen[0].body)?["messages"]?.arrayValue).compactMap { $0["messageId"]?.stringValue }
        #expect(ids == ["m1", "m2"])
    }

    @Test func anItemOfAnotherUserIsNeverReported() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.mindboxPath, .ok([]))
        // "al" is a prefix of "alice": still another user.
        try await fixture.journal([("i1", mindboxItem(user: "alice"), now), ("e1", event("nc.open", "e1", user: "al", item: 1), now)])
        let follower = try OutboxFollower(options: fixture.options())
        #expect(follower.catchUp().delivered == 0)
        #expect(fixture.server.hits(Self.mindboxPath) == 0)
    }

    @Test func a503ThreeTimesThenOkIsDeliveredOnceAfterRecovery() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.mindboxPath, .sequence([.status(503), .status(503), .status(503), .ok([])]))
        try await fixture.journal([("e1", event("nc.opened", "e1"), now)])
        let follower = try OutboxFollower(options: fixture.options())
        let followerRunner = try follower.running()
        #expect(waitFor(10) { follower.status.delivered == 1 })
        followerRunner.stop()
        let requests = fixture.server.requests(Self.mindboxPath)
        #expect(requests.count == 4)
        // Every attempt carries the same transaction id, so the receiver can deduplicate.
        #expect(Set(requests.map(\.target)).count == 1)
        #expect(follower.status.retried == 3)
        #expect(follower.status.pending == 0 && follower.status.parked == 0)
    }

    @Test func aUsersLaterEventWaitsForTheEarlierOne() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.mindboxPath, .sequence([.status(503), .ok([])]))
        try await fixture.journal([("e1", event("nc.opened", "first"), now), ("e2", event("nc.opened", "second"), now)])
        let follower = try OutboxFollower(options: fixture.options())
        follower.catchUp()
        #expect(fixture.server.hits(Self.mindboxPath) == 1)  // "second" held back behind "first"
        // A pass a second later: the retry (backoff at most 40 ms) is due by then.
        follower.catchUp(now: Posix.wallClockMillis() + 1_000)
        let order = fixture.server.requests(Self.mindboxPath).map { $0.target.components(separatedBy: "transactionId=").last ?? "" }
        #expect(order == ["first", "first", "second"])
    }

    @Test func a400ParksTheEventWithTheResponseAndNoSecret() async throws {
        let fixture = try OutboxFixture()
        // A receiver that echoes the request's key in its error body.
        fixture.server.route(Self.mindboxPath, .respond(status: 400, headers: [("Content-Type", "application/json")],
                                                        body: Array(#"{"status":"ValidationError","echo":"SecretKey \#(OutboxFixture.mindboxKey)"}"#.utf8)))
        try await fixture.journal([("e1", event("nc.opened", "e1"), now)])
        let collected = Locked<[OutboxNotice]>([])
        let follower = try OutboxFollower(options: fixture.options()) { notice in collected.withLock { $0.append(notice) } }
        let status = follower.catchUp()
        #expect(status.parked == 1 && status.pending == 0 && status.delivered == 0)
        #expect(fixture.server.hits(Self.mindboxPath) == 1)  // not retried
        let store = OutboxStore(stateDirectory: fixture.state)
        let parked = try store.list(store.parkedDirectory)
        try #require(parked.count == 1)
        #expect(parked[0].lastStatus == 400)
        #expect(parked[0].parkedReason == "http_400")
        #expect(parked[0].lastResponse?.contains("ValidationError") == true)
        #expect(parked[0].lastResponse?.contains("<redacted>") == true)
        for (name, bytes) in fixture.allStateBytes() {
            #expect(!String(decoding: bytes, as: UTF8.self).contains(OutboxFixture.mindboxKey), "\(name) holds the key")
        }
        #expect(!(status.lastError ?? "").contains(OutboxFixture.mindboxKey))
        let notices = collected.withLock { $0 }
        #expect(notices.count == 1)
        if case .parked(let id, let target, let code, let reason, let message)? = notices.first {
            #expect(id == "2-0" || id.hasSuffix("-0"))
            #expect(target == "mindbox" && code == 400 && reason == "http_400")
            #expect(!message.contains(OutboxFixture.mindboxKey))
        } else {
            Issue.record("expected a parked notice, got \(notices)")
        }

        // `pushspoolctl outbox retry` renames the dead letter into retry/; the follower sends it again.
        fixture.server.route(Self.mindboxPath, .ok([]))
        try store.move(parked[0].fileName, from: store.parkedDirectory, to: store.retryDirectory)
        let after = follower.catchUp()
        #expect(after.delivered == 1 && after.parked == 0 && after.pending == 0)
    }

    @Test func anEventOlderThanMaxAgeIsParkedNotSent() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.mindboxPath, .ok([]))
        try await fixture.journal([("e1", event("nc.opened", "e1"), now - 7_200_000)])
        let follower = try OutboxFollower(options: fixture.options(maxAge: .seconds(3600)))
        let status = follower.catchUp()
        #expect(status.parked == 1 && status.delivered == 0)
        #expect(fixture.server.hits(Self.mindboxPath) == 0)
        let store = OutboxStore(stateDirectory: fixture.state)
        #expect(try store.list(store.parkedDirectory).first?.parkedReason == "max_age")
    }

    /// The runner sleeps with nothing due (no commit, no retry in backoff): a dead letter an
    /// operator sends again (`pushspoolctl outbox retry` renames it into `retry/`) must wake it,
    /// not wait for the next event that happens to be journaled.
    @Test func aRetriedDeadLetterIsSentWithoutAnotherCommit() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.mindboxPath, .status(500))
        try await fixture.journal([("e1", event("nc.opened", "e1"), now)])
        let follower = try OutboxFollower(options: fixture.options(maxAttempts: 1))
        let runner = try follower.running()
        defer { runner.stop() }
        #expect(waitFor(10) { follower.status.parked == 1 })
        // Idle before the retry: blocked with no timer, so only the retry's wake-up can step it.
        #expect(waitFor(10) {
            switch runner.waiting {
            case .commitAfter(_, atMost: nil)?, .sleep(atMost: nil)?: true
            default: false
            }
        })
        let steps = runner.steps
        fixture.server.route(Self.mindboxPath, .ok([]))
        let store = OutboxStore(stateDirectory: fixture.state)
        let parked = try #require(try store.names(store.parkedDirectory).first)
        try store.requeue(parked)
        #expect(waitFor(10) { follower.status.delivered == 1 })
        #expect(runner.steps > steps)
        #expect(fixture.server.hits(Self.mindboxPath) == 2)
    }

    /// The runner steps at every journal commit: `retry/` is listed only when its watch saw a
    /// change (and at the first step), and a dead letter `pushspoolctl outbox retry` sends
    /// again is still taken at the next step.
    @Test func stepsListRetryOnlyAfterTheWatchSawAChange() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.mindboxPath, .status(500))
        try await fixture.journal([("e1", event("nc.opened", "e1"), now)])
        let store = OutboxStore(stateDirectory: fixture.state)
        let listings = Locked(0)
        let follower = try OutboxFollower(options: fixture.options(maxAttempts: 1), listDirectory: { path in
            if path == store.retryDirectory { listings.withLock { $0 += 1 } }
            return try? store.names(path)
        })
        let runner = try follower.running()
        defer { runner.stop() }
        #expect(waitFor(10) { follower.status.parked == 1 })
        let listed = listings.withLock { $0 }
        #expect(listed >= 1)

        for _ in 0..<5 {
            let steps = runner.steps
            runner.wake()
            #expect(waitFor(10) { runner.steps > steps })
        }
        #expect(listings.withLock { $0 } == listed)

        fixture.server.route(Self.mindboxPath, .ok([]))
        try store.requeue(try #require(try store.names(store.parkedDirectory).first))
        #expect(waitFor(10) { follower.status.delivered == 1 })
        #expect(listings.withLock { $0 } > listed)
        #expect(try store.names(store.retryDirectory).isEmpty)
    }

    /// When the outbox cannot take new records (here `pending/` cannot be written: ENOTDIR),
    /// every step failed at once and the runner stepped again at once: a core spun. The failure
    /// now reaches the runner, which backs off and shows it.
    @Test func aFailingPendingDirectoryBacksOffInsteadOfSpinning() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.mindboxPath, .ok([]))
        try await fixture.journal((1...3).map { ("e\($0)", event("nc.opened", "e\($0)"), now) })
        let follower = try OutboxFollower(options: fixture.options())
        let store = OutboxStore(stateDirectory: fixture.state)
        try FileManager.default.removeItem(atPath: store.pendingDirectory)
        try Data("not a directory".utf8).write(to: URL(fileURLWithPath: store.pendingDirectory))
        let runner = FollowerRunner(follower, commits: CommitFeed(lastSeq: 3), backoff: Backoff(base: .milliseconds(50), ceiling: .seconds(1)),
                                    niceness: 0)
        try runner.start()
        defer { runner.stop() }
        usleep(600_000)  // why: the measuring window: steps counted over 0.6 s of backoff, not a settle
        #expect(runner.status.failuresTotal >= 1, "outbox: \(follower.status)")
        #expect(runner.status.lastError?.hasPrefix("outbox_journal") == true, "\(String(describing: runner.status.lastError))")
        // 50, 100, 200, 400 ms: a handful of steps, not thousands.
        #expect(runner.steps < 12, "\(runner.steps) steps in 0.6 s")
    }

    @Test func attemptsRunOutThenTheEventIsParked() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.mindboxPath, .status(500))
        try await fixture.journal([("e1", event("nc.opened", "e1"), now)])
        let follower = try OutboxFollower(options: fixture.options(maxAttempts: 3))
        let followerRunner = try follower.running()
        #expect(waitFor(10) { follower.status.parked == 1 })
        followerRunner.stop()
        #expect(fixture.server.hits(Self.mindboxPath) == 3)
    }

    /// Restart by stop and re-creation over the same state directory (the crash variant with
    /// SIGKILL is in `OutboxCrashTests`): pending deliveries survive, delivered ones are not repeated.
    @Test func pendingEventsAreDeliveredAfterARestartAndNothingTwice() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.mindboxPath, .status(503))
        try await fixture.journal([("e1", event("nc.opened", "e1"), now)])
        do {
            let first = try OutboxFollower(options: fixture.options())
            #expect(first.catchUp().pending == 1)
            first.stopRequested()
        }
        fixture.server.route(Self.mindboxPath, .ok([]))
        let second = try OutboxFollower(options: fixture.options())
        #expect(second.status.pending == 1)
        // A pass a second later: the backoff (at most 40 ms) is over by then.
        #expect(second.catchUp(now: Posix.wallClockMillis() + 1_000).delivered == 1)
        try await fixture.journal([("e2", event("nc.opened", "e2"), now)])
        second.catchUp()
        let third = try OutboxFollower(options: fixture.options())
        third.catchUp()
        let sent = fixture.server.requests(Self.mindboxPath).map { $0.target.components(separatedBy: "transactionId=").last ?? "" }
        #expect(sent == ["e1", "e1", "e2"])  // one 503, then each event once
    }

    @Test func aKeyFileReadableByOthersIsRefusedWithoutShowingTheKey() throws {
        let fixture = try OutboxFixture()
        try fixture.writeKey("loose.key", "loose-secret-789", mode: 0o644)
        var options = OutboxOptions(stateDirectory: fixture.state)
        do {
            try options.load(mindboxSecretKeyFile: fixture.dir.appending("loose.key"), infobipAppKeyFile: "")
            Issue.record("a 0644 key file was accepted")
        } catch {
            #expect(error.code == .secretFile)
            #expect(error.description.contains("loose.key"))
            #expect(!error.description.contains("loose-secret-789"))
        }
        #expect("\(try Secret.load(path: fixture.dir.appending("mindbox.key")))" == "<redacted>")
    }

    @Test func plainHTTPNeedsAllowHTTP() throws {
        var options = OutboxOptions(stateDirectory: "/nonexistent")
        options.mindboxURL = "http://127.0.0.1:1"
        #expect(throws: OutboxError.self) { try options.validate() }
        options.allowHTTP = true
        #expect(throws: Never.self) { try options.validate() }
    }

    @Test func loopbackIsRefusedUnlessAllowed() async throws {
        let fixture = try OutboxFixture()
        fixture.server.route(Self.mindboxPath, .ok([]))
        try await fixture.journal([("e1", event("nc.opened", "e1"), now)])
        var options = try fixture.options()
        options.allowNetworks = []
        let follower = try OutboxFollower(options: options)
        let status = follower.catchUp()
        #expect(status.delivered == 0 && status.pending == 1)
        #expect(status.lastError?.contains("AllowNetworks") == true)
        #expect(fixture.server.hits(Self.mindboxPath) == 0)
    }
}

extension OutboxDeliveryTests {
    /// The follower refuses what `pushspoolctl config check` refuses (issue 21 #12).
    @Test func aConnectTimeoutLongerThanTheRequestTimeoutIsRefused() throws {
        var options = OutboxOptions(stateDirectory: "/nonexistent")
        options.connectTimeout = .seconds(15)
        options.requestTimeout = .seconds(10)
        #expect(throws: OutboxError.self) { try options.validate() }
        options.connectTimeout = .seconds(10)
        #expect(throws: Never.self) { try options.validate() }
    }
}
