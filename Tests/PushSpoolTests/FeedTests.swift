@preconcurrency import Glibc
import Foundation
import Testing
import PushSystem
@testable import PushSpool

@Suite struct IncomingFeedTests {
    /// Runs `feed.next` until `done` or `seconds` pass; returns every batch.
    func drive(_ feed: IncomingFeed, seconds: Double = 5, until done: ([IncomingFeed.Batch]) -> Bool) throws -> [IncomingFeed.Batch] {
        var batches: [IncomingFeed.Batch] = []
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline && !done(batches) {
            batches.append(try feed.next(timeoutMillis: 50))
        }
        return batches
    }

    @Test func aStartupBacklogIsFedInBoundedBatches() throws {
        let t = try TempSpool(inMemory: true)
        for i in 0..<3000 { try t.write(t.layout.incoming, "b\(i).json", "{}") }
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        let feed = IncomingFeed(spool: spool, watcher: try IncomingWatcher(layout: t.layout), stableAgeNanos: 0, batchSize: 500)
        let batches = try drive(feed) { $0.contains { $0.scanCompleted } }
        #expect(batches.allSatisfy { $0.names.count <= 500 })
        let names = batches.flatMap(\.names)
        #expect(Set(names).count == 3000)
        #expect(names.count == 3000)
        #expect(feed.stats.scansCompleted == 1)
        #expect(!feed.scanning)
    }

    @Test func aFreshFileFoundByTheStartupScanIsFedOnceStable() throws {
        let t = try TempSpool()
        try t.write(t.layout.incoming, "fresh.json", "{}")  // written before the watcher: no event
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        let feed = IncomingFeed(spool: spool, watcher: try IncomingWatcher(layout: t.layout), stableAgeNanos: 400_000_000)
        let started = Date()
        let first = try feed.next(timeoutMillis: 0)
        #expect(first.names.isEmpty, "a file with a fresh mtime must wait")
        #expect(feed.stats.deferred == 1)
        let batches = try drive(feed) { $0.contains { $0.names.contains("fresh.json") } }
        #expect(batches.flatMap(\.names) == ["fresh.json"])
        #expect(Date().timeIntervalSince(started) >= 0.3)
    }

    @Test func aFileThatRaisedNoEventIsFoundByThePeriodicRescan() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        let feed = IncomingFeed(spool: spool, watcher: try IncomingWatcher(layout: t.layout),
                                rescanIntervalNanos: 300_000_000, stableAgeNanos: 0)
        _ = try drive(feed) { $0.contains { $0.scanCompleted } }
        // A hard link raises IN_CREATE only, which the watcher does not ask for.
        try t.write(t.root, "elsewhere.json", "{}")
        #expect(link(t.root + "/elsewhere.json", t.layout.incoming + "/linked.json") == 0)
        let batches = try drive(feed) { $0.contains { $0.names.contains("linked.json") } }
        #expect(batches.flatMap(\.names) == ["linked.json"])
        #expect(feed.stats.scansStarted >= 2)
    }

    @Test func requestRescanStartsOneAtOnce() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        let feed = IncomingFeed(spool: spool, watcher: try IncomingWatcher(layout: t.layout), stableAgeNanos: 0)
        _ = try drive(feed) { $0.contains { $0.scanCompleted } }
        try t.write(t.root, "elsewhere.json", "{}")
        #expect(link(t.root + "/elsewhere.json", t.layout.incoming + "/linked.json") == 0)
        #expect(try feed.next(timeoutMillis: 0).names.isEmpty)
        feed.requestRescan()
        #expect(feed.scanning)
        #expect(try feed.next(timeoutMillis: 0).names == ["linked.json"])
    }

    @Test func eventsAreFedAndAWakeUpPassesThrough() throws {
        let t = try TempSpool()
        let spool = try Spool(layout: t.layout, maxFileBytes: 1 << 20)
        let watcher = try IncomingWatcher(layout: t.layout)
        let waker = try watcher.makeWaker()
        let feed = IncomingFeed(spool: spool, watcher: watcher)
        _ = try drive(feed) { $0.contains { $0.scanCompleted } }
        try SpoolDropper.drop(bytes: Array("{}".utf8), layout: t.layout, name: "dropped.json")
        let batches = try drive(feed) { $0.contains { $0.names.contains("dropped.json") } }
        #expect(batches.flatMap(\.names) == ["dropped.json"])
        waker.wake()
        #expect(try drive(feed) { $0.contains { $0.woken } }.contains { $0.woken })
    }
}

@Suite struct RenameFallbackTests {
    @Test func linkFallbackNeverReplacesAndMovesASymlinkItself() throws {
        let t = try TempSpool()
        let a = try Posix.openDirectory(t.layout.incoming)
        defer { Posix.close(a) }
        let b = try Posix.openDirectory(t.layout.processing)
        defer { Posix.close(b) }
        try t.write(t.layout.incoming, "x.json", "new")
        try t.write(t.layout.processing, "x.json", "old")
        #expect(throws: SystemError.self) { try Posix.renameNoReplaceByLink(a, "x.json", b, "x.json") }
        #expect(try t.read(t.layout.processing + "/x.json") == Array("old".utf8))
        #expect(try t.read(t.layout.incoming + "/x.json") == Array("new".utf8))
        #expect(symlink("/etc/hostname", t.layout.incoming + "/l.json") == 0)
        try Posix.renameNoReplaceByLink(a, "l.json", b, "l.json")
        #expect(lstatType(t.layout.processing + "/l.json") == S_IFLNK)
        #expect(!exists(t.layout.incoming + "/l.json"))
    }
}
