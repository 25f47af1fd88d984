@preconcurrency import Glibc
import Dispatch
import Foundation
import Testing
@testable import PushJournal
import PushSystem
import SimulatedFS
import PushConfig
import PushModuleOptions
import TestTraits

/// The journal's directory on the simulated file system.
let simJournal = "/state/journal"

func simOptions(_ fs: SimulatedFileSystem, _ adjust: (inout JournalOptions) -> Void = { _ in }) -> JournalOptions {
    var options = JournalOptions(settings: Configuration().journal)
    options.fileSystem = fs
    options.maxBatchDelay = .zero
    options.lockWait = .zero
    options.segmentBytes = 4096
    options.checkpointEvery = 60
    // No timer: checkpoints come only from the record count, so every run of a workload makes
    // the same mutations and a crash point means the same thing each time.
    options.checkpointInterval = nil
    options.noSpaceRetryInterval = .milliseconds(1)
    adjust(&options)
    return options
}

/// What a workload did: which keys were acknowledged (and at which mutation count of the
/// file system, so a crash after mutation k must keep every ack registered at or before k),
/// and which keys may appear at all.
struct WorkloadLog: Sendable {
    var acks: [String: Int] = [:]
    var allowed: Set<String> = []
    var refused: Set<String> = []
    var failures: [String] = []
    var syncFailed = false
    var submittedAfterSyncFailure: [AppendResult] = []
}

/// A few hundred payloads in groups of four (so batches form): plain payloads, a duplicate of
/// an earlier id every 7th, a refused (oversized key) one every 11th, a media-outcome record
/// after every 5th, enough bytes for several segment rolls and checkpoints every 60 records.
/// Stops at the first failure; `waitLimit` bounds each group's wait (a paused writer).
func runWorkload(_ fs: SimulatedFileSystem, payloads: Int, options: JournalOptions,
                 onStall: () -> Void = {}) -> (WorkloadLog, JournalWriter?) {
    var log = WorkloadLog()
    let writer: JournalWriter
    do { (writer, _) = try JournalWriter.open(directory: simJournal, options: options) } catch {
        log.failures.append("open: \(error)")
        return (log, nil)
    }
    let box = Locked(WorkloadLog())
    var plan: [(key: String, body: String)] = []
    for i in 0..<payloads {
        if i % 11 == 10 {
            plan.append((String(repeating: "x", count: 300) + "\(i)", "{}"))
        } else if i % 7 == 6 {
            plan.append(("p\(i / 2)", "{\"dup\":\(i)}"))
        } else {
            plan.append(("p\(i)", "{\"id\":\"p\(i)\",\"title\":\"crash point \(i)\",\"pad\":\"\(String(repeating: "z", count: i % 40))\"}"))
        }
        if i % 5 == 4 { plan.append(("media:p\(i)", "{\"outcome\":\"\(i % 2 == 0 ? "stored" : "failed")\"}")) }
    }
    var stopped = false
    for group in stride(from: 0, to: plan.count, by: 4) where !stopped {
        let done = DispatchSemaphore(value: 0)
        let items = plan[group..<min(group + 4, plan.count)]
        for item in items {
            if item.key.utf8.count <= 255 { box.withLock { _ = $0.allowed.insert(item.key) } }
            else { box.withLock { _ = $0.refused.insert(item.key) } }
            writer.submit(key: item.key, body: Array(item.body.utf8), ingestMillis: 1_700_000_000_000) { result in
                let at = fs.mutations
                box.withLock { log in
                    switch result {
                    case .committed:
                        if log.refused.contains(item.key) { log.failures.append("refused \(item.key) was acknowledged") }
                        log.acks[item.key] = at
                    case .duplicate: break
                    case .failed(let error):
                        if case .syncFailed = error.kind { log.syncFailed = true }
                        // The oversized key is refused by design; any other failure stops the run.
                        if !log.refused.contains(item.key) { log.failures.append("\(item.key): \(error)") }
                    }
                }
                done.signal()
            }
        }
        for _ in items {
            if done.wait(timeout: .now() + .milliseconds(200)) == .timedOut {
                onStall()
                done.wait()
            }
        }
        stopped = box.withLock { !$0.failures.isEmpty }
    }
    log = box.withLock { $0 }
    return (log, writer)
}

/// Recovers the journal on `fs` and checks the invariants; returns the keys, in seq order.
@discardableResult
func checkRecovered(_ fs: SimulatedFileSystem, required: [String], allowed: Set<String>,
                    context: @autoclosure () -> String) throws -> [String] {
    let (writer, _) = try JournalWriter.open(directory: simJournal, options: simOptions(fs))
    try writer.close()
    #expect(fs.openFileCount == 0, "fd leak after a clean close: \(context())")
    let keys = try readKeys(fs)
    var seen = Set<String>()
    for key in keys {
        if !seen.insert(key).inserted { Issue.record("\(key) twice after recovery: \(context())") }
        if !allowed.contains(key) { Issue.record("\(key) was never submitted: \(context())") }
    }
    for key in required where !seen.contains(key) {
        Issue.record("acknowledged \(key) lost: \(context())")
    }
    let report = JournalVerifier.verify(directory: simJournal, fileSystem: fs)
    #expect(report.problems.isEmpty, "verify: \(report.problems) \(context())")
    // A second recovery over the first one's result changes nothing.
    let (again, second) = try JournalWriter.open(directory: simJournal, options: simOptions(fs))
    try again.close()
    #expect(second.tornBytesTruncated == 0 && second.quarantined.isEmpty && second.lostAcknowledgedRecords == 0,
            "second recovery changed something: \(second) \(context())")
    #expect(try readKeys(fs) == keys, "second recovery changed the records: \(context())")
    return keys
}

func readKeys(_ fs: SimulatedFileSystem) throws -> [String] {
    let reader = try JournalReader(directory: simJournal, committedOnly: false, fileSystem: fs)
    var keys: [String] = []
    while let record = try reader.next() { keys.append(record.key) }
    return keys
}

/// Numbers from the environment for the long run (`scripts/crash-enum-long.sh`).
func envCount(_ name: String, default value: Int) -> Int {
    getenv(name).flatMap { Int(String(cString: $0)) }.map { max(1, $0) } ?? value
}

@Suite(.serialized, .tags(.slow)) struct CrashEnumerationTests {
    /// Runs the workload once on a recording simulated file system, then for every mutating
    /// call k crashes there under each damage model (zero and scramble with several seeds),
    /// recovers, and checks: every payload acknowledged by k present exactly once, nothing
    /// unsubmitted or refused present, verify clean, a second recovery changes nothing.
    @Test func everyCrashPointRecovers() throws {
        let seeds = envCount("PUSHSPOOL_CRASH_ENUM_SEEDS", default: 1)
        let payloads = envCount("PUSHSPOOL_CRASH_ENUM_PAYLOADS", default: 420)
        let fs = SimulatedFileSystem()
        fs.recordImages(true)
        let (log, writer) = runWorkload(fs, payloads: payloads, options: simOptions(fs))
        let writerOpen = try #require(writer)
        try writerOpen.close()
        #expect(log.failures.isEmpty, "\(log.failures)")
        let images = fs.images
        #expect(images.count > 300, "the workload should make hundreds of mutating calls")
        let segments = try listSegments(simJournal, fs: fs)
        #expect(segments.count >= 4, "several segment rolls")
        #expect(fs.exists(simJournal + "/" + JournalFiles.checkpoint))
        let ackOrder = log.acks.sorted { $0.value < $1.value }

        var states = 0
        let started = Posix.monotonicNanos()
        for (index, image) in images.enumerated() {
            let k = index + 1
            let required = ackOrder.prefix { $0.value <= k }.map(\.key)
            for model in DamageModel.allCases {
                let runs = (model == .drop || model == .keep) ? 1 : seeds
                for seed in 0..<runs {
                    let crashed = SimulatedFileSystem(crashed: image, model: model, seed: UInt64(seed * 7919 + k))
                    states += 1
                    do {
                        try checkRecovered(crashed, required: required, allowed: log.allowed,
                                           context: "crash after mutation \(k) of \(images.count), \(model), seed \(seed)")
                    } catch {
                        Issue.record("recovery failed after mutation \(k), \(model), seed \(seed): \(error)")
                    }
                }
            }
        }
        let seconds = Double(Posix.monotonicNanos() - started) / 1e9
        print("crash-enumeration: \(states) crash states checked (\(images.count) crash points, \(seeds) seeds) in \(String(format: "%.1f", seconds)) s")
        #expect(states >= 1_800)
    }

    /// A crash during recovery is recovered too: for sampled crash points, recovery itself is
    /// crashed after each of its mutating calls, and the next recovery must still satisfy the
    /// invariants.
    @Test func crashDuringRecoveryRecovers() throws {
        let stride = envCount("PUSHSPOOL_CRASH_ENUM_RECOVERY_STRIDE", default: 37)
        let fs = SimulatedFileSystem()
        fs.recordImages(true)
        let (log, writer) = runWorkload(fs, payloads: 120, options: simOptions(fs))
        try #require(writer).close()
        let images = fs.images
        let ackOrder = log.acks.sorted { $0.value < $1.value }
        var states = 0
        for index in Swift.stride(from: 0, to: images.count, by: stride) {
            let k = index + 1
            let required = ackOrder.prefix { $0.value <= k }.map(\.key)
            for model in [DamageModel.zero, .scramble] {
                // How many mutating calls a full recovery of this state makes.
                let probe = SimulatedFileSystem(crashed: images[index], model: model, seed: UInt64(k))
                let before = probe.mutations
                if let (w, _) = try? JournalWriter.open(directory: simJournal, options: simOptions(probe)) { try? w.close() }
                let recoveryMutations = probe.mutations - before
                for m in 1...max(1, recoveryMutations) {
                    let first = SimulatedFileSystem(crashed: images[index], model: model, seed: UInt64(k))
                    first.crashAfter(mutations: m)
                    if let (w, _) = try? JournalWriter.open(directory: simJournal, options: simOptions(first)) { try? w.close() }
                    let second = SimulatedFileSystem(crashed: first.image, model: model, seed: UInt64(k &* 31 &+ m))
                    states += 1
                    do {
                        try checkRecovered(second, required: required, allowed: log.allowed,
                                           context: "crash after mutation \(k), recovery crashed after \(m), \(model)")
                    } catch {
                        Issue.record("recovery after a crashed recovery failed (\(k), \(m), \(model)): \(error)")
                    }
                }
            }
        }
        print("crash-enumeration: \(states) crash-during-recovery states checked")
        #expect(states > 50)
    }
}
