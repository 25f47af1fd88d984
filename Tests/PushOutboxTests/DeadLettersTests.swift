@preconcurrency import Glibc
import Testing
import PushOutboxStore
import PushSystem
import TestSupport

/// Issue 35: the dead letters' side of the store that the journal outbox and the fleet's retry
/// sender share — taking a retried dead letter back into `pending/`, parking one again, and
/// the watch on `retry/` — over a real directory.
@Suite struct DeadLettersTests {
    static func delivery(seq: UInt64 = 7) -> OutboxDelivery {
        OutboxDelivery(seq: seq, index: 0, target: .mindbox, eventId: "e\(seq)", eventType: "open", orderKey: "u:alice",
                       createdMillis: 1_000, atMillis: 1_000, operation: "op", device: "dev-1", payload: .object([:]))
    }

    /// A dead letter as `pushspoolctl outbox retry` leaves it in `retry/`: spent attempts, a
    /// backoff, a reason.
    static func deadLetter(seq: UInt64 = 7) -> OutboxDelivery {
        var delivery = delivery(seq: seq)
        delivery.attempts = 10
        delivery.notBeforeMillis = 9_999
        delivery.lastStatus = 503
        delivery.lastError = "HTTP 503"
        delivery.parkedReason = "attempts"
        delivery.parkedAtMillis = 5_000
        return delivery
    }

    /// A store in `temp` whose `directory` (`\.retryDirectory`, …) holds `delivery`.
    static func store(_ temp: TempDir, holding delivery: OutboxDelivery? = nil,
                      in directory: KeyPath<OutboxStore, String> = \.retryDirectory) throws -> OutboxStore {
        let store = OutboxStore(directory: temp.appending("outbox"))
        try store.create()
        if let delivery { try store.write(delivery, in: store[keyPath: directory]) }
        return store
    }

    @Test func aRetriedDeadLetterGoesToPendingWithFreshAttemptsAndAge() throws {
        let temp = TempDir()
        let dead = Self.deadLetter()
        let store = try Self.store(temp, holding: dead)
        guard case .pending(let taken) = store.takeRetried(dead.fileName, now: 42_000) else {
            Issue.record("not taken")
            return
        }
        var expected = dead
        expected.attempts = 0
        expected.notBeforeMillis = 0
        expected.parkedReason = nil
        expected.parkedAtMillis = nil
        expected.createdMillis = 42_000
        // What the last attempt said stays for the operator.
        #expect(taken == expected)
        #expect(store.read(store.pendingDirectory + "/" + dead.fileName) == expected)
        #expect(try store.names(store.retryDirectory).isEmpty)
    }

    @Test func oneRefusedStaysInRetryAndTheClockIsNotRead() throws {
        let temp = TempDir()
        let dead = Self.deadLetter()
        let store = try Self.store(temp, holding: dead)
        var asked = false
        let take = store.takeRetried(dead.fileName, now: { asked = true; return 1 }(), keep: { $0.orderKey != "u:alice" })
        guard case .refused(let refused) = take else {
            Issue.record("not refused: \(take)")
            return
        }
        #expect(refused == dead)
        #expect(!asked)
        #expect(try store.names(store.retryDirectory) == [dead.fileName])
        #expect(try store.names(store.pendingDirectory).isEmpty)
    }

    @Test func anUnreadableOneIsLeftWhereItIs() throws {
        let temp = TempDir()
        let store = try Self.store(temp)
        try Posix.writeFileAtomically(directory: store.retryDirectory, name: "7-0.json", bytes: Array("{not json".utf8), mode: 0o640)
        guard case .unreadable = store.takeRetried("7-0.json", now: 1) else {
            Issue.record("not unreadable")
            return
        }
        guard case .unreadable = store.takeRetried("gone.json", now: 1) else {
            Issue.record("a missing file is not unreadable")
            return
        }
        #expect(try store.names(store.retryDirectory) == ["7-0.json"])
        #expect(try store.names(store.pendingDirectory).isEmpty)
    }

    /// `pending/` cannot be written: the dead letter stays in `retry/` for the next look.
    @Test func aFailedWriteLeavesItInRetry() throws {
        let temp = TempDir()
        let dead = Self.deadLetter()
        let store = try Self.store(temp, holding: dead)
        #expect(rmdir(store.pendingDirectory) == 0)
        guard case .failed(let error) = store.takeRetried(dead.fileName, now: 1) else {
            Issue.record("did not fail")
            return
        }
        #expect(error.cause?.errno == ENOENT)
        #expect(try store.names(store.retryDirectory) == [dead.fileName])
    }

    @Test func parkingMovesItFromPendingToParkedWithTheReason() throws {
        let temp = TempDir()
        var delivery = Self.delivery()
        delivery.attempts = 3
        let store = try Self.store(temp, holding: delivery, in: \.pendingDirectory)
        try store.park(&delivery, reason: "http_400", message: "HTTP 400", now: 77)
        #expect(delivery.parkedReason == "http_400")
        #expect(delivery.parkedAtMillis == 77)
        #expect(delivery.lastError == "HTTP 400")
        #expect(delivery.attempts == 3)
        #expect(store.read(store.parkedDirectory + "/" + delivery.fileName) == delivery)
        #expect(try store.names(store.pendingDirectory).isEmpty)
    }

    /// The dead letter cannot be written: the delivery stays pending, never lost.
    @Test func aParkThatCannotWriteLeavesItPending() throws {
        let temp = TempDir()
        var delivery = Self.delivery()
        let store = try Self.store(temp, holding: delivery, in: \.pendingDirectory)
        #expect(rmdir(store.parkedDirectory) == 0)
        #expect(throws: OutboxError.self) { try store.park(&delivery, reason: "attempts", message: "m", now: 1) }
        #expect(try store.names(store.pendingDirectory) == [delivery.fileName])
    }

    @Test func theWatchStartsOnceThereIsSomethingToWakeAndFiresOnARename() throws {
        let temp = TempDir()
        let store = try Self.store(temp)
        let watch = RetryWatch(store: store)
        defer { watch.stop() }
        #expect(try watch.start { nil } == false)
        let changes = Locked(0)
        #expect(try watch.start { { changes.withLock { $0 += 1 } } } == true)
        // Watching already: nothing more is asked for.
        var asked = false
        #expect(try watch.start { asked = true; return nil } == true)
        #expect(!asked)
        let dead = Self.deadLetter()
        try store.write(dead, in: store.parkedDirectory)
        try store.requeue(dead.fileName)
        #expect(eventually(within: 10) { changes.withLock { $0 } > 0 })
    }

    @Test func aMissingRetryDirectoryIsMadeOnlyWhenAskedTo() throws {
        let temp = TempDir()
        let store = try Self.store(temp)
        #expect(rmdir(store.retryDirectory) == 0)
        let watch = RetryWatch(store: store)
        defer { watch.stop() }
        #expect(throws: SystemError.self) { try watch.start { {} } }
        #expect(try watch.start(creating: true) { {} } == true)
        var status = stat()
        #expect(stat(store.retryDirectory, &status) == 0)
        // Stopped, it starts again.
        watch.stop()
        var asked = false
        #expect(try watch.start { asked = true; return {} } == true)
        #expect(asked)
    }
}
