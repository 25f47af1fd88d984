@preconcurrency import Glibc
import PushSystem

/// TEST HOOK, not an operator feature: `PUSHSPOOL_TEST_STOP_AT=<point>[:N]` makes `pushspoold`
/// SIGKILL itself at the N-th pass (default 1) of a named `StopPoint` (`before-write`,
/// `after-write`, `after-sync`, `roll-temp`, `roll-renamed`, `checkpoint`, `recovery`), so
/// the real-fault tests (`Tests/IntegrationTests/RealFaultTests.swift`, `scripts/kill-soak.sh`)
/// can crash it exactly between a write and its sync. Like `FaultHook`, it also needs
/// `PUSHSPOOL_ALLOW_FAULT_INJECTION=1`; without it the variable is ignored (with a warning), and
/// with it a value that does not parse stops start-up, so a test cannot pass unarmed.
enum StopHook {
    static let variable = "PUSHSPOOL_TEST_STOP_AT"

    enum Decision: Equatable {
        case none
        case ignored(spec: String)
        case arm(StopPoint, pass: Int)
        case invalid(String)
    }

    static func decide(environment: (String) -> String?) -> Decision {
        guard let spec = environment(variable), !spec.isEmpty else { return .none }
        guard environment(FaultHook.allowVariable) == "1" else { return .ignored(spec: spec) }
        let parts = spec.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        let names = StopPoint.allCases.map(\.name).joined(separator: ", ")
        guard parts.count <= 2, let point = StopPoint(name: parts[0]) else {
            return .invalid("'\(spec)': expected <point>[:N], <point> one of \(names)")
        }
        var pass = 1
        if parts.count == 2 {
            // Bounded where parsed: a pass count from the environment never meets a trap.
            guard let value = Int(parts[1]), value >= 1, value <= 1_000_000_000 else {
                return .invalid("'\(spec)': N must be a number from 1 to 1000000000")
            }
            pass = value
        }
        return .arm(point, pass: pass)
    }
}
