import Foundation
import PushPayload
import PushSystem

/// `pushspool-bench payload [DIR] [--seconds S]`: payloads per second on one core for the
/// example mix in DIR (default `spool-examples`), against Foundation's `JSONSerialization`
/// parsing the same bytes in the same run, and against the 50 000/s target.
///
/// The contenders run interleaved in short slices and are timed with the thread's CPU clock,
/// so a busy machine (other builds, CI neighbours) skews neither the rates nor the ratios much.
func runPayloadBench(arguments: [String]) {
    var directory = "spool-examples"
    var seconds = 2.0
    var i = 0
    while i < arguments.count {
        if arguments[i] == "--seconds", i + 1 < arguments.count, let s = Double(arguments[i + 1]) {
            seconds = s
            i += 2
            continue
        }
        directory = arguments[i]
        i += 1
    }
    let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasSuffix(".json") }.sorted()
    let payloads: [[UInt8]] = names.compactMap { try? Posix.readFile(directory + "/" + $0) }
    guard !payloads.isEmpty else {
        print("payload bench: no *.json in \(directory)")
        return
    }
    let datas = payloads.map { Data($0) }
    let options = NormalizerOptions()
    let bytes = payloads.reduce(0) { $0 + $1.count }

    struct Contender {
        var label: String
        var body: (Int) -> Int
        var cpuNanos: UInt64 = 0
        var wallNanos: UInt64 = 0
        var done = 0
        var sink = 0
        var cpuRate: Double { Double(done) / (Double(cpuNanos) / 1e9) }
        var wallRate: Double { Double(done) / (Double(wallNanos) / 1e9) }
    }
    var contenders = [
        Contender(label: "Foundation JSONSerialization parse") { index in
            (try? JSONSerialization.jsonObject(with: datas[index], options: [.fragmentsAllowed])) == nil ? 0 : 1
        },
        Contender(label: "pushspool JSONParser parse") { index in
            (try? JSONParser().parse(payloads[index])) == nil ? 0 : 1
        },
        Contender(label: "pushspool Normalizer.normalize") { index in
            switch Normalizer.normalize(payloads[index], options: options) {
            case .accepted(let n): n.id.utf8.count
            case .refused(let r): r.code.rawValue.utf8.count
            }
        },
        Contender(label: "normalize + jsonValue().serialized()") { index in
            if case .accepted(let n) = Normalizer.normalize(payloads[index], options: options) { return n.jsonValue().serialized().count }
            return 0
        },
    ]
    print("payload bench: \(payloads.count) payloads (\(bytes) bytes) per round, ~\(seconds) s CPU each, interleaved, one thread")

    // Warm-up round so caches and lazy initialisers do not count.
    for c in contenders.indices { for index in payloads.indices { contenders[c].sink &+= contenders[c].body(index) } }
    let slice = UInt64(50_000_000)  // 50 ms of CPU per contender per turn
    let budget = UInt64(seconds * 1e9)
    while contenders.contains(where: { $0.cpuNanos < budget }) {
        for c in contenders.indices {
            let cpuStart = threadCPUNanos()
            let wallStart = Posix.monotonicNanos()
            while threadCPUNanos() - cpuStart < slice {
                for index in payloads.indices { contenders[c].sink &+= contenders[c].body(index) }
                contenders[c].done += payloads.count
            }
            contenders[c].cpuNanos += threadCPUNanos() - cpuStart
            contenders[c].wallNanos += Posix.monotonicNanos() - wallStart
        }
    }
    for c in contenders {
        print("  \(c.label.padding(toLength: 38, withPad: " ", startingAt: 0)) \(String(format: "%9.0f", c.cpuRate)) payloads/CPU-s  (wall \(String(format: "%.0f", c.wallRate))/s, checksum \(c.sink & 0xFFFF))")
    }
    let baseline = contenders[0].cpuRate, parse = contenders[1].cpuRate
    let normalize = contenders[2].cpuRate, record = contenders[3].cpuRate
    print(String(format: "  normalize / 50 000 target:               %.2fx", normalize / 50_000))
    print(String(format: "  normalize / JSONSerialization parse:     %.2fx", normalize / baseline))
    print(String(format: "  JSONParser / JSONSerialization parse:    %.2fx", parse / baseline))
    print(String(format: "  normalize + record / 50 000 target:      %.2fx", record / 50_000))
    BenchResults.shared.add("normaliser", String(format: "%.0f payloads/CPU-s", normalize),
                            ratio: String(format: "%.2f× JSONSerialization parse", normalize / baseline), target: "≥ 50,000/s",
                            met: normalize >= 50_000)
}

/// CPU time consumed by the calling thread (CLOCK_THREAD_CPUTIME_ID).
private func threadCPUNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}
