@preconcurrency import Glibc
import Foundation
import PushSystem

/// `pushspool-bench visible [--rate R] [--seconds S] [--inbox-only]`
///
/// Drop-to-visible latency (issue 21): the real `pushspoold` (inbox follower, outbox and
/// exporter on, as deployed; `--inbox-only` leaves the outbox and exporter off) and the real
/// `pushspool-inbox`, one `GET /v1/inbox/stream` open for a user. Files for that user are
/// renamed into `incoming/` at R a second (default 200) for S seconds (default 10); the latency
/// of each is from just before its rename until its `event: item` arrived on the stream
/// (p50/p99/p999/max; target at 200/s: p99 ≤ 10 ms). Then, in the same run, the C loop's
/// drop-to-durable latency at the same rate, the floor the disk sets, beside it.
func runVisibleBench(arguments: [String]) {
    var rate = 200
    var seconds = 10
    var inboxOnly = false
    var index = 0
    while index < arguments.count {
        let value = index + 1 < arguments.count ? Int(arguments[index + 1]) : nil
        switch (arguments[index], value) {
        case ("--rate", let v?) where v > 0 && v <= 100_000: rate = v
        case ("--seconds", let v?) where v > 0 && v <= 3_600: seconds = v
        case ("--inbox-only", _): inboxOnly = true; index -= 1
        default:
            print("usage: pushspool-bench visible [--rate R] [--seconds S] [--inbox-only]")
            exit(64)
        }
        index += 2
    }
    if !visibleBench(rate: rate, seconds: seconds, inboxOnly: inboxOnly) { exit(1) }
}

/// The drop-to-visible bench; false (and a results row saying why) when it could not measure.
func visibleBench(rate: Int, seconds: Int, inboxOnly: Bool) -> Bool {
    let followers = inboxOnly ? "inbox follower only" : "inbox follower, outbox and exporter on"
    print("== visible: \(rate) files/s for \(seconds) s, drop (rename into incoming/) to `event: item` on GET /v1/inbox/stream "
          + "(pushspoold with \(followers), pushspool-inbox), then the C loop's drop-to-durable at the same rate")
    let rowName = "drop-to-visible at \(rate)/s"
    let stack: LiveStack
    do { stack = try LiveStack(label: "visible", outbox: !inboxOnly, export: !inboxOnly) } catch {
        print("visible: \(error)")
        BenchResults.shared.add(rowName, "not measured: \(error)")
        return false
    }
    var stopped = false
    defer { if !stopped { stack.stop() } }
    let loadBefore = loadAverage()

    let total = rate * seconds
    let user = "bench-visible"
    // Arrival by file index (0 = not yet); warm-up files carry no index.
    let arrivals = Locked<(at: [UInt64], count: Int, other: Int)>(([UInt64](repeating: 0, count: total), 0, 0))
    // What a tail is made of: each item's `ingestedAt` (wall clock, milliseconds) against the
    // wall clock at its drop and at its arrival.
    let ingested = Locked<[Int64]>([Int64](repeating: 0, count: total))
    let arrivedWall = Locked<[Int64]>([Int64](repeating: 0, count: total))
    let warm = Locked<Int>(0)
    let stream: InboxStreamReader
    do {
        stream = try InboxStreamReader(port: stack.inboxPort, user: user, token: stack.token(user: user)) { event, data, at in
            guard event == "item" else { return }
            guard let number = fileNumber(in: data, prefix: "vis-") else {
                warm.withLock { $0 += 1 }
                return
            }
            arrivals.withLock { state in
                guard number < state.at.count else { state.other += 1; return }
                if state.at[number] == 0 {
                    state.at[number] = at
                    state.count += 1
                }
            }
            if number < total, let millis = ingestedAtMillis(in: data) {
                let now = Posix.wallClockMillis()
                ingested.withLock { $0[number] = millis }
                arrivedWall.withLock { $0[number] = now }
            }
        }
    } catch {
        print("visible: \(error)")
        BenchResults.shared.add(rowName, "not measured: \(error)")
        return false
    }
    defer { stream.stop() }
    guard stream.waitStatus() == 200 else {
        print("visible: GET /v1/inbox/stream answered \(stream.status.withLock { $0 }.map(String.init) ?? "nothing"), not 200")
        BenchResults.shared.add(rowName, "not measured: the stream was refused")
        return false
    }
    func payload(_ title: String, _ i: Int) -> [UInt8] {
        Array("""
            {"pushspool":1,"user":"\(user)","platform":"ios","payload":{"aps":{"alert":{"title":"\(title)","body":"Everything −20% today only, item \(i)"},"mutable-content":1},"clickUrl":"https://shop.example/p/\(i)","uniqueKey":"\(title)","payload":"{\\"pushName\\":\\"sale\\",\\"pushDate\\":\\"2026-11-29T10:00:00Z\\"}"}}
            """.utf8)
    }
    // Warm-up: the first files open the index, the stream's queries and the journal readers.
    let warmCount = 20
    for i in 0..<warmCount { _ = stack.drop(name: "w\(i).json", bytes: payload("warm-\(i)", i)) }
    waitFor(seconds: 30, "  the warm-up items on the stream") { warm.withLock { $0 } >= warmCount }

    var dropped = [UInt64](repeating: 0, count: total)
    var droppedWall = [Int64](repeating: 0, count: total)
    let interval = 1_000_000_000 / UInt64(clamping: rate)
    let begin = Posix.monotonicNanos()
    var failedDrops = 0
    for i in 0..<total {
        sleepUntil(monotonicNanos: begin + UInt64(clamping: i) * interval)
        droppedWall[i] = Posix.wallClockMillis()
        if let at = stack.drop(name: "v\(i).json", bytes: payload("vis-\(i)", i)) { dropped[i] = at } else { failedDrops += 1 }
    }
    waitFor(seconds: 30, "  every file's item on the stream") { arrivals.withLock { $0.count } >= total - failedDrops }
    let state = arrivals.withLock { $0 }
    stream.stop()
    stack.stop()
    stopped = true

    let latencies = (0..<total).compactMap { i -> UInt64? in
        guard dropped[i] > 0, state.at[i] > 0 else { return nil }
        return state.at[i] > dropped[i] ? state.at[i] - dropped[i] : 0
    }
    print("  load average \(loadBefore) before the stack's run, \(loadAverage()) after (\(Posix.usableCPUs()) usable CPUs)")
    let visible = LatencyPercentiles(latencies)
    let missing = total - failedDrops - latencies.count
    print(String(format: "drop to visible: p50 %.2f ms, p99 %.2f ms, p999 %.2f ms, max %.2f ms over %d files%@ (target at 200/s: p99 ≤ 10 ms)",
                 visible.p50, visible.p99, visible.p999, visible.max, visible.count,
                 missing > 0 || failedDrops > 0 ? " (\(missing) never arrived, \(failedDrops) not dropped)" : ""))
    // The split at millisecond resolution, for the slowest 1 %: drop → ingestedAt (pushspoold
    // claimed and read the file) and ingestedAt → arrival (journal sync, index, stream).
    let ingestedAt = ingested.withLock { $0 }, arrivedAt = arrivedWall.withLock { $0 }
    let slowest = (0..<total).filter { dropped[$0] > 0 && state.at[$0] > 0 }
        .sorted { state.at[$0] - min(state.at[$0], dropped[$0]) > state.at[$1] - min(state.at[$1], dropped[$1]) }
        .prefix(max(1, total / 100))
        .filter { ingestedAt[$0] > 0 }
    if !slowest.isEmpty {
        let toIngest = slowest.map { max(0, ingestedAt[$0] - droppedWall[$0]) }, toArrival = slowest.map { max(0, arrivedAt[$0] - ingestedAt[$0]) }
        print(String(format: "  slowest %d files (ms, ±1): drop → ingestedAt median %.0f, max %lld; ingestedAt → on the stream median %.0f, max %lld",
                     slowest.count, median(toIngest.map(Double.init)), toIngest.max() ?? 0, median(toArrival.map(Double.init)), toArrival.max() ?? 0))
    }
    let loop = cLoopLatency(rate: rate, count: total)
    if let loop {
        print(String(format: "C loop drop to durable: p50 %.2f ms, p99 %.2f ms, p999 %.2f ms, max %.2f ms; drop-to-visible p99 is %.2f× the loop's",
                     loop.p50, loop.p99, loop.p999, loop.max, visible.p99 / max(0.001, loop.p99)))
    }
    let met: Bool? = rate == 200 ? (visible.p99 <= 10 && missing == 0 && failedDrops == 0) : nil
    BenchResults.shared.add(rowName + (inboxOnly ? " (inbox only)" : ""),
                            String(format: "p50 %.2f ms, p99 %.2f ms, p999 %.2f ms", visible.p50, visible.p99, visible.p999)
                                + (missing > 0 ? " (\(missing) missing)" : ""),
                            ratio: loop.map { String(format: "p99 %.2f× the C loop's drop-to-durable (%.2f ms; p999 %.2f ms)", visible.p99 / max(0.001, $0.p99), $0.p99, $0.p999) } ?? "",
                            target: rate == 200 ? "p99 ≤ 10 ms" : "", met: met)
    return missing == 0
}

/// The `ingestedAt` of an item's JSON (`"ingestedAt":"2026-12-01T18:04:27.123Z"`) in
/// milliseconds since the epoch, or nil.
private func ingestedAtMillis(in text: String) -> Int64? {
    guard let range = text.range(of: "\"ingestedAt\":\"") else { return nil }
    let stamp = Array(text[range.upperBound...].prefix(24).utf8)
    // YYYY-MM-DDTHH:MM:SS.mmmZ
    guard stamp.count == 24, stamp[23] == UInt8(ascii: "Z") else { return nil }
    func number(_ from: Int, _ count: Int) -> Int32? {
        var value: Int32 = 0
        for byte in stamp[from..<(from + count)] {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            value = value * 10 + Int32(byte - 0x30)
        }
        return value
    }
    guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
          let minute = number(14, 2), let second = number(17, 2), let millis = number(20, 3) else { return nil }
    var parts = tm()
    parts.tm_year = year - 1900
    parts.tm_mon = month - 1
    parts.tm_mday = day
    parts.tm_hour = hour
    parts.tm_min = minute
    parts.tm_sec = second
    let seconds = timegm(&parts)
    guard seconds >= 0 else { return nil }
    return Int64(seconds) * 1000 + Int64(millis)
}

/// The number after the first `prefix` in `text` (`"title":"vis-42"` → 42).
func fileNumber(in text: String, prefix: String) -> Int? {
    guard let range = text.range(of: prefix) else { return nil }
    let digits = text[range.upperBound...].prefix { $0.isASCII && $0.isNumber }
    return digits.isEmpty || digits.count > 9 ? nil : Int(digits)
}
