@preconcurrency import Glibc
import Foundation
import Testing
@testable import PushJournal
import PushSystem
import SimulatedFS
import TestTraits

/// I/O errors through the file-system seam: EIO, ENOSPC, EDQUOT and short writes at the N-th
/// call, once and persistently, for every N the workload reaches (the SQLite ioerr loop, over
/// all calls rather than one name at a time).
@Suite(.serialized, .tags(.slow)) struct CrashIOErrorTests {
    enum Fault: String, CaseIterable, Sendable {
        case eio, enospc, edquot, short

        var code: Int32 {
            switch self {
            case .eio: EIO
            case .enospc: ENOSPC
            case .edquot: EDQUOT
            case .short: 0
            }
        }
    }

    /// Every time: a failed batch is never acknowledged (acknowledged keys survive, failed
    /// ones are never claimed), a sync failure stops the writer for good, no simulated fd stays
    /// open once the writer is closed or failed to open, and once the fault clears recovery and
    /// verify pass.
    @Test(arguments: Fault.allCases, [false, true])
    func faultAtEveryCall(fault: Fault, persistent: Bool) throws {
        // The call count of a clean run bounds N.
        let clean = SimulatedFileSystem()
        let (_, cleanWriter) = runWorkload(clean, payloads: 24, options: simOptions(clean))
        try #require(cleanWriter).close()
        let total = clean.calls
        var faulted = 0
        for n in 0..<total {
            let fs = SimulatedFileSystem()
            let rule = SimulatedFileSystem.FaultRule(nth: n, errno: fault.code == 0 ? EIO : fault.code,
                                                     persistent: persistent && fault != .short, short: fault == .short)
            fs.setFaults([rule])
            let (log, writer) = runWorkload(fs, payloads: 24, options: simOptions(fs), onStall: { fs.clearFaults() })
            var failedAfterSync: AppendResult?
            if let writer {
                if log.syncFailed {
                    // An fsync error stops the writer: nothing more is accepted.
                    failedAfterSync = append(writer, "after-sync-failure", "{}")
                }
                try? writer.close()
            }
            if !log.failures.isEmpty || writer == nil { faulted += 1 }
            #expect(fs.openFileCount == 0, "fd leak: \(fault) persistent=\(persistent) n=\(n) \(log.failures)")
            if let failedAfterSync {
                guard case .failed = failedAfterSync else {
                    Issue.record("the writer accepted a record after a sync failure: \(fault) n=\(n)")
                    continue
                }
            }
            fs.clearFaults()
            do {
                try checkRecovered(fs, required: Array(log.acks.keys), allowed: log.allowed,
                                   context: "\(fault) persistent=\(persistent) at call \(n)")
            } catch {
                Issue.record("recovery after the fault cleared failed: \(fault) persistent=\(persistent) n=\(n): \(error)")
            }
        }
        print("io-error-injection: \(fault) persistent=\(persistent): \(total) call positions, \(faulted) runs failed")
        if fault != .short { #expect(faulted > 0, "the fault never hit") }
    }

    /// Memory stays flat over many failing runs (RSS from /proc/self/statm).
    @Test func noMemoryGrowthUnderFaults() throws {
        func rss() -> Int {
            let text = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
            let fields = text.split(separator: " ")
            return fields.count > 1 ? (Int(fields[1]) ?? 0) * 4096 : 0
        }
        func round() {
            for n in stride(from: 0, to: 400, by: 3) {
                let fs = SimulatedFileSystem()
                fs.setFaults([.init(nth: n, errno: EIO)])
                let (_, writer) = runWorkload(fs, payloads: 12, options: simOptions(fs))
                try? writer?.close()
            }
        }
        round()
        let before = rss()
        for _ in 0..<3 { round() }
        let growth = rss() - before
        print("io-error-injection: RSS growth over 3 rounds of faulted runs: \(growth / 1024) KiB")
        #expect(growth < 32 << 20)
    }
}
