@preconcurrency import Glibc
import Foundation
import PushOutbox
import PushOutboxStore
import PushSystem
import TestSupport
import Testing

/// The delivery engine both outboxes use, over a fake poster and a fake source: what each
/// answer means (delivered, parked with a reason, handed back with a backoff, dropped for an
/// erasure, aborted), the order of an event's several POSTs, and a source that takes back
/// what was handed back.
@Suite struct DeliveryEngineTests {
    /// Answers POSTs from a script, in order, and records what was posted; `during` runs while
    /// a POST is "out" (an erasure arriving meanwhile).
    final class ScriptedPoster: DeliveryPoster {
        var answers: [PostResult]
        var posted: [String] = []
        var bodies: [String] = []
        var during: (() -> Void)?

        init(_ answers: [PostResult]) { self.answers = answers }

        func post(url: String, headers: [String], body: [UInt8]) -> PostResult {
            posted.append(url)
            bodies.append(String(decoding: body, as: UTF8.self))
            during?()
            return answers.isEmpty ? PostResult(status: 200, body: []) : answers.removeFirst()
        }
    }

    /// A source's side that only records what the engine told it.
    struct RecordingLedger: DeliveryLedger {
        typealias Failure = Never
        enum Call: Equatable {
            case willPost
            case delivered([String])
            case park([String], Parking)
            case finished
            case handBack([String], HandBack)
            case erased
            case aborted
        }

        var calls: [Call] = []
        /// What `park` answers: false = the dead letter could not be written.
        var parkWrites = true

        mutating func willPost() { calls.append(.willPost) }
        mutating func delivered(_ deliveries: [OutboxDelivery]) { calls.append(.delivered(deliveries.map(\.id))) }
        mutating func park(_ deliveries: [OutboxDelivery], _ parking: Parking) -> Bool {
            calls.append(.park(deliveries.map(\.id), parking))
            return parkWrites
        }
        mutating func finished() { calls.append(.finished) }
        mutating func handBack(_ failed: [OutboxDelivery], _ retry: HandBack) { calls.append(.handBack(failed.map(\.id), retry)) }
        mutating func erased() { calls.append(.erased) }
        mutating func aborted() { calls.append(.aborted) }

        /// The calls without the `willPost` before each POST.
        var answers: [Call] { calls.filter { $0 != .willPost } }
    }

    static let now: Int64 = 1_700_000_000_000

    /// Options with both vendors' keys (read from key files, as the daemons do) unless
    /// `infobip` is false; the poster is a stand-in, so the URLs are never dialled.
    static func options(maxAttempts: Int = 3, infobip: Bool = true) throws -> OutboxOptions {
        let dir = TempDir("engine")
        var options = OutboxOptions(stateDirectory: dir.path)
        options.mindboxURL = "http://127.0.0.1:9"
        options.mindboxEndpointId = "app-ios"
        options.infobipURL = "http://127.0.0.1:9"
        try Posix.writeFileAtomically(directory: dir.path, name: "mindbox.key", bytes: Array("mb-secret-123\n".utf8), mode: 0o600)
        options.mindboxSecret = try Secret.load(path: dir.appending("mindbox.key"))
        if infobip {
            try Posix.writeFileAtomically(directory: dir.path, name: "infobip.key", bytes: Array("ib-key-456\n".utf8), mode: 0o600)
            options.infobipAppKey = try Secret.load(path: dir.appending("infobip.key"))
        }
        options.retryBase = .milliseconds(100)
        options.retryCeiling = .seconds(5)
        options.maxAttempts = maxAttempts
        return options
    }

    static func mindbox(_ seq: UInt64, index: Int = 0, user: String = "alice", operation: String = "NCOpen",
                        attempts: Int = 0) -> OutboxDelivery {
        var delivery = OutboxDelivery(seq: seq, index: index, target: .mindbox, eventId: "ev-\(seq)", eventType: "nc.open",
                                      orderKey: "u:\(user)", createdMillis: now, atMillis: now, operation: operation, device: "dev-1",
                                      payload: .object(["n": .integer(Int64(index))]))
        delivery.attempts = attempts
        return delivery
    }

    static func infobip(_ seq: UInt64, index: Int, target: OutboxTarget, user: String = "bob") -> OutboxDelivery {
        OutboxDelivery(seq: seq, index: index, target: target, eventId: "ev-\(seq)", eventType: "nc.action", orderKey: "u:\(user)",
                       createdMillis: now, atMillis: now, operation: nil, device: "reg-1",
                       payload: .object(["messageId": .string("m-\(seq)")]))
    }

    static func ok() -> PostResult { PostResult(status: 200, body: []) }
    static func status(_ code: Int, retryAfter: String? = nil) -> PostResult {
        PostResult(status: code, body: Array("{\"error\":\"no\"}".utf8), retryAfter: retryAfter)
    }

    // MARK: Several POSTs of one event

    @Test func aMindboxOpenAndItsClickGoInOrderAndAreAnsweredOnce() throws {
        let poster = ScriptedPoster([Self.ok(), Self.ok()])
        let engine = DeliveryEngine(options: try Self.options(), poster: poster)
        var ledger = RecordingLedger()
        let open = Self.mindbox(7), click = Self.mindbox(7, index: 1, operation: "MobilePush.TrackClick")
        let (outcome, notice) = engine.deliver([[open], [click]], now: Self.now, into: &ledger)
        #expect(outcome == .finished && notice == nil)
        #expect(poster.posted.count == 2)
        #expect(poster.posted[0].hasSuffix("operation=NCOpen&deviceUUID=dev-1&transactionId=ev-7"))
        #expect(poster.posted[1].hasSuffix("operation=MobilePush.TrackClick&deviceUUID=dev-1&transactionId=ev-7.1"))
        #expect(ledger.calls == [.willPost, .delivered(["7-0"]), .willPost, .delivered(["7-1"]), .finished])
    }

    @Test func a503OnTheClickHandsTheWholeEventBack() throws {
        let poster = ScriptedPoster([Self.ok(), Self.status(503)])
        let engine = DeliveryEngine(options: try Self.options(), poster: poster)
        var ledger = RecordingLedger()
        let (outcome, notice) = engine.deliver([[Self.mindbox(7)], [Self.mindbox(7, index: 1, operation: "Click")]],
                                               now: Self.now, into: &ledger)
        #expect(outcome == .handedBack)
        guard ledger.answers.count == 2, case .handBack(let failed, let back) = ledger.answers[1] else {
            Issue.record("\(ledger.calls)")
            return
        }
        #expect(ledger.answers[0] == .delivered(["7-0"]) && failed == ["7-1"])
        #expect(back.attempts == 1 && back.status == 503 && back.message == "HTTP 503" && (50...100).contains(back.delayMillis))
        #expect(notice == .failed(id: "7-1", target: "mindbox", status: 503, message: "HTTP 503", retryInMillis: back.delayMillis))
    }

    @Test func anInfobipActionReportsSeenThenTheMO() throws {
        let poster = ScriptedPoster([])
        let engine = DeliveryEngine(options: try Self.options(), poster: poster)
        var ledger = RecordingLedger()
        let seen = Self.infobip(9, index: 0, target: .infobipSeen), mo = Self.infobip(9, index: 1, target: .infobipMO)
        let (outcome, _) = engine.deliver([[seen], [mo]], now: Self.now, into: &ledger)
        #expect(outcome == .finished)
        #expect(poster.posted == ["http://127.0.0.1:9/mobile/2/messages/seen", "http://127.0.0.1:9/mobile/1/messages/mo"])
        #expect(ledger.answers == [.delivered(["9-0"]), .delivered(["9-1"]), .finished])
    }

    @Test func aPartParkedInAnEventDoesNotStopTheRest() throws {
        // Without an Infobip key the seen is parked as unconfigured, unsent; the Mindbox part goes.
        let poster = ScriptedPoster([])
        let engine = DeliveryEngine(options: try Self.options(infobip: false), poster: poster)
        var ledger = RecordingLedger()
        let (outcome, notice) = engine.deliver([[Self.infobip(9, index: 0, target: .infobipSeen)], [Self.mindbox(9, index: 1)]],
                                               now: Self.now, into: &ledger)
        #expect(outcome == .finished)
        #expect(poster.posted.count == 1)
        guard case .park(let ids, let parking) = ledger.answers.first else {
            Issue.record("\(ledger.calls)")
            return
        }
        #expect(ids == ["9-0"] && parking.reason == "unconfigured" && parking.status == 0 && parking.attempts == nil)
        #expect(Array(ledger.answers.dropFirst()) == [.delivered(["9-1"]), .finished])
        #expect(notice == DeliveryEngine.notice(Self.infobip(9, index: 0, target: .infobipSeen), parking))
    }

    @Test func aDeadLetterThatCannotBeWrittenStopsTheItem() throws {
        let poster = ScriptedPoster([Self.status(400)])
        let engine = DeliveryEngine(options: try Self.options(), poster: poster)
        var ledger = RecordingLedger(parkWrites: false)
        let (outcome, _) = engine.deliver([[Self.mindbox(3)], [Self.mindbox(3, index: 1)]], now: Self.now, into: &ledger)
        #expect(outcome == .released)
        #expect(poster.posted.count == 1, "no POST after a park that could not be written")
        #expect(!ledger.calls.contains(.finished))
    }

    // MARK: What an answer means

    @Test func a4xxIsParkedWithItsStatusAndTheRedactedResponse() throws {
        let poster = ScriptedPoster([PostResult(status: 400, body: Array("bad key mb-secret-123".utf8))])
        let engine = DeliveryEngine(options: try Self.options(), poster: poster)
        var ledger = RecordingLedger()
        let (outcome, notice) = engine.deliver([[Self.mindbox(1)]], now: Self.now, into: &ledger)
        #expect(outcome == .finished)
        guard case .park(let ids, let parking) = ledger.answers.first else {
            Issue.record("\(ledger.calls)")
            return
        }
        #expect(ids == ["1-0"] && parking.reason == "http_400" && parking.status == 400 && parking.attempts == 1)
        #expect(parking.response?.contains("mb-secret-123") == false)
        #expect(notice == .parked(id: "1-0", target: "mindbox", status: 400, reason: "http_400", message: "HTTP 400"))
    }

    @Test func theLastAttemptIsParkedNotHandedBack() throws {
        let poster = ScriptedPoster([Self.status(500)])
        let engine = DeliveryEngine(options: try Self.options(maxAttempts: 3), poster: poster)
        var ledger = RecordingLedger()
        _ = engine.deliver([[Self.mindbox(1, attempts: 2)]], now: Self.now, into: &ledger)
        guard case .park(_, let parking) = ledger.answers.first else {
            Issue.record("\(ledger.calls)")
            return
        }
        #expect(parking.reason == "attempts" && parking.attempts == 3 && parking.status == 500)
    }

    @Test(arguments: [(0, Int64(100)), (1, Int64(200)), (2, Int64(400))])
    func aFailureIsHandedBackWithTheBackoff(attempts: Int, delay: Int64) throws {
        let poster = ScriptedPoster([PostResult(status: 0, body: [], error: "Connection refused")])
        let engine = DeliveryEngine(options: try Self.options(maxAttempts: 10), poster: poster)
        var ledger = RecordingLedger()
        let (outcome, _) = engine.deliver([[Self.mindbox(1, attempts: attempts)]], now: Self.now, into: &ledger)
        #expect(outcome == .handedBack)
        guard case .handBack(let failed, let back) = ledger.answers.first else {
            Issue.record("\(ledger.calls)")
            return
        }
        #expect(failed == ["1-0"] && back.attempts == attempts + 1 && back.status == 0)
        #expect(back.message == "Connection refused" && back.error == "Connection refused" && back.response.isEmpty)
        // Equal jitter: a point in the upper half of the exponential step.
        #expect((delay / 2...delay).contains(back.delayMillis), "\(back.delayMillis)")
        #expect(engine.heldUntil(.mindbox, now: Self.now) == nil, "no Retry-After: the vendor is not held")
    }

    @Test func aRetryAfterHoldsTheVendorForEveryone() throws {
        let poster = ScriptedPoster([Self.status(429, retryAfter: "2")])
        let engine = DeliveryEngine(options: try Self.options(), poster: poster)
        var ledger = RecordingLedger()
        _ = engine.deliver([[Self.infobip(1, index: 0, target: .infobipSeen)]], now: Self.now, into: &ledger)
        guard case .handBack(_, let back) = ledger.answers.first else {
            Issue.record("\(ledger.calls)")
            return
        }
        #expect(back.delayMillis == 2_000)
        #expect(engine.heldUntil(.infobipMO, now: Self.now) == Self.now + 2_000, "the hold is the vendor's, MO included")
        #expect(engine.heldUntil(.mindbox, now: Self.now) == nil)
        #expect(engine.heldUntil(.infobipSeen, now: Self.now + 2_000) == nil, "over once the time passed")
    }

    @Test func aStopMidPostIsNoAttempt() throws {
        let poster = ScriptedPoster([PostResult(status: 0, body: [], error: "aborted", aborted: true)])
        let engine = DeliveryEngine(options: try Self.options(), poster: poster)
        var ledger = RecordingLedger()
        let (outcome, notice) = engine.deliver([[Self.mindbox(1)], [Self.mindbox(1, index: 1)]], now: Self.now, into: &ledger)
        #expect(outcome == .aborted && notice == nil)
        #expect(ledger.answers == [.aborted])
        #expect(poster.posted.count == 1)
    }

    // MARK: Erasure

    @Test func aSubjectErasedWhileThePostWasOutIsDroppedNotHandedBack() throws {
        let erased = ErasedSubjects()
        let poster = ScriptedPoster([Self.status(503), Self.status(503)])
        poster.during = { erased.add(.init(erasureID: "e1", subject: .user("alice"), before: nil)) }
        let engine = DeliveryEngine(options: try Self.options(), poster: poster, erased: erased)
        var ledger = RecordingLedger()
        let (outcome, _) = engine.deliver([[Self.mindbox(1)]], now: Self.now, into: &ledger)
        #expect(outcome == .erased)
        #expect(ledger.answers == [.erased])
        // Another user's failure is handed back as usual.
        var other = RecordingLedger()
        let (otherOutcome, _) = engine.deliver([[Self.mindbox(2, user: "carol")]], now: Self.now, into: &other)
        #expect(otherOutcome == .handedBack)
    }

    @Test func anErasureCoversOnlyRecordsBeforeIt() throws {
        // The erasure record came after seq 5: seq 5 is not covered, seq 9 is new data.
        let erased = ErasedSubjects([.init(erasureID: "e1", subject: .user("alice"), before: 5)])
        let poster = ScriptedPoster([Self.status(503), Self.status(503)])
        let engine = DeliveryEngine(options: try Self.options(), poster: poster, erased: erased)
        var covered = RecordingLedger(), later = RecordingLedger()
        _ = engine.deliver([[Self.mindbox(4)]], now: Self.now, into: &covered)
        _ = engine.deliver([[Self.mindbox(9)]], now: Self.now, into: &later)
        #expect(covered.answers == [.erased])
        #expect(later.answers.first.map { if case .handBack = $0 { true } else { false } } == true)
    }

    // MARK: Before the POST

    @Test func triageDropsErasedParksStaleAndExhaustedAndWaitsForBackoffAndHolds() throws {
        let erased = ErasedSubjects([.init(erasureID: "e1", subject: .user("gone"), before: nil)])
        var options = try Self.options(maxAttempts: 3)
        options.maxAge = .seconds(60)
        let poster = ScriptedPoster([Self.status(503, retryAfter: "3")])
        let engine = DeliveryEngine(options: options, poster: poster, erased: erased)
        let now = Self.now
        #expect(engine.triage(Self.mindbox(1, user: "gone"), now: now) == .erased)
        var stale = Self.mindbox(2)
        stale.createdMillis = now - 61_000
        guard case .park(let parking) = engine.triage(stale, now: now) else {
            Issue.record("stale not parked")
            return
        }
        #expect(parking.reason == "max_age" && parking.attempts == nil)
        guard case .park(let exhausted) = engine.triage(Self.mindbox(3), now: now, handOuts: 4) else {
            Issue.record("a fourth hand-out of three attempts not parked")
            return
        }
        #expect(exhausted.reason == "attempts")
        #expect(engine.triage(Self.mindbox(3), now: now, handOuts: 3) == .send)
        var waiting = Self.mindbox(4)
        waiting.notBeforeMillis = now + 500
        #expect(engine.triage(waiting, now: now) == .wait(until: now + 500))
        // A Retry-After holds every delivery to the vendor, due or not.
        var ledger = RecordingLedger()
        _ = engine.deliver([[Self.mindbox(5)]], now: now, into: &ledger)
        #expect(engine.triage(Self.mindbox(6, user: "carol"), now: now) == .wait(until: now + 3_000))
        #expect(engine.triage(Self.infobip(7, index: 0, target: .infobipSeen), now: now) == .send)
    }

    @Test func onlyAUsersDueReportsToTheSameTargetAndDeviceShareAPost() throws {
        var options = try Self.options()
        options.batchLimit = 2
        let engine = DeliveryEngine(options: options, poster: ScriptedPoster([]))
        let head = Self.infobip(1, index: 0, target: .infobipSeen)
        #expect(engine.mayJoin(Self.infobip(2, index: 0, target: .infobipSeen), batchOf: head, count: 1, now: Self.now))
        #expect(!engine.mayJoin(Self.infobip(2, index: 0, target: .infobipSeen), batchOf: head, count: 2, now: Self.now), "BatchLimit")
        #expect(!engine.mayJoin(Self.infobip(2, index: 0, target: .infobipSeen, user: "dave"), batchOf: head, count: 1, now: Self.now))
        #expect(!engine.mayJoin(Self.infobip(2, index: 1, target: .infobipMO), batchOf: head, count: 1, now: Self.now))
        var later = Self.infobip(2, index: 0, target: .infobipSeen)
        later.notBeforeMillis = Self.now + 1
        #expect(!engine.mayJoin(later, batchOf: head, count: 1, now: Self.now))
        #expect(!engine.mayJoin(Self.mindbox(2), batchOf: Self.mindbox(1), count: 1, now: Self.now), "one Mindbox operation a POST")
    }

    // MARK: A source over the engine

    /// A source like both outboxes, in memory: items in order; one handed back waits for its
    /// delay; what it was told is recorded.
    final class FakeSource {
        var queue: [DeliveryItem]
        var notBefore: [String: Int64] = [:]
        var delivered: [String] = []
        var parked: [String: String] = [:]
        var erased: [String] = []
        var heldBack: [String: Int64] = [:]
        /// Items a "sweep" takes out of the pass (an erasure seen between items).
        var sweptOut: Set<String> = []

        init(_ items: [DeliveryItem]) { queue = items }

        /// One pass of `engine` over what is queued; what was answered leaves the queue.
        func pass(_ engine: DeliveryEngine, now: Int64, stopAfter: Int = .max) -> [OutboxNotice] {
            var items = queue
            for at in items.indices {
                for d in items[at].deliveries.indices { items[at].deliveries[d].notBeforeMillis = notBefore[items[at].head.id] ?? 0 }
            }
            var source = Source(owner: self, items: items)
            var checks = 0
            let notices = engine.pass(items, source: &source, now: { now }, shouldStop: {
                checks += 1
                return checks > stopAfter
            })
            let answered = Set(delivered + parked.keys + erased)
            queue.removeAll { item in item.deliveries.allSatisfy { answered.contains($0.id) } }
            return notices
        }

        struct Source: DeliverySource {
            typealias Ledger = FakeLedger
            let owner: FakeSource
            let items: [DeliveryItem]
            func sweep() {}
            func isWaiting(_ index: Int) -> Bool { !owner.sweptOut.contains(items[index].head.id) }
            func holdBack(_ index: Int, delayMillis: Int64) { owner.heldBack[items[index].head.id] = delayMillis }
            func dropErased(_ index: Int) { owner.erased += items[index].deliveries.map(\.id) }
            func park(_ index: Int, _ parking: Parking, now: Int64) -> OutboxNotice {
                for delivery in items[index].deliveries { owner.parked[delivery.id] = parking.reason }
                return DeliveryEngine.notice(items[index].head, parking)
            }
            func ledger(for indices: [Int], now: Int64) -> FakeLedger {
                FakeLedger(owner: owner, deliveries: indices.flatMap { items[$0].deliveries }, now: now)
            }
        }

        /// Answers a whole item as the stream does: delivered parts are kept only at `finished`.
        struct FakeLedger: DeliveryLedger {
            typealias Failure = Never
            let owner: FakeSource
            let deliveries: [OutboxDelivery]
            let now: Int64
            var sent: [String] = []
            func willPost() {}
            mutating func delivered(_ deliveries: [OutboxDelivery]) { sent += deliveries.map(\.id) }
            func park(_ deliveries: [OutboxDelivery], _ parking: Parking) -> Bool {
                for delivery in deliveries { owner.parked[delivery.id] = parking.reason }
                return true
            }
            func finished() { owner.delivered += sent }
            func handBack(_ failed: [OutboxDelivery], _ retry: HandBack) {
                for delivery in deliveries { owner.notBefore[delivery.id] = now + retry.delayMillis }
                if let at = owner.queue.firstIndex(where: { $0.head.id == deliveries[0].id }) {
                    for d in owner.queue[at].deliveries.indices { owner.queue[at].deliveries[d].attempts = retry.attempts }
                }
            }
            func erased() { owner.erased += deliveries.map(\.id) }
            func aborted() {}
        }
    }

    @Test func aPassKeepsAUsersOrderAcrossAHandBack() throws {
        // alice's first event fails once; her second waits for it, bob's goes at once.
        let poster = ScriptedPoster([Self.status(500), Self.ok(), Self.ok(), Self.ok()])
        let engine = DeliveryEngine(options: try Self.options(), poster: poster)
        let source = FakeSource([
            DeliveryItem(deliveries: [Self.mindbox(1)]),
            DeliveryItem(deliveries: [Self.mindbox(2)]),
            DeliveryItem(deliveries: [Self.mindbox(3, user: "bob")]),
        ])
        let first = source.pass(engine, now: Self.now)
        #expect(source.delivered == ["3-0"])
        #expect(first.count == 1 && source.heldBack.keys.sorted() == ["2-0"], "alice's second waits behind her first")
        _ = source.pass(engine, now: Self.now + 40)
        #expect(source.delivered == ["3-0"], "not before the backoff")
        _ = source.pass(engine, now: Self.now + 100)  // the backoff of a first failure is at most the base
        #expect(source.delivered == ["3-0", "1-0", "2-0"])
        #expect(source.queue.isEmpty && source.parked.isEmpty)
        #expect(poster.posted.filter { $0.contains("transactionId=ev-1") }.count == 2, "the repeat carries the same id")
    }

    @Test func aPassBatchesAUsersReportsAndSendsAnEventOfSeveralPOSTsAlone() throws {
        let poster = ScriptedPoster([])
        let engine = DeliveryEngine(options: try Self.options(), poster: poster)
        let source = FakeSource([
            DeliveryItem(deliveries: [Self.infobip(1, index: 0, target: .infobipSeen)]),
            DeliveryItem(deliveries: [Self.infobip(2, index: 0, target: .infobipSeen)]),
            DeliveryItem(deliveries: [Self.infobip(3, index: 0, target: .infobipSeen), Self.infobip(3, index: 1, target: .infobipMO)]),
            DeliveryItem(deliveries: [Self.infobip(4, index: 0, target: .infobipSeen)]),
        ])
        _ = source.pass(engine, now: Self.now)
        #expect(poster.posted.map { $0.hasSuffix("/mo") ? "mo" : "seen" } == ["seen", "seen", "mo", "seen"])
        #expect(poster.bodies[0].contains("m-1") && poster.bodies[0].contains("m-2"), "one POST for 1 and 2")
        #expect(source.delivered == ["1-0", "2-0", "3-0", "3-1", "4-0"])
    }

    @Test func aPassDropsErasedParksStaleAndHoldsEverythingBackOnStop() throws {
        let erasedSubjects = ErasedSubjects([.init(erasureID: "e1", subject: .user("gone"), before: nil)])
        var options = try Self.options()
        options.maxAge = .seconds(60)
        let poster = ScriptedPoster([])
        let engine = DeliveryEngine(options: options, poster: poster, erased: erasedSubjects)
        var stale = Self.mindbox(2)
        stale.createdMillis = Self.now - 61_000
        let source = FakeSource([
            DeliveryItem(deliveries: [Self.mindbox(1, user: "gone")]),
            DeliveryItem(deliveries: [stale]),
            DeliveryItem(deliveries: [Self.mindbox(3, user: "swept")]),
            DeliveryItem(deliveries: [Self.mindbox(4, user: "carol")]),
            DeliveryItem(deliveries: [Self.mindbox(5, user: "dave")]),
        ])
        source.sweptOut = ["3-0"]
        let notices = source.pass(engine, now: Self.now, stopAfter: 3)
        #expect(source.erased == ["1-0"])
        #expect(source.parked == ["2-0": "max_age"])
        #expect(notices.count == 1)
        #expect(source.delivered == ["4-0"] && poster.posted.count == 1)
        #expect(source.heldBack == ["5-0": 0], "after the stop: taken again at once")
    }
}
