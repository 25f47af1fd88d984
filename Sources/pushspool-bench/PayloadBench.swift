import Foundation
import PushPayload
import PushSystem

/// `pushspool-bench payload [DIR] [--seconds S] [--only baseline|parse|normalize|record]`: payloads per second on one core for the
/// example mix in DIR (default `spool-examples`), against Foundation's `JSONSerialization`
/// parsing the same bytes in the same run, and against the 50 000/s target.
func runPayloadBench(arguments: [String]) {
    var directory = "spool-examples"
    var seconds = 2.0
    var only: String?
    var i = 0
    while i < arguments.count {
        if arguments[i] == "--only", i + 1 < arguments.count {
            only = arguments[i + 1]
            i += 2
            continue
        }
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
    print("payload bench: \(payloads.count) payloads, \(bytes) bytes per round, \(seconds) s per measurement, one thread")

    /// Runs `body` over the whole mix until `seconds` elapse; returns payloads per second.
    func measure(_ label: String, _ key: String, _ body: (Int) -> Int) -> Double {
        if let only, only != key { return .nan }
        // Warm-up round so caches and lazy initialisers do not count.
        var sink = 0
        for index in payloads.indices { sink &+= body(index) }
        let start = Posix.monotonicNanos()
        let budget = UInt64(seconds * 1e9)
        var done = 0
        while Posix.monotonicNanos() - start < budget {
            for index in payloads.indices { sink &+= body(index) }
            done += payloads.count
        }
        let elapsed = Double(Posix.monotonicNanos() - start) / 1e9
        let rate = Double(done) / elapsed
        print("  \(label.padding(toLength: 34, withPad: " ", startingAt: 0)) \(String(format: "%10.0f", rate)) payloads/s  (checksum \(sink & 0xFFFF))")
        return rate
    }

    let baseline = measure("Foundation JSONSerialization parse", "baseline") { index in
        (try? JSONSerialization.jsonObject(with: datas[index], options: [.fragmentsAllowed])) == nil ? 0 : 1
    }
    let parseOnly = measure("pushspool JSONParser parse", "parse") { index in
        (try? JSONParser().parse(payloads[index])) == nil ? 0 : 1
    }
    let normalize = measure("pushspool Normalizer.normalize", "normalize") { index in
        switch Normalizer.normalize(payloads[index], options: options) {
        case .accepted(let n): n.id.utf8.count
        case .refused(let r): r.code.rawValue.utf8.count
        }
    }
    let record = measure("normalize + jsonValue().serialized()", "record") { index in
        if case .accepted(let n) = Normalizer.normalize(payloads[index], options: options) { return n.jsonValue().serialized().count }
        return 0
    }
    print(String(format: "  normalize vs 50 000/s target:            %.2fx", normalize / 50_000))
    print(String(format: "  normalize vs JSONSerialization parse:    %.2fx", normalize / baseline))
    print(String(format: "  JSONParser vs JSONSerialization parse:   %.2fx", parseOnly / baseline))
    print(String(format: "  normalize + record vs 50 000/s target:   %.2fx", record / 50_000))
}
