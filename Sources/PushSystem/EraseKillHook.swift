@preconcurrency import Glibc

/// TEST HOOK, not an operator feature: `PUSHSPOOL_TEST_ERASE_KILL_AT=<step>` makes the process
/// SIGKILL itself when an erasure reaches a named step, so the crash tests can stop it exactly
/// there. pushspoold's eraser names `started`, `planned`, `journal segment-temp NAME`, `journal
/// segment-renamed NAME`, `journal before-checkpoint`, `journal-done`, `inbox-done`,
/// `outbox-done`, `quarantine-done`, `status-done`, `media-done`, `stream-done`,
/// `subject-removed`; a `Source=nats` pushspool-inbox's stream follower names
/// `erasure-received` (everything before the record committed, nothing erased) and
/// `erasure-applied` (erased, the index not yet past the record). A step matches when it
/// starts with the text given. Needs `PUSHSPOOL_ALLOW_FAULT_INJECTION=1` and a debug build:
/// a release build ignores both variables.
package enum EraseKillHook {
    package static let variable = "PUSHSPOOL_TEST_ERASE_KILL_AT"
    package static let allowVariable = "PUSHSPOOL_ALLOW_FAULT_INJECTION"

    #if DEBUG
    static let compiledIn = true
    #else
    static let compiledIn = false
    #endif

    /// `PUSHSPOOL_TEST_ERASE_CRASH_AT=<step>`: the same, with a trap on the eraser's own thread,
    /// as a crash inside the erasure would be (the crash mark names the follower).
    package static let crashVariable = "PUSHSPOOL_TEST_ERASE_CRASH_AT"

    package static func hook(environment: (String) -> String?) -> @Sendable (String) -> Void {
        guard compiledIn, environment(allowVariable) == "1" else { return { _ in } }
        let kill = environment(variable).flatMap { $0.isEmpty ? nil : $0 }
        let crash = environment(crashVariable).flatMap { $0.isEmpty ? nil : $0 }
        guard kill != nil || crash != nil else { return { _ in } }
        return { step in
            if let kill, step.hasPrefix(kill) { Glibc.kill(getpid(), SIGKILL) }
            // A trap, as a failed precondition in the erasure would be: a fault (SIGILL), not a
            // signal sent, so it reaches the crash mark's handler like a real crash.
            if let crash, step.hasPrefix(crash) { preconditionFailure("\(crashVariable) reached \(step)") }
        }
    }
}
