@preconcurrency import Glibc
import Foundation
import PushSystem

/// `pushspool-bench backlog [--sizes 20000,200000,1000000]`
///
/// For each size: that many files already in `incoming/` before the real `pushspoold`
/// starts; the clock runs from the start until `incoming/` and `processing/` are empty. Prints
/// the drain rate, its ratio to the smallest size's, and the daemon's peak RSS (VmHWM, read
/// before it stops). Targets: peak RSS ≤ 64 MiB through a 1,000,000-file backlog, and the
/// largest backlog drained within 25 % of the smallest's rate. The same backlog is then drained
/// by the C loop of the burst bench, whose own ratio shows how much of a slowdown is the
/// file system's (a directory of a million entries). The 1,000,000 case stages a million files
/// first (minutes): ask for it with `--sizes`.
///
/// Each backlog is written back (`sync`) before the clock starts, as a backlog that has waited
/// is: on an ext4 with delayed allocation, a file removed before write-back never had blocks,
/// so an unsynced 20,000-file backlog drains several times faster than the same files once on
/// disk, while staging a million files takes long enough for most of them to be written back.
/// Without the sync the sizes would be compared in different states. `--no-sync` measures
/// them as staged.
func runBacklogBench(arguments: [String]) {
    var sizes = [20_000, 200_000]
    var settle = true
    var rest = arguments[...]
    while let flag = rest.popFirst() {
        switch flag {
        case "--sizes" where !rest.isEmpty:
            sizes = rest.removeFirst().split(separator: ",").compactMap { Int($0) }.filter { $0 > 0 }
        case "--no-sync":
            settle = false
        default:
            print("usage: pushspool-bench backlog [--sizes N,N,...] [--no-sync]")
            exit(64)
        }
    }
    print("== backlog: files already in incoming/ before start, " + (settle ? "written back (sync) first" : "as staged (no sync)"))
    var baseRate: Double?
    var baseLoopRate: Double?
    for size in sizes {
        let spool = ExternalSpool(label: "backlog")
        spool.write(count: size, into: spool.incoming, progressLabel: "staging \(size) files")
        if settle { sync() }
        let start = Posix.monotonicNanos()
        guard let daemon = try? DaemonProcess(spool: spool) else {
            print("  pushspoold did not start (is it built next to pushspool-bench?)")
            return
        }
        var peak = 0
        // Poll less often for big backlogs: a readdir of a huge, emptied directory is not free.
        let poll: UInt32 = size > 100_000 ? 50 : 5
        while !(ExternalSpool.isEmpty(spool.incoming) && ExternalSpool.isEmpty(spool.processing)) {
            peak = max(peak, daemon.peakRSSKiB)
            usleep(poll * 1000)
        }
        let elapsed = Double(Posix.monotonicNanos() - start) / 1e9
        peak = max(peak, daemon.peakRSSKiB)
        daemon.stop()
        spool.remove()
        let rate = Double(size) / elapsed
        let ratio = rate / (baseRate ?? rate)
        if baseRate == nil { baseRate = rate }
        print(String(format: "backlog %8d files: drained in %.1f s, %.0f files/s (%.2f of the smallest), peak RSS %.1f MiB",
                     size, elapsed, rate, ratio, Double(peak) / 1024))
        BenchResults.shared.add("backlog \(size) files", String(format: "%.0f files/s, peak RSS %.1f MiB", rate, Double(peak) / 1024),
                                ratio: String(format: "%.2f× the %d-file drain rate", ratio, sizes[0]),
                                target: "RSS ≤ 64 MiB, rate ≥ 0.75×", met: peak <= 64 * 1024 && ratio >= 0.75)

        let loop = ExternalSpool(label: "backlog-cloop")
        loop.write(count: size, into: loop.incoming, progressLabel: "staging \(size) files for the C loop")
        if settle { sync() }
        let loopRate = Double(size) / runCLoopProcess(on: loop)
        loop.remove()
        let loopRatio = loopRate / (baseLoopRate ?? loopRate)
        if baseLoopRate == nil { baseLoopRate = loopRate }
        print(String(format: "backlog %8d files, C loop: %.0f files/s (%.2f of its smallest); pushspoold %.2f× the C loop",
                     size, loopRate, loopRatio, rate / loopRate))
        BenchResults.shared.add("backlog \(size) files, C loop", String(format: "%.0f files/s", loopRate),
                                ratio: String(format: "%.2f× its %d-file rate; pushspoold %.2f× it", loopRatio, sizes[0], rate / loopRate),
                                target: "", met: nil)
    }
}
