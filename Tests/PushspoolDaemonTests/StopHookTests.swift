import Testing
@testable import PushspoolDaemon
import PushSystem

/// `PUSHSPOOL_TEST_STOP_AT` parsing; what a stop point does to the real daemon is proven by
/// `RealFaultTests` (IntegrationTests).
@Suite struct StopHookTests {
    private func decide(_ values: [String: String]) -> StopHook.Decision {
        StopHook.decide(environment: { values[$0] })
    }

    @Test func unsetOrWithoutTheAllowVariableDoesNothing() {
        #expect(decide([:]) == .none)
        #expect(decide(["PUSHSPOOL_TEST_STOP_AT": ""]) == .none)
        #expect(decide(["PUSHSPOOL_TEST_STOP_AT": "after-write"]) == .ignored(spec: "after-write"))
        #expect(decide(["PUSHSPOOL_TEST_STOP_AT": "after-write", "PUSHSPOOL_ALLOW_FAULT_INJECTION": "yes"])
                == .ignored(spec: "after-write"))
    }

    @Test(arguments: StopPoint.allCases)
    func everyPointByNameWithAndWithoutPass(_ point: StopPoint) {
        let allow = ["PUSHSPOOL_ALLOW_FAULT_INJECTION": "1"]
        #expect(decide(allow.merging(["PUSHSPOOL_TEST_STOP_AT": point.name]) { $1 }) == .arm(point, pass: 1))
        #expect(decide(allow.merging(["PUSHSPOOL_TEST_STOP_AT": point.name + ":17"]) { $1 }) == .arm(point, pass: 17))
        #expect(StopPoint(name: point.name) == point)
    }

    @Test(arguments: ["nowhere", "after-write:0", "after-write:-1", "after-write:x", "after-write:1:2",
                      "after-write:99999999999999999999", "after-write:", ":3"])
    func malformedValuesStopStartUp(_ spec: String) {
        let decision = decide(["PUSHSPOOL_TEST_STOP_AT": spec, "PUSHSPOOL_ALLOW_FAULT_INJECTION": "1"])
        guard case .invalid = decision else {
            Issue.record("\(spec) gave \(decision)")
            return
        }
    }
}
