@preconcurrency import Glibc
import PushSystem

/// TEST HOOK, not an operator feature, and present in debug builds only (a release build
/// ignores both variables, see `compiledIn`): lets the integration tests make a system call of
/// the real `pushspoold` process fail (e.g. `fdatasync` with EIO), which no file system offers
/// on demand. It arms `FaultInjector.shared` from two environment variables at start-up:
///
///     PUSHSPOOL_ALLOW_FAULT_INJECTION=1
///     PUSHSPOOL_FAULT_INJECT=<call>:<errno>[:after=N][:times=M][,<more rules>]
///
/// `<call>` is a `FaultInjector` call name; a name without a dot means the journal's call
/// (`fdatasync` = `journal.fdatasync`, see `JournalOptions.faultScope`). `<errno>` is a name
/// (`EIO`, `ENOSPC`, ...) or a number. `after=N` lets N calls through first; `times=M` fails M
/// times (default: every call from then on).
///
/// Both variables are required so that a stray `PUSHSPOOL_FAULT_INJECT` in a production
/// environment can never break a daemon: without the second one the rule is ignored and a
/// warning is logged. With both, a rule that does not parse stops start-up, so a test cannot
/// pass because its fault was silently not armed.
enum FaultHook {
    static let specVariable = "PUSHSPOOL_FAULT_INJECT"
    static let allowVariable = "PUSHSPOOL_ALLOW_FAULT_INJECTION"

    /// Whether this build has the test hooks at all: debug builds (the test suites') only.
    #if DEBUG
    static let compiledIn = true
    #else
    static let compiledIn = false
    #endif

    struct Rule: Equatable {
        var call: String
        var errno: Int32
        var skip: Int
        var times: Int?
    }

    enum Decision: Equatable {
        /// No hook requested.
        case none
        /// Requested without the allow variable: ignored.
        case ignored(spec: String)
        case arm([Rule])
        case invalid(String)
    }

    static func decide(environment: (String) -> String?) -> Decision {
        guard let spec = environment(specVariable), !spec.isEmpty else { return .none }
        // Release builds have no fault switch (`Posix.call` consults `FaultInjector` only in
        // debug builds), so a request is ignored there whatever the allow variable says.
        guard compiledIn, environment(allowVariable) == "1" else { return .ignored(spec: spec) }
        var rules: [Rule] = []
        for text in spec.split(separator: ",") {
            let parts = text.split(separator: ":").map { $0.trimmingSpaces }
            guard parts.count >= 2, !parts[0].isEmpty else {
                return .invalid("'\(text)': expected <call>:<errno>[:after=N][:times=M]")
            }
            let call = parts[0].contains(".") ? parts[0] : "journal." + parts[0]
            guard let code = errnoValue(parts[1]) else { return .invalid("'\(text)': unknown errno '\(parts[1])'") }
            var rule = Rule(call: call, errno: code, skip: 0, times: nil)
            for option in parts.dropFirst(2) {
                let pair = option.split(separator: "=", maxSplits: 1).map(String.init)
                guard pair.count == 2, let value = Int(pair[1]), value >= 0 else {
                    return .invalid("'\(text)': bad option '\(option)'")
                }
                switch pair[0] {
                case "after": rule.skip = value
                case "times" where value > 0: rule.times = value
                default: return .invalid("'\(text)': bad option '\(option)'")
                }
            }
            rules.append(rule)
        }
        return rules.isEmpty ? .invalid("'\(spec)': no rule") : .arm(rules)
    }

    /// The test crash trigger: with the allow variable set, `PUSHSPOOL_TEST_CRASH_ON=<text>`
    /// makes the pipeline trap (as a Swift runtime error does) on any claimed file whose bytes
    /// contain `<text>`, so the tests can prove that a payload which crashes the daemon is
    /// quarantined after the crash guard's isolation instead of crashing it at every start.
    static let crashVariable = "PUSHSPOOL_TEST_CRASH_ON"

    static func crashMarker(environment: (String) -> String?) -> [UInt8]? {
        guard compiledIn, environment(allowVariable) == "1", let marker = environment(crashVariable), !marker.isEmpty else { return nil }
        return Array(marker.utf8)
    }

    static func errnoValue(_ text: String) -> Int32? {
        if let number = Int32(text), number > 0 { return number }
        let names: [String: Int32] = ["EIO": EIO, "ENOSPC": ENOSPC, "EDQUOT": EDQUOT, "EROFS": EROFS, "EINTR": EINTR,
                                      "EACCES": EACCES, "EPERM": EPERM, "ENOMEM": ENOMEM, "EBADF": EBADF]
        return names[text.uppercased()]
    }

    static func arm(_ rules: [Rule]) {
        for rule in rules {
            FaultInjector.shared.arm(call: rule.call, errno: rule.errno, skip: rule.skip, times: rule.times)
        }
    }
}
