@preconcurrency import Glibc
import Synchronization

/// TEST HOOK, not an operator feature: named places in the write path where the real-fault
/// tests kill `pushspoold` with SIGKILL, to prove that a crash exactly there loses and doubles
/// nothing (a random kill rarely lands between a `write` and its `fdatasync`).
///
/// Armed only by the daemon's `PUSHSPOOL_TEST_STOP_AT` hook (`StopHook`, which also requires
/// `PUSHSPOOL_ALLOW_FAULT_INJECTION=1`). Unarmed, `StopPoints.pass` costs one relaxed atomic
/// load and a compare. Kept apart from `FaultInjector`: that one makes a call fail, this one
/// ends the process.
package enum StopPoint: Int, CaseIterable, Sendable {
    /// The journal writer holds an encoded batch and has not written it.
    case beforeWrite = 1
    /// The batch is written (page cache) and not yet `fdatasync`ed.
    case afterWrite
    /// The batch is synced; the spool file of a record is not yet unlinked.
    case afterSync
    /// A segment cut: the new segment's temp file is written and synced, not yet renamed.
    case rollTemp
    /// A segment cut: the new segment is renamed into place, the directory not yet synced.
    case rollRenamed
    /// `dedup.ckpt.tmp` is written and synced, not yet renamed over `dedup.ckpt`.
    case checkpoint
    /// Journal recovery at start: after the scan, and inside a torn-tail cut (the forensic copy
    /// written, the segment not yet truncated).
    case recovery

    /// The name `PUSHSPOOL_TEST_STOP_AT` uses.
    package var name: String {
        switch self {
        case .beforeWrite: "before-write"
        case .afterWrite: "after-write"
        case .afterSync: "after-sync"
        case .rollTemp: "roll-temp"
        case .rollRenamed: "roll-renamed"
        case .checkpoint: "checkpoint"
        case .recovery: "recovery"
        }
    }

    package init?(name: String) {
        guard let point = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = point
    }
}

/// The one armed `StopPoint` of this process, if any. `Sendable`: two atomics.
package enum StopPoints {
    /// `StopPoint.rawValue` of the armed point; 0 = none (the production state).
    private static let armed = Atomic<Int>(0)
    /// Passes left before the kill.
    private static let remaining = Atomic<Int>(0)

    /// Kills this process with SIGKILL at the `pass`-th pass (1 = the first) of `point`.
    package static func arm(_ point: StopPoint, pass: Int) {
        remaining.store(max(pass, 1), ordering: .relaxed)
        armed.store(point.rawValue, ordering: .releasing)
    }

    /// Marks a pass of `point`: returns at once unless it is the armed point; raises SIGKILL on
    /// this process at the armed pass. SIGKILL, not `_exit`: nothing of the process may run
    /// after it, exactly as with an outside `kill -9` or the OOM killer.
    @inline(__always)
    package static func pass(_ point: StopPoint) {
        guard armed.load(ordering: .relaxed) == point.rawValue else { return }
        if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
            kill(getpid(), SIGKILL)
            // SIGKILL is delivered before kill(2) returns to a process signalling itself;
            // pause is only here so no code of this thread could follow in any case.
            while true { pause() }
        }
    }
}
