@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem
@testable import PushSpool

@Suite struct WatcherTests {
    @Test func seesRenameIntoIncomingAndCloseAfterWriteButNotDotfilesOrTmp() throws {
        let t = try TempSpool()
        let watcher = try IncomingWatcher(layout: t.layout)
        try t.write(t.layout.tmp, "staged.json", "{}")
        #expect(rename(t.layout.tmp + "/staged.json", t.layout.incoming + "/moved.json") == 0)
        try t.write(t.layout.incoming, ".hidden.json", "{}")
        try t.write(t.layout.incoming, "partial.tmp", "{}")
        try t.write(t.layout.incoming, "copied.json", "{}")
        let events = try collect(watcher) { fileNames($0).contains("copied.json") }
        #expect(fileNames(events) == ["moved.json", "copied.json"])
        // Nothing else trickles in afterwards.
        #expect(try watcher.wait(timeoutMillis: 200).isEmpty)
    }

    @Test func timesOutWithNoEvents() throws {
        let t = try TempSpool()
        let watcher = try IncomingWatcher(layout: t.layout)
        let started = Date()
        #expect(try watcher.wait(timeoutMillis: 150).isEmpty)
        #expect(Date().timeIntervalSince(started) >= 0.1)
    }

    /// A waker outliving its watcher (a failing record's completion after the ingest loop has
    /// returned) must not raise SIGPIPE: that killed pushspoold instead of its exit 1. SIGPIPE
    /// is blocked in this thread, so a raised one stays pending and is seen, not fatal.
    @Test func wakerOutlivingItsWatcherRaisesNoSIGPIPE() throws {
        let t = try TempSpool()
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        var previous = sigset_t()
        #expect(pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous) == 0)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        var watcher: IncomingWatcher? = try IncomingWatcher(layout: t.layout)
        let waker = try #require(try watcher?.makeWaker())
        watcher = nil
        for _ in 0..<3 { waker.wake() }
        var pending = sigset_t()
        sigpending(&pending)
        let raised = sigismember(&pending, SIGPIPE) == 1
        if raised {
            // Take it, so the unblock in `defer` does not deliver it to the test process.
            var timeout = timespec(tv_sec: 0, tv_nsec: 0)
            _ = sigtimedwait(&pipeSignal, nil, &timeout)
        }
        #expect(!raised, "a late wake-up raised SIGPIPE")
    }

    @Test func wakerEndsAWaitFromAnotherThread() throws {
        let t = try TempSpool()
        let watcher = try IncomingWatcher(layout: t.layout)
        let waker = try watcher.makeWaker()
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.1) { waker.wake() }
        let started = Date()
        #expect(try watcher.wait(timeoutMillis: 10_000) == [.woken])
        #expect(Date().timeIntervalSince(started) < 5)
        #expect(try watcher.wait(timeoutMillis: 50).isEmpty, "a wake-up is consumed once")
    }

    @Test func removingIncomingReportsTheWatchLost() throws {
        let t = try TempSpool()
        let watcher = try IncomingWatcher(layout: t.layout)
        #expect(rmdir(t.layout.incoming) == 0)
        let events = try collect(watcher) { $0.contains(.watchLost) }
        #expect(events.contains(.watchLost))
    }

    @Test func nonUTF8NamesArriveRepaired() throws {
        let t = try TempSpool()
        let watcher = try IncomingWatcher(layout: t.layout)
        let raw: [UInt8] = Array(t.layout.incoming.utf8) + Array("/x".utf8) + [0xFF] + Array(".json".utf8)
        let fd = Glibc.open(raw.map { CChar(bitPattern: $0) } + [0], O_WRONLY | O_CREAT, 0o600)
        #expect(fd >= 0)
        close(fd)
        let events = try collect(watcher) { fileNames($0).contains("x%FF.json") }
        #expect(fileNames(events).contains("x%FF.json"))
        #expect(try t.names(t.layout.incoming) == ["x%FF.json"])
    }

    @Test func dropsAreOnlyEverSeenComplete() throws {
        let t = try TempSpool()
        let watcher = try IncomingWatcher(layout: t.layout)
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        let count = 60
        let payload = (0..<(256 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let layout = t.layout
        DispatchQueue.global().async {
            for i in 0..<count { _ = try? SpoolDropper.drop(bytes: payload, layout: layout, name: "drop-\(i).json") }
        }
        var checked = Set<String>()
        var partialSeenByScan = 0
        let deadline = Date().addingTimeInterval(30)
        while checked.count < count && Date() < deadline {
            // A rescan racing the producer must never see a file that is still being written.
            let scan = try spool.scanIncoming()
            while let batch = try scan.next() {
                for entry in batch {
                    if let status = try spool.status(incoming: entry.name), status.size != Int64(payload.count) { partialSeenByScan += 1 }
                }
            }
            for name in fileNames(try watcher.wait(timeoutMillis: 1)) where !checked.contains(name) {
                // Claim and read the file the moment its event arrives: it must be whole.
                #expect(try spool.claim(name))
                guard case .contents(let file) = try spool.read(processing: name) else {
                    Issue.record("refused \(name)")
                    continue
                }
                #expect(file.bytes == payload, "\(name) was seen partial: \(file.size) bytes")
                try spool.complete(processing: name)
                checked.insert(name)
            }
        }
        #expect(partialSeenByScan == 0)
        #expect(checked.count == count)
    }
}

@Suite struct InotifyDecoderTests {
    @Test func decodesFilesOverflowAndLostWatchAndDropsIgnoredNames() {
        var bytes: [UInt8] = []
        bytes += InotifyDecoder.encode(mask: UInt32(IN_MOVED_TO), name: Array("a.json".utf8))
        bytes += InotifyDecoder.encode(mask: UInt32(IN_CLOSE_WRITE), name: Array(".hidden".utf8))
        bytes += InotifyDecoder.encode(mask: UInt32(IN_CLOSE_WRITE), name: Array("w.tmp".utf8))
        bytes += InotifyDecoder.encode(mask: UInt32(IN_Q_OVERFLOW), name: [], watch: -1)
        bytes += InotifyDecoder.encode(mask: UInt32(IN_CLOSE_WRITE), name: Array("b.json".utf8))
        bytes += InotifyDecoder.encode(mask: UInt32(IN_CLOSE_WRITE), name: [0x62, 0xFF])
        bytes += InotifyDecoder.encode(mask: UInt32(IN_DELETE_SELF), name: [])
        bytes += InotifyDecoder.encode(mask: UInt32(IN_IGNORED), name: [])
        bytes += InotifyDecoder.encode(mask: UInt32(IN_CREATE), name: Array("c.json".utf8))
        let decoded = bytes.withUnsafeBytes { InotifyDecoder.decode($0) }
        #expect(decoded == [.file("a.json"), .overflow, .file("b.json"), .rawName([0x62, 0xFF]), .watchLost])
    }

    @Test func aTruncatedTrailingEventIsNotDecoded() {
        let whole = InotifyDecoder.encode(mask: UInt32(IN_MOVED_TO), name: Array("a.json".utf8))
        let bytes = whole + Array(InotifyDecoder.encode(mask: UInt32(IN_MOVED_TO), name: Array("b.json".utf8)).prefix(20))
        #expect(bytes.withUnsafeBytes { InotifyDecoder.decode($0) } == [.file("a.json")])
    }

    @Test func encodingMatchesTheKernelLayout() {
        #expect(MemoryLayout<inotify_event>.size == InotifyDecoder.headerSize)
        #expect(InotifyDecoder.encode(mask: 1, name: Array("abc".utf8)).count == 16 + 16)
    }
}

@Suite struct StableAgeTests {
    let second: Int64 = 1_000_000_000
    func status(_ size: Int64, _ mtime: Int64, regular: Bool = true) -> EntryStatus {
        EntryStatus(size: size, modifiedNanos: mtime, isRegular: regular)
    }

    @Test func anOldFileIsTakenAtOnce() {
        var filter = StableAgeFilter()
        #expect(filter.decide("a", status: status(10, 0), nowNanos: 5 * second) == .take)
        #expect(filter.count == 0)
    }

    @Test func aFreshFileIsDeferredThenTakenWhenUnchanged() {
        var filter = StableAgeFilter()
        let now = 100 * second
        #expect(filter.decide("a", status: status(10, now - second / 10), nowNanos: now) == .revisit(atNanos: now + second))
        #expect(filter.due(nowNanos: now + second / 2).isEmpty)
        #expect(filter.due(nowNanos: now + second) == ["a"])
        #expect(filter.decide("a", status: status(10, now - second / 10), nowNanos: now + second) == .take)
        #expect(filter.count == 0)
    }

    @Test func aFileStillGrowingIsDeferredAgain() {
        var filter = StableAgeFilter()
        let now = 100 * second
        _ = filter.decide("a", status: status(10, now), nowNanos: now)
        let later = now + second
        #expect(filter.decide("a", status: status(20, later - 1), nowNanos: later) == .revisit(atNanos: later + second))
        #expect(filter.isDeferred("a"))
    }

    @Test func aFutureMtimeIsTakenAfterTwoUnchangedLooks() {
        var filter = StableAgeFilter()
        let now = 100 * second
        let future = now + 3600 * second
        #expect(filter.decide("a", status: status(10, future), nowNanos: now) != .take)
        #expect(filter.decide("a", status: status(10, future), nowNanos: now + second / 2) == .revisit(atNanos: now + second))
        #expect(filter.decide("a", status: status(10, future), nowNanos: now + second) == .take)
    }

    @Test func nonRegularEntriesAreTakenAtOnceForQuarantine() {
        var filter = StableAgeFilter()
        #expect(filter.decide("fifo", status: status(0, 100 * second, regular: false), nowNanos: 100 * second) == .take)
    }

    @Test func deferredNamesAreBoundedAndOverflowIsFlagged() {
        var filter = StableAgeFilter(capacity: 2)
        let now = 100 * second
        for name in ["a", "b", "c"] { _ = filter.decide(name, status: status(1, now), nowNanos: now) }
        #expect(filter.count == 2)
        #expect(filter.overflowed)
        filter.acknowledgeOverflow()
        #expect(!filter.overflowed)
        filter.forget("a")
        #expect(filter.count == 1)
        #expect(filter.nextDueNanos == now + second)
    }

    @Test func aPlainCopyIntoIncomingIsDeferredByRescanUntilStable() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        var filter = StableAgeFilter(stableAgeNanos: 300_000_000)
        try t.write(t.layout.incoming, "copy.json", "{\"half\":")
        let first = try #require(try spool.status(incoming: "copy.json"))
        let firstLook = Posix.wallClockMillis() * 1_000_000
        guard case .revisit = filter.decide("copy.json", status: first, nowNanos: firstLook) else {
            Issue.record("took a fresh file")
            return
        }
        // The filter takes its clock as an argument: the second look is 0.4 s later on it.
        let second = try #require(try spool.status(incoming: "copy.json"))
        #expect(filter.decide("copy.json", status: second, nowNanos: firstLook + 400_000_000) == .take)
        #expect(try spool.status(incoming: "missing.json") == nil)
    }
}
