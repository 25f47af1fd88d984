@preconcurrency import Glibc
import Foundation
import PushInbox
import PushJournal
import PushSystem

/// `pushspool-bench nc [--items N] [--user-items M] [--feeds F] [--calls K] [--limit L] [--dir PATH] [--keep]`
///
/// Builds an inbox index of `--items` notification records (default 1,000,000) of which
/// `--user-items` (default 100,000) belong to one user and the rest to 10,000 others, with a
/// tenth of the big user's items read; then times the first page of `list` and `count` for
/// the big user over `--calls` repeated calls (p50/p99/max). The target: p99 well
/// under 10 ms each. With `--feeds F` (default 10; 0 = none) the index has F feeds: F-1 of one
/// category each (`c0`…; items carry one of 20 categories, so each such feed holds 5% of an
/// inbox) and one taking everything else (the rest, over half); the bench then also times a
/// feed's first page, one feed's count and all feeds' counts. `--keep` leaves the state directory (its path is printed) for
/// scripts/bench-inbox.sh, which serves it with pushspool-inbox.
func runInboxBench(arguments: [String]) {
    var items = 1_000_000
    var userItems = 100_000
    var calls = 2_000
    var limit = 20
    var feedCount = 10
    var parent = FileManager.default.temporaryDirectory.path
    var keep = false
    var i = 0
    while i < arguments.count {
        let value = i + 1 < arguments.count ? arguments[i + 1] : ""
        switch arguments[i] {
        case "--items": items = Int(value) ?? items
        case "--user-items": userItems = Int(value) ?? userItems
        case "--calls": calls = max(1, Int(value) ?? calls)
        case "--limit": limit = Int(value) ?? limit
        case "--feeds": feedCount = min(InboxFeed.maximum, max(0, Int(value) ?? feedCount))
        case "--dir": parent = value
        case "--keep": keep = true; i -= 1
        default:
            print("unknown option \(arguments[i])")
            return
        }
        i += 2
    }
    let root = parent + "/pushspool-nc-bench-\(getpid())"
    try? FileManager.default.removeItem(atPath: root)
    defer { if !keep { try? FileManager.default.removeItem(atPath: root) } }
    let index: InboxIndex
    let feeds = feedCount == 0 ? [] : (0..<(feedCount - 1)).map { InboxFeed(name: "f\($0)", categories: ["c\($0)"]) }
        + [InboxFeed(name: "rest", rest: true)]
    do { index = try InboxIndex(path: StateLayout(root: root).inboxIndex, feeds: feeds) } catch {
        print("nc bench: \(error)")
        return
    }
    let every = max(1, items / max(1, userItems))
    print("nc bench: \(items) items, \(userItems) for user 'big' (every \(every)th), \(feeds.count) feeds, in \(root)")
    let started = Posix.monotonicNanos()
    var batch: [JournalRecord] = []
    var bigCount = 0
    var seq: UInt64 = 0
    for n in 0..<items {
        seq += 1
        let big = n % every == 0 && bigCount < userItems
        if big { bigCount += 1 }
        let body = JSONValue.object([
            "vendor": .string("infobip"), "platform": .string("android"), "id": .string("msg-\(n)"),
            "user": .string(big ? "big" : "user-\(n % 10_000)"), "title": .string("Title \(n)"),
            "body": .string("A notification body of typical length, number \(n)."), "silent": .bool(false),
            "buttons": .array([.object(["text": .string("Open"), "options": .array([])])]),
            // Categories cycle within each user's items (the big user's every `every`th record).
            "ingestedAt": .string("2027-01-01T00:00:00.000Z"), "category": .string("c\((big ? bigCount : n / 10_000) % 20)"),
        ]).serialized()
        batch.append(JournalRecord(seq: seq, ingestMillis: 1_798_761_600_000, key: "k\(n)", body: body, segment: "", offset: 0))
        if big, bigCount % 10 == 0 {
            seq += 1
            let event = JSONValue.object(["kind": .string("event"), "type": .string("nc.read"), "eventId": .string("e\(n)"),
                                          "user": .string("big"), "item": .integer(seq - 1)]).serialized()
            batch.append(JournalRecord(seq: seq, ingestMillis: 1_798_761_600_000, key: "event:e\(n)", body: event, segment: "", offset: 0))
        }
        if batch.count >= 10_000 {
            do { try index.apply(batch) } catch { print("nc bench: \(error)"); return }
            batch.removeAll(keepingCapacity: true)
        }
    }
    do { try index.apply(batch) } catch { print("nc bench: \(error)"); return }
    let buildSeconds = Double(Posix.monotonicNanos() - started) / 1e9
    print(String(format: "indexed %d records in %.1f s (%.0f records/s)", Int(seq), buildSeconds, Double(seq) / buildSeconds))

    func measure(_ name: String, _ body: () throws -> Void) {
        var samples: [UInt64] = []
        samples.reserveCapacity(calls)
        do {
            for _ in 0..<calls {
                let t0 = Posix.monotonicNanos()
                try body()
                samples.append(Posix.monotonicNanos() - t0)
            }
        } catch {
            print("nc bench: \(name): \(error)")
            return
        }
        samples.sort()
        func ms(_ q: Double) -> Double { Double(samples[min(samples.count - 1, Int(Double(samples.count) * q))]) / 1e6 }
        print(String(format: "%@: p50 %.3f ms, p99 %.3f ms, max %.3f ms over %d calls", name, ms(0.5), ms(0.99),
                     Double(samples.last ?? 0) / 1e6, calls))
    }
    let now: Int64 = 1_798_761_700_000
    var sink = 0
    measure("list first page (limit \(limit), user with \(bigCount) items)") {
        sink &+= try index.list(.user("big"), limit: limit, now: now).items.count
    }
    measure("list first page --unread") {
        sink &+= try index.list(.user("big"), unread: true, limit: limit, now: now).items.count
    }
    measure("count (user with \(bigCount) items)") {
        let counts = try index.count(.user("big"), now: now)
        sink &+= Int(counts.unread)
    }
    measure("count (small user)") {
        sink &+= Int(try index.count(.user("user-1"), now: now).unread)
    }
    if !feeds.isEmpty {
        measure("list first page --feed f0 (5% of the inbox)") {
            sink &+= try index.list(.user("big"), feed: "f0", limit: limit, now: now).items.count
        }
        measure("list first page --feed rest (55% of the inbox)") {
            sink &+= try index.list(.user("big"), feed: "rest", limit: limit, now: now).items.count
        }
        measure("count --feed f0") {
            sink &+= Int(try index.count(.user("big"), feed: "f0", now: now).unread)
        }
        measure("counts of all \(feeds.count) feeds") {
            sink &+= try index.feedCounts(.user("big"), now: now).count
        }
        if let counts = try? index.feedCounts(.user("big"), now: now) {
            print("big user's feeds: " + counts.map { "\($0.feed) \($0.counts.unread)" }.joined(separator: ", "))
        }
    }
    if let counts = try? index.count(.user("big"), now: now) { print("big user: unseen \(counts.unseen), unread \(counts.unread)") }
    if sink == 42 { print("") }
}
