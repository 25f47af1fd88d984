@preconcurrency import Glibc
import Foundation
import Synchronization
import PushSystem
import PushExport

/// `pushspool-bench idle [--seconds N] [--settle S] [--media-off] [--totals-only]`
///
/// Wake-ups of an idle host (issues 21 and 34): the real `pushspoold` with the shipped
/// `[Media]` defaults (media on, so it spawns `pushspool-fetch`), the inbox follower, the
/// outbox (to a loopback receiver) and the exporter (to a local JetStream) enabled, and the
/// real `pushspool-inbox` holding ``idleStreams`` open `GET /v1/inbox/stream`s. A few pushes and one
/// `nc-open` event go through first (indexed, streamed, delivered, exported); after
/// `--settle` seconds (default 10; the wake-ups of each are printed) the voluntary and
/// involuntary context switches of every thread of each process are summed over `--seconds`
/// (default 10). Targets: pushspoold ≤ 2 a second, pushspool-inbox ≤ 1, pushspool-fetch ≤ 1.
/// The threads that woke are listed (id, name, the system call each sleeps in, wake-ups a
/// second) unless `--totals-only`. `--media-off` is the variant published before issue 34
/// (`[Media] Enabled=no`), which hid the media supervisor's and the fetcher's polling.
func runIdleBench(arguments: [String]) {
    var seconds = 10
    var settle = 10
    var perThread = true
    var media = true
    var index = 0
    while index < arguments.count {
        let value = index + 1 < arguments.count ? Int(arguments[index + 1]) : nil
        switch (arguments[index], value) {
        case ("--seconds", let v?) where v > 0 && v <= 3_600: seconds = v
        case ("--settle", let v?) where v >= 0 && v <= 600: settle = v
        case ("--threads", _), ("--verbose", _): perThread = true; index -= 1
        case ("--totals-only", _): perThread = false; index -= 1
        case ("--media-off", _): media = false; index -= 1
        default:
            print("usage: pushspool-bench idle [--seconds N] [--settle S] [--media-off] [--totals-only]")
            exit(64)
        }
        index += 2
    }
    if !idleBench(seconds: seconds, settle: settle, perThread: perThread, media: media) { exit(1) }
}

/// How many idle SSE streams the idle bench holds open (issue 34: ≤ 1 wake-up/s with 100).
let idleStreams = 100

/// The idle bench; false (and a results row saying why) when the stack did not start.
func idleBench(seconds: Int, settle: Int, perThread: Bool, media: Bool = true) -> Bool {
    print("== idle: pushspoold (media \(media ? "on, the shipped default" : "off"), inbox follower, outbox, exporter) and "
          + "pushspool-inbox (\(idleStreams) SSE streams open), context switches over \(seconds) s after \(settle) s settling")
    let stack: LiveStack
    do { stack = try LiveStack(label: "idle", media: media, connectionsPerIP: idleStreams + 16) } catch {
        print("idle: \(error)")
        BenchResults.shared.add("idle wake-ups", "not measured: \(error)")
        return false
    }
    defer { stack.stop() }
    guard let daemonPID = stack.daemon?.pid, let inboxPID = stack.inbox?.pid else { return false }
    var fetcherPID: Int32?
    if media {
        waitFor(seconds: 30, "  pushspool-fetch started by pushspoold") {
            fetcherPID = childProcesses(of: daemonPID, named: "pushspool-fetch").first
            return fetcherPID != nil
        }
    }
    var processes: [(name: String, pid: Int32, target: Double)] = [("pushspoold", daemonPID, 2), ("pushspool-inbox", inboxPID, 1)]
    if let fetcherPID { processes.append(("pushspool-fetch", fetcherPID, 1)) }

    // Some traffic first, so every follower has done its work once and gone back to sleep.
    let user = "bench-idle"
    let items = Atomic<Int>(0)
    let stream: InboxStreamReader
    do {
        stream = try InboxStreamReader(port: stack.inboxPort, user: user, token: stack.token(user: user)) { event, _, _ in
            if event == "item" { items.add(1, ordering: .relaxed) }
        }
    } catch {
        print("idle: \(error)")
        BenchResults.shared.add("idle wake-ups", "not measured: \(error)")
        return false
    }
    defer { stream.stop() }
    let streamStatus = stream.waitStatus()
    if streamStatus != 200 { print("  the stream answered \(streamStatus.map(String.init) ?? "nothing"), not 200: no stream open while idle") }
    // The other idle streams (other users, as many apps at once): they only get keep-alives,
    // each noted with its second, so the seconds with keep-alive writes can be left out.
    let keepAlives = Locked<[UInt64]>([])
    var others: [InboxStreamReader] = []
    for n in 1..<idleStreams {
        let other = "bench-idle-\(n)"
        guard let reader = try? InboxStreamReader(port: stack.inboxPort, user: other, token: stack.token(user: other), onEvent: { event, _, at in
            if event == ":" { keepAlives.withLock { $0.append(at) } }
        }) else { break }
        others.append(reader)
    }
    defer { for reader in others { reader.stop() } }
    let opened = others.filter { $0.waitStatus() == 200 }.count + (streamStatus == 200 ? 1 : 0)
    if opened != idleStreams { print("  \(opened) of \(idleStreams) streams open") }
    let pushes = 3
    for i in 0..<pushes {
        let payload = """
            {"pushspool":1,"user":"\(user)","platform":"ios","payload":{"aps":{"alert":{"title":"idle-\(i)","body":"An idle bench push"},"mutable-content":1},"clickUrl":"https://shop.example/p/\(i)","uniqueKey":"idle-\(i)","payload":"{\\"pushName\\":\\"idle\\"}"}}
            """
        if stack.drop(name: "idle-\(i).json", bytes: Array(payload.utf8)) == nil { print("  cannot drop idle-\(i).json") }
    }
    waitFor(seconds: 30, "  the pushes on the stream") { streamStatus != 200 || items.load(ordering: .relaxed) >= pushes }
    // One vendor event through pushspool-inbox, the spool, the journal and the outbox.
    let ncOpen = stack.request("POST", "/v1/events/nc-open", user: user, body: Array("{}".utf8))
    if ncOpen?.status != 202 { print("  POST /v1/events/nc-open answered \(ncOpen.map { "\($0.status) \($0.body)" } ?? "nothing")") }
    waitFor(seconds: 30, "  the nc-open event at the receiver") { ncOpen?.status != 202 || (stack.receiver?.hits(LiveStack.mindboxPath) ?? 0) >= 1 }
    let lastSeq = stack.journalLastSeq
    waitFor(seconds: 30, "  the exporter's cursor at seq \(lastSeq)") {
        ((try? ExportCursor.read(stateDirectory: stack.state)) ?? 0) >= lastSeq
    }
    print("  traffic done: \(items.load(ordering: .relaxed)) items streamed, \(stack.receiver?.hits(LiveStack.mindboxPath) ?? 0) events delivered, "
          + "\(lastSeq) records exported; settling \(settle) s")
    // How the processes wind down after the traffic, second by second. Per thread, so a
    // thread that ends (a dispatch worker retiring) does not take its past wake-ups with it.
    func woke(_ was: [Int32: (name: String, switches: Int)], _ now: [Int32: (name: String, switches: Int)]) -> Int {
        now.reduce(0) { sum, entry in sum + max(0, entry.value.switches - (was[entry.key]?.switches ?? 0)) }
    }
    var settling: [[Int]] = []
    var last = processes.map { threadContextSwitches(pid: $0.pid) }
    for _ in 0..<settle {
        sleep(1)
        let now = processes.map { threadContextSwitches(pid: $0.pid) }
        settling.append(zip(last, now).map { woke($0, $1) })
        last = now
    }
    if !settling.isEmpty {
        print("  while settling, wake-ups in each second: " + processes.indices.map { index in
            processes[index].name + " " + settling.map { String($0[index]) }.joined(separator: " ")
        }.joined(separator: "; "))
    }

    let before = processes.map { threadContextSwitches(pid: $0.pid) }
    let start = Posix.monotonicNanos()
    // Second by second too, for pushspool-inbox without its keep-alives: the seconds in which
    // no stream received one (and the one after, for the writes that complete them).
    var inboxBySecond: [(start: UInt64, end: UInt64, woke: Int)] = []
    var lastInbox = threadContextSwitches(pid: inboxPID)
    for _ in 0..<max(1, seconds) {
        let from = Posix.monotonicNanos()
        sleep(1)
        let now = threadContextSwitches(pid: inboxPID)
        inboxBySecond.append((from, Posix.monotonicNanos(), woke(lastInbox, now)))
        lastInbox = now
    }
    let elapsed = Double(Posix.monotonicNanos() - start) / 1e9
    let after = processes.map { threadContextSwitches(pid: $0.pid) }
    let keepAliveTimes = keepAlives.withLock { $0 }
    let quiet = inboxBySecond.enumerated().filter { index, second in
        let touched = { (s: (start: UInt64, end: UInt64, woke: Int)) in keepAliveTimes.contains { $0 >= s.start && $0 < s.end } }
        return !touched(second) && (index == 0 || !touched(inboxBySecond[index - 1]))
    }.map(\.element)
    let quietSeconds = quiet.reduce(0.0) { $0 + Double($1.end - $1.start) / 1e9 }
    let quietRate = quietSeconds > 0 ? Double(quiet.reduce(0) { $0 + $1.woke }) / quietSeconds : .nan
    print(String(format: "pushspool-inbox without keep-alives: %.2f wake-ups/s over %.0f s of %.0f without a keep-alive write "
                 + "(%d keep-alives received by %d streams), target ≤ 1/s — %@", quietRate, quietSeconds, elapsed, keepAliveTimes.count,
                 idleStreams, quietRate <= 1 ? "met" : "NOT met"))

    var allMet = true
    var values: [String] = [], ratios: [String] = []
    for (index, (name, pid, target)) in processes.enumerated() {
        let was = before[index], now = after[index]
        // Threads that started in the window count from zero; threads that ended are lost
        // (their count is not readable any more): the line says how many.
        var woke: [(tid: Int32, name: String, switches: Int)] = []
        for (tid, thread) in now {
            let delta = thread.switches - (was[tid]?.switches ?? 0)
            if delta > 0 { woke.append((tid, thread.name, delta)) }
        }
        let ended = was.keys.filter { now[$0] == nil }.count
        let total = woke.reduce(0) { $0 + $1.switches }
        let rate = Double(total) / elapsed
        // pushspool-inbox is judged without the seconds of keep-alive writes: each stream
        // gets one every 15 s by design, so a 10 s window holds a stream's or none,
        // depending on where the window falls, and says nothing about idling.
        let keepAliveFree = pid == inboxPID && !quietRate.isNaN
        let met = (keepAliveFree ? quietRate : rate) <= target
        allMet = allMet && met
        print(String(format: "%@: %.2f wake-ups/s (%d context switches in %.1f s over %d threads%@), target ≤ %.0f/s: %.2f× the target%@ — %@",
                     name, rate, total, elapsed, now.count, ended > 0 ? ", \(ended) ended in the window" : "", target, rate / target,
                     keepAliveFree ? String(format: ", %.2f× without keep-alives", quietRate / target) : "", met ? "met" : "NOT met"))
        if perThread {
            for thread in woke.sorted(by: { $0.switches > $1.switches }) {
                print(String(format: "    tid %d %@: %d (%.2f/s)", thread.tid, thread.name, thread.switches, Double(thread.switches) / elapsed))
            }
        }
        if keepAliveFree {
            values.append(String(format: "%@ %.2f/s without keep-alives (%.2f/s with the %d keep-alives written in the window)",
                                 name, quietRate, rate, keepAliveTimes.count))
            ratios.append(String(format: "%@ %.2f×", name, quietRate / target))
        } else {
            values.append(String(format: "%@ %.2f/s", name, rate))
            ratios.append(String(format: "%@ %.2f×", name, rate / target))
        }
    }
    print("  Not in these figures: under systemd, pushspoold's watchdog pings add 2 wake-ups per WatchdogSec (30 s in pushspoold.service: 0.07/s); "
          + "pushspool-inbox.service has no watchdog. Each open stream gets a keep-alive every 15 s (in the pushspool-inbox line above, "
          + "not in its line without keep-alives).")
    if media && fetcherPID == nil { print("  pushspool-fetch did not start: its wake-ups are not measured") }
    // Issue 34: an idle stack stops within a second of SIGTERM (with a hung vendor, within one
    // RequestTimeoutSec + 1 s: NotificationCenterTests checks that case).
    let stopped = stack.stopServersTimed()
    let stopTimes = [("pushspool-inbox", stopped.inbox), ("pushspoold", stopped.daemon)].compactMap { name, seconds in
        seconds.map { (name, $0) }
    }
    let stopsMet = stopTimes.allSatisfy { $0.1 <= 1 }
    print("SIGTERM to exit, idle: " + stopTimes.map { String(format: "%@ %.3f s", $0.0, $0.1) }.joined(separator: ", ")
          + ", target ≤ 1 s — " + (stopsMet ? "met" : "NOT met"))
    BenchResults.shared.add("SIGTERM to exit, idle", stopTimes.map { String(format: "%@ %.3f s", $0.0, $0.1) }.joined(separator: ", "),
                            target: "≤ 1 s each", met: stopsMet)
    BenchResults.shared.add("idle wake-ups (\(media ? "media on (default)" : "media off"), inbox, outbox, export on; \(idleStreams) SSE streams)",
                            values.joined(separator: ", "), ratio: ratios.joined(separator: ", ") + " the target",
                            target: "pushspoold ≤ 2/s, pushspool-inbox ≤ 1/s" + (media ? ", pushspool-fetch ≤ 1/s" : ""),
                            met: allMet)
    return true
}

/// Polls `done` every 10 ms for up to `seconds`; says so when it did not come true.
func waitFor(seconds: Int, _ what: String, _ done: () -> Bool) {
    let deadline = Posix.monotonicNanos() + UInt64(clamping: seconds) * 1_000_000_000
    while !done() {
        if Posix.monotonicNanos() >= deadline {
            print("\(what): not within \(seconds) s")
            return
        }
        usleep(10_000)
    }
}
