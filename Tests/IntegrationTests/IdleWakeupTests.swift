@preconcurrency import Glibc
import Foundation
import Testing
import TestSupport

/// Issue 34: an idle `pushspoold` with the shipped defaults (`[Media] Enabled=yes`, so it
/// spawns `pushspool-fetch`) sleeps. Before, the media supervisor polled its socket every
/// 50 ms and the fetcher's curl loop ticked every second: about 20 wake-ups a second.
///
/// Measured as `pushspool-bench idle` does: the context switches of every thread of both
/// processes, from `/proc/PID/task/*/status`, over 3 s windows. Start-up work (opening the
/// journal, the first scans, the fetcher's configuration) takes an unknown while on a loaded
/// machine, so the first of up to six windows under the bound passes; a poller that is back
/// fails every window (it costs 20 a second, the bound is 5).
@Suite struct IdleWakeupTests {
    /// Total context switches of the threads of `pid` (threads that ended are not counted).
    static func contextSwitches(_ pid: pid_t) -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        return tasks.reduce(0) { sum, task in
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/status", encoding: .utf8) else { return sum }
            return sum + status.split(separator: "\n").reduce(0) { lineSum, line in
                guard line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") else { return lineSum }
                return lineSum + (Int(line.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") ?? 0)
            }
        }
    }

    @Test func idleDaemonWithTheShippedDefaultsDoesNotPoll() throws {
        // An empty file: every default as shipped (media on, metrics, retention).
        let harness = try DaemonHarness(name: "idle-wakeups", config: "")
        try harness.start()
        defer { harness.stop() }
        let daemon = try #require(harness.pid)
        try waitUntil(timeout: 30, "the fetcher process") { FetcherTests.fetchers(of: daemon).count == 1 }
        let fetcher = FetcherTests.fetchers(of: daemon)[0]

        let window = 3.0, bound = 5.0
        var rates: [Double] = []
        for _ in 0..<6 {
            let before = Self.contextSwitches(daemon) + Self.contextSwitches(fetcher)
            let start = Date()
            usleep(UInt32(window * 1_000_000))  // why: the measuring window, not a settle
            let switches = Self.contextSwitches(daemon) + Self.contextSwitches(fetcher) - before
            rates.append(Double(switches) / Date().timeIntervalSince(start))
            if rates.last! < bound { break }
        }
        #expect(rates.last! < bound,
                "pushspoold and pushspool-fetch woke \(rates.map { String(format: "%.1f", $0) }) times a second in 3 s windows")
        #expect(FetcherTests.fetchers(of: daemon) == [fetcher], "the fetcher was restarted while idle")
    }
}
